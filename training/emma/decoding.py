"""Streaming decoding under the EMMA read/write policy (WhisperEMMA Algorithm 1, SeamlessStreaming's decision).

On each new chunk the pending prediction (the last token's row) is recomputed against the longer audio; then,
token by token: the greedy candidate is written while the write probability, min over all layers and heads of
p_choose(s_{i-1}, h_frontier), is ≥ ``t_emma``; below it the decoder reads (waits for the next chunk). After
``max_stall`` consecutive chunks of reading, one token is forced out and the count restarts. Written tokens are
final: EMMA never retracts, so every written word is committed once the next word has started.

Where this differs from the public code, on purpose (../shared/research/emma.md §2.7, §2.10):
- p is read at the real audio frontier (the last encoder frame heard), not at a padded frame or a mean over all;
- the stall counter restarts after any write (forced or not), so it counts *consecutive* reads (the paper's
  Algorithm 1 restarts it on forced writes only, and WhisperEMMA's code never does);
- EOT from the model before the end of the stream means "wait" (as in the stability decoder), not a reset;
- the final flush is bounded (the decoder's token budget) and a write that would make a 3-fold repetition is
  turned into a read (the stability decoder cuts loops by rolling back, which EMMA cannot do).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor

from training.emma.p_choose import EmmaPolicy
from streaming.decoding import StreamingDecoderBase, split_words
from streaming.events import Hypothesis
from streaming.textdecoder import DecoderCache


@dataclass
class EmmaState:
    tokens: list[int] = field(default_factory=list)
    cache: DecoderCache | None = None
    frontier_keys: list[Tensor] | None = None  # per layer: p_choose keys of the last frame heard, [1, H, 1, d_head]
    stall: int = 0
    ended: bool = False
    reads: int = 0  # chunks that ended in a policy read
    forced: int = 0  # writes forced by the stall limit
    last_p: float | None = None


class EmmaStreamingDecoder(StreamingDecoderBase):
    def __init__(self, model, tokenizer, policy: EmmaPolicy, t_emma: float = 0.3, max_stall: int = 3,
                 decision: str = "min",
                 max_tokens_per_chunk: int = 28, pad_frames: Tensor | None = None, int8_vocab: bool = False) -> None:
        super().__init__(model, tokenizer, n_check=1, max_tokens_per_chunk=max_tokens_per_chunk,
                         pad_frames=pad_frames, int8_vocab=int8_vocab)
        if not 0 < t_emma < 1:
            raise ValueError(f"t_emma must be in (0, 1), got {t_emma}")
        self.policy = policy.eval()
        if decision not in ("min", "mean"):
            raise ValueError(f"decision must be 'min' or 'mean', got {decision!r}")
        self.t_emma, self.max_stall, self.decision = t_emma, max_stall, decision

    def new_state(self) -> EmmaState:
        return EmmaState(cache=self.decoder.new_cache(pad=self.pad))

    def write_probability(self, states: list[Tensor], frontier_keys: list[Tensor]) -> float:
        """min (or mean) over layers and heads of p_choose at the frontier frame."""
        p = torch.sigmoid(torch.cat([layer.logits(s, k).flatten() for layer, s, k in
                                     zip(self.policy.layers, states, frontier_keys, strict=True)]))
        return float(p.min() if self.decision == "min" else p.mean())

    def _step(self, cache: DecoderCache, tokens: list[int], offset: int, rows: int = 1) -> tuple[Tensor, list[Tensor]]:
        states: list[Tensor] = []
        ids = torch.tensor([tokens], dtype=torch.long)
        return self.decoder.forward(cache, ids, offset, rows, cross_states=states)[0], states

    def update(self, state: EmmaState, new_frames: Tensor, *, final: bool = False) -> None:
        assert state.cache is not None
        self.decoder.append_audio(state.cache, new_frames)
        if new_frames.numel():
            last = new_frames[-1:].unsqueeze(0)
            state.frontier_keys = [layer.keys(last) for layer in self.policy.layers]
        if state.ended or state.cache.audio_frames == 0:
            return
        p = len(self.prefix)
        seq = self.prefix + state.tokens
        if state.tokens:  # the pending prediction, against the audio heard now
            logits, states = self._step(state.cache, seq[-1:], len(seq) - 1)
        else:
            logits, states = self._step(state.cache, seq, 0, rows=p)
            if self.tokenizer.no_speech is not None and not final:
                no_speech = torch.softmax(logits[0], dim=-1)[self.tokenizer.no_speech]
                if float(no_speech) > self.no_speech_threshold:
                    return  # nothing said yet: not a policy decision, the stall count stays
        next_lp = self._logprobs(logits[-1], len(state.tokens))
        for _ in range(self._token_budget(state.cache, len(state.tokens), final)):
            token = int(next_lp.argmax())
            if token == self.tokenizer.eot:
                break
            forced = False
            if not final:
                state.last_p = self.write_probability(states, state.frontier_keys)
                if state.last_p < self.t_emma:
                    if state.stall < self.max_stall:
                        state.stall += 1
                        state.reads += 1
                        break
                    forced = True
            if self.repeated_tail([*state.tokens, token]):
                break
            state.tokens.append(token)
            state.stall = 0
            logits, states = self._step(state.cache, [token], p + len(state.tokens) - 1)
            next_lp = self._logprobs(logits[-1], len(state.tokens))
            if forced:  # one forced token, then wait for audio again
                state.forced += 1
                break
        state.ended = final

    def hypothesis(self, state: EmmaState) -> Hypothesis:
        return split_words(self.tokenizer, state.tokens, len(state.tokens), final=state.ended)


def emma_decoder(policy: EmmaPolicy, t_emma: float = 0.3, max_stall: int = 3, decision: str = "min"):
    """A decoder factory for ``CausalStreamingEngine(decoder=…)``: EMMA's read/write policy instead of the
    stability rule."""

    def make(model, tokenizer, pad_frames: Tensor | None, int8_vocab: bool) -> EmmaStreamingDecoder:
        return EmmaStreamingDecoder(model, tokenizer, policy, t_emma=t_emma, max_stall=max_stall, decision=decision,
                                    pad_frames=pad_frames, int8_vocab=int8_vocab)

    return make
