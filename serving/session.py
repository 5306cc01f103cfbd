"""One live stream: audio in frames of any size → the engine in its own chunk pieces → word events (plain, sync).

The pieces are exactly the ones ``streaming.events.run_stream`` feeds (the first one longer by the
engine's look-ahead, then whole chunks, the rest at the end), so a live stream of an utterance yields the same
transcript as the offline-streamed evaluation of the same audio, whatever the client's frame sizes.

``catch_up`` (the default, what ``run_stream(live=True)`` models): when the engine has fallen behind and several whole
pieces wait, they go in as *one* feed — one causal step and at most one verifier pass for all of them — instead of
one step each, so a recognizer that is briefly slower than real time catches up instead of falling further behind
(a live stream that waits is already late). A session that keeps up is fed exactly as without it; a client that
sends a file faster than real time and wants the evaluated transcript bit for bit asks for ``catch_up: false``.

A live stream can outlast Whisper's 30 s encoder context: the engine is wrapped in
``streaming.segmented.Segmented``, the segmentation the evaluate stage uses too, so a stream gives the same
words whether it is evaluated or served.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streaming.events import SAMPLE_RATE, Hypothesis
from streaming.segmented import MAX_SEGMENT_MS, SEGMENT_MS, Segmented


@dataclass
class SessionStats:
    audio_samples: int = 0  # received
    fed_samples: int = 0  # given to the engine
    steps: int = 0
    caught_up: int = 0  # steps that took several whole pieces at once (the engine had fallen behind)
    compute_ms: float = 0.0
    segments: int = 0
    step_ms: list[float] = field(default_factory=list)


class StreamSession:
    """``push`` audio, ``run`` the steps it completes, ``finish`` at the end; each returns protocol events."""

    def __init__(self, engine, *, segment_ms: int = SEGMENT_MS, max_segment_ms: int = MAX_SEGMENT_MS,
                 catch_up: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.engine = engine if isinstance(engine, Segmented) else Segmented(
            engine, segment_ms=segment_ms, max_segment_ms=max_segment_ms)
        self.chunk = max(1, round(engine.chunk_ms * SAMPLE_RATE / 1000))
        self.lookahead = round(float(getattr(engine, "lookahead_ms", 0.0)) * SAMPLE_RATE / 1000)
        self.clock = clock
        self.catch_up = catch_up
        self.stats = SessionStats()
        self._pending: list[np.ndarray] = []
        self._pending_n = 0
        self._words: list[str] = []  # every final word so far
        self._hyp = Hypothesis(())
        self._t0: float | None = None
        self.engine.reset()

    # ------------------------------------------------------------------ input
    def push(self, samples: np.ndarray) -> None:
        if self._t0 is None:
            self._t0 = self.clock()
        if len(samples):
            self._pending.append(np.asarray(samples, dtype=np.float32))
            self._pending_n += len(samples)
            self.stats.audio_samples += len(samples)

    @property
    def backlog_ms(self) -> float:
        """Audio received but not yet given to the engine."""
        return self._pending_n * 1000 / SAMPLE_RATE

    @property
    def ready(self) -> bool:
        """A whole piece waits: ``run`` would step the engine (tiny frames are only buffered until then)."""
        return self._pending_n >= self._piece_size()

    def _piece_size(self) -> int:
        # the pieces of run_stream: the first one longer by the look-ahead, then whole chunks
        return self.chunk + (self.lookahead if self.stats.fed_samples == 0 else 0)

    def _take(self, n: int) -> np.ndarray:
        joined = np.concatenate(self._pending) if len(self._pending) > 1 else self._pending[0]
        piece, rest = joined[:n], joined[n:]
        self._pending = [rest] if len(rest) else []
        self._pending_n = len(rest)
        return piece

    # ------------------------------------------------------------------ steps
    def run(self) -> list[dict[str, Any]]:
        """Every whole piece received so far through the engine; the events they produce."""
        events: list[dict[str, Any]] = []
        while self._pending_n >= (size := self._piece_size()):
            if self.catch_up and self._pending_n >= size + self.chunk:  # behind: every whole piece, one feed
                size += (self._pending_n - size) // self.chunk * self.chunk
                self.stats.caught_up += 1
            events += self._step(self._take(size))
        return events

    def finish(self) -> list[dict[str, Any]]:
        """The rest of the audio, then the engine's end of stream: every word final."""
        events = self.run()
        if self._pending_n:
            events += self._step(self._take(self._pending_n))
        end_ms = self._audio_ms(self.stats.fed_samples)
        hyp = self._timed(self.engine.finish)
        events += self._events(Hypothesis(hyp.words, ()), end_ms, final=True)
        self.stats.segments = self.engine.segments
        return events

    def _timed(self, fn, *args) -> Hypothesis:
        start = time.perf_counter()
        hyp = fn(*args)
        ms = (time.perf_counter() - start) * 1000
        self.stats.steps += 1
        self.stats.compute_ms += ms
        self.stats.step_ms.append(ms)
        return hyp

    def _step(self, piece: np.ndarray) -> list[dict[str, Any]]:
        start_ms = self._audio_ms(self.stats.fed_samples)
        hyp = self._timed(self.engine.feed, piece)
        self.stats.fed_samples += len(piece)
        self.stats.segments = self.engine.segments
        return self._events(hyp, start_ms, final=False)

    def _events(self, hyp: Hypothesis, start_ms: float, final: bool) -> list[dict[str, Any]]:
        """``final`` for newly committed words, ``partial`` when the tentative tail changed."""
        before = self._hyp
        self._hyp = hyp
        common = {"start_ms": round(start_ms, 1), "end_ms": round(self._audio_ms(self.stats.fed_samples), 1),
                  "emitted_at_ms": round(self._since_start_ms(), 1)}
        events = []
        new_final = list(hyp.committed[len(before.committed):])
        if new_final:
            events.append({"type": "final", "words": new_final,
                           "index": len(before.committed), **common})
            self._words += new_final
        if hyp.tentative != before.tentative and not final:
            events.append({"type": "partial", "words": list(hyp.tentative),
                           "index": len(hyp.committed), **common})
        return events

    # ------------------------------------------------------------------ reporting
    @staticmethod
    def _audio_ms(samples: int) -> float:
        return samples * 1000 / SAMPLE_RATE

    def _since_start_ms(self) -> float:
        return 0.0 if self._t0 is None else (self.clock() - self._t0) * 1000

    @property
    def text(self) -> str:
        return " ".join(self._words)

    @property
    def words(self) -> list[str]:
        """Every final word so far, as written."""
        return list(self._words)

    def summary(self) -> dict[str, Any]:
        audio_ms = self._audio_ms(self.stats.audio_samples)
        steps = sorted(self.stats.step_ms)
        return {"type": "summary", "text": self.text, "words": len(self._words), "audio_ms": round(audio_ms, 1),
                "steps": self.stats.steps, "caught_up_steps": self.stats.caught_up, "segments": self.stats.segments,
                "compute_ms": round(self.stats.compute_ms, 1),
                "rtf": round(self.stats.compute_ms / audio_ms, 4) if audio_ms else None,
                "step_ms_p90": round(steps[int(0.9 * (len(steps) - 1))], 2) if steps else None,
                "chunk_ms": self.engine.chunk_ms}


__all__ = ["SessionStats", "StreamSession"]
