"""Word error rates: offline WER and the streaming RWER / ARWER of CarelessWhisper (WhisperRT).

Reference for RWER/ARWER: Krichli, Raj, Keshet, "CarelessWhisper: Turning Whisper into a Causal
Streaming Model", arXiv 2508.12301v1, §VII-A1 "Evaluation Metrics" (renamed WhisperRT in v2). In v1 the two
definitions are unnumbered display equations that sit between eq. (26) and eq. (27); below they are cited as
"§VII-A1 RWER eq." and "§VII-A1 ARWER eq.". With y the reference, ŷ_τ the hypothesis emitted by time τ
(Ñ_τ words), Ŷ = {ŷ_0, …, ŷ_T} and y_τ the time-τ reference:

    RWER(y, Ŷ) = Σ_τ [I + D + S](y_τ, ŷ_τ) / Σ_τ [C + D + S](y_τ, ŷ_τ),   y_τ = first Ñ_τ words of y
    ARWER(y, Ŷ) = the same ratio,                                        y_τ = words of y that ended by τ

"Ended by τ" follows the paper's own definition of the time-τ target in eq. (26),
y_{<I_j} = {y_i | t_end(y_i) ≤ I_j}: a word counts once its aligned end time is ≤ τ. Note C + D + S is just
|y_τ|, so each equation is a ratio of sums over the time points (errors pooled over τ, *not* a mean of per-τ
rates).

Aggregation over utterances is not spelled out in the paper (it reports one percentage per test set).
The default here, ``aggregate="pooled"``, extends the same ratio of sums over all (utterance, τ) pairs,
exactly as corpus WER pools S, D, I, N over utterances; ``aggregate="mean"`` averages the per-utterance
ratios instead. Plain WER (§VII-A1 "Word Error Rate") is the final hypothesis against the full reference.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from evaluation.metrics.text import ErrorCounts, error_counts, normalized_words, word_and_end

__all__ = [
    "arwer",
    "arwer_counts",
    "rwer",
    "rwer_counts",
    "utterance_counts",
    "utterance_wer",
    "wer",
    "wer_counts",
]

Snapshot = tuple[float, str]  # (time_ms, hypothesis text emitted so far)
Aggregate = Literal["pooled", "mean"]


def utterance_counts(refs: Sequence[str], hyps: Sequence[str], *, normalize_text: bool = True) -> list[ErrorCounts]:
    """S, D, I, H of each (reference, hypothesis) pair, from the one jiwer alignment :func:`wer_counts` sums."""
    if len(refs) != len(hyps):
        raise ValueError(f"{len(refs)} references but {len(hyps)} hypotheses")
    pairs = [
        (normalized_words(r, normalize_text=normalize_text), normalized_words(h, normalize_text=normalize_text))
        for r, h in zip(refs, hyps, strict=True)
    ]
    return error_counts(pairs)


def wer_counts(refs: Sequence[str], hyps: Sequence[str], *, normalize_text: bool = True) -> ErrorCounts:
    """Corpus totals S, D, I, H (and N = ``.ref_words``) over all (reference, hypothesis) pairs: the sum of
    :func:`utterance_counts`, so per-utterance errors / reference words add up to the corpus WER exactly."""
    return sum(utterance_counts(refs, hyps, normalize_text=normalize_text), ErrorCounts())


def wer(refs: Sequence[str], hyps: Sequence[str], *, normalize_text: bool = True) -> float:
    """Corpus-level WER = Σ(S + D + I) / Σ N over all utterances, after Whisper normalisation (a fraction)."""
    return wer_counts(refs, hyps, normalize_text=normalize_text).rate


def utterance_wer(ref: str, hyp: str, *, normalize_text: bool = True) -> float:
    """WER of one utterance (with an empty reference: the number of inserted words, as jiwer 4 does)."""
    return wer_counts([ref], [hyp], normalize_text=normalize_text).rate


def _reference_text(reference: str | Sequence[Any]) -> str:
    if isinstance(reference, str):
        return reference
    return " ".join(word_and_end(w)[0] for w in reference)


def rwer_counts(
    snapshots: Sequence[Snapshot], reference: str | Sequence[Any], *, normalize_text: bool = True
) -> ErrorCounts:
    """Σ_τ of the edit counts of one utterance in the RWER equation (§VII-A1, between eqs. (26) and (27)).

    ``snapshots``: one ``(time_ms, hypothesis_so_far)`` per decoding time point τ (the whole hypothesis
    emitted so far, not the increment). ``reference``: the transcript, as a string or as word items
    (``(word, end_ms)`` / WordSpan; the times are not used). ŷ_τ and y are normalised; y_τ is the first
    Ñ_τ = |ŷ_τ| words of the normalised reference (all of it when the hypothesis is longer; the extra
    words are then insertions).
    """
    ref = normalized_words(_reference_text(reference), normalize_text=normalize_text)
    pairs = []
    for _, hyp_text in snapshots:
        hyp = normalized_words(hyp_text, normalize_text=normalize_text)
        pairs.append((ref[: len(hyp)], hyp))
    return sum(error_counts(pairs), ErrorCounts())


def arwer_counts(
    snapshots: Sequence[Snapshot], ref_words: Sequence[Any], *, normalize_text: bool = True
) -> ErrorCounts:
    """Σ_τ of the edit counts of one utterance in the ARWER equation (§VII-A1, between eqs. (26) and (27)).

    ``ref_words``: aligned reference words as ``(word, end_ms)`` or WordSpan-like objects. At the snapshot
    time τ, y_τ = the words with ``end_ms <= τ`` (eq. (26)), joined in order and normalised together (so a
    spoken number spanning words normalises as it would in the full transcript); ŷ_τ is the normalised
    hypothesis. Words not yet emitted at τ count as deletions, so a late system is penalised.
    """
    items = [word_and_end(w) for w in ref_words]
    pairs = []
    for t_ms, hyp_text in snapshots:
        ended = " ".join(w for w, end in items if end <= t_ms)
        pairs.append(
            (
                normalized_words(ended, normalize_text=normalize_text),
                normalized_words(hyp_text, normalize_text=normalize_text),
            )
        )
    return sum(error_counts(pairs), ErrorCounts())


def _aggregate(per_utt: list[ErrorCounts], aggregate: Aggregate) -> float:
    if not per_utt:
        raise ValueError("no utterances")
    if aggregate == "pooled":
        return sum(per_utt, ErrorCounts()).rate
    if aggregate == "mean":
        return sum(c.rate for c in per_utt) / len(per_utt)
    raise ValueError(f"aggregate must be 'pooled' or 'mean', not {aggregate!r}")


def rwer(
    snapshots: Sequence[Sequence[Snapshot]],
    references: Sequence[str | Sequence[Any]],
    *,
    aggregate: Aggregate = "pooled",
    normalize_text: bool = True,
) -> float:
    """Relative WER over utterances (a fraction): see :func:`rwer_counts` and the module docstring.

    ``aggregate="pooled"`` (default): Σ_utt Σ_τ (I + D + S) / Σ_utt Σ_τ |y_τ|. ``"mean"``: mean of the
    per-utterance RWER(y, Ŷ). A per-utterance denominator of 0 (nothing emitted) gives errors / 1.
    """
    if len(snapshots) != len(references):
        raise ValueError(f"{len(snapshots)} snapshot lists but {len(references)} references")
    per_utt = [rwer_counts(s, r, normalize_text=normalize_text) for s, r in zip(snapshots, references, strict=True)]
    return _aggregate(per_utt, aggregate)


def arwer(
    snapshots: Sequence[Sequence[Snapshot]],
    ref_words: Sequence[Sequence[Any]],
    *,
    aggregate: Aggregate = "pooled",
    normalize_text: bool = True,
) -> float:
    """Aligned-relative WER over utterances (a fraction): see :func:`arwer_counts` and the module docstring."""
    if len(snapshots) != len(ref_words):
        raise ValueError(f"{len(snapshots)} snapshot lists but {len(ref_words)} references")
    per_utt = [arwer_counts(s, r, normalize_text=normalize_text) for s, r in zip(snapshots, ref_words, strict=True)]
    return _aggregate(per_utt, aggregate)
