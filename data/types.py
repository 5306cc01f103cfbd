"""Small value types shared by the dataset layer."""

from __future__ import annotations

from dataclasses import dataclass

SAMPLE_RATE = 16_000  # Whisper's input rate; every aligner receives audio at this rate.


@dataclass(frozen=True, slots=True)
class WordSpan:
    """One aligned word. Times are integer milliseconds from the start of the utterance."""

    word: str
    start_ms: int
    end_ms: int

    def __post_init__(self) -> None:
        if self.start_ms < 0 or self.end_ms < self.start_ms:
            raise ValueError(f"bad word span {self.word!r}: {self.start_ms}..{self.end_ms} ms")


class AlignmentError(Exception):
    """An utterance could not be aligned. `reason` is a short machine-readable code for rejects.parquet."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class AlignerUnavailable(RuntimeError):
    """The aligner's program or model is not installed here; the message says how to get it."""
