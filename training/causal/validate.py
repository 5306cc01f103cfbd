"""Validation in streaming mode: the causal streaming engine on whole utterances, scored like every other system
(WER, RWER, ARWER, latency) — not a teacher-forced full-context loss."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from streaming.engine import CausalStreamingEngine
from evaluation.sets import Utterance
from evaluation.streamed import evaluate_records, stream_all

VALIDATION_KEYS = ("wer", "rwer", "arwer", "al_ms", "laal_ms", "rtf", "word_latency_ms_median")


def streaming_scores(model: nn.Module, utterances: Sequence[Utterance], chunk_ms: int, tau0_ms: int) -> dict:
    """Stream every utterance through the engine at ``chunk_ms`` and score the records (model put in eval mode
    for the duration: LoRA dropout off)."""
    was_training = model.training
    model.eval()
    try:
        engine = CausalStreamingEngine(model, chunk_ms=chunk_ms, tau0_ms=tau0_ms)
        scores = evaluate_records(stream_all(engine, utterances, chunk_ms), utterances)
    finally:
        model.train(was_training)
    return {k: scores[k] for k in VALIDATION_KEYS if k in scores}
