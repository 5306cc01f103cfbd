"""Driver of one causal fine-tuning run: Ray Train ``TorchTrainer`` + MLflow run + registered model.

``run_finetune(cfg)``:
1. opens (or reopens, after a failure) the MLflow run keyed by the config hash, with all params and tags;
2. fits a ``TorchTrainer`` (``ScalingConfig(num_workers, use_gpu)``, gloo on CPU / nccl on GPU,
   ``FailureConfig(max_failures)``) under ``<storage_path>/<run name>``: the name is derived from the config hash,
   so a retried run (a Prefect retry, a re-submitted job) restores the last checkpoint instead of starting over;
3. copies the final adapter to ``<output_dir>/<run name>``, logs it and a pyfunc model that stream-transcribes a
   wav, registers that model as ``whisperline-causal-<model>-<chunk_ms>ms`` and closes the run.
Works on the local machine (``ray.init(num_cpus=…)``) and on a Ray cluster (``ray_address``/``RAY_ADDRESS``).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from configs.finetune import FinetuneConfig
from data.leakage import check_held_out
from data.tracking import (audio_signature, client, default_tracking_uri, experiment_id, flatten, git_commit,
                           log_pyfunc_model, open_run)
from data.utterances import check_tokenizer, dataset_ref
from data.weights import checkpoint_sha256
from training.causal.loop import train_loop_per_worker
from training.lora import read_adapter_meta
from training.progress import Progress
from training.raytrain import ensure_ray, fit
from training.raytrain import run_key as dataset_run_key

log = logging.getLogger("whisperline.finetune")


def run_key(cfg: FinetuneConfig) -> str:
    return dataset_run_key(cfg.config_hash(), cfg.datasets, cfg.validation_datasets)


def run_name(cfg: FinetuneConfig) -> str:
    return f"causal-{cfg.model}-{cfg.variant}-{run_key(cfg)[:10]}"


def run_meta(cfg: FinetuneConfig) -> dict[str, Any]:
    return {
        "base_model": cfg.model,
        "base_sha256": checkpoint_sha256(cfg.model),
        "chunk_ms": cfg.chunk_ms,
        "tau0_ms": cfg.resolved_tau0_ms,
        "chunk_ms_choices": list(cfg.chunk_ms_choices or []),
        "config_hash": cfg.config_hash(),
        "run_key": run_key(cfg),
        "datasets": [dataset_ref(d) for d in cfg.datasets],
        "train_splits": list(cfg.splits),  # with `datasets`: the provenance the evaluation's leakage guard reads
        "git_commit": git_commit(),
    }


def run_finetune(cfg: FinetuneConfig, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Train, track and register one configuration; returns a summary (metrics, paths, MLflow ids). ``say`` gets a
    progress line at least every 30 s while it trains."""
    cfg = cfg.resolved_paths()
    held_in = check_held_out(cfg.datasets, cfg.splits, cfg.validation_datasets, cfg.validation_splits,
                             allow=cfg.allow_held_in_validation)
    check_tokenizer(cfg.model, [*cfg.datasets, *cfg.validation_datasets])
    meta = run_meta(cfg)
    tracking_uri = cfg.tracking_uri or default_tracking_uri()
    name = run_name(cfg)
    tags = {"whisperline.kind": "causal-lora", "base_model": cfg.model, "base_sha256": meta["base_sha256"],
            "git_commit": meta["git_commit"], "config_hash": meta["config_hash"], "variant": cfg.variant,
            "dataset_versions": ",".join(d["version_id"] for d in meta["datasets"]),
            "validation": f"held-in ({held_in} utterances seen in training)" if held_in else "held-out"}
    params = {**flatten(cfg.model_dump(mode="json")), "tau0_ms_resolved": str(cfg.resolved_tau0_ms),
              **{f"dataset.{i}.{k}": str(v) for i, d in enumerate(meta["datasets"]) for k, v in d.items()}}
    run_id, resumed = open_run(tracking_uri, cfg.experiment, meta["run_key"], name, tags, params)
    ensure_ray(cfg.num_workers, cfg.threads_per_worker, cfg.ray_address)
    loop_config = {"finetune": cfg.model_dump(mode="json"), "run_id": run_id, "tracking_uri": tracking_uri,
                   "meta": meta}
    result, wall_s = fit(train_loop_per_worker, loop_config, name=name, num_workers=cfg.num_workers,
                         use_gpu=cfg.use_gpu, storage_path=cfg.storage_path, max_failures=cfg.max_failures,
                         tracking_uri=tracking_uri, run_id=run_id, progress=Progress(name, cfg.max_steps), say=say)
    mlflow = client(tracking_uri)
    adapter_dir = Path(cfg.output_dir).resolve() / name
    with result.checkpoint.as_directory() as d:
        if adapter_dir.exists():
            shutil.rmtree(adapter_dir)
        shutil.copytree(Path(d) / "adapter", adapter_dir)
    metrics = {k: v for k, v in result.metrics.items() if isinstance(v, int | float)}
    mlflow.log_artifacts(run_id, str(adapter_dir), artifact_path="adapter")
    model_uri, version = log_streaming_model(tracking_uri, run_id, adapter_dir, cfg)
    mlflow.log_metric(run_id, "train_wall_s", wall_s)
    mlflow.set_terminated(run_id, status="FINISHED")
    return {"run_name": name, "run_id": run_id, "resumed_mlflow_run": resumed, "adapter_dir": str(adapter_dir),
            "model_uri": model_uri, "registered_model": cfg.registered_name if cfg.register_model else None,
            "registered_version": version, "train_wall_s": round(wall_s, 2), "metrics": metrics,
            "config_hash": meta["config_hash"], "chunk_ms": cfg.chunk_ms, "variant": cfg.variant}


