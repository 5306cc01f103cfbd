"""Word and segment times for a transcribed upload (plain, sync): the words of each recognizer segment
(``streaming.segmented.Segmented.spans``) force-aligned inside that segment's audio by the project's aligner
(pocketsphinx, the dataset builds' default), then grouped into cues for subtitles and OpenAI's ``segments``.

Why align after recognition: the streaming engine knows when it *committed* a word, not when it was said; the
aligner places the words the recognizer wrote on the audio it heard. Why segment by segment: a segment is at most
27 s of audio, so an alignment never spans a whole file, and one that fails costs only its segment. A segment the
aligner cannot place (a transcript that does not fit the audio: a recognition error) gets its words spread evenly
over its audio, and says so (``aligned: false``): every word keeps a time, none is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from data.aligners.base import Aligner
from data.text import transcript_words
from data.types import AlignmentError

SAMPLE_RATE = 16_000
CUE_MAX_S = 7.0  # a subtitle longer than this is hard to read along with
CUE_MAX_CHARS = 84  # two lines of 42, the common subtitle limit
CUE_GAP_S = 1.0  # a pause this long starts a new cue


@dataclass(frozen=True, slots=True)
class TimedWord:
    word: str
    start: float  # seconds from the start of the audio
    end: float
    aligned: bool  # False: spread evenly over its segment (the aligner could not place it)


@dataclass(frozen=True, slots=True)
class Cue:
    start: float
    end: float
    text: str


def time_words(samples: np.ndarray, words: Sequence[str], spans: Sequence[tuple[int, int, int, int]],
               aligner: Aligner) -> list[TimedWord]:
    """Every word of the transcript (``words``, as written) with its time; ``spans``: the recognizer's segments as
    (first sample, end sample, first word, end word). A punctuation-only token rides with the word before it."""
    timed: list[TimedWord] = []
    for first_sample, end_sample, first_word, end_word in spans:
        display = transcript_words(" ".join(words[first_word:end_word]))
        if not display:
            continue
        audio = samples[first_sample:end_sample]
        offset = first_sample / SAMPLE_RATE
        try:
            found = aligner.align(audio, [w.norm for w in display])
            timed += [TimedWord(w.text, offset + s.start_ms / 1000, offset + s.end_ms / 1000, True)
                      for w, s in zip(display, found, strict=True)]
        except AlignmentError:
            step = len(audio) / SAMPLE_RATE / len(display)
            timed += [TimedWord(w.text, offset + i * step, offset + (i + 1) * step, False)
                      for i, w in enumerate(display)]
    return timed


def cues(words: Sequence[TimedWord]) -> list[Cue]:
    """Words grouped into subtitle cues: a new cue after a sentence's end, at a pause of ``CUE_GAP_S``, or where the
    cue would pass ``CUE_MAX_S`` or ``CUE_MAX_CHARS``."""
    out: list[Cue] = []
    group: list[TimedWord] = []
    for w in words:
        if group:
            text = " ".join(g.word for g in group)
            if (group[-1].word.endswith((".", "?", "!")) or w.start - group[-1].end >= CUE_GAP_S
                    or w.end - group[0].start > CUE_MAX_S or len(text) + 1 + len(w.word) > CUE_MAX_CHARS):
                out.append(Cue(group[0].start, group[-1].end, text))
                group = []
        group.append(w)
    if group:
        out.append(Cue(group[0].start, group[-1].end, " ".join(g.word for g in group)))
    return out


def _clock(seconds: float, decimal: str) -> str:
    ms = max(0, round(seconds * 1000))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{decimal}{ms:03d}"


def srt(items: Sequence[Cue]) -> str:
    return "".join(f"{i}\n{_clock(c.start, ',')} --> {_clock(c.end, ',')}\n{c.text}\n\n"
                   for i, c in enumerate(items, start=1))


def vtt(items: Sequence[Cue]) -> str:
    return "WEBVTT\n\n" + "".join(f"{_clock(c.start, '.')} --> {_clock(c.end, '.')}\n{c.text}\n\n" for c in items)


__all__ = ["Cue", "TimedWord", "cues", "srt", "time_words", "vtt"]
