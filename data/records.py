"""Records passed between build stages. Small and picklable: audio stays in the work store."""

from __future__ import annotations

from dataclasses import dataclass

from data.corpus import CorpusItem
from data.text import TranscriptWord
from data.types import WordSpan


def content_key(source_sha256: str, start_s: float, duration_s: float | None, transcript: str, speaker: str,
                utt_id: str) -> str:
    """What makes an input what it is: audio bytes, segment, transcript and speaker (the inputs table's digest and
    every memo key of the build are made from it)."""
    return f"{source_sha256}|{start_s}|{duration_s}|{transcript}|{speaker}|{utt_id}"


@dataclass(frozen=True, slots=True)
class Scanned:
    item: CorpusItem
    source_sha256: str

    @property
    def content_key(self) -> str:
        i = self.item
        return content_key(self.source_sha256, i.start_s, i.duration_s, i.transcript, i.speaker, i.utt_id)


@dataclass(frozen=True, slots=True)
class Reject:
    utt_id: str
    source_path: str
    source_sha256: str | None
    stage: str  # scan | validate | align
    reason: str
    detail: str


@dataclass(frozen=True, slots=True)
class Prepared:
    scanned: Scanned
    audio_sha256: str  # of the encoded 16 kHz mono clip in the work store
    duration_ms: int
    orig_sample_rate: int
    orig_channels: int
    notes: tuple[str, ...]
    words: tuple[TranscriptWord, ...]


@dataclass(frozen=True, slots=True)
class SegmentClip:
    """One ≤ 30 s piece of a long-form recording, cut at an aligned pause: its own clip, words and offset."""

    index: int
    offset_ms: int  # where the segment starts in the (prepared) recording
    duration_ms: int
    audio_sha256: str  # of the encoded segment clip in the work store
    words: tuple[TranscriptWord, ...]


@dataclass(frozen=True, slots=True)
class Aligned:
    prepared: Prepared
    spans: tuple[WordSpan, ...]  # one per word of this utterance, word = display text, times from its start
    segment: SegmentClip | None = None  # set when this utterance is a piece of a long-form recording

    @property
    def utt_id(self) -> str:
        rec = self.prepared.scanned.item.utt_id
        return rec if self.segment is None else f"{rec}-s{self.segment.index:03d}"

    @property
    def words(self) -> tuple[TranscriptWord, ...]:
        return self.prepared.words if self.segment is None else self.segment.words

    @property
    def audio_sha256(self) -> str:
        return self.prepared.audio_sha256 if self.segment is None else self.segment.audio_sha256

    @property
    def duration_ms(self) -> int:
        return self.prepared.duration_ms if self.segment is None else self.segment.duration_ms

    @property
    def offset_ms(self) -> int:
        return 0 if self.segment is None else self.segment.offset_ms
