"""Streams of any length through a recognizer whose context is bounded (Whisper's encoder holds 30 s).

``Segmented(inner)`` cuts a stream into *segments*: once a segment holds ``segment_ms`` of audio it ends after
the next quiet chunk (RMS below ``QUIET_DBFS``), and at ``max_segment_ms`` in any case. The inner recognizer then
finishes (every word of the segment becomes final) and starts afresh on the next audio. Words of finished
segments stay committed, so the hypothesis is the whole stream's. Why segments and not a sliding window: the
causal engine and the two-pass verifier both attend to all audio of their segment, so the cost of a step is
bounded by the segment, never by the stream, and minutes of silence are so many empty segments.

The evaluate stage and the live server wrap their recognizer in this one class (``serving.session``
feeds it the pieces ``run_stream`` feeds), so a stream gives the same words whether it is evaluated or served.
"""

from __future__ import annotations

import numpy as np

from streaming.events import SAMPLE_RATE, Hypothesis, StreamingRecognizer

QUIET_DBFS = -45.0
SEGMENT_MS = 24_000
MAX_SEGMENT_MS = 27_000
# + the causal engine's 1 s end-of-segment flush (and the two-pass verifier's 0.5 s hush word) stay inside 30 s
MAX_ALLOWED_MS = 28_000


def dbfs(samples: np.ndarray) -> float:
    """RMS level in dB relative to full scale (-180 for digital silence)."""
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if len(samples) else 0.0
    return 20 * float(np.log10(max(rms, 1e-9)))


class Segmented:
    """A ``StreamingRecognizer`` over ``inner`` for streams of any length (see the module docstring).

    The quiet test looks at the last chunk of each piece (a live feed may bring several chunks at once).
    ``segments`` counts the segments ended so far."""

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
        self._quiet_samples = max(1, round((self.chunk_ms or 300) * SAMPLE_RATE / 1000))
        self.segments = 0
        self._done: list[str] = []
        self._fed = 0

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
        self._done = []
        self._fed = 0

    def feed(self, samples: np.ndarray) -> Hypothesis:
        # a piece that would carry the segment past max_segment_ms (a live feed behind real time brings several
        # chunks at once) is split there: no segment ever exceeds the inner recognizer's context
        room = self.max_segment_samples - self._fed
        if len(samples) > room > 0:
            self.feed(samples[:room])
            return self.feed(samples[room:])
        hyp = self.inner.feed(samples)
        self._fed += len(samples)
        if self._fed >= self.max_segment_samples:
            return self._end_segment()
        if self._fed >= self.segment_samples and dbfs(samples[-self._quiet_samples:]) < QUIET_DBFS:
            return self._end_segment()
        return Hypothesis(tuple(self._done) + hyp.committed, hyp.tentative)

    def _end_segment(self) -> Hypothesis:
        self._done += self.inner.finish().words
        self.inner.reset()
        self._fed = 0
        self.segments += 1
        return Hypothesis(tuple(self._done))

    def finish(self) -> Hypothesis:
        if self._fed:
            return self._end_segment()
        return Hypothesis(tuple(self._done))
