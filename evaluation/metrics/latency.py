"""Simultaneous-decoding latency (AL, LAAL, DAL, AP) as SimulEval 1.1.x computes it, plus RTF helpers.

Conventions (speech input, text output, SimulEval's defaults ``--eval-latency-unit word``, reference length on):

* ``delays[i]``: ms of source audio *consumed* when target word i+1 was emitted (every word of one output
  chunk shares the chunk's delay; a final flush gets the full source length). Wall-clock time is not in it;
  the computation-aware ("_CA") variants use ``elapsed[i]`` instead: any computation-aware emission time the
  caller measures. SimulEval's own is ``delays[i] + cumulative wall ms`` (:func:`computation_aware_delays`);
  the streaming evaluator passes the real-time queue clock (finish time of the step that committed the word,
  ``streaming/events.py``), which does not charge a system that keeps up with real time for compute
  that overlapped with waiting for audio. The formulas are the same for either.
* ``source_length``: |X| in ms (``num_samples * 1000 / sample_rate``, :func:`source_length_ms`).
* ``reference_length``: |Y| in words, SimulEval counts ``len(reference.split(" "))``
  (:func:`reference_length`). ``None`` means the hypothesis length (SimulEval's ``--no-use-ref-len`` or a
  missing reference).

Formulas (SimulEval 1.1.4 ``simuleval/evaluator/scorers/latency_scorer.py``), with d_i 1-based:

* AL (STACL, Ma et al. 2019; oracle rate of SimulEval) = (1/τ) Σ_{i=1..τ} [d_i − (i−1)·|X|/|Y|], τ = the first
  i with d_i ≥ |X| (that term included) or |hyp| if none; if d_1 > |X| the score is d_1.
* LAAL (Papi et al. 2022) = AL with |Y| replaced by max(|hyp|, |Y|).
* DAL (Arivazhagan et al. 2019) = (1/|hyp|) Σ_i [d'_i − (i−1)/γ], d'_1 = d_1, d'_i = max(d_i, d'_{i−1} + 1/γ),
  γ = |hyp|/|X|: always the hypothesis length, over all words (no τ cut-off, no d_1 > |X| shortcut).
* AP (Cho & Esipova 2016) = Σ_i d_i / (|X|·|Y|).

The corpus score is the plain mean of per-utterance scores, skipping utterances with no emitted word
(:func:`corpus_latency`). The loops below mirror SimulEval's float arithmetic, so results agree to rounding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from statistics import mean

import numpy as np

__all__ = [
    "average_lagging",
    "average_proportion",
    "computation_aware_delays",
    "corpus_latency",
    "differentiable_average_lagging",
    "latency_scores",
    "latency_summary",
    "length_adaptive_average_lagging",
    "mean_rtf",
    "reference_length",
    "rtf",
    "source_length_ms",
]


def source_length_ms(num_samples: int, sample_rate: int = 16000) -> float:
    """|X| in ms as SimulEval measures speech input: ``num_samples * 1000 / sample_rate``."""
    return num_samples * 1000 / sample_rate


def reference_length(reference: str) -> int:
    """|Y| in words exactly as SimulEval counts it: ``len(reference.split(" "))`` ("a  b" counts 3)."""
    return len(reference.split(" "))


def _check(delays: Sequence[float], source_length: float, target_length: float | None) -> None:
    if len(delays) == 0:
        raise ValueError("no emitted words: latency is undefined (SimulEval skips such instances)")
    if not source_length > 0:
        raise ValueError(f"source_length must be > 0, got {source_length}")
    if target_length is not None and not target_length > 0:
        raise ValueError(f"reference_length must be > 0, got {target_length}")


def _lagging(delays: Sequence[float], source_length: float, target_length: float) -> float:
    if delays[0] > source_length:
        return float(delays[0])
    gamma = target_length / source_length
    total = 0.0
    tau = 0
    for t_minus_1, d in enumerate(delays):
        total += d - t_minus_1 / gamma
        tau = t_minus_1 + 1
        if d >= source_length:
            break
    return total / tau


def average_lagging(delays: Sequence[float], source_length: float, reference_length: int | None = None) -> float:
    """AL in the unit of ``delays`` (ms); |Y| = ``reference_length`` or, if None, the hypothesis length."""
    _check(delays, source_length, reference_length)
    target_length = len(delays) if reference_length is None else reference_length
    return _lagging(delays, source_length, target_length)


def length_adaptive_average_lagging(
    delays: Sequence[float], source_length: float, reference_length: int | None = None
) -> float:
    """LAAL: AL with the rate |X| / max(|hyp|, |Y|), so over-generation cannot lower the lag."""
    _check(delays, source_length, reference_length)
    target_length = len(delays) if reference_length is None else reference_length
    return _lagging(delays, source_length, max(len(delays), target_length))


def differentiable_average_lagging(delays: Sequence[float], source_length: float) -> float:
    """DAL; SimulEval always uses the hypothesis length here (its ``use_ref_len`` is ignored)."""
    _check(delays, source_length, None)
    target_length = len(delays)
    gamma = target_length / source_length
    total = 0.0
    g_prime_last = 0.0
    for i_minus_1, g in enumerate(delays):
        g_prime = g if i_minus_1 == 0 else max(g, g_prime_last + 1 / gamma)
        total += g_prime - i_minus_1 / gamma
        g_prime_last = g_prime
    return total / target_length


def average_proportion(delays: Sequence[float], source_length: float, reference_length: int | None = None) -> float:
    """AP = Σ d_i / (|X|·|Y|); unitless, can exceed 1 with the reference length."""
    _check(delays, source_length, reference_length)
    target_length = len(delays) if reference_length is None else reference_length
    return sum(delays) / (source_length * target_length)


def computation_aware_delays(delays: Sequence[float], wall_ms_since_start: Sequence[float]) -> list[float]:
    """SimulEval's ``elapsed``: audio ms consumed plus wall-clock ms since the first source chunk was sent
    (cumulative compute time when audio is fed as fast as it is processed). Kept for SimulEval compatibility;
    the streaming evaluator uses the real-time queue clock instead (see the module docstring)."""
    if len(delays) != len(wall_ms_since_start):
        raise ValueError("delays and wall times differ in length")
    return [d + w for d, w in zip(delays, wall_ms_since_start, strict=True)]


def latency_scores(
    delays: Sequence[float],
    source_length: float,
    reference_length: int | None = None,
    *,
    elapsed: Sequence[float] | None = None,
) -> dict[str, float]:
    """One utterance's ``AL``, ``LAAL``, ``DAL``, ``AP`` (and ``*_CA`` on ``elapsed`` when given)."""
    out: dict[str, float] = {}
    for suffix, values in (("", delays), ("_CA", elapsed)):
        if values is None:
            continue
        out["AL" + suffix] = average_lagging(values, source_length, reference_length)
        out["LAAL" + suffix] = length_adaptive_average_lagging(values, source_length, reference_length)
        out["DAL" + suffix] = differentiable_average_lagging(values, source_length)
        out["AP" + suffix] = average_proportion(values, source_length, reference_length)
    return out


