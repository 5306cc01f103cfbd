"""The evaluate stage's report: every system's rows scored the same way (``recognizer.evaluate.evaluate_systems``
streams them). Systems whose WER is not within the cap of the best offline system's are marked and kept
off the Pareto front of WER against word latency (a system that hallucinates must not look fast).

Every row keeps its per-utterance results (``per_utterance``: the numbers the corpus metrics pool) and 95 %
paired-bootstrap intervals (``evaluation/intervals.py``) of WER, median word latency and RTF, and every
system but the reference its difference to the reference system on the same utterances with a verdict
(``better`` / ``worse`` / ``not separable``). Every row also says how often its finals repeat
(``evaluation.repetition``: ``repeated_words``, ``repeat_rate``, ``utterances_with_repeats``, ``token_loops``): a
WER over few words can hide a recognizer that writes utterances again. ``write_report`` writes
``<name>.json`` / ``.md`` / ``_pareto.png``; ``log_report`` puts the same into an MLflow run.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from data.tracking import client, experiment_id
from evaluation import domains, headline, intervals, repetition
from evaluation.metrics.gate import WER_CAP_POINTS, pareto_front, within_wer_cap

ROW_KEYS = ("wer", "rwer", "arwer", "laal_ms", "al_ms", "word_latency_ms_median", "word_latency_ms_p90",
            "first_word_latency_ms_median", "word_latency_lower_bound_ms_median", "step_ms_median", "step_ms_p90",
            "rtf", "end_lag_ms_median", "end_lag_ms_max", "words_matched", "late_step_share",
            "step_ms_p90_first_minute", "step_ms_p90_last_minute", "partial_rewrite_rate", "partial_words_shown",
            "display_latency_ms_median", "display_latency_ms_p90", *repetition.SUMMARY_KEYS)
# what depends only on the transcript (identical in every repeat of a deterministic system); the rest depends on the
# clock, so a row reports the median of its repeats (these machines are shared and noisy)
TRANSCRIPT_KEYS = frozenset({"wer", "rwer", "arwer", "words_matched", "word_latency_lower_bound_ms_median",
                             *repetition.SUMMARY_KEYS})


OFFLINE_KINDS = ("offline", "faster-whisper")  # the systems a WER cap can be measured from
# how each interval is rounded in the report (WER is a fraction)
CI_DIGITS = {"wer": 5, "word_latency_ms_median": 1, "rtf": 4}


def default_reference(rows: Sequence[dict[str, Any]]) -> str | None:
    """The first whisperlivekit LocalAgreement row (the published streaming policy everyone compares with), else
    the offline row with the lowest WER, else None."""
    peer = next((r for r in rows if str(r["kind"]).startswith("whisperlivekit-la")), None)
    if peer is not None:
        return peer["name"]
    offline = _best_offline(rows)
    return offline["name"] if offline else None


def _best_offline(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    offline = [r for r in rows if r["kind"] in OFFLINE_KINDS and _finite(r["wer"])]
    return min(offline, key=lambda r: r["wer"], default=None)  # the first on a tie


def _groups(rows: Sequence[dict[str, Any]]) -> str | None:
    """Resample recordings when some utterances are segments of one longer recording (they are not independent);
    else utterances (the same thing, named plainly)."""
    entries = rows[0].get("per_utterance", []) if rows else []
    recordings = {e.get("recording", e["utt_id"]) for e in entries}
    return "recording" if len(recordings) < len(entries) else None


def _rounded(ci: Sequence[float], metric: str) -> list[float]:
    return [round(x, CI_DIGITS[metric]) if _finite(x) else float("nan") for x in ci]


def score_rows(rows: list[dict[str, Any]], *, reference: str | None = None, wer_cap: float = WER_CAP_POINTS,
               seed: int = 0, n_resamples: int = intervals.N_RESAMPLES,
               fallback_reference: bool = True) -> dict[str, Any]:
    """The part of the result computed from the rows alone (their ``per_utterance``): the WER cap and its
    reference, the Pareto front, every row's ``ci95`` and every other row's ``vs_reference``. Fills the rows in
    place and returns the result's top-level keys."""
    for r in rows:  # rows assembled elsewhere from per_utterance alone (a merged part) get the repetition keys too
        if r.get("repeated_words") is None:
            r.update(repetition.summary(r.get("per_utterance") or []))
    capper = _best_offline(rows)
    offline_wer = capper["wer"] if capper else None
    for r in rows:
        r["within_wer_cap"] = offline_wer is None or within_wer_cap(r["wer"], offline_wer, wer_cap)
    streaming = [r for r in rows if r["chunk_ms"] is not None]
    points = [(r["word_latency_ms_median"], r["wer"]) for r in streaming]
    eligible = [r["within_wer_cap"] and _finite(r["word_latency_ms_median"]) for r in streaming]
    for r, on in zip(streaming, pareto_front(points, eligible)):
        r["pareto"] = on
    if reference is None and fallback_reference:  # False: no reference means no comparison, not a stand-in
        reference = default_reference(rows)
    groups = _groups(rows)
    ref_row = next((r for r in rows if r["name"] == reference), None)
    for r in rows:
        pu = r["per_utterance"]
        r["ci95"] = {m: _rounded(intervals.ci95(pu, m, groups=groups, seed=seed, n_resamples=n_resamples), m)
                     for m in intervals.METRICS}
        if ref_row is None or r is ref_row:
            continue
        vs = {}
        for m in intervals.METRICS:
            if m == "word_latency_ms_median" and not (_finite(r[m]) and _finite(ref_row[m])):
                continue  # a system with no matched word (or the reference) has no latency to compare
            c = intervals.compare(pu, ref_row["per_utterance"], m, groups=groups, seed=seed, n_resamples=n_resamples)
            vs[m] = {"diff": round(c["diff"], CI_DIGITS[m]), "ci95": _rounded(c["ci95"], m), "verdict": c["verdict"]}
        r["vs_reference"] = vs
    entries = [u for r in rows for u in r["per_utterance"]]
    per_domain = {"domains": domains.by_domain(rows, reference=ref_row["name"] if ref_row else None, seed=seed,
                                               n_resamples=n_resamples)
                  } if entries and all(u.get("domain") for u in entries) else {}
    return {"offline_wer": offline_wer, "wer_cap_reference": capper["name"] if capper else None,
            "wer_cap_points": wer_cap, "reference_system": ref_row["name"] if ref_row else None,
            "systems": rows, **per_domain,
            "intervals": {"confidence": 0.95, "n_resamples": n_resamples, "seed": seed,
                          "unit": "recording" if groups else "utterance", "method": dict(intervals.METHOD),
                          "paired": True}}


