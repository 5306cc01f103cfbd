"""Long-form recordings: one recording + one transcript → ≤ 30 s utterances cut at aligned pauses.

``segment_recording(audio, words, aligner)`` returns contiguous ``Segment``s (start/end in the
recording, the slice of ``words`` each holds, and the words' spans relative to the segment
start) or raises ``AlignmentError`` with a reason code; ``cut(audio, segment)`` is its clip.

Approach: windowed forced alignment with anchors, using nothing but ``Aligner.align``. Aligning a
whole recording at once costs more than linear time and memory in its length; windows keep both
bounded, but need an aligner that takes ``window_ms`` of audio (pocketsphinx, MFA; not whisper).

* The recording is aligned in windows of ``window_ms`` that start at the previous cut. Each
  window gets only the words expected in its first ``max_segment_ms`` + ``LOOKAHEAD_MS``
  (speaking rate from an energy VAD × speech in that stretch). An aligner may stretch the last
  words of a truncated window over the speech that follows, so its last ``TAIL_GUARD`` words are
  never trusted; a window whose last word ends within ``SQUEEZE_MS`` of its end retries with fewer words.
* A cut candidate is a gap ≥ ``min_pause_ms`` between two trusted consecutive words; the cut
  is the middle of the gap (clamped to ``max_segment_ms``, keeping ≥ min_pause/2 after the
  word), so no word is cut. An energy check at the cut guards against a gap the aligner
  invented inside speech.
* Choice (greedy, because the windows are only known one at a time): in the second half of the
  allowed span the longest pause (capped at ``PREFERRED_PAUSE_MS``, ties → later), i.e. sentence
  breaks but long segments; otherwise the latest candidate. This reaches the end whenever
  always taking the latest pause would: the first latest-pause cut past any cut p lies within
  max_segment_ms of p.
* Every segment clip is then aligned on its own: its spans are exactly what the ordinary
  align stage computes for a ≤ 30 s utterance, and they must agree with the window's
  (median word-end difference ≤ ``AGREE_MS``), a check that the words were split right.

Word items are opaque units (one may contain spaces, "one thousand dollars"): they are passed
to the aligner unchanged; only the speaking-rate estimate counts their space-separated parts.
Leading audio of more than ``max_segment_ms`` before the first word is not handled (rejected);
trailing audio with no words that does not fit into the last segment is left out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from data.aligners.base import Aligner, check_spans
from data.types import SAMPLE_RATE, AlignmentError, WordSpan

_PER_MS = SAMPLE_RATE // 1000  # 16 samples per millisecond: ms boundaries are exact sample indices
FRAME_MS = 10  # energy frames, the aligners' own frame rate
TAIL_GUARD = 3  # untrusted last words of a window that was given only part of the remaining words
LOOKAHEAD_MS = 3000  # words past max_segment_ms a window must see to know the gap after the last one
SQUEEZE_MS = 1500  # a truncated window whose last word ends this close to its end had too many words
PREFERRED_PAUSE_MS = 600  # pauses this long are all "sentence breaks": among them the later one wins
AGREE_MS = 100  # median |word end(clip alignment) - word end(window alignment)| allowed per segment
CUT_CHECK_MS = 20  # energy is measured over ±20 ms around a cut


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of the recording: [start_ms, end_ms) and words[word_slice[0]:word_slice[1]]."""

    start_ms: int
    end_ms: int
    word_slice: tuple[int, int]
    spans: tuple[WordSpan, ...]  # relative to start_ms; .word is the input word

    @property
    def duration_ms(self) -> int:
        return self.end_ms - self.start_ms


def cut(audio: np.ndarray, segment: Segment) -> np.ndarray:
    """The segment's clip (a view of ``audio``)."""
    return audio[segment.start_ms * _PER_MS: segment.end_ms * _PER_MS]


