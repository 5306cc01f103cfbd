"""EMMA sweeps with Ray Tune: each trial trains (or reuses) a policy and scores it in streaming mode.

- Trials are the grid of ``SweepConfig.trial_configs()``: thresholds × loss weights × chunk sizes.
- A trial's policy lives in ``policy_store/<training key>``, where the key is the config hash (without the
  inference parameters ``t_emma``/``max_stall``) plus the dataset versions. The first trial of a key trains it
  under a file lock; every other threshold of that key loads it: a threshold never retrains. A retried or re-run
  sweep reuses finished policies too. (On a multi-node cluster ``policy_store`` must be shared storage.)
- Concurrency is bounded by the cluster: ``cpus_per_trial`` per trial, at most ``max_concurrent_trials``
  (default: the cluster's CPUs / cpus_per_trial). ASHA (optional) stops trainings whose loss lags at its rungs.
- MLflow: one parent run per sweep; ``MlflowTrialRuns`` (a Tune callback, in the driver: one writer to the
  tracking store) makes every trial a child run with its parameters, its training curve and its streaming scores,
  and attaches the policy to the child run that trained it.

Ray, torch, mlflow and the policy trainer (torch) are imported inside the trial, the callback and the sweep driver:
this module only declares them, and the trials run in Ray's worker processes.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from filelock import FileLock

from configs.emma import EmmaConfig, SweepConfig
from data.tracking import client, experiment_id
from training.raytrain import ensure_ray, run_key, storage_uri

TRIAL_PARAMS = ("t_emma", "max_stall", "decision", "lambda_latency", "lambda_variance", "chunk_ms", "variant", "encoder",
                "latency_loss", "lambda_alignment", "max_steps", "beta_weight_max")


def training_key(cfg: EmmaConfig) -> str:
    return run_key(cfg.config_hash(), cfg.datasets)


def emma_trial(config: dict[str, Any]) -> None:
    """Ray Tune function trainable: train-or-load the policy, evaluate it at the trial's threshold."""
    import torch
    from ray import tune

    from training.emma.artifact import META, load_policy, read_policy_meta
    from training.emma.train import eval_utterances, evaluate_policy, train_policy

    cfg = EmmaConfig.model_validate(config["emma"])
    torch.set_num_threads(int(config.get("threads", 1)))
    store = Path(config["policy_store"])
    store.mkdir(parents=True, exist_ok=True)
    key = training_key(cfg)
    policy_dir = store / key[:20]
    trained_here = False
    with FileLock(str(policy_dir) + ".lock"):
        if not (policy_dir / META).exists():
            train_policy(cfg, policy_dir, report=lambda m: tune.report({**m, "trained_here": 1}),
                         meta={"training_key": key, "base_sha256": config.get("base_sha256")})
            trained_here = True
    train_metrics = read_policy_meta(policy_dir)["train_metrics"]
    model, policy, _ = load_policy(policy_dir)
    scores = evaluate_policy(model, policy, eval_utterances(cfg), cfg.chunk_ms, cfg.resolved_tau0_ms, cfg.t_emma,
                             cfg.max_stall, cfg.decision)
    tune.report({**scores, "loss": train_metrics["loss"], "nll": train_metrics["nll"],
                 "latency_s": train_metrics["latency_s"], "trained_here": int(trained_here), "evaluated": 1,
                 "policy_dir": str(policy_dir), "training_key": key})


