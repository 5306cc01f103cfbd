"""The sweep dashboard, rebuilt from MLflow alone (``whisperline sweep report <run>``).

From the parent run's child runs: a WER–AL scatter with the Pareto front (lower is better on both), a
parallel-coordinates plot of the swept parameters and the scores, and the trial table as markdown, HTML and JSON,
all logged to the parent run under ``dashboard/``.

The WER gate (../shared/DESIGN.md, "Latency clock"): only trials whose WER ≤ reference WER + cap (default 5 points)
may be on the Pareto front or be promoted (``registry.pick_best``). A lag number says when words come out, not which:
a trial that hallucinates emits many words early and gets a small or negative AL. The reference is the offline WER
when the sweep recorded one (the ``offline_wer`` metric of the parent run, logged by ``log_dashboard`` from a
reference labelled "offline…"); otherwise the best WER among the trials, a weaker relative gate (see
``evaluation.metrics.gate.reference_wer``).

Negative AL is *flagged* (``al_negative``) and such a trial is kept off the front and out of promotion, not
clamped: AL < 0 means the words came out ahead of AL's oracle that emits the reference at a uniform rate, which a
causal recognizer only does by over-generating, so the number is not a lag at all; clamping it to 0 would instead
make the trial the lowest-lag point, the very mistake the gate is there to stop.
"""

from __future__ import annotations

import html
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from data.tracking import client
from evaluation.metrics.gate import WER_CAP_POINTS, pareto_front, reference_wer, within_wer_cap

OFFLINE_WER_METRIC = "offline_wer"  # parent-run metric: the offline WER on the sweep's evaluation set

PARAMS = ("t_emma", "lambda_latency", "lambda_variance", "lambda_alignment", "decision", "chunk_ms", "variant",
          "encoder")
SCORES = ("wer", "arwer", "al_ms", "laal_ms", "rtf", "loss")


def trial_rows(tracking_uri: str, parent_run_id: str, offline_wer: float | None = None,
               wer_cap: float = WER_CAP_POINTS) -> list[dict[str, Any]]:
    """One row per finished, evaluated child run (FINISHED, with WER and AL): its parameters and final scores,
    gated and marked (``within_wer_cap``, ``al_negative``, ``eligible``, ``pareto``; see ``mark_pareto``).
    Unfinished or partly logged trials never reach the dashboard or the promotion rule. ``offline_wer``
    defaults to the parent run's ``offline_wer`` metric, if any."""
    c = client(tracking_uri)
    parent = c.get_run(parent_run_id)
    if offline_wer is None:
        offline_wer = parent.data.metrics.get(OFFLINE_WER_METRIC)
    runs = c.search_runs([parent.info.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent_run_id}'",
                         max_results=5000)
    rows = []
    for run in runs:
        m, p = run.data.metrics, run.data.params
        if run.info.status != "FINISHED" or "wer" not in m or "al_ms" not in m:
            continue
        row: dict[str, Any] = {"run_id": run.info.run_id, "trial": run.info.run_name}
        for k in PARAMS:
            if k in p:
                row[k] = p[k] if k in ("variant", "encoder", "decision") else float(p[k])
        row.update({k: m[k] for k in SCORES if k in m})
        rows.append(row)
    rows.sort(key=lambda r: (r.get("al_ms", 0), r["wer"]))
    mark_pareto(rows, offline_wer=offline_wer, wer_cap=wer_cap)
    return rows


def gate_rows(rows: Sequence[dict[str, Any]], offline_wer: float | None = None, wer_cap: float = WER_CAP_POINTS,
              x: str = "al_ms", y: str = "wer") -> float:
    """Mark every row ``within_wer_cap`` (its WER ≤ reference + cap), ``al_negative`` (its ``x`` lag < 0) and
    ``eligible`` (both fine: it may be on the front or be promoted); return the reference WER used (the offline
    WER if given, else the best WER among the rows)."""
    ref = reference_wer((r[y] for r in rows), offline_wer)
    for r in rows:
        r["within_wer_cap"] = within_wer_cap(r[y], ref, wer_cap)
        r["al_negative"] = bool(r[x] < 0)
        r["eligible"] = r["within_wer_cap"] and not r["al_negative"]
    return ref


def mark_pareto(rows: Sequence[dict[str, Any]], x: str = "al_ms", y: str = "wer", *, offline_wer: float | None = None,
                wer_cap: float = WER_CAP_POINTS) -> float:
    """Set ``pareto`` on each row: it is eligible (``gate_rows``: WER within the cap, AL not negative) and no other
    eligible row is at least as good on both and better on one. Returns the reference WER of the gate."""
    ref = gate_rows(rows, offline_wer, wer_cap, x, y)
    for r, on_front in zip(rows, pareto_front([(r[x], r[y]) for r in rows], [r["eligible"] for r in rows]),
                           strict=True):
        r["pareto"] = on_front
    return ref


def offline_reference_wer(references: dict[str, tuple[float, float]] | None) -> float | None:
    """The WER of the reference labelled "offline…" (e.g. "offline Whisper (30 s pad)"), if there is one."""
    for label, (_, wer) in (references or {}).items():
        if label.strip().lower().startswith("offline"):
            return float(wer)
    return None


