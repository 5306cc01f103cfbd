"""Sample-point training targets (WhisperRT section VI): what the decoder must say after each chunk boundary.

A *sample point* is a chunk boundary: an encoder block end ``e`` (frames of 20 ms; the first at τ0, then every τ).
At boundary ``e`` the streaming decoder has heard audio up to ``20·e`` ms (plus the 12.5 ms look-ahead of the front
end), so its target is every token whose aligned end time is ≤ ``20·e`` ms, followed by EOT ("wait for more audio";
at the end of the speech EOT is also the end of the transcript).

Valid boundaries of an utterance are the whole blocks after τ0 up to the speech end plus a margin of silence
(the audio is padded with zeros to cover it); ``⌈f̂·|I|⌉`` of them are drawn per utterance and step.

Labels: the decoder input is ``prefix + tokens[:n]`` (prefix = SOT sequence + <|notimestamps|>, exactly what the
streaming decoder feeds); the prefix positions before the last one are not supervised (the engine forces them), the
last prefix position predicts the first token, …, the last input position predicts EOT, also once every token
has ended (where the public code's argmin over an all-True row puts EOT at position 0).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from streaming.mask import FRAME_MS, block_sizes

IGNORE = -100


def valid_boundaries(n_frames: int, speech_end_ms: int, chunk_ms: int, tau0_ms: int, margin_ms: int) -> list[int]:
    """Block ends (encoder frames) usable as sample points: whole blocks, ≤ speech end + margin, and inside the
    ``n_frames`` computed frames with one frame to spare (the last block's look-ahead must be real audio)."""
    tau, tau0 = block_sizes(chunk_ms, tau0_ms)
    limit = min(n_frames - 1, (speech_end_ms + margin_ms) // FRAME_MS)
    return list(range(tau0, limit + 1, tau))


def draw_sample_points(boundaries: Sequence[int], fraction: float, rng: np.random.Generator) -> list[int]:
    """⌈f̂·|I|⌉ distinct boundaries (at least one), sorted."""
    if not boundaries:
        return []
    k = min(len(boundaries), max(1, math.ceil(fraction * len(boundaries))))
    picked = rng.choice(len(boundaries), size=k, replace=False)
    return sorted(boundaries[i] for i in picked)


def tokens_done(token_end_ms: Sequence[int], boundary_ms: int) -> int:
    """How many tokens have ended by ``boundary_ms`` (token end times are non-decreasing)."""
    return bisect.bisect_right(token_end_ms, boundary_ms)


@dataclass(frozen=True)
class Row:
    inputs: list[int]
    labels: list[int]


def target_row(prefix: Sequence[int], eot: int, token_ids: Sequence[int], n_done: int) -> Row:
    """Decoder input and labels of one sample point (see the module docstring)."""
    text = list(token_ids[:n_done])
    inputs = [*prefix, *text]
    labels = [IGNORE] * (len(prefix) - 1) + text + [eot]
    return Row(inputs, labels)


def pad_rows(rows: Sequence[Row], pad_token: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad to one length: [R, L] inputs (``pad_token``) and labels (ignored)."""
    length = max(len(r.inputs) for r in rows)
    inputs = np.full((len(rows), length), pad_token, dtype=np.int64)
    labels = np.full((len(rows), length), IGNORE, dtype=np.int64)
    for i, r in enumerate(rows):
        inputs[i, : len(r.inputs)] = r.inputs
        labels[i, : len(r.labels)] = r.labels
    return inputs, labels
