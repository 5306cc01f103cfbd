"""Two-pass streaming: causal partials at once, finals confirmed by the original weights.

The causal engine (block-causal encoder + adapter) answers after every chunk, fast but less accurate on unseen
speech than offline Whisper. Every ``every_ms`` of audio, the *verifier* — the original weights, full attention —
transcribes the audio heard so far followed by the hush word (WhisperFlow: a learned 0.5 s segment that tells the
model the speech has ended, instead of 30 s of zero padding, so the encoder runs on the real length), with the
words already final forced as the decoder prefix. A word becomes **final** when it is the next word of

- the verifier's and the causal engine's hypotheses alike (two different models on the same audio agree) and not
  the last word of either (``hold_last``: audio cut inside a word makes both guess the same shorter words; on the
  real dev split this halved the two-pass WER, 24 → 12 %, for +0.3 s median final-word latency; with
  ``hold_last_edge_ms`` a last word the verifier's alignment ends that far before the audio's end is not held), or
- with ``self_agreement``, two consecutive verifier passes (LocalAgreement-2 on the verifier: covers words the
  causal model gets wrong), unless it is the last word of either pass (audio cut inside a word makes Whisper guess a
  shorter one). Off by default: chosen on the dev split (lower WER, higher latency).

A pass runs at most every ``every_ms`` and only when it can finalise something: a causal tail of at least two
words that changed since the last pass (on dev: same WER and latency, RTF 0.18 → 0.14 at every chunk of 300 ms).
With ``heartbeat_ms`` a pass also runs once that much audio, not all of it quiet, has arrived since the last one:
the causal engine goes quiet on a list said aloud, and without it the repeats waited for the segment's end.
The causal tail is aligned with the final words by words; when the final words hold a word the causal transcript
lacks, the tails one word either side are tried too, or the two would never agree again in that utterance.

At the end of the stream one last verifier pass over the whole utterance makes every remaining word final, so the
final transcript is the verifier's (offline accuracy) while the partials stay as fast as the causal engine.

Repeats are speech too ("zero zero zero", a list read aloud). A mid-stream pass stops at a repeating tail (three
copies in a row): it may be a loop, and waiting costs only latency. The last pass, which decides every word left,
keeps decoding and asks the audio: Whisper's cross-attention ends spoken repeats one after another, while a loop's
surplus piles up at the audio's end and is cut there (``Verifier._held``). Likewise words that copy the final
tail are an echo only where they end where the final words end (``Verifier._echo``;
docs/decisions/spoken-repeats.md).

``window_ms`` bounds what a pass costs: once the verifier's audio is longer than that, the audio of the words
already final is cut off (at the quietest point near the last final word's end, which the verifier's own
cross-attention gives: ``streaming.word_times``) and their text becomes the verifier's prompt (Whisper's
``<|startofprev|>`` context), so a pass encodes the words still open and a few seconds before them, however long
the segment has run. None: every pass re-encodes the whole segment (bounded by ``streaming.segmented`` alone).
Final words are ``Hypothesis.committed`` (never revised), and their latency is what the evaluation reports as word
latency. Partial words (``Hypothesis.tentative``) are what ``partials`` shows past them (``PARTIALS``); the finals
are the same whichever is shown:

- ``causal``: every causal word past the final words;
- ``verifier-fresh`` (served): the last verifier pass's words that are not final yet but its last one (the audio's
  edge may cut inside it, as ``hold_last`` for finals), up to where they start saying again two words in a row that
  were already written (``restart_at``): a mid-stream pass hears the audio then 5 s of zeros, and Whisper often fills
  them by restarting the sentence. The other policies measured, and why this one, are in
  docs/decisions/partials-policy.md and partials-fresh.md.
"""

from __future__ import annotations

import difflib

import numpy as np

from streaming.events import SAMPLE_RATE, Hypothesis, norm_word, restart_at
from streaming.segmented import QUIET_DBFS, dbfs
from streaming.verifier import PROMPT_TOKENS, Verifier, VerifierWords
from streaming.word_times import quiet_cut

KEEP_S = 1.5  # the final words' audio a trimmed window keeps before the open words (see TwoPassStreaming._trim)
# what is shown past the final words (module docstring)
PARTIALS = ("causal", "verifier-fresh")
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