def _scatter(rows: Sequence[dict], path: Path, references: dict[str, tuple[float, float]],
             gate_wer: float | None = None) -> None:
    import matplotlib  # lazy: only the written dashboard plots; the headless backend goes before pyplot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    kept = [r for r in rows if r.get("eligible", True)]
    gated = [r for r in rows if not r.get("eligible", True)]
    if kept:
        sc = ax.scatter([r["al_ms"] for r in kept], [100 * r["wer"] for r in kept],
                        c=[r.get("t_emma", 0) for r in kept], cmap="viridis", s=40, zorder=3)
        fig.colorbar(sc, ax=ax, label="t_emma")
    if gated:
        ax.scatter([r["al_ms"] for r in gated], [100 * r["wer"] for r in gated], marker="x", c="grey", s=40,
                   label="gated (WER over cap or AL < 0)", zorder=3)
    if gate_wer is not None:
        ax.axhline(100 * gate_wer, color="grey", ls="--", lw=1, label="WER gate", zorder=1)
    front = sorted((r for r in rows if r["pareto"]), key=lambda r: r["al_ms"])
    ax.plot([r["al_ms"] for r in front], [100 * r["wer"] for r in front], "r-", lw=1.5, label="Pareto front", zorder=2)
    for label, (al, wer) in references.items():
        ax.scatter([al], [100 * wer], marker="*", s=120, label=label, zorder=4)
    ax.set_xlabel("AL (ms, SimulEval 1.1 definition)")
    ax.set_ylabel("WER (%)")
    ax.set_title("EMMA sweep: WER vs average lagging")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _parallel(rows: Sequence[dict], path: Path) -> None:
    import matplotlib  # lazy: as in _scatter

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = [k for k in ("t_emma", "lambda_latency", "lambda_variance", "chunk_ms", "al_ms", "wer", "arwer")
            if all(isinstance(r.get(k), float | int) for r in rows)]
    lo = {k: min(r[k] for r in rows) for k in axes}
    hi = {k: max(r[k] for r in rows) for k in axes}
    norm = lambda r, k: 0.5 if hi[k] == lo[k] else (r[k] - lo[k]) / (hi[k] - lo[k])  # noqa: E731
    cmap = plt.get_cmap("plasma")
    wers = [r["wer"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for r in rows:
        shade = 0.5 if max(wers) == min(wers) else (r["wer"] - min(wers)) / (max(wers) - min(wers))
        ax.plot(range(len(axes)), [norm(r, k) for k in axes], color=cmap(shade), lw=2 if r["pareto"] else 0.8,
                alpha=0.9 if r["pareto"] else 0.5)
    ax.set_xticks(range(len(axes)), [f"{k}\n[{lo[k]:.3g}, {hi[k]:.3g}]" for k in axes], fontsize=8)
    ax.set_yticks([])
    ax.set_title("EMMA sweep: parallel coordinates (colour = WER, bold = Pareto)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _table(rows: Sequence[dict]) -> tuple[str, str]:
    cols = ["trial", *PARAMS, *SCORES, "within_wer_cap", "al_negative", "pareto"]
    cols = [c for c in cols if any(c in r for r in rows)]

    def cell(v: Any) -> str:
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    md = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    md += ["| " + " | ".join(cell(r.get(c, "")) for c in cols) + " |" for r in rows]
    body = "".join("<tr>" + "".join(f"<td>{html.escape(cell(r.get(c, '')))}</td>" for c in cols) + "</tr>"
                   for r in rows)
    page = (f"<html><body><h2>EMMA sweep</h2><img src='wer_al_pareto.png'/><img src='parallel_coordinates.png'/>"
            f"<table border=1><tr>{''.join(f'<th>{c}</th>' for c in cols)}</tr>{body}</table></body></html>")
    return "\n".join(md) + "\n", page


def write_dashboard(rows: Sequence[dict], out_dir: Path, references: dict[str, tuple[float, float]] | None = None,
                    wer_cap: float = WER_CAP_POINTS, offline_wer: float | None = None) -> list[Path]:
    """Write the plots and tables of gated rows (``trial_rows``). The WER gate line is drawn at reference + cap,
    the reference being ``offline_wer``, else the offline entry of ``references``, else the best trial's WER."""
    if not rows:
        raise ValueError("no finished, evaluated trials to report")
    out_dir.mkdir(parents=True, exist_ok=True)
    offline = offline_wer if offline_wer is not None else offline_reference_wer(references)
    gate_wer = reference_wer((r["wer"] for r in rows), offline) + wer_cap
    _scatter(rows, out_dir / "wer_al_pareto.png", references or {}, gate_wer)
    _parallel(rows, out_dir / "parallel_coordinates.png")
    md, page = _table(rows)
    (out_dir / "trials.md").write_text(md)
    (out_dir / "trials.html").write_text(page)
    (out_dir / "trials.json").write_text(json.dumps(list(rows), indent=2))
    return sorted(out_dir.iterdir())


def log_dashboard(tracking_uri: str, parent_run_id: str, references: dict[str, tuple[float, float]] | None = None,
                  wer_cap: float = WER_CAP_POINTS) -> list[dict[str, Any]]:
    """Rebuild the dashboard from the parent run's children and log it to the parent under ``dashboard/``.

    An offline reference among ``references`` is also logged as the parent's ``offline_wer`` metric, so that the
    promotion rule (which reads the rows back from MLflow) gates on the same offline WER."""
    c = client(tracking_uri)
    offline = offline_reference_wer(references)
    if offline is not None:
        c.log_metric(parent_run_id, OFFLINE_WER_METRIC, offline)
    else:
        offline = c.get_run(parent_run_id).data.metrics.get(OFFLINE_WER_METRIC)
    rows = trial_rows(tracking_uri, parent_run_id, offline_wer=offline, wer_cap=wer_cap)
    with tempfile.TemporaryDirectory() as tmp:
        write_dashboard(rows, Path(tmp), references, wer_cap, offline)
        c.log_artifacts(parent_run_id, tmp, artifact_path="dashboard")
    return rows
