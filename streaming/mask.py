"""Block-causal self-attention mask of the streaming encoder (WhisperRT / CarelessWhisper eq. 11).

Units: one encoder frame = 20 ms (Whisper's conv2 has stride 2 over 10 ms mel hops).

Blocks: the first block holds the first τ0 frames, every later block τ frames; the last block is cut at the sequence
length. A query frame may attend to every key frame of its own block and of all earlier blocks:

    allowed(i, j)  ⇔  j < block_end(i)
    block_end(i)   =  τ0                          if i < τ0
                      τ0 + τ·(⌊(i−τ0)/τ⌋ + 1)     otherwise        (capped at n)

When τ0 is a multiple of τ (τ0 = τ·(E+1)) this is exactly the paper's eq. 11 and the public code's invariant
``col < τ·(max(⌊row/τ⌋, E) + 1)``; the formulation above also admits τ0 that is not a multiple of τ.
"""

from __future__ import annotations

import torch

FRAME_MS = 20  # one encoder frame


def ms_to_frames(ms: int) -> int:
    """Milliseconds → encoder frames (20 ms each); ``ValueError`` if ``ms`` is not a whole number of frames."""
    if isinstance(ms, bool) or int(ms) != ms:
        raise ValueError(f"duration must be an integer number of milliseconds, got {ms!r}")
    ms = int(ms)
    if ms % FRAME_MS:
        raise ValueError(f"{ms} ms is not a multiple of the {FRAME_MS} ms encoder frame")
    return ms // FRAME_MS


def block_sizes(chunk_ms: int, tau0_ms: int) -> tuple[int, int]:
    """Validate a (chunk, first block) configuration and return (τ, τ0) in encoder frames."""
    if chunk_ms <= 0 or tau0_ms <= 0:
        raise ValueError(f"chunk_ms and tau0_ms must be positive, got chunk_ms={chunk_ms}, tau0_ms={tau0_ms}")
    tau, tau0 = ms_to_frames(chunk_ms), ms_to_frames(tau0_ms)
    if tau0 < tau:
        raise ValueError(f"the first block (tau0_ms={tau0_ms}) must not be shorter than a chunk (chunk_ms={chunk_ms})")
    return tau, tau0


def block_ends(n_frames: int, chunk_ms: int, tau0_ms: int) -> list[int]:
    """Frame counts at which each block completes: [τ0, τ0+τ, τ0+2τ, …, n_frames] (the last one capped at n)."""
    tau, tau0 = block_sizes(chunk_ms, tau0_ms)
    if n_frames < 0:
        raise ValueError(f"n_frames must be >= 0, got {n_frames}")
    ends: list[int] = []
    end = tau0
    while n_frames > 0:
        ends.append(min(end, n_frames))
        if end >= n_frames:
            break
        end += tau
    return ends


def block_end_of(i: int, tau: int, tau0: int) -> int:
    """Uncapped end (exclusive) of the block holding frame ``i``."""
    return tau0 if i < tau0 else tau0 + tau * ((i - tau0) // tau + 1)


def block_causal_mask(n_frames: int, chunk_ms: int, tau0_ms: int, device: torch.device | str | None = None
                      ) -> torch.Tensor:
    """Boolean [n, n] mask, True = query row i may attend to key column j (the ``attn_mask`` convention of SDPA)."""
    tau, tau0 = block_sizes(chunk_ms, tau0_ms)
    if n_frames < 0:
        raise ValueError(f"n_frames must be >= 0, got {n_frames}")
    i = torch.arange(n_frames, device=device)
    later = tau0 + tau * (torch.div(i - tau0, tau, rounding_mode="floor") + 1)
    end = torch.where(i < tau0, torch.full_like(i, tau0), later).clamp_(max=n_frames)
    return i[None, :] < end[:, None]
