"""Text normalisation and word-level edit counts shared by every WER-style metric.

All WER variants in this package compare *normalised* words: Whisper's ``EnglishTextNormalizer``
(lower case, punctuation removed, spelled-out numbers to digits, British to American spelling,
fillers such as "uh"/"hmm" dropped), then digit strings in one canonical form (:func:`digit_units`: digit by
digit), followed by whitespace splitting. The edit counts come from jiwer's Levenshtein alignment
(``jiwer.process_words``).

Why the digit form: the normaliser joins spelled digits but not written ones ("TWO TWO EIGHT SEVEN" → "2287",
"2-2-8-7." → "2 2 8 7"), so a right transcript of a digit string read aloud scored as four errors, and most for a
system that writes digit by digit (docs/decisions/digit-scoring.md). Every system, peers included, is scored
through this one function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re

import jiwer

__all__ = ["ErrorCounts", "digit_units", "error_counts", "match_pairs", "normalize", "normalized_words",
           "word_and_end"]

_DIGIT_WORDS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine".split())}
# a written zero that leads a digit string ("0351", "007"): the normaliser drops it ("0351" → "351")
_LEADING_ZERO = re.compile(r"(?<![\d.,])0(?=\d)")


@lru_cache(maxsize=1)
def _english_normalizer() -> Callable[[str], str]:
    # Imported lazily: `whisper` pulls in torch, which metric users that never normalise don't need.
    from whisper.normalizers import EnglishTextNormalizer

    return EnglishTextNormalizer()


def digit_units(words: Sequence[str]) -> list[str]:
    """Normalised words with every digit string said digit by digit ("2287" → "2", "2", "8", "7"), and a digit
    word left alone by the normaliser as its digit ("1" comes out of it as "one")."""
    words = [_DIGIT_WORDS.get(w, w) for w in words]
    return [d for w in words for d in (list(w) if w.isdigit() and len(w) > 1 else [w])]


def normalize(text: str) -> str:
    """Whisper's ``EnglishTextNormalizer`` (one shared instance), then :func:`digit_units`, e.g. "Mr. Smith's 2nd"
    -> "mister smith's 2nd", "TWO TWO EIGHT SEVEN" and "2-2-8-7." -> "2 2 8 7", "0351" -> "0 3 5 1"."""
    while _LEADING_ZERO.search(text):
        text = _LEADING_ZERO.sub("0 ", text)
    return " ".join(digit_units(_english_normalizer()(text).split()))


def normalized_words(text: str, *, normalize_text: bool = True) -> list[str]:
    """Words of ``text`` after normalisation (or plain whitespace splitting when ``normalize_text`` is False)."""
    return (normalize(text) if normalize_text else text).split()


def word_and_end(item: Any) -> tuple[str, float]:
    """Accept a reference word as ``(word, end_ms)`` or as an object with ``.word`` and ``.end_ms`` (WordSpan)."""
    if isinstance(item, tuple | list):
        word, end_ms = item[0], item[-1]
    else:
        word, end_ms = item.word, item.end_ms
    return str(word), float(end_ms)


@dataclass(frozen=True)
class ErrorCounts:
    """Word edit counts: S substitutions, D deletions, I insertions, H hits (correct words, "C").

    ``ref_words`` is N = H + S + D (the reference length, the WER denominator) and ``errors`` is S + D + I.
    Counts add up (``a + b``), so pooled (corpus-level) rates are ``sum(counts).rate``.
    """

    substitutions: int = 0
    deletions: int = 0
    insertions: int = 0
    hits: int = 0

    @property
    def ref_words(self) -> int:
        return self.hits + self.substitutions + self.deletions

    @property
    def hyp_words(self) -> int:
        return self.hits + self.substitutions + self.insertions

    @property
    def errors(self) -> int:
        return self.substitutions + self.deletions + self.insertions

    @property
    def rate(self) -> float:
        """errors / N. With N = 0 this is the number of insertions (jiwer 4's empty-reference convention)."""
        return self.errors / max(self.ref_words, 1)

    def __add__(self, other: ErrorCounts) -> ErrorCounts:
        return ErrorCounts(
            self.substitutions + other.substitutions,
            self.deletions + other.deletions,
            self.insertions + other.insertions,
            self.hits + other.hits,
        )

    def __radd__(self, other: object) -> ErrorCounts:  # lets sum() start from 0
        if other == 0:
            return self
        return NotImplemented

    def as_dict(self) -> dict[str, int]:
        return {
            "S": self.substitutions,
            "D": self.deletions,
            "I": self.insertions,
            "H": self.hits,
            "N": self.ref_words,
        }


def error_counts(pairs: Iterable[tuple[Sequence[str], Sequence[str]]]) -> list[ErrorCounts]:
    """Per-pair edit counts of already-normalised word lists ``(ref_words, hyp_words)``.

    Pairs with an empty reference are counted here (all hypothesis words are insertions) because jiwer 3
    rejects empty references; the others go to one batched ``jiwer.process_words`` call.
    """
    pairs = list(pairs)
    out: list[ErrorCounts | None] = [None] * len(pairs)
    idx, refs, hyps = [], [], []
    for i, (ref, hyp) in enumerate(pairs):
        if len(ref) == 0:
            out[i] = ErrorCounts(insertions=len(hyp))
        elif len(hyp) == 0:
            out[i] = ErrorCounts(deletions=len(ref))
        else:
            idx.append(i)
            refs.append(" ".join(ref))
            hyps.append(" ".join(hyp))
    if idx:
        result = jiwer.process_words(refs, hyps)
        for i, chunks in zip(idx, result.alignments, strict=True):
            s = d = ins = h = 0
            for c in chunks:
                n_ref, n_hyp = c.ref_end_idx - c.ref_start_idx, c.hyp_end_idx - c.hyp_start_idx
                if c.type == "equal":
                    h += n_ref
                elif c.type == "substitute":
                    s += n_ref
                elif c.type == "delete":
                    d += n_ref
                elif c.type == "insert":
                    ins += n_hyp
            out[i] = ErrorCounts(s, d, ins, h)
    return [c for c in out if c is not None]


def match_pairs(ref: Sequence[str], hyp: Sequence[str]) -> list[tuple[int, int]]:
    """``(ref_index, hyp_index)`` of the words jiwer's alignment marks as correct ("equal" chunks)."""
    if not ref or not hyp:
        return []
    chunks = jiwer.process_words(" ".join(ref), " ".join(hyp)).alignments[0]
    pairs: list[tuple[int, int]] = []
    for c in chunks:
        if c.type == "equal":
            pairs.extend(
                zip(range(c.ref_start_idx, c.ref_end_idx), range(c.hyp_start_idx, c.hyp_end_idx), strict=True)
            )
    return pairs