class TwoPassStreaming:
    """A `StreamingRecognizer`: the verifier's finals, partials by ``partials`` (see the module docstring)."""

    def __init__(self, engine, verifier: Verifier, every_ms: int = 600, self_agreement: bool = False,
                 hold_last: bool = True, window_ms: int | None = None, partials: str = "causal",
                 verifier_restart_words: int = 0, verifier_restart_distinct: int = 1,
                 verifier_restart_whole: bool = False, verifier_restart_long: int = 0,
                 partial_min_prob: float = 0.0, heartbeat_ms: int | None = None,
                 hold_last_edge_ms: int | None = None) -> None:
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
        # ... unless the verifier's own alignment puts the word's end this far before the audio's end (None: always
        # held): the hold costs a pass interval on every word, and on a list said aloud the passes (two open words
        # at most, the loop cut) finalised one repeat per two passes, slower than they were said
        if hold_last_edge_ms is not None and hold_last_edge_ms <= 0:
            raise ValueError(f"hold_last_edge_ms must be > 0 or None, got {hold_last_edge_ms}")
        self.hold_last_edge_ms = hold_last_edge_ms
        # also finalise on two consecutive verifier passes: on the real dev split (random-chunk adapter, 300 ms) it
        # halved the final-word latency (690 → 306 ms) but finalised more wrong words (WER 14.7 → 16.0 %); off
        self.self_agreement = self_agreement
        # a mid-stream pass finalises nothing from where its open words say again this many written words in a row
        # (``restart_at``; 0: off): two passes fill the 5 s of zeros by restarting the sentence alike, and
        # self-agreement made that final (docs/decisions/verifier-restart-cut.md). The last pass decides the rest.
        # ``verifier_restart_distinct``: only a run of that many different words is a restart ("zero zero": speech)
        if verifier_restart_words < 0 or verifier_restart_distinct < 1:
            raise ValueError(f"verifier_restart_words must be >= 0 and verifier_restart_distinct >= 1, got "
                             f"{verifier_restart_words}, {verifier_restart_distinct}")
        self.verifier_restart_words, self.verifier_restart_distinct = verifier_restart_words, verifier_restart_distinct
        # ``verifier_restart_whole``: only a run that goes on saying what followed its first saying (``restart_at``),
        # or with ``verifier_restart_long`` one that goes on for that many words, whole or not: a sentence that says
        # "should be" twice had every pass cut to nothing for 4 s (dev: LJ001-0015; docs/decisions/restart-long.md)
        if verifier_restart_long < 0 or (verifier_restart_long and not verifier_restart_whole):
            raise ValueError(f"verifier_restart_long must be >= 0, and is read only with verifier_restart_whole, got "
                             f"{verifier_restart_long} (whole: {verifier_restart_whole})")
        self.verifier_restart_whole, self.verifier_restart_long = verifier_restart_whole, verifier_restart_long
        # the verifier's partials stop before the first open word the greedy decoder gave a token of less than this
        # probability (0: off): a word the pass was unsure of is the one the next pass changes
        if not 0.0 <= partial_min_prob < 1.0:
            raise ValueError(f"partial_min_prob must be in [0, 1), got {partial_min_prob}")
        self.partial_min_prob = partial_min_prob
        # a pass also runs once this much audio arrived since the last one, unless that audio is quiet (None: off).
        # ``_worth_a_pass`` alone stops asking once the causal engine writes nothing new and a pass found no open
        # word: on a list said aloud ("zero zero zero ...") the causal model goes quiet on the repeats, and every
        # word waited for the segment's end (dev latencies of 25 s). Quiet audio is skipped: nothing to find there
        if heartbeat_ms is not None and heartbeat_ms < every_ms:
            raise ValueError(f"heartbeat_ms must be >= every_ms ({every_ms}) or None, got {heartbeat_ms}")
        self.heartbeat_ms = heartbeat_ms
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
        self._previous: VerifierWords | None = None
        self._verified_tail: list[str] | None = None  # the causal tail the last pass saw
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
                                self.verifier_restart_distinct, self.verifier_restart_whole, self.verifier_restart_long)
                     if self.verifier_restart_words else len(now.words))
            n, tail = 0, causal_tail[0]
            for i, candidate in enumerate(causal_tail):
                m = agreed(now.words, candidate)
                if m > n and (i == 0 or m >= 2):  # a shifted tail agreeing on one short word ("a") is chance
                    n, tail = m, candidate
            held = min(len(now.words), len(tail)) - 1  # the last word of either: ``hold_last``
            both = (agreed(now.words, self._previous.words) if self._previous is not None and self.self_agreement
                    else 0)
            last = min(len(now.words), len(self._previous.words)) - 1 if self._previous is not None else 0
            # the alignment costs a decoder pass: asked only when a hold would cut a word
            clear = self._clear(audio, now) if self.hold_last and (n > held or both > last) else 0
            if self.hold_last:
                n = max(0, min(n, max(held, clear)))
            if self._previous is not None and self.self_agreement:
                # LocalAgreement-2 on the verifier alone, but never on the last word of either pass: audio cut
                # inside a word makes Whisper guess a shorter word ("type of" for "typography"), and it can
                # guess the same twice (unless this pass heard the word end clear of the audio's edge)
                n = max(n, min(both, max(last, clear)))
            n = min(n, fresh)
        self.final_words += now.words[:n]
        self.final_tokens += [t for g in now.tokens[:n] for t in g]
        self._window += now.tokens[:n]
        self._previous = VerifierWords(now.words[n:], now.tokens[n:], now.probs[n:])
        if n and not final and self.window_ms and len(audio) * 1000 > self.window_ms * SAMPLE_RATE:
            self._trim(audio, now.tokens[n:])

    def _clear(self, audio: np.ndarray, now: VerifierWords) -> int:
        """How many leading open words of this pass end at least ``hold_last_edge_ms`` before the audio's end, by
        the verifier's cross-attention (0 when off): ``hold_last`` need not hold them, the audio's edge is not inside
        them. The last word's path ends at the real audio's end at the latest, so a word the edge cut never
        counts as clear."""
        if not self.hold_last_edge_ms or not now.words:
            return 0
        ends = self.verifier.word_ends(self._window + now.tokens)[len(self._window):]
        edge = len(audio) / SAMPLE_RATE - self.hold_last_edge_ms / 1000
        return next((i for i, end in enumerate(ends) if end > edge), len(ends))

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
        if due and (self._worth_a_pass(tails[0]) or self._heartbeat()):
            self._verify(tails, final=False)
            tails = self._tails(causal)  # past the new final words
        shown = self._shown(tails[0])
        return Hypothesis(tuple(self.final_words), shown)

    def _shown(self, tail: list[str]) -> tuple[str, ...]:
        """The partial words past the final ones, by ``self.partials`` (module docstring); the verifier's words only
        up to its first unsure one (``partial_min_prob``)."""
        shown = self._policy(tail)
        if self.partial_min_prob and self._previous and self.partials.startswith("verifier"):
            sure = self._previous.confident(self.partial_min_prob)
            return shown[:sure] if sure < len(self._previous.words) else shown
        return shown

    def _policy(self, tail: list[str]) -> tuple[str, ...]:
        if self.partials == "causal":
            return tuple(tail)
        heard = self._previous.words if self._previous else []
        return tuple(heard[: restart_at(self.final_words, heard, RESTART_WORDS, RESTART_CONTEXT)][:-1])

    def _worth_a_pass(self, tail: list[str]) -> bool:
        """Whether a pass now can finalise anything: with ``hold_last`` a word needs a causal word after it, and
        an unchanged causal tail would only repeat the last answer (the verifier's own answer moves little in
        one chunk); without a causal word to confirm (silence, every word final) the pass is pure cost."""
        if self.self_agreement:
            return bool(tail or (self._previous and self._previous.words))
        return len(tail) >= (2 if self.hold_last else 1) and tail != self._verified_tail

    def _heartbeat(self) -> bool:
        """Whether ``heartbeat_ms`` of audio, not all of it quiet, arrived since the last pass."""
        if self.heartbeat_ms is None:
            return False
        since = self._samples - self._last_pass
        if since * 1000 < self.heartbeat_ms * SAMPLE_RATE:
            return False
        pieces, n = [], 0  # the newest pieces only: the window may hold a whole silent segment
        for piece in reversed(self._audio):
            if n >= since:
                break
            pieces.append(piece)
            n += len(piece)
        return bool(pieces) and dbfs(np.concatenate(pieces[::-1])[-since:]) >= QUIET_DBFS

    def finish(self) -> Hypothesis:
        # the causal engine's own end-of-stream work would only feed partials nobody sees any more
        self._verify([], final=True)
        return Hypothesis(tuple(self.final_words))


__all__ = ["PARTIALS", "TwoPassStreaming", "agreed"]
