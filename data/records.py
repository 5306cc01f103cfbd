"""Records passed between build stages. Small and picklable: audio stays in the work store."""

from __future__ import annotations

from dataclasses import dataclass

from data.corpus import CorpusItem
from data.text import TranscriptWord
from data.types import WordSpan


@dataclass(frozen=True, slots=True)
class Scanned:
    item: CorpusItem
    source_sha256: str

    @property
    def content_key(self) -> str:
        """What makes this input what it is: audio bytes, segment, transcript and speaker."""
        i = self.item
        return f"{self.source_sha256}|{i.start_s}|{i.duration_s}|{i.transcript}|{i.speaker}|{i.utt_id}"


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
class Aligned:
    prepared: Prepared
    spans: tuple[WordSpan, ...]  # one per prepared.words, word = display text
