"""Varied English sentences for synthetic training speech: WordNet's usage examples.

Why: the synthetic training speech spoke ~60 distinct sentences (``data.tts_kokoro.kokoro_texts("train")``), so a
causal adapter saw the same words hundreds of times. WordNet 3.0 glosses hold ~48,000 quoted usage examples
("The runners reached the finish line, panting heavily"): natural sentences over the whole vocabulary of English,
under a permissive licence (WordNet 3.0 licence: use, copy, modify, distribute with its notice). They come from the
Debian package ``wordnet-base`` (``/usr/share/wordnet``; ``scripts/setup.sh`` installs it), never from a hub.

The examples are read from the ``data.{noun,verb,adj,adv}`` files in place, cleaned, filtered to sentences a voice
can say as written (letters and plain punctuation, ``MIN_WORDS``–``MAX_WORDS`` words), de-duplicated, and ordered
by a hash of each sentence, so a sample of n is the same on every machine and grows by appending.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path

from data.text import normalize_transcript

WORDNET_DIR = Path("/usr/share/wordnet")
POS_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
MIN_WORDS, MAX_WORDS = 5, 20

_QUOTED = re.compile(r'"([^"]+)"')
# a voice says these as written; digits, slashes, brackets and abbreviations would need a verbaliser's guess
_PLAIN = re.compile(r"[A-Za-z][A-Za-z ,;:!?'.-]*")
_ABBREVIATION = re.compile(r"\b(?:[A-Za-z]\.){2,}|\b(?:Mr|Mrs|Dr|St|etc|e\.g|i\.e|vs)\.")


class WordNetMissingError(FileNotFoundError):
    """The WordNet database files are not where the caller said."""


def _examples(line: str) -> list[str]:
    """The quoted usage examples of one synset line (the gloss follows the ``|``)."""
    if "|" not in line:
        return []
    return _QUOTED.findall(line.split("|", 1)[1])


def clean_example(text: str) -> str | None:
    """A usage example as a sentence to speak, or None when a voice could not say it as written."""
    text = " ".join(text.replace("`", "'").split()).strip(" ;")
    if not _PLAIN.fullmatch(text) or _ABBREVIATION.search(text) or "--" in text or ".." in text:
        return None
    if not MIN_WORDS <= len(text.split()) <= MAX_WORDS:
        return None
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def _order(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def wordnet_sentences(wordnet_dir: str | Path = WORDNET_DIR, exclude: Iterable[str] = ()) -> list[str]:
    """Every usable usage example, de-duplicated by normalised text, in hash order.

    ``exclude``: transcripts (e.g. every held-out one) whose normalised text no returned sentence may equal.
    """
    root = Path(wordnet_dir)
    missing = [name for name in POS_FILES if not (root / name).is_file()]
    if missing:
        raise WordNetMissingError(f"{root}: no WordNet {', '.join(missing)} (Debian: apt-get install wordnet-base)")
    seen = {normalize_transcript(t) for t in exclude}
    out = []
    for name in POS_FILES:
        with open(root / name, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("  "):  # the licence header
                    continue
                for raw in _examples(line):
                    text = clean_example(raw)
                    key = normalize_transcript(text) if text else ""
                    if text and key not in seen:
                        seen.add(key)
                        out.append(text)
    return sorted(out, key=_order)


def sample_sentences(n: int, wordnet_dir: str | Path = WORDNET_DIR, exclude: Iterable[str] = ()) -> list[str]:
    """The first ``n`` of :func:`wordnet_sentences`: a fixed sample; a larger n keeps the smaller one's sentences."""
    sentences = wordnet_sentences(wordnet_dir, exclude)
    if n > len(sentences):
        raise ValueError(f"asked for {n} sentences, WordNet gives {len(sentences)}")
    return sentences[:n]
