"""The sample-point loss: block-causal encoder once per utterance, all sample points through the decoder at once.

Encoder: :class:`CausalEncoder` full masked forward (``exact=False``: training needs no bit-exactness) over the
batch's mel; the block mask makes frame i depend on frames of its own and earlier blocks only, so each utterance's
frames before boundary e are exactly what the streaming encoder produces after e frames, and zero padding after an
utterance cannot leak into it.

Decoder: one row per sample point, cross-attention keys restricted to the row's boundary (frames < e) by a
key mask, causal self-attention over the row's tokens. Cross-attention keys/values are projected once per
utterance and gathered per row. Logits are computed only at supervised positions.

Distillation (``configs.finetune.DistillSettings``, docs/decisions/distillation.md): the teacher is the same base
weights with the adapter switched off (``training.lora.adapters_off``), its encoder at full attention over each
utterance's own frames (no batch padding), its decoder on the same token rows attending to every frame. At the
positions whose target is a word token, ``loss = (1 - w) CE + w T² KL(teacher_T || student_T)``. The "wait" EOT
positions are left to the cross-entropy alone: the teacher hears the next word there and would teach the student to
guess it.

Wrapped as an ``nn.Module`` whose ``forward`` returns the loss, so DDP (``ray.train.torch.prepare_model``) sees one
forward per step and all-reduces the LoRA gradients once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from configs.finetune import DistillSettings
from training.causal.data import SamplePointBatch
from training.causal.samples import IGNORE
from streaming.encoder import CausalEncoder
from training.lora.adapter import adapters_off


def kl_teacher_student(teacher_logp: Tensor, student_logp: Tensor) -> Tensor:
    """KL(teacher ‖ student), mean over rows; the teacher's zero-probability tokens add nothing (and no NaN)."""
    p = teacher_logp.exp()
    terms = torch.where(p > 0, p * (teacher_logp - student_logp), torch.zeros_like(p))
    return terms.sum(-1).mean()


class SamplePointLoss(nn.Module):
    def __init__(self, model: nn.Module, distill: DistillSettings | None = None, eot: int | None = None) -> None:
        """``distill``: the distillation term's settings (None: cross-entropy alone); the teacher is the student's
        own base weights with the adapter off."""
        super().__init__()
        distill = distill or DistillSettings(weight=0.0)
        if distill.weight and eot is None:
            raise ValueError("distillation needs the tokenizer's EOT id (its positions are not distilled)")
        self.model = model
        self.distill, self.eot = distill, eot
        self._encoders: dict[tuple[int, int], CausalEncoder] = {}
        self.last: dict[str, float] = {}  # the last forward's loss parts (for logging)

    def encoder_for(self, chunk_ms: int, tau0_ms: int) -> CausalEncoder:
        key = (chunk_ms, tau0_ms)
        if key not in self._encoders:  # plain dict: the views share the model's modules, nothing to register
            self._encoders[key] = CausalEncoder(self.model.encoder, chunk_ms, tau0_ms, exact=False)
        return self._encoders[key]

    def forward(self, mel: Tensor, tokens: Tensor, labels: Tensor, row_utt: Tensor, row_frames: Tensor,
                chunk_ms: int, tau0_ms: int, utt_frames: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The loss (mean cross-entropy over supervised positions, with the distillation term when on), and the
        count of supervised positions. ``utt_frames`` [U]: each utterance's own encoder frames (the teacher's)."""
        audio = self.encoder_for(chunk_ms, tau0_ms)(mel)  # [U, T, d]
        logits, targets = decoder_logits(self.model.decoder, tokens, labels, audio, row_utt, row_frames)
        n = targets.numel()
        ce = F.cross_entropy(logits.float(), targets, reduction="mean")
        self.last = {"ce": float(ce.detach())}
        if not self.distill.weight:
            return ce, torch.tensor(n)
        if utt_frames is None:
            raise ValueError("distillation needs each utterance's frame count (SamplePointBatch.utt_frames)")
        word = (labels != IGNORE) & (labels != self.eot)
        if not word.any():  # still reported: every rank all-reduces the same metrics
            self.last["kd"] = 0.0
            return ce, torch.tensor(n)
        t = self.distill.temperature
        teacher_logp = F.log_softmax(self.teacher_logits(mel, tokens, torch.where(word, labels, IGNORE), row_utt,
                                                         utt_frames).float() / t, dim=-1)
        student_logp = F.log_softmax(logits[word[labels != IGNORE]].float() / t, dim=-1)
        kd = kl_teacher_student(teacher_logp, student_logp) * t * t
        self.last["kd"] = float(kd.detach())
        w = self.distill.weight
        return (1 - w) * ce + w * kd, torch.tensor(n)

    @torch.no_grad()
    def teacher_logits(self, mel: Tensor, tokens: Tensor, labels: Tensor, row_utt: Tensor,
                       utt_frames: Tensor) -> Tensor:
        """The full-context teacher's logits at the supervised positions of ``labels`` (module docstring)."""
        with adapters_off(self.model):
            return full_context_logits(self.model, mel, tokens, labels, row_utt, utt_frames,
                                       encoder=self.encoder_for(20, 20))

    def loss(self, batch: SamplePointBatch) -> tuple[Tensor, Tensor]:
        return self(batch.mel, batch.tokens, batch.labels, batch.row_utt, batch.row_frames, batch.chunk_ms,
                    batch.tau0_ms, batch.utt_frames)


