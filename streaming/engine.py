"""The causal streaming engine: incremental log-mel → block-causal encoder with key/value caches →
streaming greedy decoder with the stability rule. Implements `events.StreamingRecognizer`.

Per chunk the work is: the new mel frames, the encoder on the new block only (attending to cached
keys/values), the cross-attention projections of the new frames, and a few decoder passes. Nothing
is recomputed over the past audio, so the cost per chunk does not grow with the stream (the
decoder's prefix pass grows with the number of tokens, which is small).

Look-ahead: a block's last encoder frame needs mel frames up to 12.5 ms past the block end (the
conv front end and the STFT window), so `lookahead_ms = 12.5`; end of stream zero-pads it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import torch
from whisper.tokenizer import get_tokenizer

from streaming.beam import StreamingBeamDecoder
from streaming.decoding import CachePolicy, StreamingGreedyDecoder
from streaming.encoder import CausalEncoder
from streaming.events import Hypothesis
from streaming.frontend import StreamingLogMel, causal_log_mel


class StreamingDecoder(Protocol):
    """What the engine needs of a decoder (greedy, beam, EMMA, …): per-stream state, new encoder frames in, the
    committed/tentative hypothesis out."""

    def new_state(self) -> Any: ...

    def update(self, state: Any, frames: torch.Tensor, final: bool = False) -> Any: ...

    def hypothesis(self, state: Any) -> Hypothesis: ...


# (model, tokenizer, pad_frames or None, int8_vocab) -> a decoder
DecoderFactory = Callable[[Any, Any, "torch.Tensor | None", bool], StreamingDecoder]


# silence fed at the end of a stream (docs/decisions/end-of-stream-flush.md)
FLUSH_MS = 1000
# Greedy decoding's restart cut (streaming.decoding): chosen on dev (docs/decisions/restart-cut.md) ...
RESTART_WORDS = 3
# ... said again from the last this many words (docs/decisions/restart-context.md)
RESTART_CONTEXT = 24
# The stability rule's window (streaming.decoding): the last this many emitted tokens are scored again on every chunk,
# older ones are committed; the paper's value (docs/decisions/stability-window.md)
N_CHECK = 2


class CausalStreamingEngine:
    lookahead_ms = 12.5

    def __init__(self, model, chunk_ms: int = 300, tau0_ms: int = 600, *, decoder: DecoderFactory | None = None,
                 cache_policy: CachePolicy = "exact", beam_size: int | None = None, pad_silence: bool = False,
                 int8_vocab: bool = True, tokenizer=None, flush_ms: int = FLUSH_MS,
                 restart_words: int = RESTART_WORDS) -> None:
        """`beam_size` None/1: greedy (Algorithm 1), else streaming beam search (Algorithm 2).
        `cache_policy` / `int8_vocab`: the decoder's speed trade-offs (decoding.py, textdecoder.py); "exact" by
        default: it is the computation the stability rule is defined on, not an approximation of it ("reuse" is
        the served two-pass recognizer's: docs/decisions/two-pass-serving-compute.md).
        `pad_silence`: the decoder sees the frames heard so far followed by encoder frames of silence up to 30 s
        (textdecoder.CrossCache). Not a recognizer option: it lets the original weights (tests, speed benchmarks,
        no adapter) wait instead of restarting the sentence on partial audio.
        `flush_ms`: silence fed (in chunk-sized steps) when the stream ends, before the final step: a tuned model
        writes a word once it has heard its end *and a margin after it*, so a stream that ends right after its
        last word would otherwise lose that word (0 turns it off).
        `restart_words`: greedy decoding cuts a restart of that many words (0: off; streaming.decoding) said again
        from the last `RESTART_CONTEXT` words.
        `decoder`: another write policy than the stability rule, as a factory
        `(model, tokenizer, pad_frames, int8_vocab) -> decoder` (e.g. `training.emma.decoding.emma_decoder(policy,
        t_emma)`): the engine knows the decoder interface (`new_state`, `update`, `hypothesis`), not the policies."""
        self.model = model
        self.chunk_ms = chunk_ms
        self.tau0_ms = tau0_ms
        if flush_ms < 0:
            raise ValueError(f"flush_ms must be ≥ 0, got {flush_ms}")
        self.flush_ms = flush_ms
        self.tokenizer = tokenizer or get_tokenizer(model.is_multilingual, num_languages=model.num_languages,
                                                    language="en", task="transcribe")
        self.encoder = CausalEncoder(model.encoder, chunk_ms, tau0_ms)
        self.frontend = StreamingLogMel(model.dims.n_mels)
        pad = self._silence_frames() if pad_silence else None
        self.decoder: StreamingDecoder
        if decoder is not None:
            self.decoder = decoder(model, self.tokenizer, pad, int8_vocab)
        elif beam_size and beam_size > 1:
            self.decoder = StreamingBeamDecoder(model, self.tokenizer, beam_size=beam_size, n_check=N_CHECK,
                                                pad_frames=pad, int8_vocab=int8_vocab)
        else:
            self.decoder = StreamingGreedyDecoder(model, self.tokenizer, n_check=N_CHECK, cache_policy=cache_policy,
                                                  pad_frames=pad, int8_vocab=int8_vocab, restart_words=restart_words,
                                                  restart_context=RESTART_CONTEXT)
        self.reset()

    @torch.inference_mode()
    def _silence_frames(self) -> torch.Tensor:
        """This encoder's output for 30 s of silence: [n_audio_ctx, d], computed once per engine."""
        n = self.model.dims.n_audio_ctx
        mel = causal_log_mel(np.zeros(n * 320, dtype=np.float32), self.model.dims.n_mels, pad_end=True)[:, : 2 * n]
        return self.encoder(mel[None])[0]

    def reset(self) -> None:
        self.frontend.reset()
        self.enc_state = self.encoder.new_state()
        self.dec_state = self.decoder.new_state()

    @torch.inference_mode()
    def feed(self, samples: np.ndarray) -> Hypothesis:
        mel = self.frontend.feed(samples)
        frames = self.encoder.stream(self.enc_state, mel)
        if frames.shape[0]:
            self.decoder.update(self.dec_state, frames)
        return self.decoder.hypothesis(self.dec_state)

    @torch.inference_mode()
    def finish(self) -> Hypothesis:
        if self.flush_ms:
            step = round(16 * self.chunk_ms)  # 16 samples per ms
            # never past the encoder's 30 s context (a stream that long ends with what it has)
            room = (2 * self.enc_state.max_frames - 2) * 160 - self.frontend.samples_in  # 2 mel frames / frame
            # one step of whole chunks, not one per chunk: the decoder answers once for all of them
            # (docs/decisions/end-of-stream-flush.md)
            steps = min(math.ceil(self.flush_ms / self.chunk_ms), max(0, room) // step)
            if steps:
                self.feed(np.zeros(step * steps, dtype=np.float32))
        frames = [self.encoder.stream(self.enc_state, self.frontend.finish()), self.encoder.flush(self.enc_state)]
        self.decoder.update(self.dec_state, torch.cat([f for f in frames if f.numel()] or frames[:1]), final=True)
        return self.decoder.hypothesis(self.dec_state)
