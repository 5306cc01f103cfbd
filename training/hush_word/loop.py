"""Ray Train worker loop of hush-word training: data-parallel, the hush word's gradient all-reduced.

The only parameter is the waveform ``hush`` (``samples`` values, initialised in ±``init_scale``, clamped to
±``amplitude_bound`` after every step); Whisper is frozen (``requires_grad_(False)``: no weight gradients are even
computed). Each rank accumulates the loss of its utterances one by one (batch 1, no padding, so no padding can leak
into the encoder) and the summed gradient is all-reduced before the AdamW step. After every epoch all ranks score
the validation utterances (teacher-forced loss, split across ranks, sums all-reduced); rank 0 checkpoints the hush
word, the optimizer, the loss history and every epoch's hush word. The final hush word is the mean of the
``average_best`` epochs with the lowest validation loss (the paper averages the best epochs).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray.train
import torch

from configs.hush_word import HushWordConfig
from data.utterances import read_all
from training.causal.data import rank_batches
from streaming.hush.frontend import save_hush_word
from training.hush_word.objective import hush_loss, target_tokens
from training.raytrain import WorkerSetup, all_reduce_mean

STATE_FILE = "hush_state.pt"


def average_best(history: list[tuple[int, float]], snapshots: dict[int, torch.Tensor], k: int) -> tuple[torch.Tensor, list[int]]:
    """Mean of the hush words of the k epochs with the lowest validation loss, and those epochs."""
    best = [e for e, _ in sorted(history, key=lambda item: (item[1], item[0]))[:k]]
    return torch.stack([snapshots[e] for e in best]).mean(0), best


def phrase_crop(utt, rng) -> tuple[np.ndarray, list[int]]:
    """Audio cut after a random word (halfway into the pause before the next one) and the tokens ended by then."""
    words = utt.words
    k = int(rng.integers(1, len(words) + 1))
    end_ms = words[k - 1][2]
    cut_ms = end_ms if k == len(words) else (end_ms + max(end_ms, words[k][1])) // 2
    n_tokens = sum(1 for t in utt.token_end_ms if t <= end_ms)
    return utt.audio[: cut_ms * 16], list(utt.token_ids[:n_tokens])


def _all_reduce_sum(t: torch.Tensor) -> torch.Tensor:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.all_reduce(t)
    return t


def train_loop_per_worker(config: dict[str, Any]) -> None:
    cfg = HushWordConfig.model_validate(config["hush"])
    setup = WorkerSetup(config, cfg.model, cfg.threads_per_worker)
    rank, world, meta, tokenizer = setup.rank, setup.world, setup.meta, setup.tokenizer
    model = setup.model.eval()
    model.requires_grad_(False)

    generator = torch.Generator().manual_seed(cfg.seed)  # same init on every rank
    hush = torch.nn.Parameter(torch.empty(cfg.samples).uniform_(-cfg.init_scale, cfg.init_scale, generator=generator))
    optimizer = torch.optim.AdamW([hush], lr=cfg.lr, eps=1e-8, weight_decay=cfg.weight_decay)
    start_epoch, history, snapshots = 0, [], {}
    if (checkpoint := ray.train.get_checkpoint()) is not None:
        with checkpoint.as_directory() as d:
            state = torch.load(Path(d) / STATE_FILE, map_location="cpu", weights_only=True)
        if state["config_hash"] != cfg.config_hash():
            raise RuntimeError("checkpoint of another hush-word configuration")
        with torch.no_grad():
            hush.copy_(state["hush"])
        optimizer.load_state_dict(state["optimizer"])
        start_epoch, history, snapshots = state["epoch"], [tuple(h) for h in state["history"]], state["snapshots"]

    train_utts = read_all(cfg.datasets, cfg.splits)

    def example(i: int, rng: np.random.Generator) -> tuple:
        utt = train_utts[i]
        if cfg.crop_prob and utt.words and rng.random() < cfg.crop_prob:
            audio, tokens = phrase_crop(utt, rng)
        else:
            audio, tokens = utt.audio, list(utt.token_ids)
        return (torch.from_numpy(np.ascontiguousarray(audio)), *target_tokens(tokenizer, tokens))

    val_all = read_all(cfg.validation_datasets or cfg.datasets, cfg.validation_splits, cfg.validation_limit)
    val = [(torch.from_numpy(u.audio), *target_tokens(tokenizer, u.token_ids)) for u in val_all[rank::world]]
    steps_per_epoch = len(rank_batches(len(train_utts), world, rank, cfg.batch_size, cfg.seed, 0))

    monitor = setup.system_metrics()
    for epoch in range(start_epoch, cfg.epochs):
        t0 = time.perf_counter()
        for index, batch in enumerate(rank_batches(len(train_utts), world, rank, cfg.batch_size, cfg.seed, epoch)):
            rng = np.random.default_rng([cfg.seed, epoch, index, rank])
            optimizer.zero_grad(set_to_none=False)
            hush.grad = torch.zeros_like(hush)
            total = 0.0
            for i in batch:
                loss = hush_loss(model, hush, *example(i, rng), eot_weight=cfg.eot_weight) / len(batch)
                loss.backward()
                total += float(loss)
            _all_reduce_sum(hush.grad).div_(world)
            optimizer.step()
            with torch.no_grad():
                hush.clamp_(-cfg.amplitude_bound, cfg.amplitude_bound)
            step = epoch * steps_per_epoch + index + 1
            loss_mean = all_reduce_mean(total)
            setup.log({"loss": loss_mean, "epoch": epoch, "hush_peak": float(hush.detach().abs().max())}, step)
        with torch.no_grad():
            sums = torch.tensor([sum(float(hush_loss(model, hush, *v, eot_weight=cfg.eot_weight)) for v in val), float(len(val))],
                                dtype=torch.float64)
        _all_reduce_sum(sums)
        val_loss = float(sums[0] / sums[1]) if sums[1] else float("nan")
        history.append((epoch, val_loss))
        snapshots[epoch] = hush.detach().clone()
        epoch_s = all_reduce_mean(time.perf_counter() - t0)
        metrics = {"epoch": epoch + 1, "val_loss": val_loss, "epoch_s": epoch_s,
                   "utterances_per_s": steps_per_epoch * cfg.batch_size * world / max(epoch_s, 1e-9)}
        last = epoch + 1 == cfg.epochs
        if last:
            final, best = average_best(history, snapshots, cfg.average_best)
            with torch.no_grad():
                final_loss = torch.tensor([sum(float(hush_loss(model, final, *v, eot_weight=cfg.eot_weight)) for v in val)], dtype=torch.float64)
            _all_reduce_sum(final_loss)
            metrics.update({"final_val_loss": float(final_loss[0] / max(float(sums[1]), 1.0)),
                            "averaged_epochs": len(best)})
        setup.log(metrics, epoch + 1)
        with tempfile.TemporaryDirectory() as tmp:
            if rank == 0:
                torch.save({"hush": hush.detach(), "optimizer": optimizer.state_dict(), "epoch": epoch + 1,
                            "history": history, "snapshots": snapshots, "config_hash": cfg.config_hash()},
                           Path(tmp) / STATE_FILE)
                if last:
                    save_hush_word(final.numpy(), Path(tmp) / "hush_word",
                                   {**meta, "amplitude_bound": cfg.amplitude_bound, "averaged_epochs": best})
            ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(tmp) if rank == 0 else None)
    if monitor is not None:
        monitor.finish()
