"""Causal (block-masked) Whisper encoder: a full-sequence masked forward for training, and an exact streaming step.

:class:`CausalEncoder` wraps a ``whisper.model.AudioEncoder`` without copying anything: it calls the encoder's own
sub-modules (``conv1``, ``conv2``, each block's ``attn_ln``, ``attn.query/key/value/out``, ``mlp_ln``, ``mlp``,
``ln_post``) at call time, so LoRA layers that ``peft`` injects into those Linear modules are used. It never calls
``AudioEncoder.forward`` (which asserts a 30 s input) nor ``MultiHeadAttention.forward`` (whose SDPA path turns any
mask into ``is_causal``): attention is ``F.scaled_dot_product_attention`` with the boolean block mask passed as
``attn_mask``. Positional embeddings are sliced to the length (no 30 s padding).

Streaming (``new_state`` / ``stream`` / ``flush``) runs each new block of encoder frames through the transformer once,
attending to a per-layer K/V cache of all earlier frames plus its own block, which by Theorem 2 of the WhisperRT paper
equals the full masked forward. The conv front is incremental too (2 mel frames and 1 conv1 frame of left context).

Look-ahead. conv1 (k=3, pad 1) and conv2 (k=3, stride 2, pad 1) make encoder frame k depend on mel frames up to
2k+2. Mel frame t is centred at t·10 ms and needs audio up to t·10 ms + 12.5 ms (``frontend.py``). So the block that
ends at encoder frame e (time 20·e ms) needs mel frames 0..2e, i.e. audio up to **20·e ms + 12.5 ms**: 12.5 ms of
look-ahead past the block end (in mel frames: one frame past the block, ``2e + 1`` frames in total). At the end of a
stream, ``flush`` zero-pads the missing look-ahead exactly as ``forward`` on the zero-padded (to even length) mel.

Context: at most ``n_audio_ctx`` (1500) encoder frames = 30 s = 3000 mel frames per stream (positional embeddings
end there); feeding more raises :class:`ContextOverflowError` (``streaming.segmented`` cuts longer streams).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from streaming.mask import FRAME_MS, block_causal_mask, block_end_of, block_sizes

MEL_PER_FRAME = 2  # conv2 stride
LOOKAHEAD_MS = 12.5  # audio past the end of a block before it can be computed (mel window half-width)

_BLOCK = "block"

# Numerical agreement: streaming equals the full masked forward to float32 rounding (~1e-5 of the largest activation)
# on every CPU, because both paths put most elements through the same arithmetic in the same order:
# * MKL sgemm switches to another kernel when a thread gets fewer than 4 rows: every matmul sees a multiple of
#   ROW_MULTIPLE rows (zero rows, discarded afterwards);
# * the CPU flash-attention kernel's summation order depends on the key block length (min(512, n_keys)):
#   ``exact=True`` pads keys (masked) to KEY_MULTIPLE in both paths, bit-identical on some CPUs only (SIMD paths
#   differ per CPU, so no test relies on bit equality); the default pads to FAST_KEY_MULTIPLE (whole SIMD vectors),
#   differing by summation order only, at the same speed;
# * elementwise kernels (GELU) differ between contiguous and strided inputs: keep tensors contiguous;
# * oneDNN Conv1d results depend on the sequence length: both convolutions run as im2col + matmul.
ROW_MULTIPLE = 4
KEY_MULTIPLE = 512  # exact=True: whole key blocks of the CPU flash kernel
FAST_KEY_MULTIPLE = 16  # exact=False: whole SIMD vectors only
CACHE_STEP = 512  # K/V caches grow in steps of this many frames


class ContextOverflowError(ValueError):
    """The stream is longer than the encoder's context (30 s for Whisper)."""


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def _pad_rows(x: Tensor, rows: int) -> Tensor:
    """Zero-pad dim 1 of [B, n, ...] to ``rows``."""
    n = x.shape[1]
    if n == rows:
        return x
    return torch.cat([x, x.new_zeros((x.shape[0], rows - n, *x.shape[2:]))], dim=1)


def _conv_rows(conv: nn.Conv1d, x: Tensor, padding: int) -> Tensor:
    """``conv`` (k=3) as im2col + matmul: [B, C, T] → [B, T', out] (time-major), ``padding`` zeros on both sides."""
    if padding:
        x = F.pad(x, (padding, padding))
    (k,), (stride,) = conv.kernel_size, conv.stride
    cols = x.unfold(2, k, stride).permute(0, 2, 1, 3).flatten(2)  # [B, T', C·k], (channel, tap) order
    n = cols.shape[1]
    cols = _pad_rows(cols, _round_up(max(n, 1), ROW_MULTIPLE))
    bias = None if conv.bias is None else conv.bias.to(x.dtype)
    out = F.linear(cols, conv.weight.flatten(1).to(x.dtype), bias)
    # contiguous: elementwise kernels (GELU) take another, not bit-identical, code path on strided tensors
    return out if out.shape[1] == n else out[:, :n].contiguous()


