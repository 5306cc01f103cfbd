"""sweep_emma flow: MLflow parent run → Ray Tune trials (train-or-reuse policy, streaming evaluation) →
dashboard on the parent run → optional promotion of the best trial (challenger, gated champion)."""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from configs.emma import SweepConfig
from data.tracking import client
from tasks.emma import open_sweep_run, promote_best, sweep_dashboard, sweep_trials
from tasks.runtime import prefect_api
from training.emma.dashboard import trial_rows


@flow(name="sweep-emma", log_prints=True)
def sweep_emma(sweep: SweepConfig, promote: bool = False, references: dict[str, tuple[float, float]] | None = None
               ) -> dict:
    tracking_uri, parent, done = open_sweep_run(sweep)
    if done:  # same grid, same data, same policies: nothing to recompute (promotion may still be asked for)
        rows = trial_rows(tracking_uri, parent)
        result = {"parent_run_id": parent, "tracking_uri": tracking_uri, "trials": [], "dashboard_rows": rows,
                  "skipped": True}
        promoted = client(tracking_uri).get_run(parent).data.tags.get("promoted_version")
        if promote and not promoted:
            result["promotion"] = promote_best(tracking_uri, parent, sweep.base.registered_name, sweep.al_budget_ms)
        elif promoted:
            result["promotion"] = {"version": promoted, "decision": "already promoted by this sweep"}
        return result
    trials = sweep_trials(sweep, tracking_uri, parent)
    rows = sweep_dashboard(tracking_uri, parent, references)
    result = {"parent_run_id": parent, "tracking_uri": tracking_uri, "trials": trials, "dashboard_rows": rows,
              "skipped": False}
    if promote:
        result["promotion"] = promote_best(tracking_uri, parent, sweep.base.registered_name, sweep.al_budget_ms)
    client(tracking_uri).set_terminated(parent, status="FINISHED")
    front = [r for r in rows if r["pareto"]]
    create_markdown_artifact(key="emma-sweep", description="EMMA sweep Pareto front", markdown="\n".join(
        ["| t_emma | λ_latency | λ_variance | WER | AL ms |", "|---|---|---|---|---|"]
        + [f"| {r['t_emma']} | {r['lambda_latency']} | {r['lambda_variance']} | {100 * r['wer']:.2f} % | "
           f"{r['al_ms']:.0f} |" for r in front]))
    return result


def run_sweep_flow(sweep: SweepConfig, promote: bool = False,
                   references: dict[str, tuple[float, float]] | None = None) -> dict:
    with prefect_api():
        return sweep_emma(sweep=sweep, promote=promote, references=references)
