"""WordNet usage examples as training sentences: cleaning, exclusion of held-out transcripts, a stable order."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from data.text import normalize_transcript
from data.wordnet_text import (POS_FILES, WORDNET_DIR, WordNetMissingError, clean_example, sample_sentences,
                               wordnet_sentences)

LICENCE = "  1 This software and database is being provided to you, the LICENSEE\n"
SYNSETS = [
    '00004227 29 v 03 exhale 0 008 @ 00001740 v 0000 | expel air; "Exhale when you lift the weight"  \n',
    '00004492 29 v 01 hold 4 001 | keep from exhaling; "hold your breath"; "she held her breath for a minute"  \n',
    '00001740 29 v 04 breathe 0 | draw air; "I can breathe better when the air is clean"; '
    '"The patient is respiring"\n',
    '00005041 29 v 01 inhale 0 | draw in air; "Inhale deeply"; "the dog ran 3 miles"; "he met Dr. Smith at home"\n',
    '00006000 29 v 01 pant 0 | breathe noisily; "The runners reached the finish line, panting heavily"\n',
    '00007000 29 n 01 dup 0 | a repeat; "I can breathe better when the air is clean!"\n',
]


@pytest.fixture()
def wordnet(tmp_path: Path) -> Path:
    for i, name in enumerate(POS_FILES):
        (tmp_path / name).write_text(LICENCE + "".join(SYNSETS[i::len(POS_FILES)]), encoding="utf-8")
    return tmp_path


def test_clean_example_keeps_only_what_a_voice_says_as_written():
    assert clean_example("she held her breath for a minute") == "She held her breath for a minute."
    assert clean_example("Is it raining in the hills?") == "Is it raining in the hills?"
    assert clean_example("Inhale deeply") is None  # too short to carry context
    assert clean_example("the dog ran 3 miles home today") is None  # digits: a verbaliser would guess
    assert clean_example("he met Dr. Smith at the station") is None  # abbreviations
    assert clean_example("storefronts with...dirt on the walls") is None
    assert clean_example(" ".join(["word"] * 21)) is None


def test_sentences_are_unique_excluded_and_in_hash_order(wordnet: Path):
    got = wordnet_sentences(wordnet)
    assert got == sorted(set(got), key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    # the same words with other punctuation are one sentence (the first file's copy is kept)
    assert sum(normalize_transcript(t) == "i can breathe better when the air is clean" for t in got) == 1
    assert all("3" not in t and "Dr." not in t for t in got)
    assert len(got) == 4  # exhale, held, breathe (once), runners; the 3- and 4-word examples are too short

    held_out = ["The runners reached the finish line panting heavily"]  # punctuation differs: same words
    kept = wordnet_sentences(wordnet, exclude=held_out)
    assert len(kept) == 3 and not any("runners" in t for t in kept)


def test_a_sample_is_a_prefix_of_a_larger_one(wordnet: Path):
    assert sample_sentences(2, wordnet) == sample_sentences(4, wordnet)[:2]
    with pytest.raises(ValueError, match="WordNet gives 4"):
        sample_sentences(5, wordnet)


def test_missing_database_says_how_to_install(tmp_path: Path):
    with pytest.raises(WordNetMissingError, match="apt-get install wordnet-base"):
        wordnet_sentences(tmp_path)


def test_the_installed_wordnet_gives_thousands_of_sentences():
    """scripts/setup.sh installs Debian's wordnet-base: the evaluation's training corpus draws 800 from it."""
    sentences = wordnet_sentences(WORDNET_DIR)
    assert len(sentences) > 20_000
    assert all(5 <= len(t.split()) <= 20 and t[0].isupper() and t[-1] in ".!?" for t in sentences)
