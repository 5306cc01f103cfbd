"""Streaming beam search with the stability rule (CarelessWhisper/WhisperRT, Definition 3, Algorithm 2).

Beams persist across chunks. On a new chunk every beam is re-scored over its whole prefix against the
longer audio (one decoder pass per beam, which also refreshes its self-attention cache); each of its
last `n_check` tokens is stable iff it is still among the top-b tokens at its position (Def. 3), and
the beam is cut at the first unstable one. Beam scores are sums of token log-probabilities, the
re-checked tokens' taken on the current audio (the public code re-sums every token with an off-by-one
that drops one; not repeated here).
Then ordinary beam steps run until EOT enters the top-b candidates ("wait for more audio").

Shown hypothesis: the best beam by length-normalised score (whisper's MaximumLikelihoodRanker with no
length penalty). Committed: the tokens every beam agrees on, older than the best beam's last n_check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor

from streaming.decoding import StreamingDecoderBase, split_words
from streaming.events import Hypothesis
from streaming.textdecoder import DecoderCache


@dataclass
class Beam:
    tokens: list[int]
    cache: DecoderCache
    token_logprobs: list[float] = field(default_factory=list)
    next_logprobs: Tensor | None = None  # log P of the token after `tokens`, current audio

    @property
    def score(self) -> float:
        return sum(self.token_logprobs)

    def ranked(self) -> float:
        return self.score / max(1, len(self.tokens))


@dataclass
class BeamState:
    beams: list[Beam]
    shared: DecoderCache  # holds the cross-attention keys/values all beams read
    finished: list[Beam] = field(default_factory=list)
    ended: bool = False
    committed: int = 0  # tokens committed so far (never decreases)


class StreamingBeamDecoder(StreamingDecoderBase):
    def __init__(self, model, tokenizer, beam_size: int = 5, n_check: int = 2,
                 max_tokens_per_chunk: int = 28, pad_frames: Tensor | None = None, int8_vocab: bool = False) -> None:
        super().__init__(model, tokenizer, n_check, max_tokens_per_chunk, pad_frames, int8_vocab)
        self.beam_size = beam_size

    def new_state(self) -> BeamState:
        shared = self.decoder.new_cache(pad=self.pad)
        return BeamState([Beam([], shared.copy())], shared)

    def _rescore(self, beam: Beam) -> None:
        """Re-run the beam's prefix on the current audio; apply Def. 3 to its last n_check tokens.

        Those tokens (and the next) get their current log-probabilities; older tokens keep the ones
        they were scored with (projecting every row onto the vocabulary per chunk costs too much)."""
        p = len(self.prefix)
        checked_from = max(0, len(beam.tokens) - self.n_check)
        logits = self._run(beam.cache, self.prefix + beam.tokens, 0, logit_rows=len(beam.tokens) - checked_from + 1)
        lps = [self._logprobs(logits[pos - checked_from], pos) for pos in range(checked_from, len(beam.tokens) + 1)]
        cut = len(beam.tokens)
        for pos in range(checked_from, len(beam.tokens)):
            if beam.tokens[pos] not in lps[pos - checked_from].topk(self.beam_size).indices.tolist():
                cut = pos
                break
        beam.tokens = beam.tokens[:cut]
        beam.cache.truncate(p + cut)
        beam.token_logprobs = beam.token_logprobs[:checked_from] + [
            float(lps[pos - checked_from][beam.tokens[pos]]) for pos in range(checked_from, cut)]
        beam.next_logprobs = lps[cut - checked_from]

    def _extend(self, parent: Beam, token: int, logprob: float) -> Beam:
        cache = parent.cache.copy()
        child = Beam(parent.tokens + [token], cache, parent.token_logprobs + [logprob])
        row = self._run(cache, [token], len(self.prefix) + len(parent.tokens))[0]
        child.next_logprobs = self._logprobs(row, len(child.tokens))
        return child

    def update(self, state: BeamState, new_frames: Tensor, *, final: bool = False) -> None:
        self.decoder.append_audio(state.shared, new_frames)
        if state.ended or state.shared.audio_frames == 0:
            return
        for beam in state.beams:
            self._rescore(beam)
        unique: dict[tuple[int, ...], Beam] = {}
        for beam in sorted(state.beams, key=lambda b: -b.score):
            unique.setdefault(tuple(beam.tokens), beam)
        state.beams = list(unique.values())
        eot = self.tokenizer.eot
        longest = max(len(b.tokens) for b in state.beams)
        for _ in range(self._token_budget(state.shared, longest, final)):
            candidates = []
            for beam in state.beams:
                assert beam.next_logprobs is not None
                top = beam.next_logprobs.topk(self.beam_size + 1)
                candidates += [(beam.score + float(lp), beam, int(t), float(lp)) for lp, t in zip(top.values, top.indices)]
            candidates.sort(key=lambda c: -c[0])
            chosen = candidates[: self.beam_size]
            if not final and any(t == eot for _, _, t, _ in chosen):
                break  # EOT among the top-b: wait for more audio (Algorithm 2, line 24)
            survivors = []
            for _, beam, token, lp in candidates:
                if token == eot:
                    state.finished.append(Beam(beam.tokens, beam.cache, beam.token_logprobs + [lp]))
                elif len(survivors) < self.beam_size and len(beam.tokens) < self.max_tokens:
                    survivors.append(self._extend(beam, token, lp))
                if len(survivors) >= self.beam_size or (final and len(state.finished) >= self.beam_size):
                    break
            state.beams = survivors
            if not survivors or (final and len(state.finished) >= self.beam_size):
                break
        if final:
            state.ended = True

    def best(self, state: BeamState) -> Beam:
        pool = state.finished if state.ended and state.finished else state.beams
        return max(pool, key=Beam.ranked)

    def hypothesis(self, state: BeamState) -> Hypothesis:
        best = self.best(state)
        if state.ended:
            return split_words(self.tokenizer, best.tokens, len(best.tokens), final=True)
        # Any beam may still cut its own last n_check tokens: commit only what lies before all of those.
        common = min(len(b.tokens) for b in state.beams) - self.n_check
        for beam in state.beams:
            n = 0
            while n < min(len(beam.tokens), common) and beam.tokens[n] == best.tokens[n]:
                n += 1
            common = n
        state.committed = max(state.committed, common, 0)
        return split_words(self.tokenizer, best.tokens, min(state.committed, len(best.tokens)))
