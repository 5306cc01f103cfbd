"""Whisper's text decoder run with explicit, growable caches (no module hooks).

- Cross-attention keys/values are projected once per encoder frame and written chunk by chunk into
  preallocated buffers (`append_audio`), so a new chunk costs the projections of its own frames only.
- Self-attention keys/values live in preallocated buffers with a length that can be cut back
  (`truncate`): rolling back to the stable prefix is a length change, not a copy.

The forward pass calls the modules of openai-whisper's `TextDecoder` blocks one by one (query/key/
value/out, layer norms, MLP), so LoRA layers injected into those Linear modules by peft are used.
Attention is SDPA with an explicit mask (whisper's own path passes `is_causal` and cannot take one).
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

# token embedding module -> {int8?: ((weight data_ptr, version), projection)}: the prepared vocabulary projections
_SHARED_VOCAB: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class CrossCache:
    """Cross-attention keys/values of the encoder frames seen so far, per decoder layer.

    Buffers are preallocated for the whole audio context (1500 frames = 30 s) and filled chunk by
    chunk. With `pad` (projections of encoder frames of silence, one row per position), the
    positions not heard yet hold silence, and attention spans the whole context, as offline Whisper
    always sees 30 s: the original weights then wait at the end of the speech instead of restarting
    the sentence. Without it, attention spans only the frames heard so far (the paper's setting).
    """

    def __init__(self, n_layer: int, n_frames: int, d: int, dtype, device, pad: list[tuple[Tensor, Tensor]] | None):
        if pad is None:
            # uninitialised: attention reads the first ``frames`` rows only, each written by ``append_audio`` first
            # (zeroing 30 s of keys/values is a measurable share of every verifier pass)
            self.k = [torch.empty(1, n_frames, d, dtype=dtype, device=device) for _ in range(n_layer)]
            self.v = [torch.empty(1, n_frames, d, dtype=dtype, device=device) for _ in range(n_layer)]
        else:
            self.k = [k.clone() for k, _ in pad]
            self.v = [v.clone() for _, v in pad]
        self.padded = pad is not None
        self.frames = 0  # real encoder frames written

    @property
    def span(self) -> int:
        return self.k[0].shape[1] if self.padded else self.frames


class DecoderCache:
    def __init__(self, decoder, batch: int = 1, cross: CrossCache | None = None,
                 pad: list[tuple[Tensor, Tensor]] | None = None, n_audio_ctx: int = 1500) -> None:
        d = decoder.token_embedding.weight.shape[1]
        n_ctx = decoder.positional_embedding.shape[0]
        n_layer = len(decoder.blocks)
        dtype = decoder.token_embedding.weight.dtype
        device = decoder.token_embedding.weight.device
        # uninitialised: ``forward`` writes positions offset…end before attention reads positions < end
        self.self_k = [torch.empty(batch, n_ctx, d, dtype=dtype, device=device) for _ in range(n_layer)]
        self.self_v = [torch.empty(batch, n_ctx, d, dtype=dtype, device=device) for _ in range(n_layer)]
        # beams share one CrossCache: the audio is the same for all of them
        self.cross = cross or CrossCache(n_layer, n_audio_ctx, d, dtype, device, pad)
        self.length = 0  # tokens whose self-attention keys/values are in the buffers

    @property
    def audio_frames(self) -> int:
        return self.cross.frames

    def truncate(self, length: int) -> None:
        self.length = min(self.length, length)

    def copy(self) -> DecoderCache:
        """Same audio (shared), own copy of the self-attention keys/values (a new beam)."""
        twin = DecoderCache.__new__(DecoderCache)
        twin.self_k = [k.clone() for k in self.self_k]
        twin.self_v = [v.clone() for v in self.self_v]
        twin.cross, twin.length = self.cross, self.length
        return twin


class CachedTextDecoder:
    """Forward passes of a Whisper `TextDecoder` over explicit caches."""

    def __init__(self, decoder, int8_vocab: bool = False) -> None:
        """`int8_vocab`: project onto the vocabulary with a dynamically quantized int8 copy of the
        tied embedding. That product reads the whole 51k × d matrix for every token and is most of a
        decoder step on CPU (memory-bound); int8 reads a quarter of the bytes and changes logits by
        quantization noise only. Off: exact fp32."""
        self.decoder = decoder
        self.n_head = decoder.blocks[0].attn.n_head
        self.n_ctx = decoder.positional_embedding.shape[0]
        self.int8_vocab = int8_vocab
        self._vocab: tuple[tuple[int, int], Callable[[Tensor], Tensor]] | None = None

    def _vocab_projection(self) -> Callable[[Tensor], Tensor]:
        """The tied output projection, prepared once (rebuilt when the embedding changes): fp32
        transposed and contiguous (`x @ W.T` on the transposed view is much slower), or int8."""
        weight = self.decoder.token_embedding.weight
        key = (weight.data_ptr(), weight._version)
        if self._vocab is None or self._vocab[0] != key:
            # shared by every decoder on these weights: a server builds one engine per stream, and each would
            # otherwise build and hold its own copy
            shared = _SHARED_VOCAB.setdefault(self.decoder.token_embedding, {})  # a module: identity equality
            if shared.get(self.int8_vocab, (None,))[0] != key:
                shared[self.int8_vocab] = (key, self._build_projection(weight))
            self._vocab = shared[self.int8_vocab]
        return self._vocab[1]

    def _build_projection(self, weight: Tensor) -> Callable[[Tensor], Tensor]:
        if not self.int8_vocab:
            matrix = weight.detach().T.contiguous()
            return lambda x: x @ matrix.to(x.dtype)
        linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
        linear.weight.data = weight.detach().float().clone()
        with warnings.catch_warnings():
            # torch announces the eager-mode API's move to torchao at every call; it still works here
            # and torchao is not a dependency
            warnings.filterwarnings("ignore", category=UserWarning, message=r"(?s).*quantiz")
            warnings.filterwarnings("ignore", category=DeprecationWarning, message=r"(?s).*quantiz")
            quantized = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(linear), {torch.nn.Linear},
                                                               dtype=torch.qint8)
        return lambda x: quantized(x.float())

    def new_cache(self, batch: int = 1, pad: list[tuple[Tensor, Tensor]] | None = None,
                  n_audio_ctx: int = 1500) -> DecoderCache:
        """``n_audio_ctx``: the encoder frames the cache can hold (a verifier pass knows its own count)."""
        return DecoderCache(self.decoder, batch, pad=pad, n_audio_ctx=n_audio_ctx)

    def project_audio(self, frames: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Cross-attention keys/values of encoder frames [n, d], per layer (e.g. the silence pad)."""
        x = frames.unsqueeze(0) if frames.dim() == 2 else frames
        return [(block.cross_attn.key(x), block.cross_attn.value(x)) for block in self.decoder.blocks]

    def append_audio(self, cache: DecoderCache, frames: Tensor) -> None:
        """Project the cross-attention keys/values of new encoder frames [n, d] into the cache."""
        if frames.numel() == 0:
            return
        cross = cache.cross
        start, end = cross.frames, cross.frames + frames.shape[-2]
        if end > cross.k[0].shape[1]:
            raise ValueError(f"{end} encoder frames exceed the audio context of {cross.k[0].shape[1]}")
        for i, (k, v) in enumerate(self.project_audio(frames)):
            cross.k[i][:, start:end] = k
            cross.v[i][:, start:end] = v
        cross.frames = end

    def _heads(self, x: Tensor) -> Tensor:
        b, n, d = x.shape
        return x.view(b, n, self.n_head, d // self.n_head).transpose(1, 2)

    def forward(self, cache: DecoderCache, tokens: Tensor, offset: int, logit_rows: int | None = None,
                cross_states: list[Tensor] | None = None) -> Tensor:
        """Logits [B, r, vocab] for `tokens` [B, n] placed at positions offset…offset+n−1, for the
        last r = `logit_rows` positions (all n when None: projecting rows nobody reads onto the
        51k-token vocabulary would dominate the cost).

        `cross_states`: if given, receives each layer's cross-attention input (after its layer norm)
        at the last position, [B, 1, d]: what EMMA's p_choose network reads.

        Self-attention sees the cached positions < offset plus the new tokens causally; the cache
        is overwritten from `offset` on and its length set to offset + n.
        """
        span = cache.cross.span
        if span == 0:
            raise RuntimeError("no audio in the decoder cache yet")
        dec = self.decoder
        b, n = tokens.shape
        end = offset + n
        if offset > cache.length:  # the positions between would be read unwritten
            raise ValueError(f"tokens placed at {offset} leave a gap after the {cache.length} cached")
        if end > self.n_ctx:
            raise ValueError(f"{end} tokens exceed the decoder context of {self.n_ctx}")
        x = dec.token_embedding(tokens) + dec.positional_embedding[offset:end]
        causal = torch.ones(n, end, dtype=torch.bool, device=x.device).tril(diagonal=offset)
        for i, block in enumerate(dec.blocks):
            h = block.attn_ln(x)
            cache.self_k[i][:b, offset:end] = block.attn.key(h)
            cache.self_v[i][:b, offset:end] = block.attn.value(h)
            q = self._heads(block.attn.query(h))
            k = self._heads(cache.self_k[i][:b, :end])
            v = self._heads(cache.self_v[i][:b, :end])
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=causal)
            x = x + block.attn.out(a.transpose(1, 2).reshape(b, n, -1))
            h = block.cross_attn_ln(x)
            if cross_states is not None:
                cross_states.append(h[:, -1:])
            q = self._heads(block.cross_attn.query(h))
            ck = self._heads(cache.cross.k[i][:, :span]).expand(b, -1, -1, -1)
            cv = self._heads(cache.cross.v[i][:, :span]).expand(b, -1, -1, -1)
            a = F.scaled_dot_product_attention(q, ck, cv)
            x = x + block.cross_attn.out(a.transpose(1, 2).reshape(b, n, -1))
            x = x + block.mlp(block.mlp_ln(x))
        cache.length = end
        if logit_rows is not None:
            x = x[:, n - logit_rows :]
        x = dec.ln(x)
        if torch.is_grad_enabled():  # training: keep the graph through the embedding
            return (x @ dec.token_embedding.weight.to(x.dtype).T).float()
        return self._vocab_projection()(x).float()
