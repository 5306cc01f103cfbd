"""Digit strings are scored in one canonical form, digit by digit, on both sides and for every system: Whisper's
normaliser joins spelled digits ("TWO TWO EIGHT SEVEN" → "2287") but not written ones ("2-2-8-7." → "2 2 8 7"),
which scored a right transcript as four errors (docs/decisions/digit-scoring.md)."""

from __future__ import annotations

import pytest

from evaluation.metrics import normalize, wer, wer_counts


@pytest.mark.parametrize("ref, hyp", [
    ("TWO TWO EIGHT SEVEN", "2-2-8-7."),
    ("FOUR FIVE FOUR SEVEN", "4 5 4 7"),
    ("SIX EIGHT FOUR SIX", "6, 8, 4, 6."),
    ("SIX EIGHT FOUR SIX", "6846"),
    ("ZERO THREE FIVE ONE", "0351"),  # the normaliser alone drops a written leading zero ("0351" → "351")
    ("ZERO THREE FIVE ONE", "oh three five one"),
    ("twenty three", "23"),
    ("one of them", "1 of them"),
])
def test_a_right_digit_transcript_scores_no_error(ref, hyp):
    assert wer([ref], [hyp]) == 0.0


def test_a_digit_string_counts_its_digits():
    counts = wer_counts(["TWO TWO EIGHT SEVEN"], ["2-2-8-1"])
    assert (counts.ref_words, counts.substitutions, counts.errors) == (4, 1, 1)
    # one digit left out is one deletion, not a substitution of the whole string
    counts = wer_counts(["FOUR FIVE FOUR SEVEN"], ["457"])
    assert (counts.ref_words, counts.errors) == (4, 1)


def test_numbers_that_are_not_digit_strings_keep_their_form():
    assert normalize("$1,250") == "$1250" and normalize("3.05 percent") == "3.05%"
    assert normalize("the 2nd of May") == "the 2nd of may"
    assert normalize("1,050 and 10") == "1 0 5 0 and 1 0"  # no leading zero is read into a comma or a 10
    assert normalize("007 James") == "0 0 7 james"
