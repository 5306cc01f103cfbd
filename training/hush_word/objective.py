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

from training.hush_word.frontend import encode, hushed_mel


def target_tokens(tokenizer, text_tokens: Sequence[int]) -> tuple[list[int], list[int]]:
    """Decoder input and labels (labels[i] is the token after inputs[i]; −100 where unsupervised)."""
    prefix = list(tokenizer.sot_sequence_including_notimestamps)
    inputs = prefix + list(text_tokens)
    labels = [-100] * (len(prefix) - 1) + list(text_tokens) + [tokenizer.eot]
    return inputs, labels


def hush_loss(model, hush: Tensor, speech: Tensor, inputs: Sequence[int], labels: Sequence[int]) -> Tensor:
    """Mean CE over the supervised positions of one utterance (the model's weights get no gradient)."""
    mel = hushed_mel(speech, hush, model.dims.n_mels)[None]
    audio = encode(model, mel)
    tokens = torch.tensor([list(inputs)], device=audio.device)
    logits = model.decoder(tokens, audio)[0]
    return F.cross_entropy(logits.float(), torch.tensor(list(labels), device=logits.device), ignore_index=-100)
