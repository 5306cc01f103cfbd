"""Train one EMMA policy (in-process: a Ray Tune trial runs this) and score it in streaming mode.

The base model (and the causal LoRA adapter) stays frozen; the encoder runs once per utterance, block-causally at
the config's chunk size (what the streaming engine computes), and its frames are cached. Each step: a seeded
batch of whole utterances, teacher-forced through ``EmmaLoss``, one optimizer step. ``report`` receives the
running metrics every ``log_every`` steps (Ray Tune's ``tune.report`` in a sweep, so ASHA can stop a lagging
training).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from whisper.tokenizer import get_tokenizer

from configs.emma import EmmaConfig
from data.utterances import TrainUtterance, check_tokenizer, read_all
from evaluation.sets import Utterance, eval_utterance
from evaluation.streamed import evaluate_records, stream_all
from streaming.encoder import CausalEncoder
from streaming.engine import CausalStreamingEngine
from training.causal.data import padded_mel, rank_batches
from training.causal.evaluate import load_tuned
from training.causal.loop import lr_lambda
from training.emma.artifact import save_policy, value_parameters
from training.emma.decoding import emma_decoder
from training.emma.objective import EmmaLoss, make_batch
from training.emma.p_choose import EmmaPolicy

EVAL_KEYS = ("wer", "rwer", "arwer", "al_ms", "laal_ms", "dal_ms", "al_ca_ms", "rtf", "word_latency_ms_median")


class FrameCache:
    """Block-causal encoder frames of each utterance (speech + margin), computed once."""

    def __init__(self, model, cfg: EmmaConfig) -> None:
        self.encoder = CausalEncoder(model.encoder, cfg.chunk_ms, cfg.resolved_tau0_ms, exact=False)
        self.margin_ms, self.n_mels = cfg.margin_ms, model.dims.n_mels
        self._frames: dict[str, Tensor] = {}

    def __call__(self, utt: TrainUtterance) -> Tensor:
        if utt.key not in self._frames:
            mel = padded_mel(utt.audio, utt.speech_end_ms, self.margin_ms, self.n_mels)
            with torch.no_grad():
                self._frames[utt.key] = self.encoder(mel[None])[0]
        return self._frames[utt.key]


def base_model(cfg: EmmaConfig):
    model = load_tuned(cfg.model, cfg.adapter_dir if cfg.encoder == "causal_lora" else None)
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def ramp(cfg: EmmaConfig, step: int) -> float:
    """0 → 1 over ``beta_ramp_steps``: β_weight = ramp · beta_weight_max, and the shaping losses follow it."""
    return 1.0 if cfg.beta_ramp_steps == 0 else min(1.0, step / cfg.beta_ramp_steps)


def train_policy(cfg: EmmaConfig, out_dir: str | Path, report: Callable[[dict[str, float]], None] | None = None,
                 meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """Train, save to ``out_dir``; returns the final metrics and the policy directory."""
    check_tokenizer(cfg.model, [*cfg.datasets, *cfg.validation_datasets])
    torch.manual_seed(cfg.seed)
    model = base_model(cfg)
    tokenizer = get_tokenizer(model.is_multilingual, num_languages=model.num_languages, language="en",
                              task="transcribe")
    prefix = [*tokenizer.sot_sequence, tokenizer.no_timestamps]  # the prompt the streaming decoder feeds
    policy = EmmaPolicy.for_model(model, cfg.p_choose, seed=cfg.seed)
    groups = [{"params": list(policy.parameters()), "lr": cfg.lr}]
    if cfg.variant == "pchoose_value":
        values = list(value_parameters(model).values())
        for p in values:
            p.requires_grad_(True)
        groups.append({"params": values, "lr": cfg.value_lr})
    model.train()  # dropout-free Whisper: only switches peft's LoRA dropout, which is 0 at inference anyway
    optimizer = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    objective = EmmaLoss(model.decoder, policy, cfg)
    utterances = read_all(cfg.datasets, cfg.splits)
    frames = FrameCache(model, cfg)
    steps_per_epoch = len(rank_batches(len(utterances), 1, 0, cfg.batch_size, cfg.seed, 0))
    metrics: dict[str, float] = {}
    started = time.perf_counter()
    for step in range(cfg.max_steps):
        epoch, index = divmod(step, steps_per_epoch)
        chosen = [utterances[i] for i in rank_batches(len(utterances), 1, 0, cfg.batch_size, cfg.seed, epoch)[index]]
        batch = make_batch([frames(u) for u in chosen], [u.token_ids for u in chosen], prefix, tokenizer.eot,
                           [u.token_end_ms for u in chosen])
        weight = ramp(cfg, step) * cfg.beta_weight_max
        loss, parts = objective(batch, weight, shaping_scale=ramp(cfg, step))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_([p for g in groups for p in g["params"]], cfg.grad_clip)
        optimizer.step()
        scheduler.step()
        done = step + 1
        metrics = {**parts, "step": done, "beta_weight": weight, "grad_norm": float(grad_norm),
                   "energy_bias": float(torch.stack([layer.energy_bias for layer in policy.layers]).mean()),
                   "train_s": time.perf_counter() - started}
        if report and (done % cfg.log_every == 0 or done == cfg.max_steps):
            report(metrics)
    model.eval()
    directory = save_policy(out_dir, policy, model, cfg, {**(meta or {}), "train_metrics": metrics,
                                                         "utterances": len(utterances)})
    return {"policy_dir": str(directory), "metrics": metrics}


def evaluate_policy(model, policy: EmmaPolicy, utterances: Sequence[Utterance], chunk_ms: int, tau0_ms: int,
                    t_emma: float, max_stall: int, decision: str = "min") -> dict[str, float]:
    """Stream every utterance through the causal engine under the policy and score it like every other system."""
    engine = CausalStreamingEngine(model.eval(), chunk_ms=chunk_ms, tau0_ms=tau0_ms,
                                   decoder=emma_decoder(policy.eval(), t_emma, max_stall, decision))
    scores = evaluate_records(stream_all(engine, utterances, chunk_ms), utterances)
    return {k: float(scores[k]) for k in EVAL_KEYS if k in scores}


def eval_utterances(cfg: EmmaConfig) -> list[Utterance]:
    return [eval_utterance(u) for u in read_all(cfg.validation_datasets, cfg.validation_splits,
                                                     cfg.validation_limit)]

