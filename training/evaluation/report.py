"""The evaluate stage: every system streams the same held-out utterances in one run, scored the same way.

``evaluate_systems`` builds each :class:`~training.evaluation.systems.SystemSpec`, warms it up on one utterance
that is not scored, streams the test set through ``run_stream`` (one real-time-queue clock for all) and scores it
with ``evaluate_records``. Systems whose WER is not within the cap of offline Whisper's are marked and kept off the
Pareto front of WER against word latency (a system that hallucinates must not look fast). ``write_report`` writes
``<name>.json`` / ``.md`` / ``_pareto.png``; ``log_report`` puts the same into an MLflow run.
"""

from __future__ import annotations

import json
import math
import re
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from training.evaluation.sets import Utterance
from training.evaluation.systems import SystemSpec, _Models, build
from training.metrics.gate import WER_CAP_POINTS, pareto_front, within_wer_cap
from training.streaming.evaluate import evaluate_records, stream_all

ROW_KEYS = ("wer", "rwer", "arwer", "laal_ms", "al_ms", "word_latency_ms_median", "word_latency_ms_p90",
            "first_word_latency_ms_median", "word_latency_lower_bound_ms_median", "step_ms_median", "step_ms_p90",
            "rtf", "end_lag_ms_median", "end_lag_ms_max", "words_matched")
# what depends only on the transcript (identical in every repeat of a deterministic system); the rest depends on the
# clock, so a row reports the median of its repeats (these machines are shared and noisy)
TRANSCRIPT_KEYS = frozenset({"wer", "rwer", "arwer", "words_matched", "word_latency_lower_bound_ms_median"})


