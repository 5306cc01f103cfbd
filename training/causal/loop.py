"""The Ray Train worker loop of causal LoRA fine-tuning (``train_loop_per_worker``).

Per step and rank: a batch of utterances (this rank's slice of a seeded permutation), sample points drawn per
utterance (seeded by step and rank), one forward through the DDP-wrapped :class:`SamplePointLoss`, one backward,
one optimizer step. Checkpoints (adapter in peft format + optimizer/scheduler state + step) are written by rank 0
and reported with ``ray.train.report``; every rank reports the same number of times (it is a barrier). A restarted
worker group resumes from ``ray.train.get_checkpoint()`` and replays the same data order from that step.

Rank 0 logs per-step metrics to the MLflow run the driver opened (``run_id``), plus system metrics, and runs the
streaming validation.
"""

from __future__ import annotations

import json
import math
import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray.train
import torch
from ray.train.torch import get_device, prepare_model

from configs.finetune import FinetuneConfig
from training.causal.augment import augment
from evaluation.sets import eval_utterance
from data.utterances import TrainUtterance, read_all
from training.causal.data import collate, padded_mel, rank_batches
from training.causal.join import join
from training.causal.objective import SamplePointLoss
from training.causal.validate import streaming_scores
from training.lora import apply_lora, load_adapter, save_adapter, trainable_parameters
from training.raytrain import WorkerSetup, all_reduce_mean

STATE_FILE = "trainer_state.pt"


class CheckpointMismatch(RuntimeError):
    """A checkpoint of another configuration was offered for resuming."""


def lr_lambda(cfg: FinetuneConfig):
    """Linear warm-up, then cosine decay to 10 % over ``max_steps``."""
    def f(step: int) -> float:
        if step < cfg.warmup_steps:
            return (step + 1) / cfg.warmup_steps
        span = max(1, cfg.max_steps - cfg.warmup_steps)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, (step - cfg.warmup_steps) / span)))
    return f


def chunk_for_step(cfg: FinetuneConfig, step: int) -> int:
    """The step's chunk size: fixed, or (random chunk size variant) drawn from the set, equal on every rank."""
    if not cfg.chunk_ms_choices:
        return cfg.chunk_ms
    return int(np.random.default_rng([cfg.seed, step, 1]).choice(cfg.chunk_ms_choices))


class MelCache:
    """Log-mel of each padded utterance, computed once per worker (an augmented one is new at every step)."""

    def __init__(self, margin_ms: int, n_mels: int) -> None:
        self.margin_ms, self.n_mels = margin_ms, n_mels
        self._mels: dict[str, torch.Tensor] = {}

    def __call__(self, utt: TrainUtterance, cached: bool = True) -> torch.Tensor:
        if not cached:
            return padded_mel(utt.audio, utt.speech_end_ms, self.margin_ms, self.n_mels)
        if utt.key not in self._mels:
            self._mels[utt.key] = padded_mel(utt.audio, utt.speech_end_ms, self.margin_ms, self.n_mels)
        return self._mels[utt.key]


def step_batch(cfg: FinetuneConfig, utterances: list[TrainUtterance], mels: MelCache, *, step: int, rank: int,
               world: int, steps_per_epoch: int, prefix: list[int], eot: int, device) -> tuple[Any, int, int]:
    """(this rank's batch of ``step`` on ``device``, epoch, chunk_ms): its slice of the epoch's seeded permutation,
    augmented and sampled with generators seeded by (seed, step, rank), so a resumed or emulated rank gets the
    same batch."""
    epoch, index = divmod(step, steps_per_epoch)
    batch_ids = rank_batches(len(utterances), world, rank, cfg.batch_size, cfg.seed, epoch)[index]
    chunk_ms = chunk_for_step(cfg, step)
    originals = [utterances[i] for i in batch_ids]
    joined = originals
    if cfg.join.p > 0:  # its own generator: joins leave the other draws of a step unchanged
        join_rng = np.random.default_rng([cfg.seed, step, rank, 3])
        joined = [join(u, utterances, cfg.join, join_rng) for u in originals]
    augment_rng = np.random.default_rng([cfg.seed, step, rank, 2])
    batch_utts = [augment(u, cfg.augment, cfg.margin_ms, augment_rng) for u in joined]
    batch = collate(batch_utts, [mels(u, cached=u is o) for u, o in zip(batch_utts, originals)], chunk_ms=chunk_ms,
                    tau0_ms=cfg.resolved_tau0_ms, fraction=cfg.fraction_for(chunk_ms), margin_ms=cfg.margin_ms,
                    prefix=prefix, eot=eot, rng=np.random.default_rng([cfg.seed, step, rank])).to(device)
    return batch, epoch, chunk_ms


