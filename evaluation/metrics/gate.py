"""The WER gate: lag metrics and Pareto fronts only count systems whose WER is within a cap of offline.

Why: AL, LAAL and DAL measure *when* words come out, not *which* words. A system that hallucinates or stalls can score
a small (even negative) AL — AL's oracle rate is |X|/|Y|, and every extra word subtracts another |X|/|Y| — so a lag
number is only comparable between systems that transcribe about as well as offline Whisper (../shared/DESIGN.md,
"Latency clock"). WER is a fraction here (0.05 = 5 points).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

__all__ = ["WER_CAP_POINTS", "pareto_front", "reference_wer", "wer_gate_limit", "within_wer_cap"]

WER_CAP_POINTS = 0.05  # default cap: offline WER + 5 points (absolute, not relative)
_EPS = 1e-9  # 0.07 + 0.05 is 0.12000000000000001 in floats: a WER of exactly offline + cap passes


def within_wer_cap(wer: float, offline_wer: float, cap_points: float = WER_CAP_POINTS) -> bool:
    """True when ``wer`` ≤ ``offline_wer`` + ``cap_points``. A missing/NaN WER never passes."""
    if cap_points < 0:
        raise ValueError(f"cap_points must be ≥ 0, got {cap_points}")
    if wer is None or offline_wer is None or math.isnan(wer) or math.isnan(offline_wer):
        return False
    return wer <= offline_wer + cap_points + _EPS


def reference_wer(wers: Iterable[float], offline_wer: float | None = None) -> float:
    """The WER the cap is measured from: the offline WER when one is known; otherwise the best (lowest) of
    ``wers`` — a weaker, relative gate (it keeps the systems within the cap of the best one), used only when
    no offline number was recorded. NaN when there is nothing to compare with."""
    if offline_wer is not None and not math.isnan(offline_wer):
        return float(offline_wer)
    finite = [float(w) for w in wers if w is not None and not math.isnan(w)]
    return min(finite) if finite else float("nan")


def wer_gate_limit(wers: Iterable[float], offline_wer: float | None = None,
                   cap_points: float = WER_CAP_POINTS) -> float:
    """The highest WER that passes the gate: ``reference_wer(wers, offline_wer) + cap_points``."""
    return reference_wer(wers, offline_wer) + cap_points


def pareto_front(points: Sequence[tuple[float, float]], eligible: Sequence[bool] | None = None) -> list[bool]:
    """For (lag, WER) points, lower is better on both: True where no other *eligible* point is at least as good on
    both and better on one. Ineligible points (e.g. failing the WER gate) are never on the front and never push
    another point off it."""
    ok = [True] * len(points) if eligible is None else [bool(e) for e in eligible]
    if len(ok) != len(points):
        raise ValueError("one eligibility flag per point")
    front = []
    for i, (x, y) in enumerate(points):
        front.append(ok[i] and not any(
            ok[j] and j != i and ox <= x and oy <= y and (ox < x or oy < y) for j, (ox, oy) in enumerate(points)))
    return front
