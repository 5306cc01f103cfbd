"""Teacher-forced loss of a hush word: frozen Whisper must say the transcript, then EOT, on speech ⊕ hush word.

Target (paper): ``<|startoftranscript|> … <|notimestamps|>`` + transcript tokens + ``<|endoftext|>``; the loss is
the cross-entropy of every token after the prefix (the transcript and the final EOT), so the hush word learns to
make the model *finish* right after the speech — the job 30 s of padding does for offline Whisper.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from streaming.hush.frontend import encode, hushed_mel


def target_tokens(tokenizer, text_tokens: Sequence[int]) -> tuple[list[int], list[int]]:
    """Decoder input and labels (labels[i] is the token after inputs[i]; −100 where unsupervised)."""
    prefix = list(tokenizer.sot_sequence_including_notimestamps)
    inputs = prefix + list(text_tokens)
    labels = [-100] * (len(prefix) - 1) + list(text_tokens) + [tokenizer.eot]
    return inputs, labels


def hush_loss(model, hush: Tensor, speech: Tensor, inputs: Sequence[int], labels: Sequence[int],
              eot_weight: float = 1.0) -> Tensor:
    """Weighted mean CE over the supervised positions of one utterance (the model's weights get no gradient).

    ``eot_weight``: weight of the final EOT against 1 for each transcript token. Stopping is the hush word's job,
    and one EOT among ~30 tokens is a small part of a plain mean; unpadded Whisper's failure is a loop after the
    last word, i.e. a missed EOT."""
    mel = hushed_mel(speech, hush, model.dims.n_mels)[None]
    audio = encode(model, mel)
    tokens = torch.tensor([list(inputs)], device=audio.device)
    logits = model.decoder(tokens, audio)[0]
    target = torch.tensor(list(labels), device=logits.device)
    ce = F.cross_entropy(logits.float(), target, ignore_index=-100, reduction="none")
    weights = (target != -100).float()
    weights[-1] = weights[-1] * eot_weight  # the last label is the EOT (target_tokens)
    return (ce * weights).sum() / weights.sum()
