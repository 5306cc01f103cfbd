"""EMMA's training objective on a Whisper decoder: NLL + λ_latency·L_latency + λ_variance·L_variance.

Teacher forcing over whole utterances with the frozen encoder's frames. Per decoder layer l, the p_choose layer
reads the state entering the cross-attention (after its layer norm) and the frames; its write logits give the
expected monotonic alignment alpha (per head), and the cross-attention output of the target rows becomes
(1 - β_weight)·softmax-attention + β_weight·βV, with β EMMA's expected soft attention (infinite lookback) on the
cross-attention's *own* energies q·k/√d (not the monotonic energy: the public WhisperEMMA bug, emma.md §2.4). The
NLL therefore depends on where alpha says each token is written: writing before the audio that predicts a
token costs likelihood, and the latency loss pulls the other way.

Latency and variance are averaged over layers and heads, in seconds (delay of writing at frame j: (j + 1)·20 ms),
over text targets only (EOT is not written into the stream), per the config's C ("expected_delay" or "dal").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from configs.emma import EmmaConfig
from training.causal.objective import _heads
from training.causal.samples import IGNORE, pad_rows, target_row
from training.emma.alignment import (
    alignment_closed_form,
    alignment_variance,
    differentiable_average_lagging,
    expected_delays,
    expected_soft_attention,
    log_alignment_from_logits,
    preserve_mass,
)
from training.emma.p_choose import EmmaPolicy
from streaming.mask import FRAME_MS

FRAME_S = FRAME_MS / 1000


@dataclass
class EmmaBatch:
    audio: Tensor  # [B, S, d] encoder frames, zeros past each utterance's length
    lengths: Tensor  # [B] real frames
    tokens: Tensor  # [B, L] prompt + text tokens (EOT-padded)
    labels: Tensor  # [B, L] next token (text, then EOT) from the last prompt position on; IGNORE elsewhere
    text_mask: Tensor  # [B, T] target rows (from the last prompt position) whose target is a text token
    first_target: int  # row of the first target (len(prompt) - 1)
    end_frames: Tensor | None = None  # [B, T] frame at which each target's audio is complete (forced alignment)


def make_batch(frames: Sequence[Tensor], token_ids: Sequence[Sequence[int]], prefix: Sequence[int], eot: int,
               token_end_ms: Sequence[Sequence[int]] | None = None) -> EmmaBatch:
    """``token_end_ms``: aligned end of every token (the EOT target ends with the last one); needed only for the
    alignment-supervision term."""
    rows = [target_row(prefix, eot, ids, len(ids)) for ids in token_ids]
    inputs, labels = pad_rows(rows, eot)
    first = len(prefix) - 1
    n_targets = labels.shape[1] - first
    text_mask = torch.zeros(len(rows), n_targets)
    for i, ids in enumerate(token_ids):
        text_mask[i, : len(ids)] = 1
    s = max(f.shape[0] for f in frames)
    audio = torch.zeros(len(frames), s, frames[0].shape[-1])
    for i, f in enumerate(frames):
        audio[i, : f.shape[0]] = f
    ends = None
    if token_end_ms is not None:
        ends = torch.full((len(rows), n_targets), 10**6, dtype=torch.long)  # padded targets: never complete
        for i, times in enumerate(token_end_ms):
            frames_i = [-(-int(t) // FRAME_MS) for t in times]
            ends[i, : len(frames_i) + 1] = torch.tensor([*frames_i, frames_i[-1] if frames_i else 0])
    return EmmaBatch(audio, torch.tensor([f.shape[0] for f in frames]), torch.from_numpy(inputs),
                     torch.from_numpy(labels), text_mask, first, ends)


def _merge(x: Tensor) -> Tensor:
    b, h, n, dh = x.shape
    return x.transpose(1, 2).reshape(b, n, h * dh)


class EmmaLoss(nn.Module):
    """``forward(batch, beta_weight) -> (loss, parts)``; trainable: the policy (+ value projections by variant)."""

    def __init__(self, decoder: nn.Module, policy: EmmaPolicy, cfg: EmmaConfig) -> None:
        super().__init__()
        self.decoder, self.policy, self.cfg = decoder, policy, cfg

    def alignment(self, logits: Tensor, lengths: Tensor) -> Tensor:
        """alpha [B, H, T, S] (float64) of write logits, padding-masked, mass-preserved by config."""
        if self.cfg.alignment == "closed_form":
            real = torch.arange(logits.shape[-1]) < lengths[:, None, None, None]
            alpha = alignment_closed_form(torch.sigmoid(logits.double()) * real)
        else:
            alpha = log_alignment_from_logits(logits, lengths[:, None]).exp()
        return preserve_mass(alpha, lengths[:, None]) if self.cfg.mass_preservation else alpha

    def forward(self, batch: EmmaBatch, beta_weight: float = 0.0, shaping_scale: float = 1.0
                ) -> tuple[Tensor, dict[str, float]]:
        """``shaping_scale`` multiplies λ_latency and λ_variance (ramped with β_weight by the trainer: until βV
        enters the attention, nothing in the NLL opposes the latency loss, which would push every write to the
        first frame and saturate p there)."""
        dec = self.decoder
        b, length = batch.tokens.shape
        n_head = dec.blocks[0].attn.n_head
        t0 = batch.first_target
        x = dec.token_embedding(batch.tokens) + dec.positional_embedding[:length]
        causal = torch.ones(length, length, dtype=torch.bool).tril()
        real = (torch.arange(batch.audio.shape[1]) < batch.lengths[:, None])[:, None, None, :]  # [B, 1, 1, S]
        alphas, supervised = [], []
        for block, p_choose in zip(dec.blocks, self.policy.layers, strict=True):
            h = block.attn_ln(x)
            q, k, v = (_heads(f(h), n_head) for f in (block.attn.query, block.attn.key, block.attn.value))
            x = x + block.attn.out(_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=causal)))
            h = block.cross_attn_ln(x)
            q = _heads(block.cross_attn.query(h), n_head)
            k = _heads(block.cross_attn.key(batch.audio), n_head)
            v = _heads(block.cross_attn.value(batch.audio), n_head)
            energy = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5  # [B, H, L, S]
            attn = torch.softmax(energy.masked_fill(~real, float("-inf")), dim=-1) @ v
            write_logits = p_choose(h[:, t0:], batch.audio)
            alpha = self.alignment(write_logits, batch.lengths)
            alphas.append(alpha)
            if self.cfg.lambda_alignment > 0:
                supervised.append(self.alignment_supervision(write_logits, batch))
            if beta_weight > 0:
                beta = expected_soft_attention(alpha.clamp_min(1e-300).log(), energy[:, :, t0:], batch.lengths[:, None])
                mixed = (1 - beta_weight) * attn[:, :, t0:] + beta_weight * (beta @ v)
                attn = torch.cat([attn[:, :, :t0], mixed], dim=2)
            x = x + block.cross_attn.out(_merge(attn))
            x = x + block.mlp(block.mlp_ln(x))
        keep = batch.labels != IGNORE
        logits = dec.ln(x[keep]) @ dec.token_embedding.weight.T
        nll = F.cross_entropy(logits.float(), batch.labels[keep])
        latency, variance = self.shaping_losses(torch.stack(alphas), batch)
        shaping = self.cfg.lambda_latency * latency.float() + self.cfg.lambda_variance * variance.float()
        loss = nll + shaping_scale * shaping
        parts = {"nll": nll.item(), "latency_s": latency.item(), "variance_s2": variance.item()}
        if supervised:
            align = torch.stack(supervised).mean()
            loss = loss + self.cfg.lambda_alignment * align
            parts["alignment_bce"] = align.item()
        return loss, {"loss": loss.item(), **parts}

    def alignment_supervision(self, logits: Tensor, batch: EmmaBatch) -> Tensor:
        """Class-balanced BCE of every head's p against "the target's audio is complete at frame j"
        (j ≥ its aligned end frame), over real frames and real targets: whisperline's addition to EMMA, which
        uses the forced alignments the dataset already holds; it makes the min-over-heads decision at the
        frontier meaningful after a short training."""
        if batch.end_frames is None:
            raise ValueError("lambda_alignment > 0 needs token end times in the batch")
        frames = torch.arange(logits.shape[-1])
        target = (frames >= batch.end_frames[:, None, :, None]).float().expand_as(logits)
        real_frame = frames < batch.lengths[:, None, None, None]
        real_target = (batch.end_frames < 10**6)[:, None, :, None]
        weight = (real_frame & real_target).float().expand_as(logits)
        pos = (target * weight).sum().clamp_min(1)
        neg = ((1 - target) * weight).sum().clamp_min(1)
        weight = weight * (target / pos + (1 - target) / neg) / 2
        return F.binary_cross_entropy_with_logits(logits, target, weight=weight, reduction="sum")

    def shaping_losses(self, alpha: Tensor, batch: EmmaBatch) -> tuple[Tensor, Tensor]:
        """(L_latency, L_variance) from alpha [layers, B, H, T, S], averaged over layers, heads and text targets."""
        mask = batch.text_mask.to(alpha.dtype)
        n = mask.sum().clamp_min(1)
        delays = expected_delays(alpha, FRAME_S).mean(dim=(0, 2))  # [B, T]
        variance = (alignment_variance(alpha, FRAME_S).mean(dim=(0, 2)) * mask).sum() / n
        if self.cfg.latency_loss == "dal":
            source_s = batch.lengths.to(alpha.dtype) * FRAME_S
            latency = differentiable_average_lagging(delays, source_s, mask).mean()
        else:
            latency = (delays * mask).sum() / n
        return latency, variance