def _finite(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _fmt(x, pct: bool = False) -> str:
    if not _finite(x):
        return "—"
    return f"{100 * x:.2f} %" if pct else f"{x:g}"


def _ci(r: dict[str, Any], metric: str, fmt) -> str:
    lo, hi = (r.get("ci95") or {}).get(metric, (None, None))
    return f" [{fmt(lo)}, {fmt(hi)}]" if _finite(lo) and _finite(hi) else ""


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _ms(x: float) -> str:
    return f"{x:.0f}"


def _rtf(x: float) -> str:
    return f"{x:.3g}"


# how the difference to the reference is written: WER in percentage points, latency in ms, RTF as is
_DIFF_FMT = {"wer": (lambda x: f"{100 * x:+.2f} pts", _pct), "word_latency_ms_median": (lambda x: f"{x:+.0f} ms", _ms),
             "rtf": (lambda x: f"{x:+.3g}", _rtf)}


def _vs(r: dict[str, Any], metric: str, reference: str | None) -> str:
    if r["name"] == reference:
        return "reference"
    c = (r.get("vs_reference") or {}).get(metric)
    if not c:
        return "—"
    point, bound = _DIFF_FMT[metric]
    lo, hi = c["ci95"]
    ci = f" [{bound(lo)}, {bound(hi)}]" if _finite(lo) and _finite(hi) else ""
    return f"{point(c['diff'])}{ci} {c['verdict']}"


def _feeding(r: dict[str, Any]) -> str:
    """``live (23 %)``: fed as a live server feeds it, 23 % of its steps started behind real time; ``fixed``: one
    chunk per step whatever the clock (rows scored before live feeding existed)."""
    late = r.get("late_step_share")
    return r.get("feeding", "fixed") + (f" ({100 * late:.0f} %)" if _finite(late) else "")


def _repeats(r: dict[str, Any]) -> str:
    """``7 (2 utt)``: 7 repeated final words in 2 utterances; ``—``: a row scored before the metric existed."""
    n = r.get("repeated_words")
    if not _finite(n):
        return "—"
    return f"{n} ({r.get('utterances_with_repeats')} utt)" if n else "0"


def markdown(result: dict[str, Any]) -> str:
    ts = result["test_set"]
    reference = result.get("reference_system")
    iv = result.get("intervals") or {}
    split = "/".join(ts.get("splits", ["test"]))
    lines = [f"Held-out {split} set: {ts['n_utterances']} utterances, {ts.get('n_words', '?')} words, {ts['seconds']} s, "
             f"{ts['speakers']} speakers "
             f"({', '.join(ts.get('corpora', []))}); audio shared with any training data: "
             f"{ts.get('audio_sha256_overlap_with_training', '?')}. Offline WER {_fmt(result['offline_wer'], True)}"
             f"{' (' + result['wer_cap_reference'] + ')' if result.get('wer_cap_reference') else ''}; "
             f"WER cap for latency claims: offline + {100 * result['wer_cap_points']:g} points. Timings: median of "
             f"{max((r.get('repeats', 1) for r in result['systems']), default=1)} run(s) of the whole set."
             + (f" This {split} set has been scored {ts['times_scored']} time(s) for `{ts.get('purpose')}` "
                f"(ledger: `{ts.get('ledger')}`)." if ts.get("times_scored") else ""), ""]
    if iv:
        lines += [f"[brackets]: 95 % paired bootstrap intervals over {iv['unit']}s ({iv['n_resamples']:,} "
                  f"resamples, seed {iv['seed']}; {', '.join(f'{m}: {k}' for m, k in iv['method'].items())}). "
                  f"vs reference = system − {reference or 'none'} on the same {iv['unit']}s: `better` / `worse` when "
                  f"the interval of the difference excludes 0, else `not separable`. Per-utterance results are in "
                  f"the json (`per_utterance`).", ""]
    lines += ["| system | source | chunk ms | WER [95 % CI] | repeats | loops | ARWER | partial rewrites | LAAL ms | "
              "word latency median [95 % CI] / p90 ms "
              "(queue) | first word ms | step median / p90 ms | RTF [95 % CI] | end lag ms | feeding (late steps) | within cap | "
              "Pareto | vs reference: ΔWER [ci] verdict | Δ median latency [ci] verdict | ΔRTF [ci] verdict |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["systems"]:
        lines.append(
            f"| {r['name']} | {r['source']} | {r['chunk_ms'] or 'offline'} | {_fmt(r['wer'], True)}"
            f"{_ci(r, 'wer', _pct)} | {_repeats(r)} | {_fmt(r.get('token_loops'))} | {_fmt(r['arwer'], True)} | "
            f"{_fmt(r.get('partial_rewrite_rate'), True)} | "
            f"{_fmt(r['laal_ms'])} | "
            f"{_fmt(r['word_latency_ms_median'])}{_ci(r, 'word_latency_ms_median', _ms)} / "
            f"{_fmt(r['word_latency_ms_p90'])} | {_fmt(r['first_word_latency_ms_median'])} | "
            f"{_fmt(r['step_ms_median'])} / {_fmt(r['step_ms_p90'])} | {_fmt(r['rtf'])}{_ci(r, 'rtf', _rtf)} | "
            f"{_fmt(r['end_lag_ms_median'])} | {_feeding(r)} | {'yes' if r['within_wer_cap'] else 'no'} | "
            f"{'yes' if r.get('pareto') else ''} | "
            + " | ".join(_vs(r, m, reference) for m in intervals.METRICS) + " |")
    if result.get("domains"):
        lines += ["", "## Per domain", "", domains.markdown(result["domains"], reference)]
    if result.get("headline_domains"):
        lines += ["", "## Against offline faster-whisper, per domain", "",
                  headline.domains_markdown(result["headline_domains"])]
    if (gain := result.get("real_speech_gain")) is not None:
        lines += [f"Real-speech gain (the causal pass minus the same pass over the synthetic-only recipe's adapter, "
                  f"pooled): {100 * gain['causal_minus_synthetic_only']:+.1f} points "
                  f"[{100 * gain['ci95'][0]:+.1f}, {100 * gain['ci95'][1]:+.1f}], {gain['verdict']}.", ""]
    lines += _parts_notes(result)
    return "\n".join(lines) + "\n"


def _parts_notes(result: dict[str, Any]) -> list[str]:
    """What a release scored in parts (evaluation.merge) has not scored yet, and how often each row's
    system was scored on this test set."""
    notes = []
    if result.get("reference_missing"):
        notes.append(f"- The reference `{result['reference_missing']}` is not scored yet: no row is compared.")
    missing = [k for k, v in (result.get("peers_on_test") or {}).items() if v is None]
    if missing:
        notes.append(f"- Dev-chosen peer configurations not scored on test yet: {', '.join(missing)}.")
    per = (result.get("test_set") or {}).get("scored_per_system") or {}
    again = {k: v for k, v in per.items() if v > 1}
    if per:
        notes.append(f"- Release scorings of this test set per system (ledger): "
                     + (", ".join(f"{k} ×{v}" for k, v in again.items()) if again else "each system once") + ".")
    if result.get("parts"):
        notes.append("- Scored in parts: " + "; ".join(f"{p['created']}: {', '.join(p['systems'])}"
                                                     for p in result["parts"]) + ".")
    return ["", *notes] if notes else []


def _err(point: float, ci: Sequence[float] | None, scale: float = 1.0) -> list[list[float]]:
    """Asymmetric error bar lengths [[below], [above]] (0 where the interval is missing or does not hold the point)."""
    lo, hi = ci if ci else (math.nan, math.nan)
    below = point - lo if _finite(lo) else 0.0
    above = hi - point if _finite(hi) else 0.0
    return [[max(0.0, scale * below)], [max(0.0, scale * above)]]


def plot(result: dict[str, Any], path: Path) -> Path:
    import matplotlib  # lazy: only a written report plots, and the headless backend must be chosen before pyplot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    markers = iter("osD^v<>pPX*h" * 4)
    for r in result["systems"]:
        x, y = r["word_latency_ms_median"], r["wer"]
        if r["chunk_ms"] is None or not _finite(x):
            continue
        # one legend entry per system (names would overlap where systems cluster); hollow = over the WER cap
        colour = "tab:blue" if r["source"] == "ours" else "tab:orange"
        ci = r.get("ci95") or {}
        # the bars are asymmetric intervals, so a log y axis draws them as they are (a WER interval at 0 would be
        # clipped to the bottom of the axis; matplotlib's default for non-positive values)
        ax.errorbar([x], [100 * y], xerr=_err(x, ci.get("word_latency_ms_median")),
                    yerr=_err(y, ci.get("wer"), 100), fmt="none", ecolor=colour, elinewidth=0.8, capsize=2, alpha=0.7)
        ax.scatter([x], [100 * y], marker=next(markers), s=50, edgecolors=colour,
                   facecolors=colour if r["within_wer_cap"] else "none", zorder=3,
                   label=f"{r['name']}{'' if r['within_wer_cap'] else ' (over cap)'}")
    if result["offline_wer"] is not None:
        ax.axhline(100 * result["offline_wer"], color="grey", lw=0.8,
                   label=f"offline ({result.get('wer_cap_reference') or 'Whisper'})")
        ax.axhline(100 * (result["offline_wer"] + result["wer_cap_points"]), color="grey", ls="--", lw=0.8,
                   label="WER cap")
    ax.set_yscale("log")  # WERs from a few % to hundreds of % (a model that restarts sentences)
    ax.set_xlabel("median word latency, real-time queue (ms)")
    ax.set_ylabel("WER (%)")
    ax.set_title(f"held-out test set: {result['test_set']['n_utterances']} utterances, 95 % bootstrap intervals "
                 f"(blue: ours, orange: PyPI)", fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_report(result: dict[str, Any], out_dir: str | Path, name: str = "evaluation") -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.json", out / f"{name}.md"]
    # one line: a report holds every utterance's words and latencies, and the committed dev evidence travels with the
    # working tree to a lent GPU machine (64 MiB in all); the .md beside it is the form to read
    paths[0].write_text(json.dumps(result, sort_keys=False, default=str) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(result), encoding="utf-8")
    paths.append(plot(result, out / f"{name}_pareto.png"))
    return paths


def metric_name(system: str) -> str:
    """A system name as MLflow allows in a metric key (letters, digits, _ - . space : /)."""
    return re.sub(r"[^\w\-. :/]", "_", system)


def log_report(tracking_uri: str, experiment: str, result: dict[str, Any], files: Sequence[Path]) -> str:
    """An MLflow run with every system's metrics (``<system>.<metric>``) and the report files; its id."""
    c = client(tracking_uri)
    run = c.create_run(experiment_id(tracking_uri, experiment), run_name="evaluation", tags={
        "whisperline.kind": "evaluation", "test_set_audio_sha256": result["test_set"].get("audio_sha256", ""),
        "test_set_overlap_with_training": str(result["test_set"].get("audio_sha256_overlap_with_training"))})
    run_id = run.info.run_id
    for r in result["systems"]:
        for k in ROW_KEYS:
            if _finite(r.get(k)):
                c.log_metric(run_id, f"{metric_name(r['name'])}.{k}", float(r[k]))
    for d, entry in (result.get("domains") or {}).items():
        for name, value in entry["wer"].items():
            c.log_metric(run_id, f"{metric_name(name)}.wer.{metric_name(d)}", float(value))
    for path in files:
        c.log_artifact(run_id, str(path))
    c.set_terminated(run_id, "FINISHED")
    return run_id
