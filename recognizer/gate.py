"""The dev-split gate over registered recognizers: which version each alias names.

Every candidate (causal greedy, beam, two-pass, EMMA where the profile keeps it, at each chunk size the profile
trains) is registered and scored on the `dev` split in one evaluate run beside the offline references. The gate
then names:

- ``champion``: the lowest dev WER among candidates within the WER cap (offline Whisper on the same utterances + cap
  points), within the profile's median final-word latency budget and compute budget (RTF), when set; ties go to
  the lower latency. The server serves it by default.
- ``champion-<chunk>ms``: the same rule at one chunk size (a deployment bound to a chunk size).
- ``champion-fast``: the lowest RTF within the WER cap and the latency budget (a low-compute deployment, when the
  accurate one costs more than a node can give).

When no candidate is within the cap the lowest-WER candidate is still named (a pipeline must end with something
to serve), and its ``gate`` tag says it is outside the cap. The dev numbers go onto each version as ``dev_*`` tags.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CHAMPION, FAST = "champion", "champion-fast"


@dataclass(frozen=True)
class Budget:
    latency_ms: float | None = None  # median final-word latency on dev
    rtf: float | None = None  # compute: seconds of compute per second of audio


def _ok(x: Any) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _within(row: Mapping[str, Any], budget: Budget) -> bool:
    lat, rtf = row.get("word_latency_ms_median"), row.get("rtf")
    return ((budget.latency_ms is None or (_ok(lat) and lat <= budget.latency_ms))
            and (budget.rtf is None or (_ok(rtf) and rtf <= budget.rtf)))


def _best(rows: Sequence[Mapping[str, Any]], key) -> Mapping[str, Any] | None:
    return min(rows, key=key) if rows else None


def by_wer(r: Mapping[str, Any]) -> tuple[float, float]:
    lat = r.get("word_latency_ms_median")
    return (r["wer"], lat if _ok(lat) else math.inf)


def choose(rows: Sequence[Mapping[str, Any]], budget: Budget = Budget()) -> dict[str, Any]:
    """{alias: (row name, reason)} from dev rows of candidates (each with ``wer``, ``within_wer_cap``,
    ``word_latency_ms_median``, ``rtf``, ``chunk_ms``)."""
    if not rows:
        raise ValueError("no candidate recognizer was scored on dev")
    capped = [r for r in rows if r.get("within_wer_cap")]
    eligible = [r for r in capped if _within(r, budget)]
    aliases: dict[str, Any] = {}
    if eligible:
        best = _best(eligible, by_wer)
        aliases[CHAMPION] = (best["name"], "lowest dev WER within the WER cap and the budget")
    elif capped:
        best = _best(capped, by_wer)
        aliases[CHAMPION] = (best["name"], "lowest dev WER within the WER cap; none within the budget")
    else:
        best = _best(rows, by_wer)
        aliases[CHAMPION] = (best["name"], "outside the WER cap: no candidate within it; lowest dev WER")
    for chunk in sorted({r["chunk_ms"] for r in rows if r.get("chunk_ms")}):
        at = [r for r in (eligible or capped or rows) if r.get("chunk_ms") == chunk]
        if at:
            aliases[f"{CHAMPION}-{chunk}ms"] = (_best(at, by_wer)["name"], f"the champion rule at {chunk} ms")
    fast = _best([r for r in eligible or capped if _ok(r.get("rtf"))], lambda r: (r["rtf"], r["wer"]))
    if fast is not None:
        aliases[FAST] = (fast["name"], "lowest RTF within the WER cap and the latency budget")
    return aliases


def dev_tags(row: Mapping[str, Any], eval_set: str) -> dict[str, str]:
    """What a version records of its dev evaluation (selection evidence, next to the test numbers added later)."""
    ci = (row.get("ci95") or {}).get("wer")
    tags = {f"dev_{k}": str(row[k]) for k in ("wer", "word_latency_ms_median", "word_latency_ms_p90", "rtf",
                                             "within_wer_cap") if k in row}
    if ci:
        tags["dev_wer_ci95"] = f"[{ci[0]}, {ci[1]}]"
    tags["eval_set"] = eval_set
    return tags


def promote(tracking_uri: str, rows: Sequence[Mapping[str, Any]], versions: Mapping[str, Mapping[str, str]],
            eval_set: str, budget: Budget = Budget()) -> dict[str, Any]:
    """Tag every candidate version with its dev numbers and point the aliases; ``versions``: row name → the
    registration (``registered_model``, ``version``). Returns {alias: {name, version, reason}} and the rule."""
    from training.tracking import client

    c = client(tracking_uri)
    scored = [r for r in rows if r["name"] in versions]
    for r in scored:
        v = versions[r["name"]]
        for k, value in dev_tags(r, eval_set).items():
            c.set_model_version_tag(v["registered_model"], v["version"], k, value)
    out: dict[str, Any] = {}
    for alias, (name, reason) in choose(scored, budget).items():
        v = versions[name]
        c.set_registered_model_alias(v["registered_model"], alias, v["version"])
        if alias == CHAMPION:
            c.set_model_version_tag(v["registered_model"], v["version"], "gate", reason)
        out[alias] = {"name": name, "registered_model": v["registered_model"], "version": v["version"],
                      "kind": v.get("kind"), "reason": reason}
    return {"aliases": out, "budget": {"latency_ms": budget.latency_ms, "rtf": budget.rtf}, "eval_set": eval_set}


__all__ = ["Budget", "CHAMPION", "FAST", "choose", "dev_tags", "promote"]