def log_streaming_model(tracking_uri: str, run_id: str, adapter_dir: Path, cfg: FinetuneConfig
                        ) -> tuple[str, str | None]:
    """Log the pyfunc ("models from code") streaming model with the adapter as its artifact; register it."""
    from training.causal import pyfunc_model  # lazy: importing a models-from-code file runs its set_model

    return log_pyfunc_model(tracking_uri, run_id, pyfunc_model.__file__, {"adapter": str(adapter_dir)},
                            cfg.registered_name if cfg.register_model else None, name="streaming_model",
                            signature=audio_signature({"audio_path": "string", "text": "string", "chunk_ms": "long"},
                                                      chunk_param=True))


def register_adapter(tracking_uri: str, adapter_dir: str | Path, experiment: str = "whisperline-causal",
                     tags: dict[str, str] | None = None) -> tuple[str, str]:
    """An adapter directory (trained earlier, elsewhere, or built for a test) logged and registered the way a
    fine-tuning run registers its own, in a new FINISHED run; returns (registered name, version)."""
    meta = read_adapter_meta(adapter_dir)
    # only what names and registers the model (the training fields are the adapter's own business)
    cfg = FinetuneConfig.model_construct(model=meta["base_model"], chunk_ms=int(meta["chunk_ms"]),
                                         chunk_ms_choices=tuple(meta.get("chunk_ms_choices") or ()) or None)
    if meta.get("base_sha256") and meta["base_sha256"] != checkpoint_sha256(cfg.model):
        raise ValueError(f"{adapter_dir}: trained on other {cfg.model} weights than the ones here")
    run_tags = {"whisperline.kind": "causal-lora", "base_model": cfg.model, "base_sha256": checkpoint_sha256(cfg.model),
                "variant": cfg.variant, "adapter_dir": str(Path(adapter_dir).resolve()),
                "dataset_versions": ",".join(d["version_id"] for d in meta.get("datasets", [])), **(tags or {})}
    c = client(tracking_uri)
    run = c.create_run(experiment_id(tracking_uri, experiment), run_name=f"register-{Path(adapter_dir).name}",
                       tags=run_tags)
    _, version = log_streaming_model(tracking_uri, run.info.run_id, Path(adapter_dir), cfg)
    c.set_terminated(run.info.run_id, "FINISHED")
    assert version is not None  # cfg.register_model is on by default
    return cfg.registered_name, version
