"""Driver of hush-word training: Ray Train job + MLflow run (hush word as .wav + .npy artifacts) + registered
pyfunc model ``whisperline-hushword-<model>`` that transcribes a wav with the hush word instead of 30 s padding."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from configs.hush_word import HushWordConfig
from data.leakage import check_held_out
from data.tracking import client, default_tracking_uri, flatten, git_commit, log_pyfunc_model, open_run
from data.utterances import check_tokenizer, dataset_ref
from data.weights import checkpoint_sha256
from training.hush_word.loop import train_loop_per_worker
from training.progress import Progress
from training.raytrain import ensure_ray, fit, run_key


def run_name(cfg: HushWordConfig) -> str:
    return f"hushword-{cfg.model}-{run_key(cfg.config_hash(), cfg.datasets, cfg.validation_datasets)[:10]}"


def run_meta(cfg: HushWordConfig) -> dict[str, Any]:
    """What hush_word.json records: base weights, config, and the training data (dataset versions + splits: the
    provenance the evaluation's leakage guard reads)."""
    return {"base_model": cfg.model, "base_sha256": checkpoint_sha256(cfg.model), "config_hash": cfg.config_hash(),
            "run_key": run_key(cfg.config_hash(), cfg.datasets, cfg.validation_datasets),
            "datasets": [dataset_ref(d) for d in cfg.datasets], "train_splits": list(cfg.splits),
            "git_commit": git_commit()}


def train_hush_word(cfg: HushWordConfig, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train, track and register a hush word; ``say`` gets a progress line (epochs) at least every 30 s."""
    from training.hush_word import pyfunc_model  # lazy: importing a models-from-code file runs its set_model

    cfg = cfg.resolved_paths()
    held_in = check_held_out(cfg.datasets, cfg.splits, cfg.validation_datasets or cfg.datasets,
                             cfg.validation_splits, allow=cfg.allow_held_in_validation)
    check_tokenizer(cfg.model, [*cfg.datasets, *(cfg.validation_datasets or ())])
    meta = run_meta(cfg)
    key = meta["run_key"]
    tracking_uri = cfg.tracking_uri or default_tracking_uri()
    name = run_name(cfg)
    tags = {"whisperline.kind": "hush-word", "base_model": cfg.model, "base_sha256": meta["base_sha256"],
            "git_commit": meta["git_commit"], "config_hash": meta["config_hash"],
            "dataset_versions": ",".join(d["version_id"] for d in meta["datasets"]),
            "validation": f"held-in ({held_in} utterances seen in training)" if held_in else "held-out"}
    params = {**flatten(cfg.model_dump(mode="json")),
              **{f"dataset.{i}.{k}": str(v) for i, d in enumerate(meta["datasets"]) for k, v in d.items()}}
    run_id, resumed = open_run(tracking_uri, cfg.experiment, key, name, tags, params)
    ensure_ray(cfg.num_workers, cfg.threads_per_worker, cfg.ray_address)
    result, wall_s = fit(train_loop_per_worker, {"hush": cfg.model_dump(mode="json"), "run_id": run_id,
                                                 "tracking_uri": tracking_uri, "meta": meta},
                         name=name, num_workers=cfg.num_workers, use_gpu=cfg.use_gpu, storage_path=cfg.storage_path,
                         max_failures=cfg.max_failures, tracking_uri=tracking_uri, run_id=run_id,
                         progress=Progress(name, cfg.epochs, unit="epoch"), say=say)
    out = Path(cfg.output_dir).resolve() / name
    with result.checkpoint.as_directory() as d:
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(Path(d) / "hush_word", out)
    mlflow = client(tracking_uri)
    mlflow.log_artifacts(run_id, str(out), artifact_path="hush_word")
    model_uri, version = log_pyfunc_model(tracking_uri, run_id, pyfunc_model.__file__, {"hush_word": str(out)},
                                          cfg.registered_name if cfg.register_model else None)
    mlflow.log_metric(run_id, "train_wall_s", wall_s)
    mlflow.set_terminated(run_id, status="FINISHED")
    metrics = {k: v for k, v in result.metrics.items() if isinstance(v, int | float)}
    return {"run_name": name, "run_id": run_id, "resumed_mlflow_run": resumed, "hush_word_dir": str(out),
            "model_uri": model_uri, "registered_model": cfg.registered_name if cfg.register_model else None,
            "registered_version": version, "train_wall_s": round(wall_s, 2), "metrics": metrics}
