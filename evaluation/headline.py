"""The partials' headline numbers of a release report, read off its rows.

The rows are the test report's own (``evaluation.merge``): the served spec's causal pass alone (what a user sees
first), the served two-pass system (its finals), and the offline reference every WER is judged
against (faster-whisper, the offline system a user would otherwise run). Each WER carries its 95 % bootstrap
interval over utterances; the two-pass one also the paired interval of its difference from the offline reference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from evaluation import intervals
from evaluation.domains import units_by_domain

# the served two-pass row: a new name whenever what the served spec shows changes (finals or partials), as the test
# ledger counts scorings by name (the rows of earlier served specs stay in the report under their own names)
SERVED_ROW = "two-pass 300 ms (served: hush word mid-stream, partials at 0.7, last word held)"
# report key → the row it is read from (the names the release gives its rows)
CAUSAL_ROW = "causal tuned 300 ms"
# the same causal pass over the synthetic-only recipe's adapter: the real-speech gain is the causal row minus it
SYNTHETIC_CAUSAL_ROW = "causal tuned 300 ms (synthetic-only recipe)"
ROWS = {"causal_only_tuned_300ms_wer": CAUSAL_ROW, "two_pass_300ms_wer": SERVED_ROW}
OFFLINE = "faster-whisper offline"


def _wer(row: Mapping[str, Any], seed: int, n_resamples: int) -> dict[str, Any]:
    lo, hi = intervals.ci95(row["per_utterance"], "wer", seed=seed, n_resamples=n_resamples)
    return {"value": row["wer"], "ci95": [round(lo, 5), round(hi, 5)], "row": row["name"]}


def partials_headline(rows: Sequence[Mapping[str, Any]], *, seed: int = 0,
                      n_resamples: int = intervals.N_RESAMPLES) -> dict[str, Any]:
    """The keys of :data:`ROWS` whose rows are present, ``offline_reference_wer``, the two-pass row's
    ``vs_offline_ci95`` (its WER minus the offline reference's, paired over utterances), its median / p90 final-word
    latency, and ``partial_rewrite_rate`` (the share of the words the served system showed as partials that it
    later changed). Raises KeyError when the offline reference is missing: nothing is judged without it."""
    by_name = {r["name"]: r for r in rows}
    offline = by_name.get(OFFLINE)
    if offline is None:
        raise KeyError(f"the report has no {OFFLINE!r} row: the partials are judged against it")
    out: dict[str, Any] = {"offline_reference_wer": _wer(offline, seed, n_resamples)}
    for key, name in ROWS.items():
        if name in by_name:
            out[key] = _wer(by_name[name], seed, n_resamples)
            out[key]["vs_offline_ratio"] = round(out[key]["value"] / offline["wer"], 4) if offline["wer"] else None
    two_pass = by_name.get(ROWS["two_pass_300ms_wer"])
    if two_pass is not None:
        diff = intervals.compare(two_pass["per_utterance"], offline["per_utterance"], "wer", seed=seed,
                                 n_resamples=n_resamples)
        out["two_pass_300ms_wer"].update({
            "vs_offline_ci95": [round(x, 5) for x in diff["ci95"]], "vs_offline_verdict": diff["verdict"],
            "word_latency_ms_median": two_pass.get("word_latency_ms_median"),
            "word_latency_ms_p90": two_pass.get("word_latency_ms_p90")})
        out["partial_rewrite_rate"] = two_pass.get("partial_rewrite_rate")
    if CAUSAL_ROW in by_name and SYNTHETIC_CAUSAL_ROW in by_name:
        gain = intervals.compare(by_name[CAUSAL_ROW]["per_utterance"], by_name[SYNTHETIC_CAUSAL_ROW]["per_utterance"],
                                 "wer", seed=seed, n_resamples=n_resamples)
        out["real_speech_gain"] = {"causal_minus_synthetic_only": round(gain["diff"], 5),
                                   "ci95": [round(x, 5) for x in gain["ci95"]], "verdict": gain["verdict"],
                                   "synthetic_only": _wer(by_name[SYNTHETIC_CAUSAL_ROW], seed, n_resamples)}
    per_domain = domain_headline(rows, seed=seed, n_resamples=n_resamples)
    if per_domain:
        out["headline_domains"] = per_domain
    return out


def domain_headline(rows: Sequence[Mapping[str, Any]], *, seed: int = 0,
                    n_resamples: int = intervals.N_RESAMPLES) -> dict[str, dict[str, Any]]:
    """The release's bars per test domain (issue 66: a pooled number hides what each domain's user sees): the
    offline reference's WER, the causal pass's WER and its ratio to offline (and, with the synthetic-only recipe's
    row, its paired difference from it: the real-speech gain), the two-pass finals' WER with its paired difference
    from offline, their median / p90 final-word latency and partial rewrite rate, each over the domain's
    utterances. Empty where the rows carry no domains (a report scored before they existed)."""
    by_name = {r["name"]: r for r in rows}
    offline = by_name.get(OFFLINE)
    if offline is None or any(u.get("domain") is None for u in offline["per_utterance"]):
        return {}
    base = units_by_domain(offline)
    split = {key: units_by_domain(by_name[name]) for key, name in ROWS.items() if name in by_name}
    synthetic = units_by_domain(by_name[SYNTHETIC_CAUSAL_ROW]) if SYNTHETIC_CAUSAL_ROW in by_name else {}
    out: dict[str, dict[str, Any]] = {}
    for d, units in sorted(base.items()):
        off = intervals.point(units, "wer")
        entry: dict[str, Any] = {"utterances": len(units), "words": sum(u["ref_words"] for u in units),
                                 "offline_wer": round(off, 4)}
        if (causal := split.get("causal_only_tuned_300ms_wer", {}).get(d)) is not None:
            wer = intervals.point(causal, "wer")
            entry["causal_wer"] = round(wer, 4)
            entry["causal_vs_offline_ratio"] = round(wer / off, 4) if off else None
            if (synth := synthetic.get(d)) is not None:
                gain = intervals.compare(causal, synth, "wer", seed=seed, n_resamples=n_resamples)
                entry["real_speech_gain"] = {"synthetic_only_wer": round(intervals.point(synth, "wer"), 4),
                                             "causal_minus_synthetic_only": round(gain["diff"], 4),
                                             "ci95": [round(x, 4) for x in gain["ci95"]], "verdict": gain["verdict"]}
        if (two := split.get("two_pass_300ms_wer", {}).get(d)) is not None:
            diff = intervals.compare(two, units, "wer", seed=seed, n_resamples=n_resamples)
            latencies = any(u.get("word_latency_ms") for u in two)
            entry["two_pass"] = {
                "wer": round(intervals.point(two, "wer"), 4),
                "vs_offline": round(diff["diff"], 4), "vs_offline_ci95": [round(x, 4) for x in diff["ci95"]],
                "vs_offline_verdict": diff["verdict"],
                "word_latency_ms_median": round(intervals.point(two, "word_latency_ms_median"), 1)
                if latencies else None,
                "word_latency_ms_p90": round(intervals.point(two, "word_latency_ms_p90"), 1) if latencies else None,
                "partial_rewrite_rate": round(intervals.point(two, "partial_rewrite_rate"), 4)
                if sum(u.get("partials_shown", 0) for u in two) else None}
        out[str(d)] = entry
    return out


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f} %"


def domains_markdown(per_domain: Mapping[str, Mapping[str, Any]]) -> str:
    """:func:`domain_headline` as a table: one row per test domain (a column for the real-speech gain where the
    synthetic-only recipe was scored)."""
    gains = any("real_speech_gain" in e for e in per_domain.values())
    lines = ["| domain | utterances / words | faster-whisper offline | causal pass (× offline) | two-pass finals | "
             "two-pass − offline [95 %] | final-word latency median / p90 ms | partial rewrites |"
             + (" causal: synthetic-only recipe; real-speech gain [95 %] |" if gains else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if gains else "")]
    for d, e in per_domain.items():
        two = e.get("two_pass") or {}
        causal = f"{_pct(e.get('causal_wer'))} ({e['causal_vs_offline_ratio']:.2f}×)" \
            if e.get("causal_vs_offline_ratio") is not None else _pct(e.get("causal_wer"))
        diff = (f"{100 * two['vs_offline']:+.1f} [{100 * two['vs_offline_ci95'][0]:+.1f}, "
                f"{100 * two['vs_offline_ci95'][1]:+.1f}] {two['vs_offline_verdict']}") if two else "—"
        lat = f"{two.get('word_latency_ms_median') or '—'} / {two.get('word_latency_ms_p90') or '—'}" if two else "—"
        g = e.get("real_speech_gain")
        gain = (f" {_pct(g['synthetic_only_wer'])}; {100 * g['causal_minus_synthetic_only']:+.1f} "
                f"[{100 * g['ci95'][0]:+.1f}, {100 * g['ci95'][1]:+.1f}] {g['verdict']} |") if g else " — |"
        lines.append(f"| {d} | {e['utterances']} / {e['words']} | {_pct(e['offline_wer'])} | {causal} | "
                     f"{_pct(two.get('wer'))} | {diff} | {lat} | {_pct(two.get('partial_rewrite_rate'))} |"
                     + (gain if gains else ""))
    return "\n".join(lines) + "\n"
