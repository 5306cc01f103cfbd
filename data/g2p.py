"""Pronunciations for words missing from CMUdict (ARPAbet, as the pocketsphinx en-us model uses).

- a hyphenated word ("forty-two", kept by data.text.normalize_word) is its parts in a row, each from
  the dictionary where it has them;
- anything else comes from espeak-ng's rule-based grapheme-to-phoneme (``espeak-ng -q --ipa --sep=_``),
  its IPA mapped to ARPAbet (its guesses for names and rare words align about as well as hand-made entries).
Failing raises `G2PError`; the aligner turns that into a reject with the word named.
"""

from __future__ import annotations

import shutil
import subprocess
import unicodedata
from collections.abc import Callable
from functools import lru_cache

# espeak-ng en-us IPA symbol (stress and length marks removed first, except in the listed long vowels)
# → ARPAbet. Multi-character symbols are matched first (espeak separates phonemes with the --sep
# character, so "aɪ" arrives as one unit).
IPA_TO_ARPA: dict[str, tuple[str, ...]] = {
    "p": ("P",), "b": ("B",), "t": ("T",), "d": ("D",), "k": ("K",), "ɡ": ("G",), "g": ("G",),
    "f": ("F",), "v": ("V",), "θ": ("TH",), "ð": ("DH",), "s": ("S",), "z": ("Z",), "ʃ": ("SH",),
    "ʒ": ("ZH",), "h": ("HH",), "tʃ": ("CH",), "dʒ": ("JH",), "m": ("M",), "n": ("N",), "ŋ": ("NG",),
    "l": ("L",), "ɹ": ("R",), "r": ("R",), "w": ("W",), "j": ("Y",), "ʔ": ("T",), "ɾ": ("T",),
    "n̩": ("AH", "N"), "l̩": ("AH", "L"), "m̩": ("AH", "M"), "x": ("K",), "ç": ("HH",),
    "i": ("IY",), "iː": ("IY",), "ɪ": ("IH",), "ᵻ": ("IH",), "e": ("EY",), "eɪ": ("EY",), "ɛ": ("EH",),
    "æ": ("AE",), "a": ("AE",), "ɐ": ("AH",), "ə": ("AH",), "ʌ": ("AH",), "ɚ": ("ER",), "ɝ": ("ER",),
    "ɜ": ("ER",), "ɜː": ("ER",), "ɑ": ("AA",), "ɑː": ("AA",), "ɒ": ("AA",), "ɔ": ("AO",), "ɔː": ("AO",),
    "o": ("OW",), "oʊ": ("OW",), "əʊ": ("OW",), "ʊ": ("UH",), "u": ("UW",), "uː": ("UW",), "aɪ": ("AY",),
    "ɔɪ": ("OY",), "aʊ": ("AW",), "ɛɹ": ("EH", "R"), "ɪɹ": ("IH", "R"), "ʊɹ": ("UH", "R"),
    "ɑːɹ": ("AA", "R"), "ɔːɹ": ("AO", "R"), "oːɹ": ("AO", "R"), "iə": ("IY", "AH"), "eə": ("EH", "R"),
    "aɪə": ("AY", "ER"), "aɪɚ": ("AY", "ER"), "ɑːɪ": ("AY",),
}
_MARKS = "ˈˌ‿"


class G2PError(ValueError):
    pass


def ipa_to_arpabet(ipa: str) -> list[str]:
    """Map one word of espeak-ng IPA, phonemes separated by '_', to ARPAbet phones."""
    phones: list[str] = []
    for unit in ipa.replace(" ", "_").split("_"):
        unit = unicodedata.normalize("NFC", "".join(ch for ch in unit if ch not in _MARKS))
        if not unit:
            continue
        if unit in IPA_TO_ARPA:
            phones += IPA_TO_ARPA[unit]
            continue
        # Not a known unit: split greedily into known symbols (longest first), e.g. "iːə".
        i = 0
        while i < len(unit):
            for size in (3, 2, 1):
                piece = unit[i : i + size]
                if piece in IPA_TO_ARPA:
                    phones += IPA_TO_ARPA[piece]
                    i += size
                    break
                if size == 1 and piece == "ː":  # a stray length mark carries no phone
                    i += 1
                    break
            else:
                raise G2PError(f"no ARPAbet phone for IPA {piece!r} in {ipa!r}")
    if not phones:
        raise G2PError(f"espeak-ng gave no phonemes ({ipa!r})")
    return phones


@lru_cache(maxsize=4096)
def espeak_arpabet(word: str, voice: str = "en-us") -> tuple[str, ...]:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise G2PError("espeak-ng is not installed (Debian package espeak-ng) for out-of-vocabulary words")
    proc = subprocess.run([exe, "-q", "--ipa", "--sep=_", "-v", voice, word], capture_output=True, text=True,
                          timeout=30, check=False)
    if proc.returncode != 0:
        raise G2PError(f"espeak-ng failed on {word!r}: {proc.stderr.strip()}")
    return tuple(ipa_to_arpabet(proc.stdout.strip()))


def pronounce(word: str, lookup: Callable[[str], str | None]) -> tuple[list[str], str]:
    """ARPAbet phones for an out-of-vocabulary word and how they were found ('parts' | 'espeak').

    A hyphenated word is its parts in a row, each from the dictionary where it has them.
    """
    if "-" in word:
        phones: list[str] = []
        for part in filter(None, word.split("-")):
            known = lookup(part)
            phones += known.split() if known else espeak_arpabet(part)
        return phones, "parts"
    return list(espeak_arpabet(word)), "espeak"