@torch.no_grad()
def full_context_logits(model: nn.Module, mel: Tensor, tokens: Tensor, labels: Tensor, row_utt: Tensor,
                        utt_frames: Tensor, encoder: CausalEncoder | None = None) -> Tensor:
    """``model``'s logits at the supervised positions of ``labels``, its encoder at full attention over each
    utterance's own frames (``mask=None``: the block size of the view is unused) and every row attending to all of
    its utterance's frames."""
    encoder = encoder or CausalEncoder(model.encoder, 20, 20, exact=False)
    frames = torch.zeros(mel.shape[0], mel.shape[-1] // 2, model.dims.n_audio_state, dtype=mel.dtype,
                         device=mel.device)
    for u, n in enumerate(utt_frames.tolist()):  # each utterance alone: batch padding must not leak in
        frames[u, :n] = encoder(mel[u : u + 1, :, : 2 * n], mask=None)[0]
    logits, _ = decoder_logits(model.decoder, tokens, labels, frames, row_utt, utt_frames[row_utt])
    return logits


def _heads(x: Tensor, n_head: int) -> Tensor:
    b, n, d = x.shape
    return x.view(b, n, n_head, d // n_head).transpose(1, 2)


def decoder_logits(decoder: nn.Module, tokens: Tensor, labels: Tensor, audio: Tensor, row_utt: Tensor,
                   row_frames: Tensor) -> tuple[Tensor, Tensor]:
    """Logits [N, vocab] at the N supervised positions of ``labels`` and the target ids [N].

    tokens/labels [R, L]; audio [U, T, d]; row r attends to ``audio[row_utt[r], :row_frames[r]]``.
    """
    r, length = tokens.shape
    n_head = decoder.blocks[0].attn.n_head
    x = decoder.token_embedding(tokens) + decoder.positional_embedding[:length]
    causal = torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()
    frames = torch.arange(audio.shape[1], device=audio.device)
    cross_mask = (frames[None, :] < row_frames[:, None])[:, None, None, :]  # [R, 1, 1, T]
    for block in decoder.blocks:
        h = block.attn_ln(x)
        q, k, v = (_heads(f(h), n_head) for f in (block.attn.query, block.attn.key, block.attn.value))
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=causal)
        x = x + block.attn.out(a.transpose(1, 2).reshape(r, length, -1))
        h = block.cross_attn_ln(x)
        q = _heads(block.cross_attn.query(h), n_head)
        ck = _heads(block.cross_attn.key(audio), n_head)[row_utt]
        cv = _heads(block.cross_attn.value(audio), n_head)[row_utt]
        a = F.scaled_dot_product_attention(q, ck, cv, attn_mask=cross_mask)
        x = x + block.cross_attn.out(a.transpose(1, 2).reshape(r, length, -1))
        x = x + block.mlp(block.mlp_ln(x))
    keep = labels != IGNORE
    x = decoder.ln(x[keep])
    return x @ decoder.token_embedding.weight.to(x.dtype).T, labels[keep]
