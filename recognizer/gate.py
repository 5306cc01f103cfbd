"""The dev-split gate over registered recognizers: which version each alias names (docs/evaluation.md, "The
dev-split gate"; docs/decisions/default-champion.md).

Candidates are scored on `dev` in one evaluate run beside the offline references. First, a candidate whose dev
finals repeat (``evaluation.repetition``: more repeated words than the best offline row on the same utterances, or
any token loop) gets no alias whatever its WER, and its version's ``gate`` tag says why; a row without the
repetition keys is not set aside. Of the rest the gate names:

- ``champion``: the lowest dev WER among candidates within the WER cap (offline Whisper + cap points) and the
  profile's latency (median final-word) and RTF budgets, when set; ties go to the lower latency. With a *default
  champion* (``Default.pattern``: part of a candidate's name, the curated served spec), the default is named unless
  another candidate's dev WER is *separably lower* (paired 95 % bootstrap interval of the difference wholly below
  0, ``evaluation.intervals.compare``; resampled by recording where utterances share one). A small dev set is no
  evidence against a spec chosen on real speech, so the default joins the pool even outside the WER cap (the budget
  still binds it), and a set of fewer than ``Default.min_units`` units never replaces it. Several matches (one per
  chunk size): the lowest WER of them is the default. No match, or a pool row without ``per_utterance``: lowest WER.
- ``champion-<chunk>ms``: the same rule at one chunk size (a deployment bound to a chunk size).
- ``champion-fast``: the lowest RTF within the WER cap and the latency budget (a low-compute deployment).

When no candidate is within the cap the lowest-WER candidate is still named (a pipeline must end with something to
serve) and its ``gate`` tag says so. When every candidate repeats, the gate names none and raises. Every scored
version gets ``dev_*`` tags and a ``gate`` tag with the gate's verdict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from data.tracking import client
from evaluation import domains
from evaluation.intervals import compare
from evaluation.report import OFFLINE_KINDS, _groups
from recognizer.card import write_card

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


def repetition_excluded(row: Mapping[str, Any], offline: Mapping[str, Any] | None = None) -> str | None:
    """Why a candidate's dev finals keep it from every alias, or None: more repeated words than ``offline`` (the
    best offline row on the same utterances; 0 without it), or a token loop."""
    repeated, loops = row.get("repeated_words"), row.get("token_loops")
    allowed = (offline or {}).get("repeated_words")
    allowed = allowed if _ok(allowed) else 0
    why = []
    if _ok(repeated) and repeated > allowed:
        why.append(f"finals repeat ({repeated} words in {row.get('utterances_with_repeats', '?')} utterances on dev"
                   + (f"; the offline reference {allowed}" if allowed else "") + ")")
    if _ok(loops) and loops > 0:
        why.append(f"token loops in {loops} utterance{'s' if loops != 1 else ''} on dev")
    return "excluded: " + "; ".join(why) if why else None


def best_offline(rows: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The offline row with the lowest WER (the WER cap's reference; the first on a tie), or None; rows without a
    ``kind`` (not from a report) are not offline."""
    offline = [r for r in rows if r.get("kind") in OFFLINE_KINDS and _ok(r.get("wer"))]
    return min(offline, key=lambda r: r["wer"], default=None)


@dataclass(frozen=True)
class Default:
    """The default champion: ``pattern`` is a part of a candidate's name (case-blind); the bootstrap of the
    WER difference that may replace it."""

    pattern: str | None = None
    seed: int = 0
    n_resamples: int = 10_000  # evaluation.intervals.N_RESAMPLES, the report's
    # fewer resampling units than this cannot separate: a bootstrap over a handful of utterances undercovers, so
    # such a dev set never replaces the default
    min_units: int = 20


def _pick(pool: Sequence[Mapping[str, Any]], default: Default, reason: str, scope: str) -> tuple[str, str]:
    """(name, reason) of the pool's pick: the lowest WER (``reason``), or the default unless separably beaten
    (module docstring); ``scope``: which candidates the pool holds."""
    best = _best(pool, by_wer)
    pattern = (default.pattern or "").lower()
    matches = [r for r in pool if pattern and pattern in str(r["name"]).lower()]
    if not matches:
        return best["name"], reason
    if not all(r.get("per_utterance") for r in pool):
        return best["name"], f"{reason} (no per-utterance results to test the default champion against)"
    base = _best(matches, by_wer)
    groups = _groups(pool)  # resample recordings where utterances share one, as the report does
    units = len({e.get(groups, e["utt_id"]) if groups else e["utt_id"] for e in base["per_utterance"]})
    if units < default.min_units:
        return base["name"], (f"the default champion ({default.pattern!r}): a dev set of {units} "
                              f"{groups or 'utterance'}s cannot separate candidates (fewer than {default.min_units}); "
                              f"candidates {scope}")
    beaten = []
    for r in pool:
        if r is base or r["wer"] >= base["wer"]:
            continue  # an interval wholly below 0 needs a lower point WER
        c = compare(r["per_utterance"], base["per_utterance"], "wer", groups=groups, seed=default.seed,
                    n_resamples=default.n_resamples)
        if _ok(c["ci95"][1]) and c["ci95"][1] < 0:
            beaten.append((r, c))
    if not beaten:
        return base["name"], (f"the default champion ({default.pattern!r}): no candidate's dev WER separably "
                              f"lower; candidates {scope}")
    r, c = min(beaten, key=lambda rc: by_wer(rc[0]))
    lo, hi = (100 * x for x in c["ci95"])
    return r["name"], (f"dev WER separably lower than the default champion {base['name']}: "
                       f"{100 * c['diff']:+.2f} points [{lo:+.2f}, {hi:+.2f}]; candidates {scope}")


