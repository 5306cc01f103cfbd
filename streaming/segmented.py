"""Streams of any length through a recognizer whose context is bounded (Whisper's encoder holds 30 s).

``Segmented(inner)`` cuts a stream into *segments*: once a segment holds ``segment_ms`` of audio it ends in the
middle of the next pause (``PAUSE_MS`` of 10 ms frames ``PAUSE_DROP_DB`` below the segment's median frame level; the
piece that holds it is split there), and at ``max_segment_ms`` in any case. Why frames and not a quiet chunk:
read speech often holds no quiet 300 ms chunk for many seconds, and a forced cut breaks the word it falls in
(docs/decisions/longform-cuts.md). The inner recognizer then finishes (every word of the segment becomes final)
and starts afresh on the next audio. Words of finished
segments stay committed, so the hypothesis is the whole stream's. Why segments and not a sliding window: the
causal engine and the two-pass verifier both attend to all audio of their segment, so the cost of a step is
bounded by the segment, never by the stream, and minutes of silence are so many empty segments.

The evaluate stage and the live server wrap their recognizer in this one class (``serving.session``
feeds it the pieces ``run_stream`` feeds), so a stream gives the same words whether it is evaluated or served.
"""

from __future__ import annotations

import numpy as np

from streaming.events import SAMPLE_RATE, Hypothesis, StreamingRecognizer

QUIET_DBFS = -45.0  # the two-pass verifier's "has sound" test (streaming.second_pass)
FRAME = 160  # 10 ms
PAUSE_MS = 60
PAUSE_DROP_DB = 25.0
SEGMENT_MS = 24_000
MAX_SEGMENT_MS = 27_000
# + the causal engine's 1 s end-of-segment flush (and the two-pass verifier's 0.5 s hush word) stay inside 30 s
MAX_ALLOWED_MS = 28_000


def dbfs(samples: np.ndarray) -> float:
    """RMS level in dB relative to full scale (-180 for digital silence)."""
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if len(samples) else 0.0
    return 20 * float(np.log10(max(rms, 1e-9)))


def frame_dbfs(samples: np.ndarray) -> np.ndarray:
    """RMS level (dBFS) of each whole 10 ms frame of ``samples``."""
    n = len(samples) // FRAME
    frames = np.asarray(samples[: n * FRAME], dtype=np.float64).reshape(n, FRAME)
    return 20 * np.log10(np.maximum(np.sqrt(np.mean(frames**2, axis=1)), 1e-9))


class Segmented:
    """A ``StreamingRecognizer`` over ``inner`` for streams of any length (see the module docstring).

    The pause test looks at every 10 ms frame of each piece (a live feed may bring several chunks at once); a run of
    quiet frames may begin in the piece before. ``segments`` counts the segments ended so far."""

    def __init__(self, inner: StreamingRecognizer, *, segment_ms: int = SEGMENT_MS,
                 max_segment_ms: int = MAX_SEGMENT_MS) -> None:
        if not 0 < segment_ms <= max_segment_ms <= MAX_ALLOWED_MS:
            raise ValueError(f"need 0 < segment_ms ({segment_ms}) <= max_segment_ms ({max_segment_ms}) "
                             f"<= {MAX_ALLOWED_MS}")
        self.inner = inner
        self.chunk_ms = getattr(inner, "chunk_ms", None)
        self.lookahead_ms = float(getattr(inner, "lookahead_ms", 0.0))
        self.segment_samples = segment_ms * SAMPLE_RATE // 1000
        self.max_segment_samples = max_segment_ms * SAMPLE_RATE // 1000
        self.segments = 0
        # each ended segment: (first sample, end sample, first word, end word) of the stream; what a caller that
        # times words (an upload's word timestamps) aligns segment by segment
        self.spans: list[tuple[int, int, int, int]] = []
        self._offset = 0  # the stream's samples before the current segment
        self._done: list[str] = []
        self._fed = 0
        self._levels: list[np.ndarray] = []  # the current segment's frame levels, for its median
        self._run = 0  # quiet frames in a row at the end of what the segment was fed

    def __getattr__(self, name: str):
        # what callers read of the wrapped system (model, chunk sizes, profiles) passes through
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def segment_fed_samples(self) -> int:
        """Audio given to the current segment so far."""
        return self._fed

    def reset(self) -> None:
        self.inner.reset()
        self.segments = 0
        self.spans, self._offset = [], 0
        self._done = []
        self._fed = 0
        self._levels, self._run = [], 0

    def _threshold(self) -> float:
        return float(np.median(np.concatenate(self._levels))) - PAUSE_DROP_DB if self._levels else -np.inf

    def _scan(self, levels: np.ndarray, threshold: float) -> tuple[int | None, int]:
        """One walk over a piece's frames: where in it (samples) the segment ends, the middle of the first pause that
        ends past segment_ms (None: nowhere), and the quiet frames in a row at the piece's end."""
        need, run = PAUSE_MS * SAMPLE_RATE // 1000 // FRAME, self._run
        for j, level in enumerate(levels):
            run = run + 1 if level < threshold else 0
            end = (j + 1) * FRAME
            if run >= need and self._fed + end >= self.segment_samples:
                return max(0, end - (need // 2) * FRAME), run
        return None, run

    def feed(self, samples: np.ndarray) -> Hypothesis:
        # a piece that would carry the segment past max_segment_ms (a live feed behind real time brings several
        # chunks at once) is split there: no segment ever exceeds the inner recognizer's context
        room = self.max_segment_samples - self._fed
        if len(samples) > room > 0:
            self.feed(samples[:room])
            return self.feed(samples[room:])
        levels = frame_dbfs(samples)
        cut, run = self._scan(levels, self._threshold())
        if cut is not None:  # the piece is split in the pause: its first part ends this segment
            if cut:
                self.inner.feed(samples[:cut])
                self._fed += cut
            hyp = self._end_segment()
            return self.feed(samples[cut:]) if cut < len(samples) else hyp
        hyp = self.inner.feed(samples)
        self._fed += len(samples)
        self._levels.append(levels)
        self._run = run
        if self._fed >= self.max_segment_samples:
            return self._end_segment()
        return Hypothesis(tuple(self._done) + hyp.committed, hyp.tentative)

    def _end_segment(self) -> Hypothesis:
        first = len(self._done)
        self._done += self.inner.finish().words
        self.spans.append((self._offset, self._offset + self._fed, first, len(self._done)))
        self._offset += self._fed
        self.inner.reset()
        self._fed = 0
        self._levels, self._run = [], 0
        self.segments += 1
        return Hypothesis(tuple(self._done))

    def finish(self) -> Hypothesis:
        if self._fed:
            return self._end_segment()
        return Hypothesis(tuple(self._done))