@dataclass(eq=False)
class EncoderState:
    """Per-stream state of :meth:`CausalEncoder.stream`: plain tensors, no hooks (drop it to free the caches)."""

    max_frames: int  # encoder frames this stream may have (≤ n_audio_ctx)
    mel_seen: int = 0  # mel frames received
    conv1_done: int = 0  # conv1 outputs computed
    frames_done: int = 0  # encoder frames after conv2 (+ positional embedding), waiting or processed
    frames_out: int = 0  # encoder frames that went through the transformer and were returned
    mel_ctx: Tensor | None = None  # [1, n_mels, m] mel frames conv1_done-1 .. mel_seen-1
    g1_ctx: Tensor | None = None  # [1, d, g] gelu(conv1) frames 2·frames_done-1 .. conv1_done-1
    pending: Tensor | None = None  # [1, n, d] conv-front output of frames frames_out .. frames_done-1
    k_cache: list[Tensor] = field(default_factory=list)  # per layer [1, capacity, d], zero beyond frames_out
    v_cache: list[Tensor] = field(default_factory=list)  # (capacity grows in steps of 512 frames)
    finished: bool = False

    @property
    def remaining_mel_frames(self) -> int:
        """Mel frames this stream can still take before hitting the context limit."""
        return MEL_PER_FRAME * self.max_frames - self.mel_seen


