"""The sweep dashboard, rebuilt from MLflow alone (``whisperline sweep report <run>``).

From the parent run's child runs: a WER–AL scatter with the Pareto front (lower is better on both), a
parallel-coordinates plot of the swept parameters and the scores, and the trial table as markdown, HTML and JSON,
all logged to the parent run under ``dashboard/``.
"""

from __future__ import annotations

import html
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

PARAMS = ("t_emma", "lambda_latency", "lambda_variance", "lambda_alignment", "decision", "chunk_ms", "variant",
          "encoder")
SCORES = ("wer", "arwer", "al_ms", "laal_ms", "rtf", "loss")


def trial_rows(tracking_uri: str, parent_run_id: str) -> list[dict[str, Any]]:
    """One row per finished, evaluated child run (FINISHED, with WER and AL): its parameters and final scores.
    Unfinished or partly logged trials never reach the dashboard or the promotion rule."""
    from training.tracking import client

    c = client(tracking_uri)
    parent = c.get_run(parent_run_id)
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
    mark_pareto(rows)
    return rows


def mark_pareto(rows: Sequence[dict[str, Any]], x: str = "al_ms", y: str = "wer") -> None:
    """Set ``pareto`` on each row: no other row is at least as good on both and better on one."""
    for r in rows:
        r["pareto"] = not any(o is not r and o[x] <= r[x] and o[y] <= r[y] and (o[x] < r[x] or o[y] < r[y])
                              for o in rows)


def _scatter(rows: Sequence[dict], path: Path, references: dict[str, tuple[float, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    sc = ax.scatter([r["al_ms"] for r in rows], [100 * r["wer"] for r in rows], c=[r.get("t_emma", 0) for r in rows],
                    cmap="viridis", s=40, zorder=3)
    fig.colorbar(sc, ax=ax, label="t_emma")
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
    import matplotlib

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
    cols = ["trial", *PARAMS, *SCORES, "pareto"]
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


def write_dashboard(rows: Sequence[dict], out_dir: Path, references: dict[str, tuple[float, float]] | None = None
                    ) -> list[Path]:
    if not rows:
        raise ValueError("no finished, evaluated trials to report")
    out_dir.mkdir(parents=True, exist_ok=True)
    _scatter(rows, out_dir / "wer_al_pareto.png", references or {})
    _parallel(rows, out_dir / "parallel_coordinates.png")
    md, page = _table(rows)
    (out_dir / "trials.md").write_text(md)
    (out_dir / "trials.html").write_text(page)
    (out_dir / "trials.json").write_text(json.dumps(list(rows), indent=2))
    return sorted(out_dir.iterdir())


def log_dashboard(tracking_uri: str, parent_run_id: str, references: dict[str, tuple[float, float]] | None = None
                  ) -> list[dict[str, Any]]:
    """Rebuild the dashboard from the parent run's children and log it to the parent under ``dashboard/``."""
    from training.tracking import client

    rows = trial_rows(tracking_uri, parent_run_id)
    with tempfile.TemporaryDirectory() as tmp:
        write_dashboard(rows, Path(tmp), references)
        client(tracking_uri).log_artifacts(parent_run_id, tmp, artifact_path="dashboard")
    return rows
