"""The two-pass recognizer's verifier: the original weights transcribe the audio heard so far after a forced prefix
of final words (``streaming.second_pass`` decides what becomes final and what is shown).

A pass stops at a loop, and asks the audio where a repeating tail is speech and where it is Whisper filling the
padding (``Verifier._held``, docs/decisions/spoken-repeats.md); it cuts an echo of the final words
(``Verifier._echo``) and a restatement the audio holds once (``Verifier._restated``, docs/decisions/repeat-guard.md);
and it keeps, per word, the lowest probability the greedy decoder gave any of its tokens (``VerifierWords.probs``),
which tells the partials which open words the next pass is likely to change.

Not thread-safe: a pass keeps its encoder frames for :meth:`Verifier.word_ends`; one verifier per stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from whisper.tokenizer import get_tokenizer

from streaming.decoding import StreamingDecoderBase, word_tokens
from streaming.encoder import CausalEncoder
from streaming.events import SAMPLE_RATE, norm_word
from streaming.hush.transcribe import condition_mel
from streaming.word_times import FRAMES_PER_S, word_ends_s

# Whisper's previous-text context holds up to 223 tokens; the last sentence or two is what helps, and every prompt
# token is decoded again at each pass
PROMPT_TOKENS = 96
# a repeating tail is a loop when its words pile up at the audio's end (see Verifier._held); checked again every
# LOOP_CHECK_TOKENS tokens while the repeats advance
PILE_UP_WORDS, PILE_UP_S, LOOP_CHECK_TOKENS = 3, 0.06, 16
ECHO_ADVANCE_S = 0.1  # a word copying the final tail is spoken when it ends this much after it (Verifier._echo)
# a phrase of RESTATED_WORDS or more words said again right after itself is speech only where its second saying takes
# at least SPOKEN_SHARE of the first saying's time in the audio (Verifier._restated)
RESTATED_WORDS, SPOKEN_SHARE = 3, 0.5


def restatement(keys: list[str], start: int, min_words: int = RESTATED_WORDS) -> tuple[int, int] | None:
    """The first phrase said twice in a row that reaches past ``start``: (where its second saying starts, its
    length in words), or None. ``keys``: normalized words; the first ``start`` of them are final already, so a repeat
    wholly inside them is not this pass's to judge. Empty keys (punctuation alone) never match."""
    for copy in range(min_words, len(keys) - min_words + 1):
        for n in range(min_words, min(copy, len(keys) - copy) + 1):
            if copy + n > start and all(keys[copy - n : copy]) and keys[copy - n : copy] == keys[copy : copy + n]:
                return copy, n
    return None


def one_copy(tokens: list[int]) -> int:
    """How many tokens to keep of ``tokens`` so that its repeating tail is said once ("keb-f-f-f-f" → "keb-f")."""
    n = len(tokens)
    while (unit := StreamingDecoderBase.repeated_tail(tokens[:n], times=2)) and n > unit:
        n -= unit
    return n


def spoken_again(ends: list[float], copy: int, n: int, origin: float = 0.0) -> bool:
    """Whether the second saying of ``keys[copy - n : copy]`` (:func:`restatement`) takes the audio a speaker needs:
    at least ``SPOKEN_SHARE`` of the first saying's time, by where each word ends (``ends``, seconds; ``origin``:
    where the audio before the first word ends). Whisper saying a phrase again that the audio holds once squeezes
    the copy into what is left after it: into the audio's end, or onto the words already final."""
    first_start = ends[copy - n - 1] if copy - n > 0 else origin
    first = ends[copy - 1] - first_start
    second = ends[copy + n - 1] - ends[copy - 1]
    return second >= SPOKEN_SHARE * first


def echo_length(final: list[int], new: list[int]) -> int:
    """How many leading tokens of ``new`` copy the end of ``final``, block after block ("repeat" → "repeat repeat").

    With the final words forced as its prefix, Whisper sometimes answers a short clip by saying its last words
    again; real speech that repeats a word right at a final/partial boundary is much rarer than that echo."""
    cut = 0
    while cut < len(new):
        k = next((k for k in range(min(len(final), len(new) - cut), 0, -1)
                  if new[cut : cut + k] == final[len(final) - k :]), 0)
        if not k:
            break
        cut += k
    return cut