def _median_row(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The first run's transcript metrics, the median of every clock-dependent one over the runs."""
    import statistics

    row = {k: runs[0].get(k) for k in ROW_KEYS}
    for k in ROW_KEYS:
        values = [r.get(k) for r in runs]
        if k not in TRANSCRIPT_KEYS and all(_finite(v) for v in values):
            row[k] = round(statistics.median(values), 4)
    return row


def evaluate_systems(specs: Sequence[SystemSpec], utterances: Sequence[Utterance], *, test_set: dict[str, Any],
                     warmup: Utterance | None = None, wer_cap: float = WER_CAP_POINTS, repeats: int = 1,
                     log=print) -> dict[str, Any]:
    """One row per system (metrics, source, timings), the offline reference WER, the WER gate and the front.

    With ``repeats`` > 1 every system streams the set that many times; its row holds the median of the
    clock-dependent metrics (``runs``: each repeat's RTF / step median) and ``transcripts_identical`` says whether
    the repeats wrote the same words (the WER is the first repeat's)."""
    if repeats < 1:
        raise ValueError(f"repeats must be ≥ 1, got {repeats}")
    models = _Models()
    rows: list[dict[str, Any]] = []
    for spec in specs:
        t0 = time.perf_counter()
        recognizer, source = build(spec, models)
        load_s = time.perf_counter() - t0
        chunk = spec.chunk_ms or 1000  # offline systems take pieces too: they only transcribe at finish()
        if warmup is not None:
            stream_all(recognizer, [warmup], chunk)
        passes = [stream_all(recognizer, utterances, chunk) for _ in range(repeats)]
        runs = [evaluate_records(records, utterances) for records in passes]
        texts = [[r.text for r in records] for records in passes]
        row = {"name": spec.name, "kind": spec.kind, "chunk_ms": spec.chunk_ms, "source": source,
               **_median_row(runs), "load_s": round(load_s, 2), "spec": spec.as_dict(), "repeats": repeats,
               "runs": [{"rtf": r.get("rtf"), "step_ms_median": r.get("step_ms_median"),
                         "word_latency_ms_median": r.get("word_latency_ms_median")} for r in runs],
               "transcripts_identical": all(t == texts[0] for t in texts),
               "hypotheses": {u.utt_id: r.text for u, r in zip(utterances, passes[0])}}
        rows.append(row)
        log(f"{spec.name:<40} WER {row['wer']:.2%}  word latency {row['word_latency_ms_median']} ms  "
            f"step {row['step_ms_median']} ms  RTF {row['rtf']}")
    offline = [r["wer"] for r in rows if r["kind"] == "offline"]
    offline_wer = min(offline) if offline else None
    streaming = [r for r in rows if r["chunk_ms"] is not None]
    for r in rows:
        r["within_wer_cap"] = offline_wer is None or within_wer_cap(r["wer"], offline_wer, wer_cap)
    points = [(r["word_latency_ms_median"], r["wer"]) for r in streaming]
    eligible = [r["within_wer_cap"] and _finite(r["word_latency_ms_median"]) for r in streaming]
    for r, on in zip(streaming, pareto_front(points, eligible)):
        r["pareto"] = on
    return {"test_set": test_set, "offline_wer": offline_wer, "wer_cap_points": wer_cap, "systems": rows,
            "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine()},
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _finite(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _fmt(x, pct: bool = False) -> str:
    if not _finite(x):
        return "—"
    return f"{100 * x:.2f} %" if pct else f"{x:g}"


def markdown(result: dict[str, Any]) -> str:
    ts = result["test_set"]
    lines = [f"Held-out test set: {ts['n_utterances']} utterances, {ts['seconds']} s, {ts['speakers']} speakers "
             f"({', '.join(ts.get('corpora', []))}); audio shared with any training data: "
             f"{ts.get('audio_sha256_overlap_with_training', '?')}. Offline WER {_fmt(result['offline_wer'], True)}; "
             f"WER cap for latency claims: offline + {100 * result['wer_cap_points']:g} points. Timings: median of "
             f"{max((r.get('repeats', 1) for r in result['systems']), default=1)} run(s) of the whole set.", "",
             "| system | source | chunk ms | WER | ARWER | LAAL ms | word latency median / p90 ms (queue) | "
             "first word ms | step median / p90 ms | RTF | end lag ms | within cap | Pareto |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["systems"]:
        lines.append(
            f"| {r['name']} | {r['source']} | {r['chunk_ms'] or 'offline'} | {_fmt(r['wer'], True)} | "
            f"{_fmt(r['arwer'], True)} | {_fmt(r['laal_ms'])} | {_fmt(r['word_latency_ms_median'])} / "
            f"{_fmt(r['word_latency_ms_p90'])} | {_fmt(r['first_word_latency_ms_median'])} | "
            f"{_fmt(r['step_ms_median'])} / {_fmt(r['step_ms_p90'])} | {_fmt(r['rtf'])} | "
            f"{_fmt(r['end_lag_ms_median'])} | {'yes' if r['within_wer_cap'] else 'no'} | "
            f"{'yes' if r.get('pareto') else ''} |")
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> Path:
    import matplotlib

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
        ax.scatter([x], [100 * y], marker=next(markers), s=50, edgecolors=colour,
                   facecolors=colour if r["within_wer_cap"] else "none",
                   label=f"{r['name']}{'' if r['within_wer_cap'] else ' (over cap)'}")
    if result["offline_wer"] is not None:
        ax.axhline(100 * result["offline_wer"], color="grey", lw=0.8, label="offline Whisper")
        ax.axhline(100 * (result["offline_wer"] + result["wer_cap_points"]), color="grey", ls="--", lw=0.8,
                   label="WER cap")
    ax.set_yscale("log")  # WERs from a few % to hundreds of % (a model that restarts sentences)
    ax.set_xlabel("median word latency, real-time queue (ms)")
    ax.set_ylabel("WER (%)")
    ax.set_title(f"held-out test set: {result['test_set']['n_utterances']} utterances (blue: ours, orange: PyPI)",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_report(result: dict[str, Any], out_dir: str | Path, name: str = "evaluation") -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.json", out / f"{name}.md"]
    paths[0].write_text(json.dumps(result, indent=2, sort_keys=False, default=str) + "\n", encoding="utf-8")
    paths[1].write_text(markdown(result), encoding="utf-8")
    paths.append(plot(result, out / f"{name}_pareto.png"))
    return paths


def metric_name(system: str) -> str:
    """A system name as MLflow allows in a metric key (letters, digits, _ - . space : /)."""
    return re.sub(r"[^\w\-. :/]", "_", system)


def log_report(tracking_uri: str, experiment: str, result: dict[str, Any], files: Sequence[Path]) -> str:
    """An MLflow run with every system's metrics (``<system>.<metric>``) and the report files; its id."""
    from training.tracking import client, experiment_id

    c = client(tracking_uri)
    run = c.create_run(experiment_id(tracking_uri, experiment), run_name="evaluation", tags={
        "whisperline.kind": "evaluation", "test_set_audio_sha256": result["test_set"].get("audio_sha256", ""),
        "test_set_overlap_with_training": str(result["test_set"].get("audio_sha256_overlap_with_training"))})
    run_id = run.info.run_id
    for r in result["systems"]:
        for k in ROW_KEYS:
            if _finite(r.get(k)):
                c.log_metric(run_id, f"{metric_name(r['name'])}.{k}", float(r[k]))
    for path in files:
        c.log_artifact(run_id, str(path))
    c.set_terminated(run_id, "FINISHED")
    return run_id
