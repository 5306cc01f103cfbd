"""Two-pass streaming: causal partials at once, finals confirmed by the original weights.

The causal engine (block-causal encoder + adapter) answers after every chunk, fast but less accurate on unseen
speech than offline Whisper. Every ``every_ms`` of audio, the *verifier* — the original weights, full attention —
transcribes the audio heard so far followed by the hush word (WhisperFlow: a learned 0.5 s segment that tells the
model the speech has ended, instead of 30 s of zero padding, so the encoder runs on the real length), with the
words already final forced as the decoder prefix. A word becomes **final** when it is the next word of

- the verifier's and the causal engine's hypotheses alike (two different models on the same audio agree) and not
  the last word of either (``hold_last``: audio cut inside a word makes both guess the same shorter words; on the
  real dev split this halved the two-pass WER, 24 → 12 %, for +0.3 s median final-word latency), or
- with ``self_agreement``, two consecutive verifier passes (LocalAgreement-2 on the verifier: covers words the
  causal model gets wrong), unless it is the last word of either pass (audio cut inside a word makes Whisper guess a
  shorter one). Off by default: chosen on the dev split (lower WER, higher latency).

A pass runs at most every ``every_ms`` and only when it can finalise something: a causal tail of at least two
words that changed since the last pass (on dev: same WER and latency, RTF 0.18 → 0.14 at every chunk of 300 ms).
The causal tail is aligned with the final words by words; when the final words hold a word the causal transcript
lacks, the tails one word either side are tried too, or the two would never agree again in that utterance.

At the end of the stream one last verifier pass over the whole utterance makes every remaining word final, so the
final transcript is the verifier's (offline accuracy) while the partials stay as fast as the causal engine.

Repeats are speech too ("zero zero zero", a list read aloud). A mid-stream pass stops at a repeating tail (three
copies in a row): it may be a loop, and waiting costs only latency. The last pass, which decides every word left,
keeps decoding and asks the audio: Whisper's cross-attention ends spoken repeats one after another, while a loop's
surplus piles up at the audio's end and is cut there (``Verifier._held``). Likewise words that copy the final
tail are an echo only where they end where the final words end (``Verifier._echo``). On the dev split's spoken-digit
streams this took the final WER from 93-98 % to 13-45 % (``benchmarks/results/selection/dev_repeats.md``).

``window_ms`` bounds what a pass costs: once the verifier's audio is longer than that, the audio of the words
already final is cut off (at the quietest point near the last final word's end, which the verifier's own
cross-attention gives: ``streaming.word_times``) and their text becomes the verifier's prompt (Whisper's
``<|startofprev|>`` context), so a pass encodes the words still open and a few seconds before them, however long
the segment has run. None: every pass re-encodes the whole segment (bounded by ``streaming.segmented`` alone).
Final words are ``Hypothesis.committed`` (never revised), and their latency is what the evaluation reports as word
latency. Partial words (``Hypothesis.tentative``) are what ``partials`` shows past them (``PARTIALS``); the finals
are the same whichever is shown:

- ``causal``: every causal word past the final words;
- ``committed``: the causal words its stability rule has committed (the causal engine will not change them; the
  verifier still may);
- ``agreed``: the causal words this step's and the previous step's causal hypotheses agree on (LocalAgreement-2 on
  what is shown: a word cut mid-way by the chunk boundary waits one chunk);
- ``verifier``: the last verifier pass's words that are not final yet (offline quality, up to ``every_ms`` old),
  then the agreed causal words past them;
- ``verifier-only``: the last verifier pass's words that are not final yet, nothing of the causal engine's;
- ``verifier-held``: the same but its last word, which the audio's edge may cut inside (as ``hold_last`` for finals).
- ``verifier-fresh``: ``verifier-held`` up to where the open words start saying again two words in a row that were
  already written (``restart_at``). A mid-stream pass hears the audio then 5 s of zeros, and Whisper often fills them
  by restarting the sentence ("produced, the | block book, produced the block book, produced"); the three-copy loop
  check stops only the third copy. On the dev split half the words ``verifier-held`` rewrote were such restarts:
  21.1 → 10.2 % rewritten, the first kept display no later (``benchmarks/results/selection/dev_partials_fresh.md``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

import numpy as np
import torch

from streaming.decoding import StreamingDecoderBase, word_tokens
from streaming.encoder import CausalEncoder
from streaming.events import SAMPLE_RATE, Hypothesis, norm_word, restart_at
from streaming.word_times import FRAMES_PER_S, quiet_cut, word_ends_s

# Whisper's previous-text context holds up to 223 tokens; the last sentence or two is what helps, and every prompt
# token is decoded again at each pass
PROMPT_TOKENS = 96
KEEP_S = 1.5  # the final words' audio a trimmed window keeps before the open words (see TwoPassStreaming._trim)
# a repeating tail is a loop when its words pile up at the audio's end (see Verifier._held); checked again every
# LOOP_CHECK_TOKENS tokens while the repeats advance
PILE_UP_WORDS, PILE_UP_S, LOOP_CHECK_TOKENS = 3, 0.06, 16
ECHO_ADVANCE_S = 0.1  # a word copying the final tail is spoken when it ends this much after it (Verifier._echo)
# what is shown past the final words (module docstring)
PARTIALS = ("causal", "committed", "agreed", "verifier", "verifier-only", "verifier-held", "verifier-fresh")
# ``restart_at`` for the shown partials: a restart re-says RESTART_WORDS words in a row from the last RESTART_CONTEXT
# words written. Chosen on half of the dev split: one word cut more rewrites (7.4 %) but a repeated "the" is common
# speech and hid a third of the partials; two cut the rate 20.6 → 9.8 % and kept most; three 11.8 %
RESTART_WORDS, RESTART_CONTEXT = 2, 12


def agreed(a: list[str], b: list[str]) -> int:
    """Length of the common prefix of two word lists, compared by :func:`norm_word`."""
    n = 0
    for x, y in zip(a, b):
        if norm_word(x) != norm_word(y) or not norm_word(x):
            break
        n += 1
    return n


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
class _Words:
    """A verifier hypothesis past the final words: its words and each word's tokens."""

    words: list[str] = field(default_factory=list)
    tokens: list[list[int]] = field(default_factory=list)


