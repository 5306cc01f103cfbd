"""Finals that say the same thing again: a failure a WER over few words hides and a gate must refuse.

A recognizer can write whole utterances again (each copy a run of insertions) and still score a WER close to its
peers' (docs/decisions/repeat-guard.md). Two measures, per utterance, of the final hypothesis against the reference:

- ``repeated_words``: both texts normalised as WER normalises them (Whisper's ``EnglishTextNormalizer`` and digit
  strings digit by digit, via :func:`evaluation.metrics.text.normalized_words`), a *repeat* is an n-gram said twice in a row, n ≥
  :data:`MIN_NGRAM` (``w[i:i+n] == w[i+n:i+2n]``). Its second copy, the n words ``w[i+n:i+2n]``, are repeated
  words; a word covered by several repeats (a loop of three copies, or the same loop seen at another n) counts
  once. A repeat whose n-gram the reference itself says twice in a row is not counted (a speaker who says
  "the old pan was covered, the old pan was covered" was transcribed right). The match is literal: a loop whose
  copies are a rotation of the reference's repeated n-gram is counted. n < 3 is left out: "very very" and
  "no no" are ordinary speech.
- ``token_loop``: the hypothesis holds a run of :data:`LOOP_RUN` or more repeated tokens, and the reference holds
  none: the same normalised word :data:`LOOP_RUN` times in a row, or, in the raw final text (lower-cased, before
  normalisation, which would split it), a unit of 1–:data:`LOOP_UNIT_CHARS` characters holding a letter repeated
  :data:`LOOP_RUN` times in a row, e.g. ``keb-f-f-f-f-f-f-f-f-f`` (a decoder stuck on one sub-word token). A
  unit without a letter (``........``, the zeros of ``1000000000``) is punctuation or a number, not a loop.

Over a set of utterances (:func:`summary`, a report row): ``repeated_words`` (the sum), ``repeat_rate`` (that sum
over all normalised hypothesis words), ``utterances_with_repeats`` (utterances with at least one repeated word)
and ``token_loops`` (utterances with a token loop).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from evaluation.metrics.text import normalized_words

MIN_NGRAM = 3  # shortest n-gram whose immediate repeat counts
LOOP_RUN = 8  # repeats in a row that make a token loop
LOOP_UNIT_CHARS = 4  # longest character unit of a token loop
# the shortest unit first, so that "ffffffff" is the unit "f" eight times, not "ff" four times
_UNIT_RUN = re.compile(rf"(.{{1,{LOOP_UNIT_CHARS}}}?)\1{{{LOOP_RUN - 1},}}", re.S)
SUMMARY_KEYS = ("repeated_words", "repeat_rate", "utterances_with_repeats", "token_loops")


def repeats(words: Sequence[str], min_n: int = MIN_NGRAM) -> list[tuple[int, int]]:
    """Every (i, n) with ``words[i:i+n] == words[i+n:i+2n]`` and n ≥ ``min_n``, by n then i.

    For each n the positions where a word equals the word n later are found at once; a repeat at i is n such
    positions in a row (a window sum of the matches), so the whole scan is O(len²) array work, fine for the
    thousands of words of a long-form stream."""
    length = len(words)
    if length < 2 * min_n:
        return []
    vocab: dict[str, int] = {}
    ids = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), dtype=np.int64, count=length)
    out: list[tuple[int, int]] = []
    for n in range(min_n, length // 2 + 1):
        same = np.concatenate(([0], np.cumsum(ids[: length - n] == ids[n:])))
        starts = np.flatnonzero(same[n: length - n + 1] - same[: length - 2 * n + 1] == n)
        out += [(int(i), n) for i in starts]
    return out


def _repeated_ngrams(words: Sequence[str]) -> set[tuple[str, ...]]:
    return {tuple(words[i:i + n]) for i, n in repeats(words)}


def repeated_words(hyp: Sequence[str], ref: Sequence[str]) -> int:
    """Hypothesis words in the second copy of a repeat the reference does not make (module docstring); both
    normalised word lists."""
    allowed = _repeated_ngrams(ref)
    covered = np.zeros(len(hyp) + 1, dtype=np.int64)  # a difference array of the copies' spans
    for i, n in repeats(hyp):
        if allowed and tuple(hyp[i:i + n]) in allowed:
            continue
        covered[i + n] += 1
        covered[i + 2 * n] -= 1
    return int(np.count_nonzero(np.cumsum(covered)[:-1]))


def _word_run(words: Sequence[str]) -> bool:
    run = 0
    for k, w in enumerate(words):
        run = run + 1 if k and w == words[k - 1] else 1
        if run >= LOOP_RUN:
            return True
    return False


def _unit_run(text: str) -> bool:
    return any(any(c.isalpha() for c in m.group(1)) for m in _UNIT_RUN.finditer(text.lower()))


def has_token_loop(raw_text: str, words: Sequence[str] | None = None) -> bool:
    """A run of repeated tokens in one text (module docstring); ``words``: its normalised words, when known."""
    return _word_run(normalized_words(raw_text) if words is None else words) or _unit_run(raw_text)


def utterance_repetition(hyp_text: str, ref_text: str) -> dict[str, Any]:
    """``repeated_words`` and ``token_loop`` of one utterance's final text against its reference (digit strings
    compared digit by digit on both sides, as WER compares them)."""
    hyp, ref = normalized_words(hyp_text), normalized_words(ref_text)
    loop = has_token_loop(hyp_text, hyp) and not has_token_loop(ref_text, ref)
    return {"repeated_words": repeated_words(hyp, ref), "token_loop": loop}


def summary(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A row's repetition keys from its ``per_utterance`` entries; {} where the entries predate the metric (no
    ``repeated_words``). ``hyp_words`` (normalised hypothesis words) is recounted from ``hyp`` where missing."""
    if not entries or not all("repeated_words" in e for e in entries):
        return {}
    repeated = sum(int(e["repeated_words"]) for e in entries)
    hyp_words = sum(int(e["hyp_words"]) if "hyp_words" in e else len(normalized_words(e.get("hyp", "")))
                    for e in entries)
    return {"repeated_words": repeated, "repeat_rate": round(repeated / hyp_words, 4) if hyp_words else 0.0,
            "utterances_with_repeats": sum(1 for e in entries if e["repeated_words"] > 0),
            "token_loops": sum(1 for e in entries if e.get("token_loop"))}


__all__ = ["LOOP_RUN", "LOOP_UNIT_CHARS", "MIN_NGRAM", "SUMMARY_KEYS", "has_token_loop", "repeated_words",
           "repeats", "summary", "utterance_repetition"]
