"""One release report from parts scored at different times on the same test set.

On a small CPU a release does not fit in one sitting (a peer at a short chunk streams several times slower than
real time), so a release is scored in parts (our systems and the
offline references, then each peer budget), and each part is merged into the report that is already there. The
merge recomputes everything that depends on more than one row (the WER cap, the front, each row's difference to
the reference) from the rows' ``per_utterance`` results, so the merged report is what one run over every row would
have written, timings apart: each row keeps the clock it was timed on (``scored_at``).

Rows are only merged on the same test set (the content hash of its audio); a part on another set replaces the
report. A system scored again replaces its earlier row, and the ledger says how often each system was scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evaluation import intervals
from evaluation.report import OFFLINE_KINDS, score_rows


class MergeError(ValueError):
    """Two parts that cannot form one report."""


def _order(row: dict[str, Any]) -> tuple:
    """Offline references, then ours, then the peers by policy and budget: the order a reader compares in."""
    kind = str(row["kind"])
    group = 0 if kind in OFFLINE_KINDS else 2 if kind.startswith("whisperlivekit") else 1
    return (group, kind if group == 2 else "", row["chunk_ms"] or 0)


def merge_release(previous: dict[str, Any] | None, part: dict[str, Any], *, reference: str | None,
                  scored_per_system: dict[str, int] | None = None, seed: int = 0,
                  n_resamples: int = intervals.N_RESAMPLES) -> dict[str, Any]:
    """``part`` (an evaluation result) merged into ``previous`` (the report so far, or None).

    Every row of ``part`` is stamped with ``scored_at`` (the part's ``created``) and replaces a row of the same
    name. ``reference`` is the system the others are compared with; when it is not (yet) among the rows the report
    compares with nothing rather than with a stand-in, and says so (``reference_missing``)."""
    same_set = previous is not None and previous.get("test_set", {}).get("audio_sha256") == \
        part["test_set"]["audio_sha256"]
    new = [{**r, "scored_at": r.get("scored_at") or part.get("created")} for r in part["systems"]]
    names = {r["name"] for r in new}
    if len(names) != len(new):
        raise MergeError(f"a part scores one system twice: {sorted(r['name'] for r in new)}")
    kept = [r for r in previous["systems"] if r["name"] not in names] if same_set else []
    rows = sorted(kept + new, key=_order)
    for r in rows:  # recomputed below from per_utterance: nothing stale survives the merge
        for key in ("ci95", "vs_reference", "within_wer_cap", "pareto"):
            r.pop(key, None)
    present = reference if reference in {r["name"] for r in rows} else None
    # a release names its own reference or compares with none: no stand-in while the reference is not scored yet
    scored = score_rows(rows, reference=present, seed=seed, n_resamples=n_resamples, fallback_reference=False)
    parts = (previous.get("parts", []) if same_set else []) + [
        {"created": part.get("created"), "systems": sorted(names), "mlflow_run_id": part.get("mlflow_run_id"),
         "times_scored": part["test_set"].get("times_scored")}]
    out = {**(previous if same_set else {}), **{k: v for k, v in part.items() if k != "systems"}, **scored,
           "parts": parts}
    out["reference_missing"] = reference if present is None else None
    # rows without live feeding were fed fixed pieces: the report says which it holds
    out["feeding"] = "/".join(sorted({r.get("feeding", "fixed") for r in rows}))
    if scored_per_system is not None:
        out["test_set"] = {**out["test_set"], "scored_per_system": {r["name"]: scored_per_system.get(r["name"], 0)
                                                                   for r in rows}}
    return out


def budget_coverage(rows: Sequence[dict[str, Any]], chosen: dict[str, dict[str, Any]]) -> dict[str, str | None]:
    """For every dev-chosen peer configuration (``choices.json``'s ``peers``: ``"<kind>@<chunk_ms>"`` → spec), the
    name of its row in the report, or None where that budget has not been scored on test yet."""
    names = {r["name"] for r in rows}
    return {key: (c["name"] if c["name"] in names else None) for key, c in sorted(chosen.items())}
