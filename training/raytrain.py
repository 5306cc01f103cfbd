"""What every whisperline Ray Train job shares: a cluster to run on, durable storage, a run name that a retry
finds again, and a fit that marks the MLflow run FAILED when Ray gives up.

Ray, torch, whisper, mlflow and the dataset reader (torch) are imported inside the functions that use them: drivers
and Prefect tasks import this module for run keys and names before any training starts."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from data.tracking import TrackingUnavailable, client, log_metrics
from data.versioning import code_version
from training.progress import Progress, watch


class TrainingFailed(RuntimeError):
    """A Ray Train job failed after exhausting its restarts (its MLflow run is marked FAILED)."""


def ensure_ray(num_workers: int, threads_per_worker: int, address: str | None = None, num_cpus: int | None = None
               ) -> None:
    """Connect to ``address``/``RAY_ADDRESS`` (a cluster) or start a local instance sized for the workers (or with
    ``num_cpus``: a Tune sweep sizes itself by the machine)."""
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address)
    else:  # the Train workers plus the Train controller
        ray.init(num_cpus=num_cpus or max(2, num_workers * threads_per_worker + 1), include_dashboard=False,
                 log_to_driver=False)


def storage_uri(path: str) -> str:
    """Ray Train storage: a URI (s3://, gs://, …: shared by every node of a cluster) as is, a local path absolute."""
    return path if "://" in path else str(Path(path).resolve())


def run_key(config_hash: str, datasets: Sequence[str], validation_datasets: Sequence[str] = ()) -> str:
    """What a run learns: its config hash, the version ids of its training and validation data, and the code that
    trains (a fixed objective or data reader must not silently reuse an adapter trained by the old code)."""
    from data.utterances import dataset_ref

    train = [dataset_ref(d)["version_id"] for d in datasets]
    val = [dataset_ref(d)["version_id"] for d in validation_datasets]
    code = code_version(*TRAINING_CODE)
    return hashlib.sha256(f"{config_hash}|{','.join(train)}|{','.join(val)}|{code}".encode()).hexdigest()


# Ray Train V2's controller takes a worker's `ray.train.report` (every logged step: it is a barrier) only when it next
# polls the workers, every 2 s by default: a short run would wait on reports more than it trains
# (docs/decisions/raytrain-poll.md). A value the user set wins; the driver's value travels to the controller and the
# workers (Ray's ENV_VARS_TO_PROPAGATE).
REPORT_POLL_ENV, REPORT_POLL_S = "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2"


# What shapes a trained adapter, hush word or policy (and its logged validation numbers): the training and
# streaming code, the configs and the data readers.
TRAINING_CODE = ("training", "configs", "data")


def fit(train_loop: Callable[[dict], None], loop_config: dict[str, Any], *, name: str, num_workers: int,
        use_gpu: bool, storage_path: str, max_failures: int, tracking_uri: str, run_id: str,
        torch_backend: str | None = None, progress: Progress | None = None, say: Callable[[str], None] | None = None):
    """``TorchTrainer(...).fit()`` under ``<storage_path>/<name>`` (same name → resume); (result, wall seconds).
    With ``progress`` and ``say``: a progress line every 30 s while it trains (``training.progress``)."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    os.environ.setdefault(REPORT_POLL_ENV, REPORT_POLL_S)
    trainer = TorchTrainer(
        train_loop,
        train_loop_config=loop_config,
        scaling_config=ScalingConfig(num_workers=num_workers, use_gpu=use_gpu),
        torch_config=TorchConfig(backend=torch_backend or ("nccl" if use_gpu else "gloo"), timeout_s=1800),
        run_config=RunConfig(name=name, storage_path=storage_uri(storage_path),
                             failure_config=FailureConfig(max_failures=max_failures),
                             checkpoint_config=CheckpointConfig(num_to_keep=2)),
    )
    started = time.perf_counter()
    try:
        with watch(tracking_uri, run_id, progress, say):
            result = trainer.fit()
    except Exception as err:  # Ray Train V2 raises once FailureConfig's restarts are used up
        mark_failed(tracking_uri, run_id)
        raise TrainingFailed(f"{name}: training failed after {max_failures} restarts: {err}") from err
    if result.checkpoint is None:
        mark_failed(tracking_uri, run_id)
        raise TrainingFailed(f"{name}: training ended without a checkpoint")
    return result, time.perf_counter() - started


def mark_failed(tracking_uri: str, run_id: str) -> None:
    """Mark the MLflow run FAILED if the store answers; if it does not (the reason training failed, maybe), the run
    stays unfinished, which a re-run reopens just the same: never an error that hides the training's own."""
    try:
        client(tracking_uri).set_terminated(run_id, status="FAILED")
    except Exception as err:  # noqa: BLE001 - best effort by design
        logging.getLogger(__name__).warning("could not mark MLflow run %s FAILED (%s); it stays unfinished",
                                            run_id, err)


def all_reduce_mean(value: float) -> float:
    """Mean of a scalar over the ranks of the process group (the value itself outside one)."""
    import torch

    if torch.distributed.is_available() and torch.distributed.is_initialized():
        t = torch.tensor([value], dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return float(t) / torch.distributed.get_world_size()
    return value


class WorkerSetup:
    """What every worker loop starts with: its rank, the run's tracking ids, and the base model, checked against
    the sha256 the driver recorded (a node with other weights must not train silently)."""

    def __init__(self, config: dict[str, Any], model_name: str, threads: int) -> None:
        import ray.train
        import torch
        from whisper.tokenizer import get_tokenizer

        from data.weights import checkpoint_sha256, load_model

        self.run_id, self.tracking_uri, self.meta = config.get("run_id"), config.get("tracking_uri"), config["meta"]
        self.node_pid = os.getppid()  # the raylet that started this worker
        ctx = ray.train.get_context()
        self.rank, self.world = ctx.get_world_rank(), ctx.get_world_size()
        torch.set_num_threads(threads)
        if checkpoint_sha256(model_name, allow_download=False) != self.meta["base_sha256"]:
            raise RuntimeError(f"rank {self.rank}: base weights of {model_name} differ from the driver's")
        self.model = load_model(model_name)
        self.tokenizer = get_tokenizer(self.model.is_multilingual, num_languages=self.model.num_languages,
                                       language="en", task="transcribe")

    def stop_if_orphaned(self, step: int) -> None:
        """Exit at once when the Ray node under this worker is gone (its raylet, the parent process, died: a killed
        pipeline takes its local Ray instance with it): a worker busy in a step would otherwise outlive the pipeline,
        logging and writing a checkpoint that a re-run could be restoring at the same time."""
        if os.getppid() != self.node_pid:
            print(f"rank {self.rank}: the Ray node under this worker is gone; stopping before step {step} is logged "
                  "or checkpointed", file=sys.stderr, flush=True)
            os._exit(1)  # no clean-up: what a SIGKILL would have left, and nothing written after the node died

    def log(self, metrics: dict[str, float], step: int) -> None:
        """Metrics into the run's MLflow record, from rank 0 only (every rank first checks that its node lives: the
        loops log before every checkpoint and report)."""
        self.stop_if_orphaned(step)
        if self.rank == 0 and self.run_id:
            try:
                log_metrics(self.tracking_uri, self.run_id, metrics, step)
            except Exception as err:  # after MLflow's own (bounded) retries: stop rather than train unrecorded
                raise TrackingUnavailable(
                    f"rank 0 could not log step {step} to MLflow {self.tracking_uri} ({type(err).__name__}: "
                    f"{str(err)[:300]}); the run stays unfinished and its last checkpoint is kept: re-run once the "
                    "tracking server is back and it resumes") from err

    def system_metrics(self):
        """MLflow's system metrics sampler (CPU, memory, GPU if any) logging into the run, on rank 0 (``.finish()``
        it at the end); None elsewhere."""
        if self.rank != 0 or not self.run_id:
            return None
        import mlflow
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        mlflow.set_tracking_uri(self.tracking_uri)
        monitor = SystemMetricsMonitor(self.run_id, sampling_interval=5, samples_before_logging=1)
        monitor.start()
        return monitor
