"""Transcript words: what is shown (tokenized for Whisper) versus what is aligned.

A transcript is split on whitespace into display words ("Printing," "Steels,").  Each gets a
normalized form for the aligners: lowercase, letters/digits/apostrophes only ("printing").
A display word whose normalized form is empty (a lone dash, "&") is glued to the word before it
so that every display word has exactly one aligned span and counts always reconcile.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_KEEP = re.compile(r"[^a-z0-9'-]+")
_HYPHENS = re.compile(r"-{2,}")


@dataclass(frozen=True, slots=True)
class TranscriptWord:
    text: str  # as written in the transcript, punctuation and case kept
    norm: str  # what the aligner sees


def normalize_word(word: str) -> str:
    """Lowercase ASCII letters, digits, inner apostrophes and inner hyphens.

    "'em" keeps its apostrophe; "forty-two" keeps its hyphen so that aligners can pronounce a
    hyphenated word as its parts (gluing them, "fortytwo", makes a word no dictionary has).
    """
    # Typographic apostrophes first: the ASCII fold below would drop them ("I’ll" → "ill").
    word = word.replace("\u2019", "'").replace("\u02bc", "'")
    ascii_word = unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode().lower()
    return _HYPHENS.sub("-", _KEEP.sub("", ascii_word)).strip("'-")


def transcript_words(transcript: str) -> list[TranscriptWord]:
    """Split a transcript into display words with normalized forms; never returns empty norms."""
    words: list[TranscriptWord] = []
    pending = ""  # punctuation-only tokens before the first real word
    for raw in transcript.split():
        norm = normalize_word(raw)
        if norm:
            words.append(TranscriptWord(f"{pending}{raw}", norm))
            pending = ""
        elif words:  # punctuation-only token: attach to the previous word
            prev = words[-1]
            words[-1] = TranscriptWord(f"{prev.text} {raw}", prev.norm)
        else:
            pending += raw + " "
    return words


def normalize_transcript(transcript: str) -> str:
    """The normalized transcript stored in the manifest: space-joined normalized words."""
    return " ".join(w.norm for w in transcript_words(transcript))