class Verifier:
    """The original weights on (audio ⊕ hush word), decoding greedily after a forced prefix of final tokens."""

    def __init__(self, model, hush: np.ndarray | None, condition: str = "hush", max_tokens_per_s: float = 12.0,
                 final_condition: str | None = None):
        """``final_condition``: the padding of the end-of-stream pass (default ``condition``). The last pass
        decides every word still pending, once per utterance, so Whisper's own 30 s padding ("pad30") there buys
        offline accuracy for the words the mid-stream passes left open at one long pass per utterance."""
        from whisper.tokenizer import get_tokenizer

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
                 prompt: list[int] | None = None) -> _Words:
        """The words past ``final_tokens``; ``last``: the end-of-stream pass (under ``final_condition``);
        ``prompt``: the text before ``audio`` (tokens), as Whisper's previous-text context."""
        from training.hush_word.transcribe import condition_mel

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
        budget = int(len(audio) / SAMPLE_RATE * self.max_tokens_per_s) + 4 - len(final_tokens)
        check_at = None  # once a loop shows: where the audio is next asked whether it holds the repeats
        for _ in range(max(0, min(budget, base.max_tokens - len(final_tokens)))):
            token = int(base._logprobs(row, len(final_tokens) + len(new)).argmax())
            if token == self.tokenizer.eot:
                break
            new.append(token)
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
        return self._words(new[self._echo((prompt or []) + final_tokens, final_tokens, new):])

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

        A repeat is not a loop by itself: cutting at the third copy (what the mid-stream passes and the streaming
        decoders do) lost 56 of 60 spoken digits on a dev stream. Spoken repeats advance through the audio; a loop
        piles its surplus up at the audio's end (``PILE_UP_WORDS`` words ending within ``PILE_UP_S``), and the
        first word of the pile is kept (the audio may end inside it). Asked in the last pass only: asked in the
        mid-stream passes too (5 s of zeros after the audio, where Whisper spreads invented copies over the
        spoken ones), a dev stream of 60 digits came out as 99 words."""
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

    def _words(self, tokens: list[int]) -> _Words:
        groups = word_tokens(self.tokenizer, tokens)
        words = [self.tokenizer.decode(g).strip() for g in groups]
        keep = [i for i, w in enumerate(words) if norm_word(w)]  # not "." alone (Whisper's answer to silence)
        return _Words([words[i] for i in keep], [groups[i] for i in keep])


class TwoPassStreaming:
    """A `StreamingRecognizer`: the verifier's finals, partials by ``partials`` (see the module docstring)."""

    def __init__(self, engine, verifier: Verifier, every_ms: int = 600, self_agreement: bool = False,
                 hold_last: bool = True, window_ms: int | None = None, partials: str = "causal",
                 verifier_restart_words: int = 0, verifier_restart_distinct: int = 1) -> None:
        if partials not in PARTIALS:
            raise ValueError(f"partials must be one of {PARTIALS}, got {partials!r}")
        self.partials = partials
        if every_ms <= 0:
            raise ValueError(f"every_ms must be > 0, got {every_ms}")
        if window_ms is not None and window_ms < 1000:
            raise ValueError(f"window_ms must be >= 1000 (or None: no trimming), got {window_ms}")
        self.window_ms = window_ms
        self.engine, self.verifier, self.every_ms = engine, verifier, every_ms
        # the last word of either hypothesis is never finalised mid-stream: audio cut inside a word makes both models
        # guess the same shorter words ("is a" for the start of "established"), and two models agreeing does not
        # protect against that; the word is finalised at the next pass, once both have heard past it
        self.hold_last = hold_last
        # also finalise on two consecutive verifier passes: on the real dev split (random-chunk adapter, 300 ms) it
        # halved the final-word latency (690 → 306 ms) but finalised more wrong words (WER 14.7 → 16.0 %); off
        self.self_agreement = self_agreement
        # a mid-stream pass finalises nothing from where its open words say again this many written words in a row
        # (``restart_at``; 0: off): two passes fill the 5 s of zeros by restarting the sentence alike, and
        # self-agreement made that final (dev: selection/dev_verifier_restart*). The last pass decides the rest.
        # ``verifier_restart_distinct``: only a run of that many different words is a restart ("zero zero": speech)
        if verifier_restart_words < 0 or verifier_restart_distinct < 1:
            raise ValueError(f"verifier_restart_words must be >= 0 and verifier_restart_distinct >= 1, got "
                             f"{verifier_restart_words}, {verifier_restart_distinct}")
        self.verifier_restart_words, self.verifier_restart_distinct = verifier_restart_words, verifier_restart_distinct
        self.lookahead_ms = getattr(engine, "lookahead_ms", 0.0)
        self.chunk_ms = getattr(engine, "chunk_ms", None)  # what a live session cuts its pieces to
        self.reset()

    def reset(self) -> None:
        self.engine.reset()
        self._audio: list[np.ndarray] = []  # the verifier's window: the segment's audio past the trimmed part
        self._samples = 0  # the segment's audio so far (trimmed or not)
        self.trimmed = 0  # samples cut off the window's start
        self._prompt: list[int] = []  # tokens of the final words whose audio was cut off
        self._window: list[list[int]] = []  # token groups of the final words still in the window
        self._last_pass = 0
        self.final_words: list[str] = []
        self.final_tokens: list[int] = []
        self._previous: _Words | None = None
        self._verified_tail: list[str] | None = None  # the causal tail the last pass saw
        self._causal_before: tuple[str, ...] = ()  # the causal words of the previous step (``agreed``)
        self.passes = 0

    def _verify(self, causal_tail: list[list[str]], final: bool) -> None:
        audio = np.concatenate(self._audio) if self._audio else np.zeros(0, dtype=np.float32)
        forced = [t for g in self._window for t in g]
        now = self.verifier(audio, forced, last=final, prompt=self._prompt)
        self.passes += 1
        self._last_pass = self._samples
        self._verified_tail = causal_tail[0] if causal_tail else None
        if final:
            n = len(now.words)
        else:
            fresh = (restart_at(self.final_words, now.words, self.verifier_restart_words, RESTART_CONTEXT,
                                self.verifier_restart_distinct) if self.verifier_restart_words else len(now.words))
            n, tail = 0, causal_tail[0]
            for i, candidate in enumerate(causal_tail):
                m = agreed(now.words, candidate)
                if m > n and (i == 0 or m >= 2):  # a shifted tail agreeing on one short word ("a") is chance
                    n, tail = m, candidate
            if self.hold_last:
                n = max(0, min(n, len(now.words) - 1, len(tail) - 1))
            if self._previous is not None and self.self_agreement:
                # LocalAgreement-2 on the verifier alone, but never on the last word of either pass: audio cut
                # inside a word makes Whisper guess a shorter word ("type of" for "typography"), and it can
                # guess the same twice
                last = min(len(now.words), len(self._previous.words)) - 1
                n = max(n, min(agreed(now.words, self._previous.words), last))
            n = min(n, fresh)
        self.final_words += now.words[:n]
        self.final_tokens += [t for g in now.tokens[:n] for t in g]
        self._window += now.tokens[:n]
        self._previous = _Words(now.words[n:], now.tokens[n:])
        if n and not final and self.window_ms and len(audio) * 1000 > self.window_ms * SAMPLE_RATE:
            self._trim(audio, now.tokens[n:])

    def _trim(self, audio: np.ndarray, open_words: list[list[int]]) -> None:
        """Cut the audio of the final words off the window, but the last ``KEEP_S`` of them; the cut words' text
        moves to the prompt, the kept ones stay the forced prefix. Why keep some: the attention places a word's
        end worst next to the open words at the window's end, and a cut a few frames late eats the start of the
        next word (on dev: "the | true printed" lost "true"); a cut inside final words costs nothing."""
        ends = self.verifier.word_ends(self._window + open_words)[: len(self._window)]
        keep_from = ends[-1] - KEEP_S
        j = max((i for i, e in enumerate(ends) if e <= keep_from), default=None)  # the last word cut off
        if j is None:
            return
        cut = quiet_cut(audio, ends[j])
        if not 0 < cut < len(audio):
            return
        self._audio = [audio[cut:]]
        self.trimmed += cut
        self._prompt = (self._prompt + [t for g in self._window[: j + 1] for t in g])[-PROMPT_TOKENS:]
        self._window = self._window[j + 1 :]

    def _tail_start(self, causal_words: list[str]) -> int:
        """Where the causal words past the final ones start (aligned by words: the transcripts may differ)."""
        if not self.final_words:
            return 0
        a = [norm_word(w) for w in self.final_words]
        b = [norm_word(w) for w in causal_words]
        blocks = [m for m in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_matching_blocks() if m.size]
        if not blocks:
            return len(self.final_words)
        last = blocks[-1]
        # final words past the last matching block are taken as substituted one for one by causal words
        return last.b + last.size + (len(a) - last.a - last.size)

    def _tails(self, causal_words: list[str]) -> list[list[str]]:
        """The causal tail, then the tails one word either side of it: when the final words hold a word the causal
        transcript lacks (or the other way round) the one-for-one guess is off by one, and the verifier would never
        agree with the causal engine again in that utterance."""
        # the final words can outnumber the causal ones (the verifier heard a word the causal engine has not written)
        k = min(self._tail_start(causal_words), len(causal_words))
        return [causal_words[j:] for j in (k, k - 1, k + 1) if 0 <= j <= len(causal_words)]

    def feed(self, samples: np.ndarray) -> Hypothesis:
        hyp = self.engine.feed(samples)
        causal = list(hyp.words)
        self._audio.append(np.asarray(samples, dtype=np.float32))
        self._samples += len(samples)
        tails = self._tails(causal)
        due = (self._samples - self._last_pass) * 1000 >= self.every_ms * SAMPLE_RATE
        if due and self._worth_a_pass(tails[0]):
            self._verify(tails, final=False)
            tails = self._tails(causal)  # past the new final words
        shown = self._shown(hyp, tails[0])
        self._causal_before = hyp.words
        return Hypothesis(tuple(self.final_words), shown)

    def _shown(self, causal: Hypothesis, tail: list[str]) -> tuple[str, ...]:
        """The partial words past the final ones, by ``self.partials`` (module docstring)."""
        if self.partials == "causal":
            return tuple(tail)
        start = len(causal.words) - len(tail)  # where the tail starts among the causal words
        if self.partials == "committed":
            return causal.words[start:len(causal.committed)]
        heard = self._previous.words if self._previous else []
        if self.partials == "verifier-only":
            return tuple(heard)
        if self.partials == "verifier-held":
            return tuple(heard[:-1])
        if self.partials == "verifier-fresh":
            return tuple(heard[: restart_at(self.final_words, heard, RESTART_WORDS, RESTART_CONTEXT)][:-1])
        # the policies below need the causal words two steps agree on: worked out only for them, every step
        stable = list(causal.words[start:max(start, agreed(list(self._causal_before), list(causal.words)))])
        if self.partials == "agreed" or not heard:
            return tuple(stable)
        # the causal words past the last one the verifier's open words also hold (none matched: past as many)
        blocks = [m for m in difflib.SequenceMatcher(a=[norm_word(w) for w in heard],
                                                     b=[norm_word(w) for w in stable],
                                                     autojunk=False).get_matching_blocks() if m.size]
        past = blocks[-1].b + blocks[-1].size if blocks else len(heard)
        return tuple(heard) + tuple(stable[past:])

    def _worth_a_pass(self, tail: list[str]) -> bool:
        """Whether a pass now can finalise anything: with ``hold_last`` a word needs a causal word after it, and
        an unchanged causal tail would only repeat the last answer (the verifier's own answer moves little in
        one chunk); without a causal word to confirm (silence, every word final) the pass is pure cost."""
        if self.self_agreement:
            return bool(tail or (self._previous and self._previous.words))
        return len(tail) >= (2 if self.hold_last else 1) and tail != self._verified_tail

    def finish(self) -> Hypothesis:
        # the causal engine's own end-of-stream work would only feed partials nobody sees any more
        self._verify([], final=True)
        return Hypothesis(tuple(self.final_words))


__all__ = ["PARTIALS", "TwoPassStreaming", "Verifier", "agreed", "echo_length", "norm_word", "restart_at"]
