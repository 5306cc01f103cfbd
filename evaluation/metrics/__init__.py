"""Evaluation metrics: WER / RWER / ARWER, SimulEval-compatible latency (AL, LAAL, DAL, AP), RTF, word
emission latency, the WER gate for lag comparisons. Pure functions (jiwer, numpy, Whisper's text normaliser);
no Prefect/Ray/MLflow here."""

from evaluation.metrics.emission import WordLatency, word_emission_latencies, word_emission_summary
from evaluation.metrics.gate import WER_CAP_POINTS, pareto_front, reference_wer, wer_gate_limit, within_wer_cap
from evaluation.metrics.latency import (
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
from evaluation.metrics.text import ErrorCounts, error_counts, normalize, normalized_words
from evaluation.metrics.wer import (
    arwer,
    arwer_counts,
    rwer,
    rwer_counts,
    utterance_counts,
    utterance_wer,
    wer,
    wer_counts,
)

__all__ = [
    "WER_CAP_POINTS",
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
    "pareto_front",
    "reference_length",
    "reference_wer",
    "rtf",
    "rwer",
    "rwer_counts",
    "source_length_ms",
    "utterance_counts",
    "utterance_wer",
    "wer",
    "wer_counts",
    "wer_gate_limit",
    "within_wer_cap",
    "word_emission_latencies",
    "word_emission_summary",
]
