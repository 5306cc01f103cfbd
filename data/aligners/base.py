"""The one interface every forced aligner implements.

An aligner receives 16 kHz mono float32 audio and the *normalized* transcript words
(data.text.TranscriptWord.norm) and returns exactly one WordSpan per word, in order.
Anything else is an AlignmentError with a short reason code that ends up in rejects.parquet.
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
    words: tuple[str, ...]  # normalized words


class Aligner(ABC):
    name: str = "base"

    @property
    @abstractmethod
    def version(self) -> str:
        """Library version + model identity; part of every cache key and of the dataset version id."""

    @abstractmethod
    def align(self, audio: np.ndarray, words: Sequence[str]) -> list[WordSpan]:
        """Align one utterance; raise AlignmentError on failure."""

    def align_many(self, items: Sequence[AlignItem]) -> list[list[WordSpan] | AlignmentError]:
        """Align a batch. Batch aligners (MFA) override this; failures are returned, not raised."""
        out: list[list[WordSpan] | AlignmentError] = []
        for item in items:
            try:
                out.append(check_spans(self.align(item.audio, item.words), item.words, len(item.audio)))
            except AlignmentError as err:
                out.append(err)
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
