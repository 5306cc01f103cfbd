"""Streaming greedy decoding with the stability rule (CarelessWhisper/WhisperRT, Definition 1, Algorithm 1).

On every new chunk the last `n_check` emitted tokens are re-scored against the longer audio. A token
stays if its probability did not drop since it was last scored (eq. 18) or it is still the argmax
(eq. 19); at the first token that fails, the hypothesis is cut and greedy decoding resumes there.
EOT means "wait for more audio": it is never appended (until the stream has ended).

Departures from the paper's public code, on purpose:
- probabilities are compared as log-softmax values, not raw logits (a raw logit can rise while the
  token's probability falls, when every logit rises);
- no SuppressBlank at every position (which forced a token on silence at stream start): only the
  first position suppresses a bare space, and EOT stays allowed there (offline Whisper suppresses it,
  which forces a word out of silence);
- prompt offsets come from the tokenizer's SOT sequence, not hard-coded 3/4;
- tokens older than the last `n_check` are never re-scored, so they are *committed*; a word is
  committed once all its tokens are and the token after it starts a new word;
- a *restart* is cut like a loop (`restart_words`): at the edge of the audio it has heard, a causal model often says
  a run of words of its own transcript again instead of waiting; only the last `n_check` tokens are re-scored, so
  without the cut every restart would be committed (docs/decisions/restart-cut.md).

Decoder self-attention cache (`cache_policy`):
- "exact": every new chunk re-runs the decoder over the whole token prefix once (this pass also
  yields the stability scores), so every cached key/value reflects the current audio;
- "reuse": keys/values of tokens older than the checked window are kept from the chunk that
  computed them (stale against the new audio: the approximation the paper discusses, section V-D);
  only the checked window and new tokens are recomputed (docs/decisions/decoder-cache-policy.md).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Literal

import torch
from torch import Tensor

from streaming.events import Hypothesis, restart_at
from streaming.textdecoder import CachedTextDecoder, DecoderCache

CachePolicy = Literal["exact", "reuse"]


def suppressed_tokens(tokenizer) -> list[int]:
    """Tokens greedy decoding must never emit: specials (but EOT), timestamps, non-speech symbols."""
    specials = {tokenizer.sot, tokenizer.sot_prev, tokenizer.sot_lm, tokenizer.no_timestamps,
                tokenizer.transcribe, tokenizer.translate}
    if tokenizer.no_speech is not None:
        specials.add(tokenizer.no_speech)
    specials.update(tokenizer.non_speech_tokens)
    return sorted(specials)


@dataclass
class GreedyState:
    tokens: list[int] = field(default_factory=list)  # emitted text tokens (no SOT prefix, no EOT)
    logprobs: list[float] = field(default_factory=list)  # log P of each token when last scored
    cache: DecoderCache | None = None
    ended: bool = False
    committed: int = 0  # leading tokens that can never change again


class StreamingDecoderBase:
    """What greedy and beam streaming decoding share: prompt, token filters, cached forward."""

    # Offline Whisper drops a segment whose <|nospeech|> probability (at the SOT position) exceeds 0.6;
    # before the first word, streaming decoding treats that as "wait for more audio" (so silence emits
    # nothing, not Whisper's habitual "you").
    no_speech_threshold: float = 0.6

    # Speech runs at most ~6 tokens/s; a hypothesis far ahead of that is a repetition loop of a model
    # that sees too little audio. While streaming, the token count is capped at this rate.
    max_tokens_per_s: float = 12.0

    def __init__(self, model, tokenizer, n_check: int = 2, max_tokens_per_chunk: int = 28,
                 pad_frames: Tensor | None = None, int8_vocab: bool = False) -> None:
        if n_check < 1:
            raise ValueError("n_check must be >= 1")
        self.tokenizer = tokenizer
        self.decoder = CachedTextDecoder(model.decoder, int8_vocab=int8_vocab)
        self.prefix = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
        self.n_check = n_check
        self.max_tokens_per_chunk = max_tokens_per_chunk
        self.max_tokens = self.decoder.n_ctx // 2 - len(self.prefix)  # whisper's sample_len
        vocab = model.decoder.token_embedding.weight.shape[0]
        self.suppress = torch.zeros(vocab, dtype=torch.bool)
        self.suppress[suppressed_tokens(tokenizer)] = True
        self.blank = tokenizer.encode(" ")
        # encoder frames of silence for the positions not heard yet (see textdecoder.CrossCache)
        with torch.no_grad():  # a constant: no gradient ever flows into the silence pad
            self.pad = None if pad_frames is None else self.decoder.project_audio(pad_frames.clone())

    def _logprobs(self, logits: Tensor, position: int) -> Tensor:
        """Filtered log-probabilities of the token at text position `position` (0 = first)."""
        logits = logits.masked_fill(self.suppress, float("-inf"))
        if position == 0:  # a bare space cannot start a text; EOT can (it means "nothing yet")
            logits = logits.clone()
            logits[self.blank] = float("-inf")
        return torch.log_softmax(logits, dim=-1)

    def _token_budget(self, cache: DecoderCache, n_tokens: int, final: bool) -> int:
        if final:
            return self.max_tokens - n_tokens
        rate_cap = int(cache.audio_frames / 50 * self.max_tokens_per_s) + 2  # 50 encoder frames per second
        return max(0, min(self.max_tokens_per_chunk, rate_cap - n_tokens, self.max_tokens - n_tokens))

    @staticmethod
    def repeated_tail(tokens: list[int], times: int = 3, max_ngram: int = 12) -> int:
        """Length of a trailing n-gram that occurs `times` times in a row at the end, else 0.

        A model that sees too little audio (or was never trained to stream) falls into loops
        ("printing in the only sense, printing in the only sense, …"); offline Whisper catches them
        with its compression-ratio fallback, streaming decoding catches them here.
        """
        for n in range(1, max_ngram + 1):
            if len(tokens) < n * times:
                break
            tail = tokens[-n:]
            if all(tokens[-n * (k + 1) : len(tokens) - n * k] == tail for k in range(1, times)):
                return n
        return 0

    def _run(self, cache: DecoderCache, tokens: list[int], offset: int, logit_rows: int | None = None) -> Tensor:
        ids = torch.tensor([tokens], dtype=torch.long)
        return self.decoder.forward(cache, ids, offset, logit_rows)[0]


class StreamingGreedyDecoder(StreamingDecoderBase):
    def __init__(self, model, tokenizer, n_check: int = 2, cache_policy: CachePolicy = "exact",
                 max_tokens_per_chunk: int = 28, pad_frames: Tensor | None = None, int8_vocab: bool = False,
                 restart_words: int = 0, restart_context: int = 24) -> None:
        """`restart_words`: open words that say again this many words in a row of the last `restart_context`
        words are cut, from the first of them, and decoding waits for more audio (0: off; module docstring).
        `max_tokens_per_chunk`: new tokens per chunk at most; `pad_frames`: encoder frames of silence for the
        positions not heard yet (see `textdecoder.CrossCache`)."""
        super().__init__(model, tokenizer, n_check, max_tokens_per_chunk, pad_frames, int8_vocab)
        if restart_words < 0 or restart_context < 0:
            raise ValueError(f"restart_words and restart_context must be >= 0, got {restart_words}, {restart_context}")
        self.cache_policy = cache_policy
        self.restart_words, self.restart_context = restart_words, restart_context

    def new_state(self) -> GreedyState:
        return GreedyState(cache=self.decoder.new_cache(pad=self.pad))

    def update(self, state: GreedyState, new_frames: Tensor, *, final: bool = False) -> None:
        """Consume new encoder frames [n, d] (possibly none at the end of stream) and decode."""
        assert state.cache is not None
        self.decoder.append_audio(state.cache, new_frames)
        if state.ended or state.cache.audio_frames == 0:
            return
        p = len(self.prefix)
        seq = self.prefix + state.tokens
        # stability check of the last n_check tokens, oldest first (Algorithm 1, lines 9-15);
        # logits are needed only for them and for the next token: row r predicts position checked_from + r
        checked_from = max(state.committed, len(state.tokens) - self.n_check)
        if self.cache_policy == "reuse" and state.tokens:
            # keep the cached keys/values before the first checked token's input; re-run from there
            start = min(p - 1 + checked_from, state.cache.length)
        else:
            start = 0
        rows = len(state.tokens) - checked_from + 1
        if not state.tokens and self.tokenizer.no_speech is not None:
            logits = self._run(state.cache, seq[start:], start, logit_rows=rows + p - 1)
            no_speech = torch.softmax(logits[0], dim=-1)[self.tokenizer.no_speech]  # row 0: the SOT position
            if float(no_speech) > self.no_speech_threshold:
                self._close_chunk(state, final)
                return
            logits = logits[p - 1 :]
        else:
            logits = self._run(state.cache, seq[start:], start, logit_rows=rows)
        for pos in range(checked_from, len(state.tokens)):
            lp = self._logprobs(logits[pos - checked_from], pos)
            token = state.tokens[pos]
            now = float(lp[token])
            if now >= state.logprobs[pos] or int(lp.argmax()) == token:
                state.logprobs[pos] = now
                continue
            del state.tokens[pos:], state.logprobs[pos:]
            state.cache.truncate(p + pos)
            break
        n = len(state.tokens)
        next_lp = self._logprobs(logits[n - checked_from], n)
        for _ in range(self._token_budget(state.cache, len(state.tokens), final)):
            token = int(next_lp.argmax())
            if token == self.tokenizer.eot:
                break
            state.tokens.append(token)
            state.logprobs.append(float(next_lp[token]))
            if loop := self.repeated_tail(state.tokens):
                keep = max(state.committed, len(state.tokens) - loop)
                del state.tokens[keep:], state.logprobs[keep:]
                state.cache.truncate(p + keep)
                break
            row = self._run(state.cache, [token], p + len(state.tokens) - 1)[0]
            next_lp = self._logprobs(row, len(state.tokens))
        if self.restart_words:
            self._cut_restart(state, state.committed, self.restart_words, self.restart_context)
        self._close_chunk(state, final)

    def _cut_restart(self, state: GreedyState, start: int, n: int, context: int) -> None:
        """Cut the open tokens (from ``start`` on) from the first word of a run of ``n`` words that the ``context``
        words before them already hold (never a token before ``start``)."""
        groups = word_tokens(self.tokenizer, state.tokens)
        words = [self.tokenizer.decode(g) for g in groups]
        ends = list(accumulate(len(g) for g in groups))  # each word's end, in tokens
        first = bisect_right(ends, start)  # the first word with a token at or past `start`
        j = restart_at(words[:first], words[first:], n, context)
        if first + j == len(groups):
            return
        keep = max(start, [0, *ends][first + j])
        del state.tokens[keep:], state.logprobs[keep:]
        assert state.cache is not None
        state.cache.truncate(len(self.prefix) + keep)

    def _close_chunk(self, state: GreedyState, final: bool) -> None:
        state.ended = final
        # Only the last n_check tokens are ever re-checked: everything before them is final.
        state.committed = len(state.tokens) if final else max(state.committed, len(state.tokens) - self.n_check)

    def hypothesis(self, state: GreedyState) -> Hypothesis:
        return split_words(self.tokenizer, state.tokens, state.committed, final=state.ended)


def word_tokens(tokenizer, tokens: list[int]) -> list[list[int]]:
    """The tokens of each word: a new word starts where a token starts with a space."""
    groups: list[list[int]] = []
    for t in tokens:
        if not groups or tokenizer.decode([t]).startswith(" "):
            groups.append([])
        groups[-1].append(t)
    return groups


def split_words(tokenizer, tokens: list[int], n_committed: int, final: bool = False) -> Hypothesis:
    """Words of a token sequence, split where a token starts with a space.

    A word is committed when all its tokens are committed and so is the token that starts the next
    word: until then a committed "most" could still become "most," (a punctuation token continues
    the word). At the end of the stream (`final`) every word is committed.
    """
    groups = word_tokens(tokenizer, tokens)
    starts = [0]
    for group in groups:
        starts.append(starts[-1] + len(group))
    committed: list[str] = []
    tentative: list[str] = []
    for g, group in enumerate(groups):
        text = tokenizer.decode(group).strip()
        if not text:
            continue
        closed = final or (g + 1 < len(groups) and starts[g + 1] < n_committed)
        (committed if closed and not tentative else tentative).append(text)
    return Hypothesis(tuple(committed), tuple(tentative))
