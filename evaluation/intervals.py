"""Paired bootstrap 95 % intervals for the evaluate stage's claims: WER, median word latency, RTF, and their
differences between two systems on the same utterances.

Input: the ``per_utterance`` entries of a report row (``evaluation.streamed.per_utterance``): ``errors``,
``ref_words``, ``word_latency_ms`` (a list), ``compute_ms``, ``audio_ms`` and ``utt_id``. The unit resampled is the
utterance, or with ``groups="recording"`` the recording (the segments of one long-form recording are not
independent; they are drawn together). The statistics are the corpus ones, recomputed on each resample:

- ``wer`` = Σ errors / Σ ref_words (a ratio of sums, not a mean of per-utterance rates);
- ``word_latency_ms_median`` = the median of the pooled word latencies of the drawn utterances (an utterance drawn
  twice counts its words twice);
- ``rtf`` = Σ compute_ms / Σ audio_ms;
- the partials' (``PARTIAL_METRICS``, not in every report row): ``partial_rewrite_rate`` = Σ partials_rewritten /
  Σ partials_shown, and ``display_latency_ms_median``, pooled like the word latency from ``display_latency_ms``.

A comparison draws the same utterances for both systems (paired), so what the two share (a hard utterance, a long
one) cancels in the difference. Every resample is done by ``scipy.stats.bootstrap`` over the array of unit indices
with a vectorized statistic; the pooled median is a weighted median over the latencies sorted once (weight = how
often the latency's utterance was drawn), exactly ``np.median`` of the pooled list without pooling per resample.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import bootstrap

METRICS = ("wer", "word_latency_ms_median", "rtf")  # every report row's intervals
PARTIAL_METRICS = ("partial_rewrite_rate", "display_latency_ms_median")  # what is shown before the finals
# the tail, compared on request (a stall of seconds moves the p90, not the median)
TAIL_METRICS = ("word_latency_ms_p90",)
# the per-utterance list each pooled median is taken over
LATENCY_KEY = {"word_latency_ms_median": "word_latency_ms", "display_latency_ms_median": "display_latency_ms",
               "word_latency_ms_p90": "word_latency_ms"}
N_RESAMPLES = 10_000
# BCa (bias-corrected and accelerated) where its theory holds: WER and RTF are smooth functions (ratios) of sums
# over utterances, and BCa corrects the skew of a ratio near 0 (a WER of a few %) that the plain percentile
# interval ignores. The pooled median is not smooth: BCa's acceleration comes from the jackknife, which fails for
# sample quantiles (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 11), so the median latency and
# its difference get the percentile interval.
METHOD = {"wer": "BCa", "rtf": "BCa", "word_latency_ms_median": "percentile", "partial_rewrite_rate": "BCa",
          "display_latency_ms_median": "percentile", "word_latency_ms_p90": "percentile"}
LOWER_IS_BETTER = {"wer": True, "word_latency_ms_median": True, "rtf": True, "partial_rewrite_rate": True,
                   "display_latency_ms_median": True, "word_latency_ms_p90": True}
_BATCH = 1_000  # resamples per vectorized call: bounds the (resamples × pooled words) weight matrix of the median

Statistic = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class _Units:
    """Per-unit (utterance or recording) sums, and every word latency sorted once with the unit it belongs to."""

    keys: tuple[str, ...]  # utt_id of each utterance, in order: what pairs two systems
    groups: tuple[str, ...]  # the unit of each utterance
    errors: np.ndarray
    ref_words: np.ndarray
    compute_ms: np.ndarray
    audio_ms: np.ndarray
    rewritten: np.ndarray  # partial words later changed (0 where an entry has no partials count)
    shown: np.ndarray  # partial words shown
    latency_ms: np.ndarray  # sorted: the ``latency_key`` list of :func:`_units`
    owner: np.ndarray  # unit index of each sorted latency


def _units(per_utt: Sequence[Mapping[str, Any]], groups: str | None, latency_key: str = "word_latency_ms") -> _Units:
    if not per_utt:
        raise ValueError("no utterances")
    group_of = [str(u[groups]) if groups else str(u["utt_id"]) for u in per_utt]
    index: dict[str, int] = {}
    unit = np.array([index.setdefault(g, len(index)) for g in group_of], dtype=np.intp)

    def per_unit(key: str, optional: bool = False) -> np.ndarray:
        values = [float(u.get(key, 0) if optional else u[key]) for u in per_utt]
        return np.bincount(unit, weights=values, minlength=len(index))

    lat = np.array([x for u in per_utt for x in u[latency_key]], dtype=np.float64)
    owner = np.repeat(unit, [len(u[latency_key]) for u in per_utt])
    order = np.argsort(lat, kind="stable")
    return _Units(tuple(str(u["utt_id"]) for u in per_utt), tuple(group_of), per_unit("errors"),
                  per_unit("ref_words"), per_unit("compute_ms"), per_unit("audio_ms"),
                  per_unit("partials_rewritten", True), per_unit("partials_shown", True), lat[order], owner[order])


def _pooled_quantile(u: _Units, idx: np.ndarray, q: float) -> np.ndarray:
    """The ``q`` quantile (numpy's linear rule) of the latencies of the drawn units, one per row of ``idx``
    (..., n): the two pooled ranks it lies between are found on the cumulative weights of the latencies sorted
    once; NaN where no word was drawn. At q = 0.5 it is the median (the lower and upper middle, averaged)."""
    n_units = len(u.errors)
    rows = idx.reshape(-1, idx.shape[-1])
    if u.latency_ms.size == 0:
        return np.full(idx.shape[:-1], np.nan)
    offsets = n_units * np.arange(len(rows))[:, None]
    counts = np.bincount((rows + offsets).ravel(), minlength=len(rows) * n_units).reshape(len(rows), n_units)
    cum = np.cumsum(counts[:, u.owner], axis=1)
    total = cum[:, -1]
    rank = (total - 1) * q
    below = np.floor(rank).astype(np.int64)
    lower = (cum > below[:, None]).argmax(axis=1)
    upper = (cum > np.ceil(rank).astype(np.int64)[:, None]).argmax(axis=1)
    frac = rank - below
    value = (1 - frac) * u.latency_ms[lower] + frac * u.latency_ms[upper]
    value[total == 0] = np.nan
    return value.reshape(idx.shape[:-1])


def _pooled_median(u: _Units, idx: np.ndarray) -> np.ndarray:
    return _pooled_quantile(u, idx, 0.5)


def _statistic(u: _Units, metric: str) -> Statistic:
    """The metric of the units drawn in each row of an index array (..., n) → (...)."""
    def ratio(num: np.ndarray, den: np.ndarray) -> Statistic:
        def f(idx: np.ndarray) -> np.ndarray:
            with np.errstate(divide="ignore", invalid="ignore"):
                return num[idx].sum(axis=-1) / den[idx].sum(axis=-1)
        return f

    if metric == "wer":
        return ratio(u.errors, u.ref_words)
    if metric == "rtf":
        return ratio(u.compute_ms, u.audio_ms)
    if metric == "partial_rewrite_rate":
        return ratio(u.rewritten, u.shown)
    if metric in LATENCY_KEY:  # the units hold that metric's latencies (_units' latency_key)
        q = 0.9 if metric.endswith("_p90") else 0.5
        return lambda idx: _pooled_quantile(u, idx, q)
    raise ValueError(f"unknown metric {metric!r}; one of {METRICS + PARTIAL_METRICS + TAIL_METRICS}")


def _interval(stat: Statistic, n_units: int, metric: str, seed: int, n_resamples: int) -> tuple[float, float]:
    """The 95 % interval of ``stat`` over resampled unit indices; NaN with fewer than 2 units (no variation to
    resample), without a point value, or when some resample has no value (e.g. drew no matched word)."""
    if n_units < 2 or not np.isfinite(stat(np.arange(n_units))):  # e.g. a system that matched no word at all
        return math.nan, math.nan
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = bootstrap((np.arange(n_units),), lambda idx, axis=-1: stat(idx), vectorized=True, axis=-1,
                        n_resamples=n_resamples, batch=_BATCH, method=METHOD[metric], confidence_level=0.95,
                        rng=np.random.default_rng(seed))
    dist = res.bootstrap_distribution
    if np.all(dist == dist[0]):  # every resample gives the same value (e.g. two identical systems): BCa is NaN
        return float(dist[0]), float(dist[0])
    for w in caught:  # anything else scipy warned about is the caller's to see
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def point(per_utt: Sequence[Mapping[str, Any]], metric: str) -> float:
    """The metric on all utterances (the row's value, unrounded)."""
    u = _units(per_utt, None, LATENCY_KEY.get(metric, "word_latency_ms"))
    return float(_statistic(u, metric)(np.arange(len(u.errors))))


def ci95(per_utt: Sequence[Mapping[str, Any]], metric: str, *, groups: str | None = None, seed: int = 0,
         n_resamples: int = N_RESAMPLES) -> tuple[float, float]:
    """95 % bootstrap interval of ``metric`` (one of :data:`METRICS`, :data:`PARTIAL_METRICS`) over utterances, or
    over the values of the ``groups`` key (e.g. ``"recording"``); method :data:`METHOD`, seeded."""
    u = _units(per_utt, groups, LATENCY_KEY.get(metric, "word_latency_ms"))
    return _interval(_statistic(u, metric), len(u.errors), metric, seed, n_resamples)


def verdict(ci: Sequence[float], metric: str) -> str:
    """``better`` / ``worse`` when the interval of (system − reference) excludes 0, else ``not separable``."""
    lo, hi = ci
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0 <= hi:
        return "not separable"
    below = hi < 0
    return "better" if below == LOWER_IS_BETTER[metric] else "worse"


def compare(per_utt_a: Sequence[Mapping[str, Any]], per_utt_b: Sequence[Mapping[str, Any]], metric: str, *,
            groups: str | None = None, seed: int = 0, n_resamples: int = N_RESAMPLES) -> dict[str, Any]:
    """System a − system b (the reference) on the same utterances: ``{"diff", "ci95": [lo, hi], "verdict"}``.

    Paired: each resample draws the same units for both systems. Raises ValueError when the two lists are not
    the same utterances in the same order (or group them differently)."""
    key = LATENCY_KEY.get(metric, "word_latency_ms")
    a, b = _units(per_utt_a, groups, key), _units(per_utt_b, groups, key)
    if a.keys != b.keys:
        only_a, only_b = sorted(set(a.keys) - set(b.keys)), sorted(set(b.keys) - set(a.keys))
        raise ValueError(f"the two systems were scored on different utterances (or orders): only in a "
                         f"{only_a[:5]}, only in b {only_b[:5]}, {len(a.keys)} vs {len(b.keys)} in all")
    if a.groups != b.groups:
        raise ValueError(f"the two systems group their utterances differently by {groups!r}")
    stat_a, stat_b = _statistic(a, metric), _statistic(b, metric)

    def diff(idx: np.ndarray) -> np.ndarray:
        return stat_a(idx) - stat_b(idx)

    everything = np.arange(len(a.errors))
    ci = _interval(diff, len(a.errors), metric, seed, n_resamples)
    return {"diff": float(diff(everything)), "ci95": [ci[0], ci[1]], "verdict": verdict(ci, metric)}