def batch_loss(module: torch.nn.Module, batch, seed: int, step: int, rank: int) -> torch.Tensor:
    """The :class:`SamplePointLoss` of one batch (``module``: the loss itself or its DDP wrapper)."""
    torch.manual_seed(hash((seed, step, rank)) % 2**31)  # LoRA dropout: same masks after a resume
    loss, _ = module(batch.mel, batch.tokens, batch.labels, batch.row_utt, batch.row_frames, batch.chunk_ms,
                     batch.tau0_ms, batch.utt_frames)
    return loss


def optimizer_step(model: torch.nn.Module, optimizer, scheduler, grad_clip: float) -> torch.Tensor:
    """Clip the LoRA gradients, step the optimizer and the schedule; the norm before clipping."""
    grad_norm = torch.nn.utils.clip_grad_norm_(trainable_parameters(model), grad_clip)
    optimizer.step()
    scheduler.step()
    return grad_norm


def save_checkpoint(directory: Path, model: torch.nn.Module, cfg: FinetuneConfig, meta: dict, optimizer, scheduler,
                    step: int) -> None:
    save_adapter(model, cfg.lora, directory / "adapter", {**meta, "step": step})
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "step": step,
                "config_hash": cfg.config_hash()}, directory / STATE_FILE)


def restore_checkpoint(directory: Path, model: torch.nn.Module, cfg: FinetuneConfig, optimizer, scheduler) -> int:
    state = torch.load(directory / STATE_FILE, map_location="cpu", weights_only=True)
    if state["config_hash"] != cfg.config_hash():
        raise CheckpointMismatch(f"checkpoint of config {state['config_hash'][:12]} offered to run "
                                 f"{cfg.config_hash()[:12]}")
    load_adapter(model, directory / "adapter", inject=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return int(state["step"])


def kill_after_commit(cfg: FinetuneConfig, rank: int, step: int, timeout_s: float = 180.0) -> None:
    """The fault drill: SIGKILL this worker once Ray's controller has committed a checkpoint.

    A checkpoint counts only when the controller has collected every rank's report of it; a worker killed before
    that takes the uncommitted checkpoint with it. So the drill waits (bounded) for the controller's snapshot to name
    a latest checkpoint: it tests recovery from a committed checkpoint, whatever the machine's load."""
    # lazy: a private Ray module, needed by the fault drill alone
    from ray.train.v2._internal.constants import CHECKPOINT_MANAGER_SNAPSHOT_FILENAME

    snapshot = Path(cfg.storage_path) / ray.train.get_context().get_experiment_name() / CHECKPOINT_MANAGER_SNAPSHOT_FILENAME
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if json.loads(snapshot.read_text()).get("latest_checkpoint_result"):
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    Path(cfg.chaos.marker).write_text(f"killed rank {rank} pid {os.getpid()} at step {step}\n")
    os.kill(os.getpid(), signal.SIGKILL)  # a real worker death, not an exception


def train_loop_per_worker(config: dict[str, Any]) -> None:
    cfg = FinetuneConfig.model_validate(config["finetune"])
    setup = WorkerSetup(config, cfg.model, cfg.threads_per_worker)
    rank, world, meta = setup.rank, setup.world, setup.meta
    device = get_device()
    model = setup.model
    apply_lora(model, cfg.lora, seed=cfg.seed)
    model.train()
    module = SamplePointLoss(model, cfg.distill, eot=setup.tokenizer.eot)
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=cfg.lr, weight_decay=cfg.weight_decay,
                                  eps=cfg.adam_eps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    start_step = 0
    if (checkpoint := ray.train.get_checkpoint()) is not None:
        with checkpoint.as_directory() as d:
            start_step = restore_checkpoint(Path(d), model, cfg, optimizer, scheduler)
    # DDP syncs trainable tensors only: frozen weights are identical on every rank (same sha256), and Whisper's
    # alignment_heads buffer is sparse, which DDP's broadcast does not support.
    torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
        module, [n for n, p in module.named_parameters() if not p.requires_grad] + [n for n, _ in module.named_buffers()])
    ddp = prepare_model(module, parallel_strategy="ddp" if world > 1 else None)

    tokenizer = setup.tokenizer
    prefix = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    utterances = read_all(cfg.datasets, cfg.splits, fraction=cfg.train_fraction, fractions=cfg.dataset_fractions)
    validation = ([eval_utterance(u) for u in read_all(cfg.validation_datasets, cfg.validation_splits,
                                                              cfg.validation_limit)]
                  if rank == 0 and cfg.validation_datasets else [])
    mels = MelCache(cfg.margin_ms, model.dims.n_mels)
    monitor = setup.system_metrics()
    steps_per_epoch = len(rank_batches(len(utterances), world, rank, cfg.batch_size, cfg.seed, 0))

    def emit(step: int, metrics: dict, with_checkpoint: bool) -> None:
        setup.log(metrics, step)
        if not with_checkpoint:
            ray.train.report(metrics)
            return
        with tempfile.TemporaryDirectory() as tmp:
            if rank == 0:  # one writer: Ray merges every rank's checkpoint files into one directory
                save_checkpoint(Path(tmp), model, cfg, meta, optimizer, scheduler, step)
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(tmp) if rank == 0 else None)

    try:
        if start_step >= cfg.max_steps:  # restored a finished run: hand its checkpoint back as the result
            emit(start_step, {"step": start_step, "resumed_from_step": start_step}, with_checkpoint=True)
        # the run's data size beside its config's train_fraction: the x axis of a learning curve over data size
        setup.log({"train_utterances": len(utterances)}, start_step)
        if start_step:
            setup.log({"resumed_from_step": start_step}, start_step)
        for step in range(start_step, cfg.max_steps):
            if cfg.chaos and rank == cfg.chaos.rank and step == cfg.chaos.at_step and not os.path.exists(cfg.chaos.marker):
                kill_after_commit(cfg, rank, step)
            t0 = time.perf_counter()
            batch, epoch, chunk_ms = step_batch(cfg, utterances, mels, step=step, rank=rank, world=world,
                                                steps_per_epoch=steps_per_epoch, prefix=prefix, eot=tokenizer.eot,
                                                device=device)
            loss = batch_loss(ddp, batch, cfg.seed, step, rank)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            grad_norm = optimizer_step(model, optimizer, scheduler, cfg.grad_clip)
            seconds = time.perf_counter() - t0
            done = step + 1
            metrics = {"step": done, "epoch": epoch, "loss": all_reduce_mean(float(loss)), "lr": scheduler.get_last_lr()[0],
                       "grad_norm": float(grad_norm), "chunk_ms": chunk_ms,
                       "sample_points": all_reduce_mean(batch.n_points) * world,
                       "step_s": all_reduce_mean(seconds)}
            metrics.update({f"loss_{k}": all_reduce_mean(v) for k, v in module.last.items()})  # ce, kd (distilling)
            metrics["sample_points_per_s"] = metrics["sample_points"] / max(metrics["step_s"], 1e-9)
            last = done == cfg.max_steps
            if validation and (last or (cfg.val_every and done % cfg.val_every == 0)):
                scores = streaming_scores(model, validation, cfg.chunk_ms, cfg.resolved_tau0_ms)
                metrics.update({f"val_{k}": v for k, v in scores.items()})
            if last or done % cfg.checkpoint_every == 0:
                emit(done, metrics, with_checkpoint=True)
            elif done % cfg.log_every == 0:
                emit(done, metrics, with_checkpoint=False)
    finally:
        if monitor is not None:
            monitor.finish()
