"""Two-pass streaming: causal partials at once, finals confirmed by the original weights.

`TwoPassStreaming` feeds every chunk to the causal engine and, at most every ``every_ms`` of audio, runs a
*verifier* pass (``streaming.verifier``: the original weights, full attention) over the segment's audio followed by
a padding, with the words already final forced as the decoder prefix. A word becomes **final**
(``Hypothesis.committed``, never revised) when it is the next word of

- both the verifier's and the causal engine's hypotheses, but not the last word of either (``hold_last``: audio cut
  inside a word makes both models guess the same shorter words; docs/decisions/hold-last.md), unless the verifier
  aligns its end ``hold_last_edge_ms`` before the audio's end (docs/decisions/edge-heartbeat.md); or
- with ``self_agreement``, two consecutive verifier passes, under the same last-word rule
  (docs/decisions/finals-self-agreement.md).

A pass runs only when it can finalise something: the causal tail changed since the last pass and holds two words
(docs/decisions/verifier-pass-trigger.md), or, with ``heartbeat_ms``, that much non-quiet audio arrived since the
last pass (the causal engine goes quiet on a list read aloud). At the end of the stream one last pass makes every
remaining word final: the final transcript is the verifier's, the partials are as fast as the causal engine.

Repeats are speech too ("zero zero zero"): a mid-stream pass stops at a repeating tail, and the last pass asks the
audio which repeats were spoken (``Verifier._held``, ``Verifier._echo``; docs/decisions/spoken-repeats.md).

``window_ms`` bounds a pass's cost: past it, the audio of final words is cut off at a quiet point near the last
final word's end and their text becomes the verifier's prompt (docs/decisions/verifier-window.md). None: every pass
re-encodes the whole segment (bounded by ``streaming.segmented``).

Partial words (``Hypothesis.tentative``) are chosen by ``partials`` (one of ``PARTIALS``); the finals do not
depend on it:

- ``causal``: every causal word past the final words;
- ``verifier-fresh`` (served): the last pass's open words but its last, up to where they say again words already
  written (``restart_at``: Whisper fills the padding by restarting the sentence; docs/decisions/partials-fresh.md),
  and with ``partial_min_prob`` up to the first unsure word (docs/decisions/partial-min-prob.md).
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
# ``restart_at`` for the shown partials: a restart says again RESTART_WORDS words in a row from the last
# RESTART_CONTEXT words written (docs/decisions/partials-fresh.md)
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
        # the last word of either hypothesis waits for the next pass (docs/decisions/hold-last.md)
        self.hold_last = hold_last
        # ... unless the verifier aligns its end this far before the audio's end (None: always held); the hold costs
        # a pass interval on every word (docs/decisions/edge-heartbeat.md)
        if hold_last_edge_ms is not None and hold_last_edge_ms <= 0:
            raise ValueError(f"hold_last_edge_ms must be > 0 or None, got {hold_last_edge_ms}")
        self.hold_last_edge_ms = hold_last_edge_ms
        # also finalise what two consecutive verifier passes agree on (docs/decisions/finals-self-agreement.md)
        self.self_agreement = self_agreement
        # a mid-stream pass finalises nothing from where its open words say again this many written words in a row
        # (``restart_at``; 0: off): two passes may fill the padding with the same restart, and self-agreement would
        # make it final (docs/decisions/verifier-restart-cut.md). The last pass decides the rest.
        # ``verifier_restart_distinct``: only a run of that many different words is a restart ("zero zero": speech)
        if verifier_restart_words < 0 or verifier_restart_distinct < 1:
            raise ValueError(f"verifier_restart_words must be >= 0 and verifier_restart_distinct >= 1, got "
                             f"{verifier_restart_words}, {verifier_restart_distinct}")
        self.verifier_restart_words, self.verifier_restart_distinct = verifier_restart_words, verifier_restart_distinct
        # ``verifier_restart_whole``: only a run that goes on saying what followed its first saying (``restart_at``),
        # or with ``verifier_restart_long`` one that goes on for that many words, whole or not: a sentence that says
        # a phrase twice is not a restart (docs/decisions/restart-whole.md, restart-long.md)
        if verifier_restart_long < 0 or (verifier_restart_long and not verifier_restart_whole):
            raise ValueError(f"verifier_restart_long must be >= 0, and is read only with verifier_restart_whole, got "
                             f"{verifier_restart_long} (whole: {verifier_restart_whole})")
        self.verifier_restart_whole, self.verifier_restart_long = verifier_restart_whole, verifier_restart_long
        # the verifier's partials stop before the first open word the greedy decoder gave a token of less than this
        # probability (0: off): a word the pass was unsure of is the one the next pass changes
        if not 0.0 <= partial_min_prob < 1.0:
            raise ValueError(f"partial_min_prob must be in [0, 1), got {partial_min_prob}")
        self.partial_min_prob = partial_min_prob
        # a pass also runs once this much non-quiet audio arrived since the last one (None: off): ``_worth_a_pass``
        # alone waits for the causal engine, which goes quiet on a list read aloud (docs/decisions/edge-heartbeat.md)
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
        moves to the prompt, the kept ones stay the forced prefix. Some are kept because the attention places a
        word's end worst next to the open words, and a late cut would eat the next word's start."""
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
