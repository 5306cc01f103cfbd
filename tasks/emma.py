"""Prefect tasks of EMMA sweeps: thin wrappers around training.emma.

The sweep task is not cached (its result lives in MLflow) but a retry or re-run is cheap where it matters: trained
policies are reused from the policy store, so only evaluations are redone.
"""

from __future__ import annotations

import hashlib
import json

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from configs.emma import SweepConfig
from data.leakage import check_held_out
from data.tracking import client, default_tracking_uri, finished_run, flatten, git_commit, open_run
from data.utterances import dataset_ref
from data.weights import checkpoint_sha256
from training.emma.dashboard import log_dashboard
from training.emma.registry import promote
from training.emma.sweep import run_sweep
from training.raytrain import run_key


def eval_set_id(sweep: SweepConfig) -> str:
    base = sweep.base
    ids = ",".join(dataset_ref(d)["version_id"] for d in base.validation_datasets)
    return f"{ids}|{'+'.join(base.validation_splits)}|limit={base.validation_limit}"


def sweep_hash(sweep: SweepConfig) -> str:
    """Hash of what the sweep computes: the grid and every trial's learned and inference values (not where it
    runs or logs, not dataset paths: their versions enter ``sweep_key``)."""
    values = sweep.model_dump(mode="json", exclude={"base", "max_concurrent_trials", "cpus_per_trial", "policy_store",
                                                    "storage_path", "experiment", "al_budget_ms"})
    values["base"] = {**sweep.base.learned_values(), "t_emma": sweep.base.t_emma, "max_stall": sweep.base.max_stall,
                      "decision": sweep.base.decision, "validation_limit": sweep.base.validation_limit,
                      "validation_splits": list(sweep.base.validation_splits)}
    values["adapters"] = {c: None for c in sweep.adapters}  # adapter contents enter through the trials' hashes
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


def sweep_key(sweep: SweepConfig) -> str:
    """The sweep's config hash plus the versions of its training and evaluation data."""
    return run_key(sweep_hash(sweep), sweep.base.datasets, sweep.base.validation_datasets)


@task(name="open-sweep-run", cache_policy=NO_CACHE)
def open_sweep_run(sweep: SweepConfig) -> tuple[str, str, bool]:
    """(tracking URI, the sweep's MLflow parent run, already finished?): a finished sweep with the same key is
    returned as done; an unfinished one is reopened; otherwise a new parent run."""
    base = sweep.base
    held_in = check_held_out(base.datasets, base.splits, base.validation_datasets, base.validation_splits,
                             allow=base.allow_held_in_validation)  # trials select on dev: never on training audio
    tracking_uri = base.tracking_uri or default_tracking_uri()
    key = sweep_key(sweep)
    if done := finished_run(tracking_uri, sweep.experiment, key):
        get_run_logger().info("sweep %s already finished: run %s", key[:10], done)
        return tracking_uri, done, True
    tags = {"whisperline.kind": "emma-sweep", "base_model": sweep.base.model,
            "base_sha256": checkpoint_sha256(sweep.base.model), "git_commit": git_commit(),
            "dataset_versions": ",".join(dataset_ref(d)["version_id"] for d in sweep.base.datasets),
            "eval_set": eval_set_id(sweep),
            "validation": f"held-in ({held_in} utterances seen in training)" if held_in else "held-out"}
    params = {**flatten(sweep.model_dump(mode="json", exclude={"base"})),
              **flatten(sweep.base.model_dump(mode="json"), "base.")}
    run_id, resumed = open_run(tracking_uri, sweep.experiment, key, f"emma-sweep-{key[:10]}", tags, params)
    get_run_logger().info("sweep parent run %s (%s)", run_id, "resumed" if resumed else "new")
    return tracking_uri, run_id, False


@task(name="emma-sweep-trials", retries=1, retry_delay_seconds=5, cache_policy=NO_CACHE)
def sweep_trials(sweep: SweepConfig, tracking_uri: str, parent_run_id: str) -> list[dict]:
    rows = run_sweep(sweep, tracking_uri, parent_run_id, name=f"emma-sweep-{parent_run_id[:10]}")
    get_run_logger().info("%d trials: %d ok", len(rows), sum(r["status"] == "ok" for r in rows))
    return rows


@task(name="emma-sweep-dashboard", cache_policy=NO_CACHE)
def sweep_dashboard(tracking_uri: str, parent_run_id: str, references: dict[str, tuple[float, float]] | None = None
                    ) -> list[dict]:
    rows = log_dashboard(tracking_uri, parent_run_id, references)
    c = client(tracking_uri)
    front = [r for r in rows if r["pareto"]]
    c.log_metric(parent_run_id, "trials_evaluated", len(rows))
    c.log_metric(parent_run_id, "pareto_trials", len(front))
    c.log_metric(parent_run_id, "best_wer", min(r["wer"] for r in rows))
    if eligible := [r for r in rows if r["eligible"]]:  # a hallucinating trial's (negative) AL is no lag record
        c.log_metric(parent_run_id, "min_al_ms", min(r["al_ms"] for r in eligible))
    return rows


@task(name="promote-best-trial", cache_policy=NO_CACHE)
def promote_best(tracking_uri: str, parent_run_id: str, registered_name: str, al_budget_ms: float | None) -> dict:
    decision = promote(tracking_uri, parent_run_id, registered_name, al_budget_ms)
    client(tracking_uri).set_tag(parent_run_id, "promoted_version", decision["version"])
    get_run_logger().info("%s v%s: %s", registered_name, decision["version"], decision["decision"])
    return decision
