"""The one interface of every streaming system (our causal engine and every baseline).

A recognizer is fed audio chunk by chunk and answers, after each chunk, with its whole current
hypothesis split into a *committed* prefix (never revised again) and a *tentative* tail (may still
change). `run_stream` turns that into word events and a `StreamRecord`, from which WER, RWER,
ARWER, AL/LAAL/DAL, word latency and RTF are all computed the same way for every system.

The latency clock (docs/evaluation.md, "The latency clock"): a real-time queue with one worker. Times are ms since
the stream's first sample.
- Step k's chunk *arrives* when its last sample has been spoken: `arrival_ms` = the audio consumed by the end
  of that step (`Step.audio_ms`; the end-of-stream step arrives at the audio end).
- It *starts* at max(arrival_k, finish_{k-1}): a worker cannot begin before the audio exists, nor before it
  is done with the previous chunk. It *finishes* at start_k + compute_k (`compute_ms`: measured wall time).
- A word event is emitted when the step that produced it finishes (`WordEvent.emitted_ms`). Its
  computation-unaware lower bound is the arrival of that step (`WordEvent.emission_ms`: infinitely fast compute).

A queue rather than "audio consumed + cumulative compute" (`WordEvent.elapsed_ms`, kept for reference only):
a system that keeps up with real time computes while waiting for audio, and a queue charges only the backlog a
user would really wait for; a system slower than real time builds a backlog on both clocks.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

SAMPLE_RATE = 16_000


def norm_word(word: str) -> str:
    """Comparison key of a word: lower case letters and digits ("Most," == "most")."""
    return re.sub(r"[^0-9a-z']", "", word.lower())


def restart_at(written: list[str], words: list[str], n: int, context: int, distinct: int = 1,
               whole: bool = False, long: int = 0) -> int:
    """Where ``words`` (what follows ``written``) first say again ``n`` words in a row that the last ``context``
    written words or the words before it hold (compared by :func:`norm_word`); ``len(words)`` when they never do.
    ``distinct``: only a run of at least that many different words counts ("zero zero" said again is a list read
    aloud). ``whole``: only a run that goes on saying what followed its first saying, until the first saying
    reaches where the run starts or the words end, counts (a sentence may say "should be" twice). ``long`` (with
    ``whole``): a run that goes on for this many words counts anyway, whole or not ("sand castle ... sandcastle").

    Why: at the edge of the audio it has heard Whisper often *restarts* the sentence instead of waiting ("produced
    the block book, produced the block book"); one word said again is ordinary speech, a run of them rarely is."""
    keys = [norm_word(w) for w in (written[-context:] if context else [])] + [norm_word(w) for w in words]
    start = len(keys) - len(words)
    for j in range(start, len(keys) - n + 1):
        gram = keys[j : j + n]
        if len(set(gram)) >= distinct and any(keys[i : i + n] == gram and (not whole or _says_again(keys, i, j, long))
                                              for i in range(j - n + 1)):
            return j - start
    return len(words)


def _says_again(keys: list[str], i: int, j: int, long: int = 0) -> bool:
    """Whether ``keys`` from ``j`` on say what they said from ``i`` on, until the first saying reaches ``j`` or the
    keys end, or for ``long`` words (0: no such length)."""
    k = 0
    while i + k < j and j + k < len(keys):
        if keys[i + k] != keys[j + k]:
            return bool(long) and k >= long
        k += 1
    return True


@dataclass(frozen=True, slots=True)
class Hypothesis:
    committed: tuple[str, ...]  # words that will never change
    tentative: tuple[str, ...] = ()  # words that may still be revised

    @property
    def words(self) -> tuple[str, ...]:
        return self.committed + self.tentative

    @property
    def text(self) -> str:
        return " ".join(self.words)


@dataclass(frozen=True, slots=True)
class WordEvent:
    index: int  # position of the word in the hypothesis
    word: str
    kind: Literal["partial", "final"]
    emission_ms: float  # computation-unaware: arrival (audio consumed) of the step that produced the event
    emitted_ms: float  # the latency clock: finish time of that step on the real-time queue (computation-aware)
    # not used by any metric: emission_ms + the stream's cumulative compute up to and including the step
    # (SimulEval's "elapsed" when audio is fed as fast as it is processed); always ≥ emitted_ms
    elapsed_ms: float
    step: int = -1  # index of the step that produced the event in `StreamRecord.steps`


class StreamingRecognizer(Protocol):
    """feed(chunk) → hypothesis after the chunk; finish() → hypothesis after end of stream (all committed).

    A recognizer that needs audio past a chunk's end before it can process the chunk says how much
    in an optional `lookahead_ms` attribute (see `chunks`)."""

    def reset(self) -> None: ...

    def feed(self, samples: np.ndarray) -> Hypothesis: ...

    def finish(self) -> Hypothesis: ...


@dataclass
class Step:
    audio_ms: float  # audio consumed by the end of this step = the arrival time of its chunk's last sample
    compute_ms: float  # wall time of the step
    hypothesis: Hypothesis
    final: bool = False  # the end-of-stream step (arrives at the audio end)

    @property
    def arrival_ms(self) -> float:
        """When the step could begin at the earliest: its audio has been spoken."""
        return self.audio_ms


@dataclass(frozen=True, slots=True)
class QueueTime:
    """One step on the real-time queue (ms since the stream's first sample)."""

    arrival_ms: float
    start_ms: float  # max(arrival, previous finish)
    finish_ms: float  # start + compute

    @property
    def wait_ms(self) -> float:
        """Backlog: how long the chunk waited for the worker after it arrived."""
        return self.start_ms - self.arrival_ms


def queue_clock(arrival_ms: Sequence[float], compute_ms: Sequence[float]) -> list[QueueTime]:
    """start_k = max(arrival_k, finish_{k-1}), finish_k = start_k + compute_k: one worker, chunks in order."""
    if len(arrival_ms) != len(compute_ms):
        raise ValueError("one compute time per arrival")
    out: list[QueueTime] = []
    finish = float("-inf")
    for arrival, compute in zip(arrival_ms, compute_ms, strict=True):
        if compute < 0:
            raise ValueError(f"negative compute time {compute}")
        start = max(float(arrival), finish)
        finish = start + float(compute)
        out.append(QueueTime(float(arrival), start, finish))
    return out


@dataclass
class StreamRecord:
    audio_ms: float
    chunk_ms: float
    steps: list[Step] = field(default_factory=list)
    events: list[WordEvent] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.steps[-1].hypothesis.text if self.steps else ""

    @property
    def compute_ms(self) -> list[float]:
        return [s.compute_ms for s in self.steps]

    @property
    def queue(self) -> list[QueueTime]:
        """Arrival, start and finish of every step on the real-time queue (recomputed from the steps)."""
        return queue_clock([s.arrival_ms for s in self.steps], [s.compute_ms for s in self.steps])

    @property
    def lag_ms(self) -> float:
        """How far behind real time the stream ends: finish of the last step − audio end (≥ 0 when the last
        step is the end-of-stream step, which arrives at the audio end)."""
        return self.queue[-1].finish_ms - self.audio_ms if self.steps else 0.0

    def final_words(self) -> list[WordEvent]:
        """The last 'final' event of every word position of the finished hypothesis, in order."""
        last: dict[int, WordEvent] = {}
        for event in self.events:
            if event.kind == "final":
                last[event.index] = event
        n = len(self.steps[-1].hypothesis.words) if self.steps else 0
        return [last[i] for i in range(n) if i in last]

    def snapshots(self, *, committed_only: bool = False) -> list[tuple[float, str]]:
        """(audio_ms, text shown) after every step: the input of RWER / ARWER."""
        return [(s.audio_ms, " ".join(s.hypothesis.committed if committed_only else s.hypothesis.words))
                for s in self.steps]


def chunks(audio: np.ndarray, chunk_ms: float, lookahead_ms: float = 0.0) -> Iterator[np.ndarray]:
    """Pieces of `chunk_ms`; the first is longer by `lookahead_ms`, so that every later piece
    completes one chunk *and* its look-ahead (a system that needs 12.5 ms past a chunk's end then
    processes that chunk on the piece that brings them, and its latency includes them)."""
    size = max(1, int(round(chunk_ms * SAMPLE_RATE / 1000)))
    first = min(len(audio), size + int(round(lookahead_ms * SAMPLE_RATE / 1000)))
    yield audio[:first]
    for start in range(first, len(audio), size):
        yield audio[start : start + size]


def _diff_events(before: Hypothesis, after: Hypothesis, step: int, emission_ms: float, emitted_ms: float,
                 elapsed_ms: float) -> list[WordEvent]:
    """Events for words that are new, changed, or newly committed between two hypotheses."""
    events = []
    # committed words never change: a prefix committed before and still committed needs no look (this keeps a
    # long stream's bookkeeping linear in its steps rather than in steps × words)
    n = len(before.committed)
    start = n if after.committed[:n] == before.committed else 0
    words = after.words
    for i in range(start, len(words)):
        word = words[i]
        committed = i < len(after.committed)
        was_committed = i < len(before.committed) and before.words[i] == word
        unchanged = i < len(before.words) and before.words[i] == word
        if committed and not was_committed:
            events.append(WordEvent(i, word, "final", emission_ms, emitted_ms, elapsed_ms, step))
        elif not committed and not unchanged:
            events.append(WordEvent(i, word, "partial", emission_ms, emitted_ms, elapsed_ms, step))
    return events


def record_from_steps(steps: Sequence[Step], audio_ms: float, chunk_ms: float) -> StreamRecord:
    """The record (queue clock and word events) of a stream given its steps: a pure function, so that any
    sequence of (arrival, compute, hypothesis) — measured or made up — is scored by the same clock."""
    record = StreamRecord(audio_ms=audio_ms, chunk_ms=chunk_ms, steps=list(steps))
    previous = Hypothesis(())
    cumulative_ms = 0.0
    for k, (step, q) in enumerate(zip(record.steps, record.queue, strict=True)):
        cumulative_ms += step.compute_ms
        record.events += _diff_events(previous, step.hypothesis, k, step.audio_ms, q.finish_ms,
                                      step.audio_ms + cumulative_ms)
        previous = step.hypothesis
    return record


def _timed(timer: Callable[[], float], fn: Callable[..., Hypothesis], *args) -> tuple[Hypothesis, float]:
    """``fn(*args)`` and its wall time in ms on ``timer`` (seconds)."""
    start = timer()
    hyp = fn(*args)
    return hyp, (timer() - start) * 1000


def run_stream(recognizer: StreamingRecognizer, audio: np.ndarray, chunk_ms: float,
               timer: Callable[[], float] = time.perf_counter, *, live: bool = False) -> StreamRecord:
    """Feed `audio` in `chunk_ms` pieces (the last one may be shorter), then finish; time every step.

    `timer` (seconds, monotonic) measures each step's compute; tests inject a fake clock to make compute
    deterministic. The audio is fed as fast as it is processed; real-time arrival is modelled by the queue clock
    (`record_from_steps`).

    ``live=False``: one piece per step, whatever the clock says: the output depends on the audio only
    (deterministic; what the pyfunc models and the equivalence tests need).
    ``live=True``: as a live server feeds a system that falls behind (whisperlivekit and whisper_streaming read
    all buffered audio each iteration): the next step takes *every* piece that has arrived by the time the worker
    is free, as one feed. A system that keeps up is fed exactly as with ``live=False``; one that cannot gets larger
    pieces instead of an ever-growing queue, so its output depends on its speed, as it does live."""
    recognizer.reset()
    steps: list[Step] = []
    lookahead_ms = float(getattr(recognizer, "lookahead_ms", 0.0))
    pieces = list(chunks(audio, chunk_ms, lookahead_ms))
    ends_ms = np.cumsum([len(p) for p in pieces]) * 1000 / SAMPLE_RATE  # arrival of each piece's last sample
    finish_ms = float("-inf")  # when the worker is free again (the queue clock, kept while feeding)
    j = 0
    while j < len(pieces):
        k = j
        if live:  # every piece that has arrived by the time the worker can start
            start_ms = max(float(ends_ms[j]), finish_ms)
            while k + 1 < len(pieces) and ends_ms[k + 1] <= start_ms:
                k += 1
        piece = pieces[j] if k == j else np.concatenate(pieces[j : k + 1])
        hyp, compute_ms = _timed(timer, recognizer.feed, piece)
        finish_ms = max(float(ends_ms[k]), finish_ms) + compute_ms
        steps.append(Step(float(ends_ms[k]), compute_ms, hyp))
        j = k + 1
    hyp, compute_ms = _timed(timer, recognizer.finish)
    # end of stream: everything shown is final
    steps.append(Step(len(audio) * 1000 / SAMPLE_RATE, compute_ms, Hypothesis(hyp.words, ()), final=True))
    return record_from_steps(steps, len(audio) * 1000 / SAMPLE_RATE, chunk_ms)