def choose(rows: Sequence[Mapping[str, Any]], budget: Budget = Budget(), *, default: Default = Default(),
           offline: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{alias: (row name, reason)} from dev rows of candidates (each with ``wer``, ``within_wer_cap``,
    ``word_latency_ms_median``, ``rtf``, ``chunk_ms``; where present ``per_utterance`` and the repetition keys).
    ``offline``: the best offline row on the same utterances (the repeated words a candidate may write)."""
    if not rows:
        raise ValueError("no candidate recognizer was scored on dev")
    excluded = {r["name"]: why for r in rows if (why := repetition_excluded(r, offline))}
    clean = [r for r in rows if r["name"] not in excluded]
    if not clean:
        raise ValueError("every candidate's dev finals repeat; none is promoted: "
                         + "; ".join(f"{name}: {why}" for name, why in excluded.items()))
    capped = [r for r in clean if r.get("within_wer_cap")]
    eligible = [r for r in capped if _within(r, budget)]
    aliases: dict[str, Any] = {}
    if eligible:
        pool, reason = eligible, "lowest dev WER within the WER cap and the budget"
        scope = "within the WER cap and the budget"
    elif capped:
        pool, reason = capped, "lowest dev WER within the WER cap; none within the budget"
        scope = "within the WER cap; none within the budget"
    else:
        pool, reason = clean, "outside the WER cap: no candidate within it; lowest dev WER"
        scope = "outside the WER cap: no candidate within it"
    # the default champion joins the pool whatever its point WER (module docstring); the budget still binds it
    pattern = (default.pattern or "").lower()
    pool = pool + [r for r in clean if pattern and pattern in str(r["name"]).lower() and _within(r, budget)
                   and not any(r is p for p in pool)]
    aliases[CHAMPION] = _pick(pool, default, reason, scope)
    for chunk in sorted({r["chunk_ms"] for r in clean if r.get("chunk_ms")}):
        at = [r for r in pool if r.get("chunk_ms") == chunk]
        if at:
            aliases[f"{CHAMPION}-{chunk}ms"] = _pick(at, default, f"the champion rule at {chunk} ms",
                                                     f"at {chunk} ms, {scope}")
    fast = _best([r for r in eligible or capped if _ok(r.get("rtf"))], lambda r: (r["rtf"], r["wer"]))
    if fast is not None:
        aliases[FAST] = (fast["name"], "lowest RTF within the WER cap and the latency budget")
    return aliases


def dev_tags(row: Mapping[str, Any], eval_set: str) -> dict[str, str]:
    """What a version records of its dev evaluation (selection evidence, next to the test numbers added later)."""
    ci = (row.get("ci95") or {}).get("wer")
    tags = {f"dev_{k}": str(row[k]) for k in ("wer", "word_latency_ms_median", "word_latency_ms_p90", "rtf",
                                             "within_wer_cap", "repeated_words", "token_loops") if k in row}
    if ci:
        tags["dev_wer_ci95"] = f"[{ci[0]}, {ci[1]}]"
    tags["eval_set"] = eval_set
    return tags | domains.wer_tags(row, "dev")


def promote(tracking_uri: str, rows: Sequence[Mapping[str, Any]], versions: Mapping[str, Mapping[str, str]],
            eval_set: str, budget: Budget = Budget(), default: Default = Default()) -> dict[str, Any]:
    """Tag every candidate version with its dev numbers and the gate's verdict, and point the aliases;
    ``rows``: the dev evaluation's rows (the offline references among them), ``versions``: row name → the
    registration (``registered_model``, ``version``). Returns {alias: {name, version, reason}}, the versions set
    aside for repeating (``excluded``: name → reason) and the rule."""
    c = client(tracking_uri)
    scored = [r for r in rows if r["name"] in versions]
    offline = best_offline(rows)
    excluded = {r["name"]: why for r in scored if (why := repetition_excluded(r, offline))}
    for r in scored:
        v = versions[r["name"]]
        for k, value in dev_tags(r, eval_set).items():
            c.set_model_version_tag(v["registered_model"], v["version"], k, value)
        if r["name"] in excluded:  # tagged before choose() can refuse them all; no alias left on them
            c.set_model_version_tag(v["registered_model"], v["version"], "gate", excluded[r["name"]])
            for alias in c.get_model_version(v["registered_model"], v["version"]).aliases or ():
                c.delete_registered_model_alias(v["registered_model"], alias)
    aliases = choose(scored, budget, default=default, offline=offline)
    out: dict[str, Any] = {}
    for alias, (name, reason) in aliases.items():
        v = versions[name]
        c.set_registered_model_alias(v["registered_model"], alias, v["version"])
        out[alias] = {"name": name, "registered_model": v["registered_model"], "version": v["version"],
                      "kind": v.get("kind"), "reason": reason}
    champion = aliases[CHAMPION][0]
    for r in scored:  # a version kept from an earlier run must not keep that run's verdict
        if r["name"] in excluded:
            continue
        held = [a for a, (name, _) in aliases.items() if name == r["name"]]
        v = versions[r["name"]]
        verdict = (aliases[CHAMPION][1] if r["name"] == champion else
                   f"candidate: {', '.join(held) if held else 'no alias'}; the champion is {champion}")
        c.set_model_version_tag(v["registered_model"], v["version"], "gate", verdict)
    for r in scored:  # every card follows its new tags and aliases
        write_card(tracking_uri, versions[r["name"]]["registered_model"], versions[r["name"]]["version"])
    return {"aliases": out, "excluded": excluded, "default_champion": default.pattern,
            "budget": {"latency_ms": budget.latency_ms, "rtf": budget.rtf}, "eval_set": eval_set}


__all__ = ["Budget", "CHAMPION", "Default", "FAST", "best_offline", "choose", "dev_tags", "promote",
           "repetition_excluded"]
