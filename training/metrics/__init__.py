"""Evaluation metrics: WER / RWER / ARWER, SimulEval-compatible latency (AL, LAAL, DAL, AP), RTF, word
emission latency. Pure functions (jiwer, numpy, Whisper's text normaliser); no Prefect/Ray/MLflow here."""

from training.metrics.emission import WordLatency, word_emission_latencies, word_emission_summary
from training.metrics.latency import (
    average_lagging,
    average_proportion,
    computation_aware_delays,
    corpus_latency,
    differentiable_average_lagging,
    latency_scores,
    latency_summary,
    length_adaptive_average_lagging,
    mean_rtf,
    reference_length,
    rtf,
    source_length_ms,
)
from training.metrics.text import ErrorCounts, error_counts, normalize, normalized_words
from training.metrics.wer import arwer, arwer_counts, rwer, rwer_counts, utterance_wer, wer, wer_counts

__all__ = [
    "ErrorCounts",
    "WordLatency",
    "arwer",
    "arwer_counts",
    "average_lagging",
    "average_proportion",
    "computation_aware_delays",
    "corpus_latency",
    "differentiable_average_lagging",
    "error_counts",
    "latency_scores",
    "latency_summary",
    "length_adaptive_average_lagging",
    "mean_rtf",
    "normalize",
    "normalized_words",
    "reference_length",
    "rtf",
    "rwer",
    "rwer_counts",
    "source_length_ms",
    "utterance_wer",
    "wer",
    "wer_counts",
    "word_emission_latencies",
    "word_emission_summary",
]
