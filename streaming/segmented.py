"""Streams of any length through a recognizer whose context is bounded (Whisper's encoder holds 30 s).

``Segmented(inner)`` cuts a stream into *segments*: once a segment holds ``segment_ms`` of audio it ends after
the next quiet chunk (RMS below ``QUIET_DBFS``; with ``quiet_margin_db``, also a chunk within that many dB of the
segment's quietest chunk so far), and at ``max_segment_ms`` in any case. The inner recognizer then
finishes (every word of the segment becomes final) and starts afresh on the next audio. Words of finished
segments stay committed, so the hypothesis is the whole stream's. Why segments and not a sliding window: the
causal engine and the two-pass verifier both attend to all audio of their segment, so the cost of a step is
bounded by the segment, never by the stream, and minutes of silence are so many empty segments.

Why a relative quiet test beside the absolute one: a recording made in a room has a noise floor of its own. The
spontaneous MFA recordings of the dev split sit at -40 to -44 dBFS between words and never reach -45, so without it
a segment of such speech runs to ``max_segment_ms`` and is cut wherever that falls, in a word or not. The floor
is the lowest level among the segment's chunks tested so far (its pauses, where it has any).

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
                 max_segment_ms: int = MAX_SEGMENT_MS, quiet_margin_db: float | None = None) -> None:
        if not 0 < segment_ms <= max_segment_ms <= MAX_ALLOWED_MS:
            raise ValueError(f"need 0 < segment_ms ({segment_ms}) <= max_segment_ms ({max_segment_ms}) "
                             f"<= {MAX_ALLOWED_MS}")
        if quiet_margin_db is not None and not 0 <= quiet_margin_db <= 20:
            raise ValueError(f"quiet_margin_db must be in [0, 20] dB (or None: off), got {quiet_margin_db}")
        self.quiet_margin_db = quiet_margin_db
        self.inner = inner
        self.chunk_ms = getattr(inner, "chunk_ms", None)
        self.lookahead_ms = float(getattr(inner, "lookahead_ms", 0.0))
        self.segment_samples = segment_ms * SAMPLE_RATE // 1000
        self.max_segment_samples = max_segment_ms * SAMPLE_RATE // 1000
        self._quiet_samples = max(1, round((self.chunk_ms or 300) * SAMPLE_RATE / 1000))
        self.segments = 0
        self._done: list[str] = []
        self._fed = 0
        self._floor_dbfs = float("inf")

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
        self._floor_dbfs = float("inf")

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
        # the level is needed past segment_ms (the quiet test) and, with a margin, for the floor at every piece
        if self._fed >= self.segment_samples or self.quiet_margin_db is not None:
            level = dbfs(samples[-self._quiet_samples:])
            if self._fed >= self.segment_samples and self._quiet(level):
                return self._end_segment()
            self._floor_dbfs = min(self._floor_dbfs, level)
        return Hypothesis(tuple(self._done) + hyp.committed, hyp.tentative)

    def _quiet(self, level: float) -> bool:
        """A piece's last chunk at ``level`` dBFS is quiet: below ``QUIET_DBFS``, or (``quiet_margin_db``) at most
        the margin above the quietest chunk the segment has had before it (so a new quietest chunk is quiet)."""
        if level < QUIET_DBFS:
            return True
        return self.quiet_margin_db is not None and level <= self._floor_dbfs + self.quiet_margin_db

    def _end_segment(self) -> Hypothesis:
        self._done += self.inner.finish().words
        self.inner.reset()
        self._fed = 0
        self._floor_dbfs = float("inf")
        self.segments += 1
        return Hypothesis(tuple(self._done))

    def finish(self) -> Hypothesis:
        if self._fed:
            return self._end_segment()
        return Hypothesis(tuple(self._done))