class CausalEncoder(nn.Module):
    """Block-causal view of a Whisper ``AudioEncoder`` (shares its modules and weights).

    ``chunk_ms`` (τ) and ``tau0_ms`` (first block τ0 ≥ τ) are multiples of 20 ms. Streaming agrees with the full
    masked forward to float32 rounding; ``exact=True`` pads keys to ``KEY_MULTIPLE`` (see the note above). Per-stream
    state lives in :class:`EncoderState`; the encoder holds only the weights and a cache of masks.
    """

    def __init__(self, encoder: nn.Module, chunk_ms: int, tau0_ms: int, exact: bool = False) -> None:
        super().__init__()
        self.exact = exact
        self.key_multiple = KEY_MULTIPLE if exact else FAST_KEY_MULTIPLE
        self.tau, self.tau0 = block_sizes(chunk_ms, tau0_ms)
        self.chunk_ms, self.tau0_ms = chunk_ms, tau0_ms
        self.encoder = encoder
        self.n_ctx, self.n_state = encoder.positional_embedding.shape
        self.n_head = encoder.blocks[0].attn.n_head
        self.n_mels = encoder.conv1.in_channels
        self._mask_cache: dict[tuple[int, torch.device], Tensor] = {}

    # ------------------------------------------------------------------ shared pieces
    def _heads(self, x: Tensor) -> Tensor:
        return x.view(*x.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)

    def _attention(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        a = F.scaled_dot_product_attention(self._heads(q), self._heads(k), self._heads(v), attn_mask=mask)
        return a.permute(0, 2, 1, 3).flatten(start_dim=2)

    def _layer(self, block: nn.Module, x: Tensor, kv: Callable[[Tensor, Tensor], tuple[Tensor, Tensor]],
               mask: Tensor | None) -> Tensor:
        """One residual attention block; ``kv`` maps this call's keys/values to the ones to attend to."""
        attn = block.attn
        h = block.attn_ln(x)
        k, v = kv(attn.key(h), attn.value(h))
        x = x + attn.out(self._attention(attn.query(h), k, v, mask))
        return x + block.mlp(block.mlp_ln(x))

    def block_mask(self, n_frames: int, device: torch.device | str | None = None) -> Tensor:
        """The boolean [n, n] block mask of this configuration (True = may attend)."""
        return block_causal_mask(n_frames, self.chunk_ms, self.tau0_ms, device=device)

    def _padded_block_mask(self, n: int, device: torch.device) -> Tensor:
        """Block mask for ``round_up(n, 4)`` queries × ``round_up(n, key_multiple)`` keys: padded keys are masked,
        padded queries (discarded) attend like the last real frame. Cached per length and device."""
        key = (n, device)
        if key not in self._mask_cache:
            nq, nk = _round_up(n, ROW_MULTIPLE), _round_up(n, self.key_multiple)
            mask = torch.zeros((nq, nk), dtype=torch.bool, device=device)
            mask[:n, :n] = self.block_mask(n, device)
            mask[n:, :n] = True
            if len(self._mask_cache) > 64:
                self._mask_cache.clear()
            self._mask_cache[key] = mask
        return self._mask_cache[key]

    # ------------------------------------------------------------------ full sequence
    def forward(self, mel: Tensor, mask: Tensor | None | str = _BLOCK) -> Tensor:
        """[B, n_mels, T] → [B, T//2, d]. ``mask``: the block mask (default), ``None`` (bidirectional, as Whisper)
        or a custom boolean [T//2, T//2] mask (True = may attend)."""
        if mel.dim() != 3 or mel.shape[1] != self.n_mels:
            raise ValueError(f"expected mel of shape [B, {self.n_mels}, T], got {tuple(mel.shape)}")
        n_mel = mel.shape[-1]
        if n_mel % MEL_PER_FRAME or n_mel == 0:
            raise ValueError(f"mel length {n_mel} must be even and > 0: zero-pad it (flush() does the same)")
        n = n_mel // MEL_PER_FRAME
        if n > self.n_ctx:
            raise ContextOverflowError(f"{n} encoder frames exceed the context of {self.n_ctx} "
                                       f"({self.n_ctx * FRAME_MS / 1000:g} s)")
        enc = self.encoder
        x = F.gelu(_conv_rows(enc.conv1, mel, padding=1))  # [B, T, d]
        x = F.gelu(_conv_rows(enc.conv2, x.transpose(1, 2), padding=1))  # [B, n, d]
        x = (x + enc.positional_embedding[:n]).to(x.dtype)

        if mask is None:  # bidirectional: exactly Whisper's attention call
            for block in enc.blocks:
                x = self._layer(block, x, lambda k, v: (k, v), None)
            return enc.ln_post(x)

        if isinstance(mask, str):
            if mask != _BLOCK:
                raise ValueError(f"mask must be a tensor, None or {_BLOCK!r}, got {mask!r}")
            attn_mask = self._padded_block_mask(n, mel.device)
        else:
            if mask.shape != (n, n) or mask.dtype != torch.bool:
                raise ValueError(f"custom mask must be a bool tensor of shape ({n}, {n}), got {mask.dtype} "
                                 f"{tuple(mask.shape)}")
            nq, nk = _round_up(n, ROW_MULTIPLE), _round_up(n, self.key_multiple)
            attn_mask = torch.zeros((nq, nk), dtype=torch.bool, device=mask.device)
            attn_mask[:n, :n] = mask
            attn_mask[n:, :n] = True
        nq, nk = attn_mask.shape
        x = _pad_rows(x, nq)

        def kv(k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
            return _pad_rows(k, nk), _pad_rows(v, nk)

        for block in enc.blocks:
            x = self._layer(block, x, kv, attn_mask)
        return enc.ln_post(x[:, :n])

    # ------------------------------------------------------------------ streaming
    def new_state(self, max_frames: int | None = None) -> EncoderState:
        """A fresh stream. ``max_frames`` (encoder frames, default and at most ``n_audio_ctx``) limits its length."""
        max_frames = self.n_ctx if max_frames is None else int(max_frames)
        if not 0 < max_frames <= self.n_ctx:
            raise ValueError(f"max_frames must be in 1..{self.n_ctx}, got {max_frames}")
        return EncoderState(max_frames=max_frames)

    def _conv_front(self, state: EncoderState, mel: Tensor) -> None:
        """Push mel frames [1, n_mels, k] through conv1/conv2 as far as their right context allows."""
        enc = self.encoder
        if state.mel_ctx is None:  # mel frame -1 is conv1's zero padding
            state.mel_ctx = mel.new_zeros((1, self.n_mels, 1))
        buf = torch.cat([state.mel_ctx, mel], dim=-1)  # mel frames conv1_done-1 .. mel_seen-1
        state.mel_seen += mel.shape[-1]
        n_new = state.mel_seen - 1 - state.conv1_done  # conv1 output t needs mel t+1
        if n_new <= 0:
            state.mel_ctx = buf
            return
        g1 = F.gelu(_conv_rows(enc.conv1, buf, padding=0)).transpose(1, 2)  # [1, d, n_new]
        state.mel_ctx = buf[..., -2:]
        state.conv1_done += n_new

        if state.g1_ctx is None:  # conv1 frame -1 is conv2's zero padding
            state.g1_ctx = g1.new_zeros((1, self.n_state, 1))
        buf = torch.cat([state.g1_ctx, g1], dim=-1)  # conv1 frames 2·frames_done-1 .. conv1_done-1
        n_new = state.conv1_done // MEL_PER_FRAME - state.frames_done  # frame k needs conv1 frame 2k+1
        if n_new <= 0:
            state.g1_ctx = buf
            return
        x = F.gelu(_conv_rows(enc.conv2, buf, padding=0))  # [1, n_new, d]
        state.g1_ctx = buf[..., MEL_PER_FRAME * n_new:]
        start = state.frames_done
        x = (x + enc.positional_embedding[start:start + n_new]).to(x.dtype)
        state.frames_done += n_new
        state.pending = x if state.pending is None else torch.cat([state.pending, x], dim=1)

    def _transformer_block(self, state: EncoderState, end: int) -> Tensor:
        """Run frames frames_out..end-1 (one block) through the transformer; returns [end - frames_out, d]."""
        start = state.frames_out
        n = end - start
        x, rest = state.pending[:, :n], state.pending[:, n:]
        state.pending = rest if rest.shape[1] else None
        enc = self.encoder
        n_keys = _round_up(end, self.key_multiple)
        self._grow_cache(state, n_keys, x)
        mask = torch.arange(n_keys, device=x.device)[None, :] < end  # [1, n_keys]: the padded keys are masked
        x = _pad_rows(x, _round_up(n, ROW_MULTIPLE))
        for block, kc, vc in zip(enc.blocks, state.k_cache, state.v_cache):

            def kv(k: Tensor, v: Tensor, kc: Tensor = kc, vc: Tensor = vc) -> tuple[Tensor, Tensor]:
                kc[:, start:end] = k[:, :n]
                vc[:, start:end] = v[:, :n]
                return kc[:, :n_keys], vc[:, :n_keys]  # rows end..n_keys-1: zeros, masked

            x = self._layer(block, x, kv, mask)
        state.frames_out = end
        return enc.ln_post(x[0, :n])

    def _grow_cache(self, state: EncoderState, n_keys: int, like: Tensor) -> None:
        """Make the K/V caches hold ``n_keys`` rows: grown in steps of 512 frames, zero-filled (the padded keys
        beyond the valid frames must be finite: they are masked, but −inf + q·k and 0·v must not give NaN)."""
        capacity = state.k_cache[0].shape[1] if state.k_cache else 0
        if n_keys <= capacity:
            return
        new_cap = _round_up(max(n_keys, min(2 * capacity, state.max_frames)), CACHE_STEP)
        for cache in (state.k_cache, state.v_cache):
            for i in range(len(self.encoder.blocks)):
                new = like.new_zeros((1, new_cap, self.n_state))
                if capacity:
                    new[:, :state.frames_out] = cache[i][:, :state.frames_out]
                    cache[i] = new
                else:
                    cache.append(new)

    def _drain(self, state: EncoderState, final: bool) -> Tensor:
        outs = []
        while state.frames_out < state.frames_done:
            end = block_end_of(state.frames_out, self.tau, self.tau0)
            if end > state.frames_done:
                if not final:
                    break
                end = state.frames_done
            outs.append(self._transformer_block(state, end))
        if not outs:
            dtype = self.encoder.positional_embedding.dtype if state.mel_ctx is None else state.mel_ctx.dtype
            return torch.empty((0, self.n_state), dtype=dtype, device=self.encoder.positional_embedding.device)
        return outs[0] if len(outs) == 1 else torch.cat(outs)

    @torch.inference_mode()
    def stream(self, state: EncoderState, mel_frames: Tensor) -> Tensor:
        """Feed new mel frames [n_mels, k]; return the encoder frames [n, d] of every block completed by them
        (whole blocks only: τ0 frames first, then τ per block; possibly none)."""
        if state.finished:
            raise RuntimeError("stream() after flush(); start a new state with new_state()")
        if mel_frames.dim() != 2 or mel_frames.shape[0] != self.n_mels:
            raise ValueError(f"expected mel frames of shape [{self.n_mels}, k], got {tuple(mel_frames.shape)}")
        if mel_frames.shape[1] > state.remaining_mel_frames:
            raise ContextOverflowError(
                f"stream exceeds the encoder context: {state.mel_seen + mel_frames.shape[1]} mel frames > "
                f"{MEL_PER_FRAME * state.max_frames} ({state.max_frames * FRAME_MS / 1000:g} s); "
                "long-form streaming is not supported, start a new state")
        if mel_frames.shape[1]:
            self._conv_front(state, mel_frames.unsqueeze(0))
        return self._drain(state, final=False)

    @torch.inference_mode()
    def flush(self, state: EncoderState) -> Tensor:
        """End of stream: the remaining frames [n, d] (the last block may be shorter), with the missing look-ahead
        zero-padded exactly as ``forward`` sees the zero-padded (to even length) full mel."""
        if state.finished:
            raise RuntimeError("flush() called twice; start a new state with new_state()")
        state.finished = True
        if state.mel_seen:
            n_pad = 1 + state.mel_seen % MEL_PER_FRAME  # to even length, then conv1's right zero padding
            self._conv_front(state, state.mel_ctx.new_zeros((1, self.n_mels, n_pad)))
        return self._drain(state, final=True)
