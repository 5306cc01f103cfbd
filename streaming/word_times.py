"""Where the words of a Whisper transcript end in their audio, from encoder frames the caller already computed.

openai/whisper's word timestamps (``whisper.timing.find_alignment``): the cross-attention of the model's alignment
heads over the audio frames, normalised per head, median-filtered, then a monotonic DTW path from text tokens to
frames. Whisper's own function re-runs the encoder on a mel; the two-pass verifier has just encoded its window, so
this runs only the decoder over the tokens (one forward pass, no sampling), which is what makes trimming the
verifier's window cheap enough to do while streaming.
"""

from __future__ import annotations

import threading

import numpy as np
import torch
from whisper.model import disable_sdpa
from whisper.timing import dtw, median_filter

FRAMES_PER_S = 50  # Whisper encoder frames per second of audio (20 ms each)
# A server runs many streams' steps on threads over one model: the hooks below sit on shared modules, and whisper's
# disable_sdpa() flips a class-wide switch. One alignment at a time, and each hook keeps only its own thread's
# weights (another stream's decoder step may pass through the same module meanwhile).
_ALIGNING = threading.Lock()


@torch.inference_mode()
def word_ends_s(model, tokenizer, frames: torch.Tensor, words: list[list[int]], n_frames: int,
                medfilt_width: int = 7) -> list[float]:
    """End time (seconds from the start of the encoded audio) of each word, given as its token ids.

    ``frames``: the encoder output [T, d] the words were decoded from; ``n_frames``: how many of its frames hold
    real audio (the rest is padding: the path may not end there). Whisper's convention: a word ends where the path
    reaches the next word's first token (the last word: the end-of-text token)."""
    text = [t for group in words for t in group]
    if not text:
        return []
    prefix = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    tokens = torch.tensor([prefix + text + [tokenizer.eot]], dtype=torch.long)
    qks: list[torch.Tensor | None] = [None] * len(model.decoder.blocks)
    me = threading.get_ident()

    def keep(i: int, out) -> None:
        if threading.get_ident() == me and out[-1] is not None:
            qks[i] = out[-1][0]

    with _ALIGNING:
        hooks = [block.cross_attn.register_forward_hook(lambda _m, _i, out, i=i: keep(i, out))
                 for i, block in enumerate(model.decoder.blocks)]
        try:
            with disable_sdpa():  # scaled-dot-product attention does not return the weights
                model.decoder(tokens, frames[None].to(next(model.decoder.parameters()).dtype))
        finally:
            for hook in hooks:
                hook.remove()
    n_frames = max(1, min(n_frames, frames.shape[0]))
    weights = torch.stack([qks[layer][head] for layer, head in model.alignment_heads.indices().T])
    weights = weights[:, :, :n_frames].float().softmax(dim=-1)
    std, mean = torch.std_mean(weights, dim=-2, keepdim=True, unbiased=False)
    weights = median_filter((weights - mean) / std, medfilt_width)
    matrix = weights.mean(dim=0)[len(prefix) - 1 : -1]  # the no-timestamps row, then one row per text token
    text_index, time_index = dtw(-matrix.double())
    jumps = np.pad(np.diff(text_index), (1, 0), constant_values=1).astype(bool)
    jump_s = time_index[jumps] / FRAMES_PER_S
    ends = np.cumsum([len(group) for group in words])
    return [float(jump_s[min(e, len(jump_s) - 1)]) for e in ends]


def quiet_cut(audio: np.ndarray, at_s: float, search_ms: float = 150.0, hop: int = 160) -> int:
    """The sample nearest ``at_s`` where the audio is quietest (10 ms frames, ± ``search_ms``): a word boundary from
    the attention is good to a few frames, and cutting in the pause between words loses nothing of either."""
    centre = int(round(at_s * 16_000))
    lo, hi = max(0, centre - int(search_ms * 16)), min(len(audio), centre + int(search_ms * 16))
    if hi - lo < hop:
        return max(0, min(len(audio), centre))
    starts = np.arange(lo, hi - hop + 1, hop)
    energy = [float(np.mean(np.square(audio[s : s + hop], dtype=np.float64))) for s in starts]
    return int(starts[int(np.argmin(energy))] + hop // 2)


__all__ = ["FRAMES_PER_S", "quiet_cut", "word_ends_s"]