@dataclass
class VerifierWords:
    """A verifier hypothesis past the final words: its words, each word's tokens, and each word's lowest token
    probability under the greedy decoder (empty: not known, e.g. a scripted verifier; read as certain)."""

    words: list[str] = field(default_factory=list)
    tokens: list[list[int]] = field(default_factory=list)
    probs: list[float] = field(default_factory=list)

    def confident(self, min_prob: float) -> int:
        """How many leading words have every token at ``min_prob`` or more."""
        return next((i for i, p in enumerate(self.probs) if p < min_prob), len(self.words))


class Verifier:
    """The original weights on (audio ⊕ padding), decoding greedily after a forced prefix of final tokens.

    ``condition``: the padding of mid-stream passes (``streaming.hush.transcribe.condition_mel``: "hush" needs
    ``hush``); ``max_tokens_per_s``: a pass's token budget per second of audio."""

    def __init__(self, model, hush: np.ndarray | None, condition: str = "hush", max_tokens_per_s: float = 12.0,
                 final_condition: str | None = None):
        """``final_condition``: the padding of the end-of-stream pass (default ``condition``); it runs once per
        utterance and decides every open word, so an offline padding there is affordable
        (docs/decisions/last-pass-padding.md)."""
        final_condition = final_condition or condition
        if hush is None and "hush" in (condition, final_condition):
            raise ValueError("the verifier's 'hush' condition needs a hush word (or condition='zeros_5s' / 'pad30')")
        self.model, self.hush, self.condition, self.final_condition = model, hush, condition, final_condition
        self.tokenizer = get_tokenizer(model.is_multilingual, num_languages=model.num_languages, language="en",
                                       task="transcribe")
        self.base = StreamingDecoderBase(model, self.tokenizer, int8_vocab=False)
        self.encoder = CausalEncoder(model.encoder, 20, 20, exact=False)  # mask=None: Whisper's own encoder
        self.max_tokens_per_s = max_tokens_per_s

    @torch.inference_mode()
    def __call__(self, audio: np.ndarray, final_tokens: list[int], last: bool = False,
                 prompt: list[int] | None = None) -> VerifierWords:
        """The words past ``final_tokens``; ``last``: the end-of-stream pass (under ``final_condition``);
        ``prompt``: the text before ``audio`` (tokens), as Whisper's previous-text context."""
        mel = condition_mel(self.model, audio, self.final_condition if last else self.condition, self.hush)
        frames = self.encoder(mel[None].to(next(self.model.parameters()).dtype), mask=None)[0]
        self.frames, self.audio_frames = frames, len(audio) // (SAMPLE_RATE // FRAMES_PER_S)  # for word_ends
        base = self.base
        cache = base.decoder.new_cache(n_audio_ctx=frames.shape[0])  # this pass's frames: no 30 s buffers
        base.decoder.append_audio(cache, frames)
        context = [self.tokenizer.sot_prev, *prompt[-PROMPT_TOKENS:]] if prompt else []
        seq = context + base.prefix + final_tokens
        row = base._run(cache, seq, 0, logit_rows=1)[-1]
        new: list[int] = []
        probs: list[float] = []  # each token's probability (the loop and pile-up cuts only shorten ``new``)
        budget = int(len(audio) / SAMPLE_RATE * self.max_tokens_per_s) + 4 - len(final_tokens)
        check_at = None  # once a loop shows: where the audio is next asked whether it holds the repeats
        for _ in range(max(0, min(budget, base.max_tokens - len(final_tokens)))):
            logprobs = base._logprobs(row, len(final_tokens) + len(new))
            token = int(logprobs.argmax())
            if token == self.tokenizer.eot:
                break
            new.append(token)
            probs.append(float(logprobs[token].exp()))
            if check_at is None and (loop := base.repeated_tail(new)):
                if not last:
                    del new[len(new) - loop :]
                    break
                check_at = len(new)
            if check_at is not None and len(new) >= check_at:
                if (held := self._held(final_tokens, new)) is not None:
                    del new[held:]
                    break
                check_at = len(new) + LOOP_CHECK_TOKENS
            row = base._run(cache, [token], len(seq) + len(new) - 1)[0]
        else:  # the token budget ran out inside a loop
            if check_at is not None and (held := self._held(final_tokens, new)) is not None:
                del new[held:]
            elif check_at is not None:
                # the repeats outran the audio without piling up as words: a loop inside one word ("keb-f-f-f..."),
                # which no word-level test sees. The budget is more than the audio can say, so one copy is kept
                del new[one_copy(new):]
        if (keep := self._restated(final_tokens, new)) is not None:
            del new[keep:]
        cut = self._echo((prompt or []) + final_tokens, final_tokens, new)
        return self._words(new[cut:], probs[cut : len(new)])

    def _restated(self, final_tokens: list[int], new: list[int]) -> int | None:
        """Where (tokens of ``new`` to keep) this pass starts saying again a phrase of ``RESTATED_WORDS`` or more words
        that the audio holds once (:func:`restatement`, :func:`spoken_again`), or None. Whisper fills what follows
        the audio (5 s of zeros, 30 s of padding, a hush word) by restating the sentence it just wrote, and the last
        pass ends there "X. X." where the speaker said X once; a list read aloud says its items in time of their
        own. Asked only where a phrase follows itself: the alignment costs a decoder pass."""
        done, groups = word_tokens(self.tokenizer, final_tokens), word_tokens(self.tokenizer, new)
        keys = [norm_word(self.tokenizer.decode(g)) for g in done + groups]
        found = restatement(keys, len(done))
        if found is None:
            return None
        copy, n = found
        if spoken_again(self.word_ends(done + groups), copy, n):
            return None
        start = max(copy, len(done)) - len(done)  # the restatement's first word among the new ones
        return sum(len(g) for g in groups[:start])

    def _echo(self, context: list[int], final_tokens: list[int], new: list[int]) -> int:
        """How many leading tokens of ``new`` are an echo of ``context`` (cut them), asked of the audio.

        ``echo_length`` finds the words that copy the final tail; repeated speech ("zero zero zero") copies it too.
        An echo re-says words whose audio is already spoken for, so the attention ends it where the last final word
        ends; a spoken repeat ends at least ``ECHO_ADVANCE_S`` later. The echo is the copied words up to the first
        that advances."""
        cut = echo_length(context, new)
        if not cut:
            return 0
        groups, ends, previous = self._new_word_ends(final_tokens, new)
        echoed = 0
        for group, end in zip(groups, ends):
            if echoed + len(group) > cut or end - previous >= ECHO_ADVANCE_S:
                break
            echoed, previous = echoed + len(group), end
        return echoed

    def _held(self, final_tokens: list[int], new: list[int]) -> int | None:
        """Where a repeating tail of ``new`` outruns the audio (tokens to keep), or None while it does not.

        A repeat is not a loop by itself: spoken repeats advance through the audio, a loop piles its surplus up at
        the audio's end (``PILE_UP_WORDS`` words ending within ``PILE_UP_S``); the first word of the pile is kept
        (the audio may end inside it). Asked in the last pass only: in a mid-stream pass Whisper spreads invented
        copies over the padding, where they do not pile up (docs/decisions/spoken-repeats.md)."""
        groups, ends, _ = self._new_word_ends(final_tokens, new)
        pile = next((k for k in range(len(ends), 0, -1) if ends[-1] - ends[-k] <= PILE_UP_S), 1)
        if pile < PILE_UP_WORDS:
            return None
        return sum(len(g) for g in groups[: len(groups) - pile + 1])

    def _new_word_ends(self, final_tokens: list[int], new: list[int]) -> tuple[list[list[int]], list[float], float]:
        """The words of ``new`` (token groups), where each ends in the last pass's audio, and where the last final
        word ends (0 without one): aligned after the final words, as they were decoded."""
        done, groups = word_tokens(self.tokenizer, final_tokens), word_tokens(self.tokenizer, new)
        ends = self.word_ends(done + groups)
        return groups, ends[len(done):], ends[len(done) - 1] if done else 0.0

    def word_ends(self, words: list[list[int]]) -> list[float]:
        """Where each word (token groups) ends in the audio of the last pass, in seconds."""
        return word_ends_s(self.model, self.tokenizer, self.frames, words, self.audio_frames)

    def _words(self, tokens: list[int], probs: list[float]) -> VerifierWords:
        groups = word_tokens(self.tokenizer, tokens)
        words = [self.tokenizer.decode(g).strip() for g in groups]
        starts = np.cumsum([0] + [len(g) for g in groups])
        lowest = [min(probs[a:b]) for a, b in zip(starts[:-1], starts[1:])]
        keep = [i for i, w in enumerate(words) if norm_word(w)]  # not "." alone (Whisper's answer to silence)
        return VerifierWords([words[i] for i in keep], [groups[i] for i in keep], [lowest[i] for i in keep])


__all__ = ["PROMPT_TOKENS", "Verifier", "VerifierWords", "echo_length", "one_copy", "restatement", "spoken_again"]