def duration_ms(audio: np.ndarray) -> int:
    """Rounded up: the last segment's [start_ms, end_ms) then holds every sample of the recording."""
    return -(-len(audio) // _PER_MS)


@dataclass(frozen=True, slots=True)
class _Cut:
    at_ms: int  # cut position in the recording
    next_word: int  # index of the first word after the cut (== len(words) after the last word)
    pause_ms: int  # length of the aligned gap the cut lies in


@dataclass(frozen=True, slots=True)
class _Step:
    pos_ms: int
    first_word: int
    spans: tuple[WordSpan, ...]  # the window alignment, relative to pos_ms
    chosen: _Cut


class _Energy:
    """Frame energies of the recording: a pause threshold and a speech-time counter (the VAD)."""

    def __init__(self, audio: np.ndarray) -> None:
        frame = FRAME_MS * _PER_MS
        n = max(1, len(audio) // frame)
        power = np.zeros(n, dtype=np.float64)
        # A minute at a time: a float64 copy of an hour of audio would cost gigabytes.
        for a in range(0, n, 6000):
            x = audio[a * frame: min(a + 6000, n) * frame].astype(np.float64)
            x.resize(-(-len(x) // frame) * frame, refcheck=False)
            power[a: a + len(x) // frame] = (x.reshape(-1, frame) ** 2).mean(axis=1)
        self.db = 10.0 * np.log10(power + 1e-12)
        floor, loud = np.percentile(self.db, [10, 95])
        # Halfway (in dB) between the noise floor and loud speech: pauses sit near the floor
        # whatever the recording level or noise. Below 10 dB of contrast there is no usable
        # VAD (noise everywhere); the checks are then switched off rather than guessing.
        self.threshold = (floor + loud) / 2 if loud - floor >= 10.0 else np.inf
        speech = self.db > self.threshold if np.isfinite(self.threshold) else np.ones(n, dtype=bool)
        self._cum = np.concatenate([[0], np.cumsum(speech)])

    def speech_ms(self, start_ms: int, end_ms: int) -> int:
        a, b = (min(len(self._cum) - 1, max(0, t // FRAME_MS)) for t in (start_ms, end_ms))
        return int(self._cum[b] - self._cum[a]) * FRAME_MS

    def is_quiet(self, at_ms: int) -> bool:
        a = max(0, (at_ms - CUT_CHECK_MS) // FRAME_MS)
        b = min(len(self.db), (at_ms + CUT_CHECK_MS) // FRAME_MS + 1)
        return a >= b or float(self.db[a:b].mean()) <= self.threshold


def segment_recording(audio: np.ndarray, words: Sequence[str], aligner: Aligner, *, max_segment_ms: int = 30_000,
                      min_pause_ms: int = 200, window_ms: int | None = None) -> list[Segment]:
    """Split a recording (float32 mono 16 kHz) with its normalized words into ≤ max_segment_ms segments.

    Raises AlignmentError: ``no_pause_to_split`` (no aligned pause ≥ min_pause_ms where a cut is
    needed), ``longform_align_failed`` (a window or segment could not be aligned; the aligner's
    reason is in the detail), ``longform_unstable_alignment`` (a segment's own alignment
    disagrees with the window's). A recording ≤ max_segment_ms is one segment, and the
    aligner's own error passes through unchanged.
    """
    if audio.ndim != 1:
        raise ValueError(f"expected mono samples, got shape {audio.shape}")
    words = list(words)
    if not words:
        raise AlignmentError("align_failed", "no words to align")
    window_ms = window_ms if window_ms is not None else max_segment_ms * 3 // 2
    if window_ms < max_segment_ms + LOOKAHEAD_MS + 5000:
        raise ValueError(f"window_ms={window_ms} leaves no room past max_segment_ms={max_segment_ms}")
    total_ms = duration_ms(audio)
    if len(audio) <= max_segment_ms * _PER_MS:
        spans = check_spans(aligner.align(audio, words), words, len(audio))
        return [Segment(0, total_ms, (0, len(words)), tuple(spans))]

    energy = _Energy(audio)
    # Speaking rate in space-separated tokens per ms of VAD speech, to guess a window's words.
    tokens = np.concatenate([[0], np.cumsum([max(1, len(w.split())) for w in words])])
    rate = tokens[-1] / max(energy.speech_ms(0, total_ms), 1000)
    steps: list[_Step] = []
    pos, first = 0, 0
    while first < len(words) and total_ms - pos > max_segment_ms:
        expected = tokens[first] + rate * energy.speech_ms(pos, pos + max_segment_ms + LOOKAHEAD_MS)
        n_words = int(np.searchsorted(tokens, expected, side="right")) - first + TAIL_GUARD
        spans, truncated = _align_window(audio, words, aligner, pos, first, n_words, window_ms, total_ms)
        cands = _candidates(spans, pos, first, truncated, energy, max_segment_ms, min_pause_ms, total_ms)
        if not cands:
            raise AlignmentError("no_pause_to_split", f"no pause >= {min_pause_ms} ms between {pos} and "
                                 f"{pos + max_segment_ms} ms (word {first} of {len(words)})")
        chosen = _choose(cands, pos, max_segment_ms)
        steps.append(_Step(pos, first, tuple(spans), chosen))
        pos, first = chosen.at_ms, chosen.next_word

    segments = [_segment(audio, words, aligner, s.pos_ms, s.chosen.at_ms, s.first_word, s.chosen.next_word, s.spans)
                for s in steps]
    if first < len(words):  # the rest fits into one segment
        segments.append(_segment(audio, words, aligner, pos, total_ms, first, len(words), None))
    return segments


def _align_window(audio: np.ndarray, words: Sequence[str], aligner: Aligner, pos: int, first: int, n_words: int,
                  window_ms: int, total_ms: int) -> tuple[list[WordSpan], bool]:
    """Align words[first:first+n] in audio[pos:pos+window]; all remaining words when the window is the rest."""
    end = min(total_ms, pos + window_ms)
    clip = audio[pos * _PER_MS: end * _PER_MS]
    remaining = len(words) - first
    n_words = remaining if end == total_ms else min(remaining, max(n_words, TAIL_GUARD + 2))
    for _ in range(4):
        part = words[first: first + n_words]
        try:
            spans = check_spans(aligner.align(clip, part), part, len(clip))
        except AlignmentError as err:
            raise AlignmentError("longform_align_failed", f"window at {pos} ms, words {first}..{first + n_words}: "
                                 f"{err.reason}: {err.detail}") from None
        truncated = n_words < remaining
        # Words that do not fit get squeezed towards the window's end: nothing there is trustworthy.
        if end == total_ms or spans[-1].end_ms <= (end - pos) - SQUEEZE_MS or n_words <= TAIL_GUARD + 2:
            return spans, truncated
        n_words = max(TAIL_GUARD + 2, int(n_words * 0.7))
    return spans, truncated


def _candidates(spans: Sequence[WordSpan], pos: int, first: int, truncated: bool, energy: _Energy,
                max_segment_ms: int, min_pause_ms: int, total_ms: int) -> list[_Cut]:
    """Cuts in aligned gaps ≥ min_pause_ms among the trusted words, no later than pos + max_segment_ms."""
    trusted = len(spans) - TAIL_GUARD if truncated else len(spans)
    cands: list[_Cut] = []
    for i in range(trusted - 1):
        gap_start, gap_end = spans[i].end_ms, spans[i + 1].start_ms
        if gap_start > max_segment_ms:
            break
        if gap_end - gap_start < min_pause_ms:
            continue
        at = min((gap_start + gap_end) // 2, max_segment_ms)
        if at - gap_start >= min_pause_ms // 2 and energy.is_quiet(pos + at):
            cands.append(_Cut(pos + at, first + i + 1, gap_end - gap_start))
    if not truncated:
        # Every remaining word is in this window, and the recording goes on past max_segment_ms:
        # word-free trailing audio. The last segment ends at the limit; the rest is left out.
        last_end = spans[-1].end_ms
        if max_segment_ms - last_end >= min_pause_ms // 2 and energy.is_quiet(pos + max_segment_ms):
            cands.append(_Cut(pos + max_segment_ms, first + len(spans), total_ms - pos - last_end))
    return cands


def _choose(cands: Sequence[_Cut], pos: int, max_segment_ms: int) -> _Cut:
    """The longest pause (capped) in the second half of the allowed span, else the latest cut."""
    late = [c for c in cands if c.at_ms - pos >= max_segment_ms // 2]
    if late:
        return max(late, key=lambda c: (min(c.pause_ms, PREFERRED_PAUSE_MS), c.at_ms))
    return max(cands, key=lambda c: c.at_ms)


def _segment(audio: np.ndarray, words: Sequence[str], aligner: Aligner, start: int, end: int, a: int, b: int,
             window_spans: Sequence[WordSpan] | None) -> Segment:
    """Align the segment's clip on its own and check it against the window alignment."""
    clip = audio[start * _PER_MS: end * _PER_MS]
    part = words[a:b]
    try:
        spans = check_spans(aligner.align(clip, part), part, len(clip))
    except AlignmentError as err:
        raise AlignmentError("longform_align_failed", f"segment {start}..{end} ms, words {a}..{b}: "
                             f"{err.reason}: {err.detail}") from None
    if window_spans is not None:
        diffs = [abs(s.end_ms - w.end_ms) for s, w in zip(spans, window_spans[: b - a], strict=True)]
        if float(np.median(diffs)) > AGREE_MS:
            raise AlignmentError("longform_unstable_alignment", f"segment {start}..{end} ms: its own alignment "
                                 f"differs from the window's by a median {np.median(diffs):.0f} ms per word")
    return Segment(start, end, (a, b), tuple(spans))