def corpus_latency(per_utterance: Iterable[dict[str, float] | None]) -> dict[str, float]:
    """Mean of each metric over utterances (SimulEval's corpus score); ``None`` entries (no output) are skipped."""
    rows = [r for r in per_utterance if r]
    if not rows:
        return {}
    return {k: mean(r[k] for r in rows) for k in rows[0]}


def rtf(compute_s: float, audio_s: float) -> float:
    """Real-time factor t_c / C (CarelessWhisper eq. (27)): compute seconds per second of audio."""
    if not audio_s > 0:
        raise ValueError(f"audio_s must be > 0, got {audio_s}")
    return compute_s / audio_s


def mean_rtf(compute_s: Sequence[float], audio_s: Sequence[float] | float) -> float:
    """Mean of per-chunk RTFs, as the paper reports it ("the mean RTF across all frames in the stream")."""
    audio = [audio_s] * len(compute_s) if isinstance(audio_s, int | float) else list(audio_s)
    if len(audio) != len(compute_s) or not compute_s:
        raise ValueError("need one audio duration per chunk and at least one chunk")
    return mean(rtf(c, a) for c, a in zip(compute_s, audio, strict=True))


def latency_summary(values: Iterable[float]) -> dict[str, float]:
    """``{"median", "p90", "mean"}`` of a list of latencies (numpy linear-interpolated p90); NaN when empty."""
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.size == 0:
        return {"median": float("nan"), "p90": float("nan"), "mean": float("nan")}
    return {"median": float(np.median(arr)), "p90": float(np.percentile(arr, 90)), "mean": float(arr.mean())}
