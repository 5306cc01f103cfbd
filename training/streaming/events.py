"""The one interface of every streaming system (our causal engine and every baseline).

A recognizer is fed audio chunk by chunk and answers, after each chunk, with its whole current
hypothesis split into a *committed* prefix (never revised again) and a *tentative* tail (may still
change). `run_stream` turns that into word events and a `StreamRecord`, from which WER, RWER,
ARWER, AL/LAAL/DAL, word latency and RTF are all computed the same way for every system
(../shared/DESIGN.md, "Streaming engine").

Times: `audio_ms` is the audio consumed when a step ended; `compute_ms` the wall time the step took.
A word's emission time is the `audio_ms` of the step in which it was first committed; its
computation-aware emission time adds the wall time spent on the stream up to then.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

SAMPLE_RATE = 16_000


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
    emission_ms: float  # audio consumed when the event happened
    elapsed_ms: float  # emission_ms + wall compute spent on the stream so far (computation-aware)


class StreamingRecognizer(Protocol):
    """feed(chunk) → hypothesis after the chunk; finish() → hypothesis after end of stream (all committed).

    A recognizer that needs audio past a chunk's end before it can process the chunk says how much
    in an optional `lookahead_ms` attribute (see `chunks`)."""

    def reset(self) -> None: ...

    def feed(self, samples: np.ndarray) -> Hypothesis: ...

    def finish(self) -> Hypothesis: ...


@dataclass
class Step:
    audio_ms: float
    compute_ms: float
    hypothesis: Hypothesis
    final: bool = False  # the end-of-stream step


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


def _diff_events(before: Hypothesis, after: Hypothesis, audio_ms: float, elapsed_ms: float) -> list[WordEvent]:
    """Events for words that are new, changed, or newly committed between two hypotheses."""
    events = []
    for i, word in enumerate(after.words):
        committed = i < len(after.committed)
        was_committed = i < len(before.committed) and before.words[i] == word
        unchanged = i < len(before.words) and before.words[i] == word
        if committed and not was_committed:
            events.append(WordEvent(i, word, "final", audio_ms, elapsed_ms))
        elif not committed and not unchanged:
            events.append(WordEvent(i, word, "partial", audio_ms, elapsed_ms))
    return events


def run_stream(recognizer: StreamingRecognizer, audio: np.ndarray, chunk_ms: float) -> StreamRecord:
    """Feed `audio` in `chunk_ms` pieces (the last one may be shorter), then finish; time every step."""
    recognizer.reset()
    record = StreamRecord(audio_ms=len(audio) * 1000 / SAMPLE_RATE, chunk_ms=chunk_ms)
    previous = Hypothesis(())
    consumed = 0
    wall_ms = 0.0
    lookahead_ms = float(getattr(recognizer, "lookahead_ms", 0.0))
    pieces: list[np.ndarray | None] = [*chunks(audio, chunk_ms, lookahead_ms), None]  # None: end of stream
    for piece in pieces:
        start = time.perf_counter()
        hyp = recognizer.finish() if piece is None else recognizer.feed(piece)
        compute_ms = (time.perf_counter() - start) * 1000
        if piece is not None:
            consumed += len(piece)
        if piece is None:  # end of stream: everything shown is final
            hyp = Hypothesis(hyp.words, ())
        wall_ms += compute_ms
        audio_ms = consumed * 1000 / SAMPLE_RATE
        record.steps.append(Step(audio_ms, compute_ms, hyp, final=piece is None))
        record.events += _diff_events(previous, hyp, audio_ms, audio_ms + wall_ms)
        previous = hyp
    return record
