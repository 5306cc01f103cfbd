"""Per-word emission latency against forced-alignment word end times.

latency(word) = emission_ms − ref_end_ms, for hypothesis words that the WER alignment marks as *correct*.
``emission_ms`` is whatever the caller measures for the moment the word became visible: the streaming evaluator
passes the real-time queue clock (finish time of the step that first committed it) and, for the
computation-unaware lower bound, the audio consumed by that step. Substituted, inserted and deleted
words have no counterpart and are left out (their count is reported so the coverage can be checked).

Matching: each reference and emitted word is normalised on its own with Whisper's EnglishTextNormalizer
(a word may become 0 tokens, e.g. "uh", or several, e.g. "it's" -> "it is"; each token keeps its word's
time), then the two token sequences are aligned with jiwer and only "equal" chunks give (ref, hyp) pairs.
Normalising word by word keeps the time of every token; both sides are treated alike, so "twenty five"
matches "twenty five" (-> "20" "5") even though the sentence-level normaliser would write "25".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaluation.metrics.latency import latency_summary
from evaluation.metrics.text import match_pairs, normalized_words, word_and_end

__all__ = ["WordLatency", "word_emission_latencies", "word_emission_summary"]


@dataclass(frozen=True)
class WordLatency:
    word: str  # the reference word as given
    ref_index: int  # its index in the reference word list
    hyp_index: int  # index of the emitted word that matched it
    emission_ms: float
    ref_end_ms: float

    @property
    def latency_ms(self) -> float:
        return self.emission_ms - self.ref_end_ms


def _tokens(items: Sequence[tuple[str, float]], normalize_text: bool) -> tuple[list[str], list[int]]:
    toks: list[str] = []
    owner: list[int] = []
    for i, (word, _) in enumerate(items):
        for t in normalized_words(word, normalize_text=normalize_text):
            toks.append(t)
            owner.append(i)
    return toks, owner


def word_emission_latencies(
    emitted: Sequence[Any], ref_words: Sequence[Any], *, normalize_text: bool = True
) -> list[WordLatency]:
    """Latency of each correctly recognised reference word of one utterance, in reference order.

    ``emitted``: ``(word, emission_ms)`` in output order. ``ref_words``: ``(word, end_ms)`` or WordSpan-like
    objects (``.word``, ``.end_ms``). A reference word that normalises to several tokens counts once, when its
    last matched token was emitted. Concatenate the lists of many utterances to pool them.
    """
    hyp_items = [word_and_end(w) for w in emitted]
    ref_items = [word_and_end(w) for w in ref_words]
    hyp_toks, hyp_owner = _tokens(hyp_items, normalize_text)
    ref_toks, ref_owner = _tokens(ref_items, normalize_text)
    best: dict[int, int] = {}  # reference word -> emitted word with the latest matched token
    for r, h in match_pairs(ref_toks, hyp_toks):
        ri, hi = ref_owner[r], hyp_owner[h]
        if ri not in best or hyp_items[hi][1] > hyp_items[best[ri]][1]:
            best[ri] = hi
    return [
        WordLatency(ref_items[ri][0], ri, hi, hyp_items[hi][1], ref_items[ri][1]) for ri, hi in sorted(best.items())
    ]


def word_emission_summary(latencies: Sequence[WordLatency], n_ref_words: int | None = None) -> dict[str, float]:
    """``{"median", "p90", "mean", "n_matched"[, "coverage"]}`` of ``latency_ms`` (ms) over matched words.

    ``coverage`` = matched / ``n_ref_words`` when the reference word count is given.
    """
    out = latency_summary(lat.latency_ms for lat in latencies)
    out["n_matched"] = float(len(latencies))
    if n_ref_words:
        out["coverage"] = len(latencies) / n_ref_words
    return out
