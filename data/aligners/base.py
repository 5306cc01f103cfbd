"""The one interface every forced aligner implements.

An aligner receives 16 kHz mono float32 audio and the *normalized* transcript words
(data.text.TranscriptWord.norm) and returns exactly one WordSpan per word, in order, whose
``.word`` is that input word. Anything else is an AlignmentError with a short reason code that
ends up in rejects.parquet.

An input word may hold several spoken words ("one thousand two hundred fifty dollars" for the
display word "$1,250"). `align` and `align_many` split such items into their spoken words, have
the aligner place those (`align_spoken` / `align_spoken_many`, what each aligner implements), and
merge the spans back: start of the first spoken word, end of the last. Doing it here, once, gives
every aligner the same contract without each of them knowing about multi-word items. Aligners
also get the grouping (``groups``: spoken words per input word) and may use it, e.g. to let a
multi-word item be spoken another way (pocketsphinx's fallback grammar); they may ignore it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from data.types import AlignmentError, WordSpan


@dataclass(frozen=True, slots=True)
class AlignItem:
    utt_id: str
    audio: np.ndarray  # float32, mono, 16 kHz
    words: tuple[str, ...]  # normalized words; one may be several space-separated spoken words
    groups: tuple[int, ...] | None = None  # for align_spoken_many: spoken words per input word


class Aligner(ABC):
    name: str = "base"

    @property
    @abstractmethod
    def version(self) -> str:
        """Library version + model identity; part of every cache key and of the dataset version id."""

    @abstractmethod
    def align_spoken(self, audio: np.ndarray, words: Sequence[str],
                     groups: Sequence[int] | None = None) -> list[WordSpan]:
        """Align one utterance of single spoken words (no spaces), one span each; raise AlignmentError.

        ``groups`` says how many consecutive spoken words make each input word (None: one each).
        """

    def align_spoken_many(self, items: Sequence[AlignItem]) -> list[list[WordSpan] | AlignmentError]:
        """Align a batch of single-word items. Batch aligners (MFA) override this; failures are returned."""
        out: list[list[WordSpan] | AlignmentError] = []
        for item in items:
            try:
                spans = self.align_spoken(item.audio, item.words, item.groups)
                out.append(check_spans(spans, item.words, len(item.audio)))
            except AlignmentError as err:
                out.append(err)
        return out

    def align(self, audio: np.ndarray, words: Sequence[str]) -> list[WordSpan]:
        """Align one utterance: one span per input word, multi-word items merged; raises AlignmentError."""
        spoken, counts = expand_words(words)
        spans = check_spans(self.align_spoken(audio, spoken, counts), spoken, len(audio))
        return merge_spans(spans, words, counts)

    def align_many(self, items: Sequence[AlignItem]) -> list[list[WordSpan] | AlignmentError]:
        """Align a batch; failures are returned, not raised."""
        expanded: list[AlignItem] = []
        groups: list[list[int]] = []
        failed: dict[int, AlignmentError] = {}
        for i, item in enumerate(items):
            try:
                spoken, counts = expand_words(item.words)
            except AlignmentError as err:
                failed[i] = err
                continue
            expanded.append(AlignItem(item.utt_id, item.audio, tuple(spoken), tuple(counts)))
            groups.append(counts)
        results = iter(zip(self.align_spoken_many(expanded) if expanded else [], groups, strict=True))
        out: list[list[WordSpan] | AlignmentError] = []
        for i, item in enumerate(items):
            if i in failed:
                out.append(failed[i])
                continue
            result, counts = next(results)
            out.append(result if isinstance(result, AlignmentError) else merge_spans(result, item.words, counts))
        return out


def expand_words(words: Sequence[str]) -> tuple[list[str], list[int]]:
    """The spoken words of the input words, and how many each input word contributed."""
    spoken: list[str] = []
    counts: list[int] = []
    for word in words:
        parts = word.split()
        if not parts:
            raise AlignmentError("align_failed", f"empty word in the transcript: {list(words)[:10]}")
        spoken += parts
        counts.append(len(parts))
    return spoken, counts


def merge_spans(spans: Sequence[WordSpan], words: Sequence[str], counts: Sequence[int]) -> list[WordSpan]:
    """One span per input word from the spans of its spoken words: first start, last end."""
    if len(spans) != sum(counts):
        raise AlignmentError("word_count_mismatch", f"{len(spans)} spans for {sum(counts)} spoken words")
    out: list[WordSpan] = []
    pos = 0
    for word, n in zip(words, counts, strict=True):
        first, last = spans[pos], spans[pos + n - 1]
        out.append(WordSpan(word, first.start_ms, max(first.start_ms, last.end_ms)))
        pos += n
    return out


def check_spans(spans: Sequence[WordSpan], words: Sequence[str], n_samples: int) -> list[WordSpan]:
    """Validate an aligner's answer: one span per word, monotone, inside the audio."""
    if len(spans) != len(words):
        raise AlignmentError("word_count_mismatch", f"{len(spans)} spans for {len(words)} words")
    duration_ms = int(round(n_samples * 1000 / 16_000))
    prev_end = 0
    for span in spans:
        if span.start_ms < prev_end - 1 or span.end_ms > duration_ms + 10:
            raise AlignmentError("non_monotone_alignment", f"{span} after {prev_end} ms (audio {duration_ms} ms)")
        prev_end = span.end_ms
    return list(spans)
