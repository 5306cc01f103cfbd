"""Transcript words: what is shown (tokenized for Whisper) versus what is aligned.

A transcript is split on whitespace into display words ("Printing," "$1,250"). The display word is
what Whisper is trained on, casing and punctuation kept. Each also gets its spoken form for the
aligners (data.verbalize): lowercase words a speaker says, several of them where the writing is
compact ("$1,250" → "one thousand two hundred fifty dollars", "Dr." → "doctor"). Aligners take a
multi-word spoken form as one item and return one span for it (data.aligners.base).
A display word with no spoken form (a lone dash, quotes) is glued to the word before it, so that
every display word has exactly one aligned span and counts always reconcile; a symbol that is said
("&" → "and", "%" → "percent") is a word of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

from data.verbalize import verbalize


@dataclass(frozen=True, slots=True)
class TranscriptWord:
    text: str  # as written in the transcript, punctuation and case kept
    norm: str  # what the aligner sees: spoken words, space-separated ("one thousand dollars")


def normalize_word(word: str) -> str:
    """Spoken form of one display word: lowercase ASCII words (letters, inner apostrophes and hyphens).

    "'em" keeps its apostrophe inside ("em"); "forty-two" keeps its hyphen so that aligners can
    pronounce a hyphenated word as its parts (gluing them, "fortytwo", makes a word no dictionary
    has). Digits and symbols become words ("3rd" → "third"); '' when nothing in it is said.
    Depends on the word alone, never on its neighbours (data.synth relies on that).
    """
    return verbalize(word)


def transcript_words(transcript: str) -> list[TranscriptWord]:
    """Split a transcript into display words with spoken forms; never returns empty norms."""
    words: list[TranscriptWord] = []
    pending = ""  # unspoken tokens before the first real word
    for raw in transcript.split():
        norm = normalize_word(raw)
        if norm:
            words.append(TranscriptWord(f"{pending}{raw}", norm))
            pending = ""
        elif words:  # unspoken token (punctuation): attach to the previous word
            prev = words[-1]
            words[-1] = TranscriptWord(f"{prev.text} {raw}", prev.norm)
        else:
            pending += raw + " "
    return words


def written_form(transcript: str) -> str:
    """A transcript in capitals as Whisper writes text: "WE CALL IT BEAR" → "We call it bear.", "I'M" → "I'm".

    Training targets are a transcript's tokens, and a corpus of prompts in capitals (speechocean762) would teach the
    decoder capital-letter tokens, a style it rarely writes (docs/decisions/real-speech-written.md). A transcript
    with any lowercase letter is already written and is returned as it is (its proper nouns stay)."""
    if any(c.islower() for c in transcript) or not any(c.isalpha() for c in transcript):
        return transcript
    words = [w.lower() for w in transcript.split()]
    words = ["I" + w[1:] if w == "i" or w.startswith("i'") else w for w in words]
    sentence = " ".join(words)
    return sentence[0].upper() + sentence[1:] + ("" if sentence[-1] in ".?!" else ".")


def normalize_transcript(transcript: str) -> str:
    """The normalized transcript stored in the manifest: the space-joined spoken words."""
    return " ".join(w.norm for w in transcript_words(transcript))