def _callback_class():
    from ray.tune import Callback

    class MlflowTrialRuns(Callback):
        """Every Tune trial as an MLflow child run of the sweep's parent run (logged from the driver)."""

        def __init__(self, tracking_uri: str, experiment_id: str, parent_run_id: str, tags: dict[str, str]) -> None:
            self.client, self.experiment_id = client(tracking_uri), experiment_id
            self.parent, self.tags = parent_run_id, tags
            self.runs: dict[str, str] = {}

        def on_trial_start(self, iteration, trials, trial, **info) -> None:
            from mlflow.entities import Param

            cfg = trial.config["emma"]
            run = self.client.create_run(self.experiment_id, run_name=f"trial-{trial.trial_id}", tags={
                **self.tags, "mlflow.parentRunId": self.parent, "whisperline.kind": "emma-trial",
                "tune.trial_id": trial.trial_id})
            self.runs[trial.trial_id] = run.info.run_id
            self.client.log_batch(run.info.run_id, params=[Param(k, str(cfg[k])) for k in TRIAL_PARAMS])

        def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
            from mlflow.entities import Metric

            run_id = self.runs[trial.trial_id]
            step = int(result.get("step", result.get("training_iteration", 0)))
            ts = int(time.time() * 1000)
            metrics = [Metric(k, float(v), ts, step) for k, v in result.items()
                       if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                       and k not in ("timestamp", "pid", "time_this_iter_s", "time_total_s", "time_since_restore",
                                     "iterations_since_restore", "training_iteration")]
            self.client.log_batch(run_id, metrics=metrics)
            if "policy_dir" in result:
                self.client.set_tag(run_id, "policy_dir", result["policy_dir"])
                self.client.set_tag(run_id, "training_key", result["training_key"])
                if result.get("trained_here"):
                    self.client.log_artifacts(run_id, result["policy_dir"], artifact_path="policy")

        def on_trial_complete(self, iteration, trials, trial, **info) -> None:
            self.client.set_terminated(self.runs[trial.trial_id], status="FINISHED")

        def on_trial_error(self, iteration, trials, trial, **info) -> None:
            self.client.set_terminated(self.runs[trial.trial_id], status="FAILED")

    return MlflowTrialRuns


def run_sweep(sweep: SweepConfig, tracking_uri: str, parent_run_id: str, name: str) -> list[dict[str, Any]]:
    """Fit the Tune grid; one dict per trial (config values, final metrics, status)."""
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

    from data.weights import checkpoint_sha256

    ensure_ray(0, 1, sweep.base.ray_address, num_cpus=os.cpu_count() or 2)
    trials = sweep.trial_configs()
    cpus = ray.cluster_resources().get("CPU", 1)
    concurrent = sweep.max_concurrent_trials or max(1, int(cpus // sweep.cpus_per_trial))
    reports = math.ceil(sweep.base.max_steps / sweep.base.log_every) + 1
    scheduler = (ASHAScheduler(metric="loss", mode="min", time_attr="training_iteration", max_t=reports,
                               grace_period=min(sweep.asha_grace_period, reports)) if sweep.asha else FIFOScheduler())
    parent_tags = client(tracking_uri).get_run(parent_run_id).data.tags
    tags = {k: v for k, v in parent_tags.items() if k in ("base_sha256", "git_commit", "dataset_versions",
                                                         "eval_set")}
    callback = _callback_class()(tracking_uri, experiment_id(tracking_uri, sweep.experiment), parent_run_id, tags)
    space = {"emma": tune.grid_search([c.model_dump(mode="json") for c in trials]),
             "policy_store": str(Path(sweep.policy_store).resolve()), "threads": max(1, int(sweep.cpus_per_trial)),
             "base_sha256": checkpoint_sha256(sweep.base.model)}
    tuner = tune.Tuner(
        tune.with_resources(emma_trial, {"cpu": sweep.cpus_per_trial}),
        param_space=space,
        tune_config=tune.TuneConfig(scheduler=scheduler, max_concurrent_trials=concurrent,
                                    trial_name_creator=lambda t: f"emma_{t.trial_id}",
                                    trial_dirname_creator=lambda t: f"emma_{t.trial_id}"),
        run_config=tune.RunConfig(name=name, storage_path=storage_uri(sweep.storage_path), callbacks=[callback],
                                  failure_config=tune.FailureConfig(max_failures=1), verbose=0),
    )
    grid = tuner.fit()
    rows = []
    for result in grid:
        cfg = result.config["emma"]
        metrics = result.metrics or {}
        row = {k: cfg[k] for k in TRIAL_PARAMS}
        row.update({k: v for k, v in metrics.items() if isinstance(v, int | float | str) and k not in ("date",)})
        row["status"] = "error" if result.error else ("stopped" if not metrics.get("evaluated") else "ok")
        rows.append(row)
    return rows
