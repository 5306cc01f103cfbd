"""Finals that say the same thing again (evaluation.repetition): the measure, per utterance and per report row.

Hand-written texts with known answers: an utterance said twice, a reference that says it twice too, a sub-word
token loop, and ordinary speech that repeats short phrases.
"""

from __future__ import annotations

import json

import pytest
from test_intervals import _record, _utterance

from evaluation import repetition
from evaluation.report import ROW_KEYS, TRANSCRIPT_KEYS, markdown, score_rows
from recognizer.evaluate import _median_row
from evaluation.repetition import has_token_loop, repeated_words, repeats, summary, utterance_repetition
from evaluation.streamed import evaluate_records, per_utterance

TWICE = "The old pan was covered. The old pan was covered."
ONCE = "The old pan was covered."
LOOP = "keb-" + "-".join(["f"] * 70)


def test_an_utterance_said_twice_repeats_its_words_once_each():
    assert utterance_repetition(TWICE, ONCE) == {"repeated_words": 5, "token_loop": False}
    # the reference says it twice too: the transcript is right
    assert utterance_repetition(TWICE, TWICE)["repeated_words"] == 0
    assert utterance_repetition(ONCE, ONCE)["repeated_words"] == 0


def test_three_copies_count_two_copies_and_each_word_once():
    # the loop is a repeat at n = 3 from every start, and again at other n: six words, not more
    three = "red green blue " * 3
    assert utterance_repetition(three, "red green blue")["repeated_words"] == 6
    words = three.split()
    assert (0, 3) in repeats(words) and (3, 3) in repeats(words) and (1, 3) in repeats(words)
    # the reference's own repeat is literal: a third copy is still counted (the rotations of the loop are not
    # the reference's n-gram)
    assert 0 < utterance_repetition(three, "red green blue red green blue")["repeated_words"] < 6


def test_short_repeats_are_speech_not_a_loop():
    for text in ("it is it is true", "very very good", "no no no", "we we we went home"):
        assert utterance_repetition(text, "something else")["repeated_words"] == 0, text
    assert repeated_words("a b a b a b".split(), []) == 0  # n = 2, however often
    # ... from n = 3 on it counts, at any place in the utterance
    assert repeated_words("so i said we can go we can go now".split(), "so i said we can go now".split()) == 3
    assert repeated_words("so we said we can go we can go we can go now".split(), []) == 6


def test_a_sub_word_token_loop_is_a_loop_unless_the_reference_holds_one():
    got = utterance_repetition(LOOP, "kebab")
    assert got["token_loop"] is True
    # normalised, the loop is "keb f f f ...": every f after the first three is in a repeat's second copy
    assert got["repeated_words"] == 67
    assert utterance_repetition(LOOP, LOOP)["token_loop"] is False
    assert has_token_loop("Aaaaaaaaah!")  # one letter eight times and more
    assert has_token_loop("hahahahahahahahaha")
    assert not has_token_loop("It cost 1000000000 dollars........ Right?!!!!!!!!")  # digits and punctuation
    assert not has_token_loop("Mississippi bookkeeper")


def test_the_same_word_eight_times_in_a_row_is_a_loop_seven_is_not():
    eight, seven = " ".join(["hello"] * 8), " ".join(["hello"] * 7)
    assert utterance_repetition(eight, "hello")["token_loop"] is True
    assert utterance_repetition(seven, "hello")["token_loop"] is False
    assert utterance_repetition("Hello, hello, hello, hello, hello, hello, hello, hello.", "hello")["token_loop"]
    assert repetition.LOOP_RUN == 8 and repetition.MIN_NGRAM == 3


def test_a_long_stream_is_scanned_quickly():
    import time

    words = [f"w{i % 400}" for i in range(2000)]  # five copies of a 400-word passage
    t0 = time.perf_counter()
    assert repeated_words(words, words[:400]) == 1600
    assert time.perf_counter() - t0 < 20


CASES = [("The old pan was covered.", [300, 600, 900, 1200, 1500], TWICE),
         ("A kebab please.", [300, 700, 1000], "a " + LOOP + " please"),
         ("Hello world", [400, 900], "hello world")]


def _scored():
    utts = [_utterance(i, ref, ends) for i, (ref, ends, _) in enumerate(CASES)]
    records = [_record(hyp, len(u.audio) / 16) for u, (_, _, hyp) in zip(utts, CASES)]
    return utts, records


def test_per_utterance_entries_and_the_row_carry_the_counts():
    utts, records = _scored()
    pu = per_utterance(records, utts)
    assert [e["repeated_words"] for e in pu] == [5, 67, 0]
    assert [e["token_loop"] for e in pu] == [False, True, False]
    assert [e["hyp_words"] for e in pu] == [10, 73, 2]
    row = evaluate_records(records, utts)
    expected = {"repeated_words": 72, "repeat_rate": round(72 / 85, 4), "utterances_with_repeats": 2,
                "token_loops": 1}
    assert {k: row[k] for k in repetition.SUMMARY_KEYS} == expected == summary(pu)
    # a report row takes them from its transcript, like the WER, and log_report logs every ROW_KEYS entry
    assert set(repetition.SUMMARY_KEYS) <= set(ROW_KEYS) and set(repetition.SUMMARY_KEYS) <= TRANSCRIPT_KEYS
    assert {k: _median_row([row])[k] for k in repetition.SUMMARY_KEYS} == expected
    json.dumps(pu)


def test_rows_from_per_utterance_alone_get_the_counts_and_the_table_shows_them():
    utts, records = _scored()
    pu = per_utterance(records, utts)
    base = {"kind": "causal", "chunk_ms": 300, "source": "ours", "arwer": 0.1, "laal_ms": 900.0,
            "word_latency_ms_median": 500.0, "word_latency_ms_p90": 900.0, "first_word_latency_ms_median": 400.0,
            "step_ms_median": 10.0, "step_ms_p90": 20.0, "rtf": 0.1, "end_lag_ms_median": 30.0}
    clean = [{**e, "hyp": u.reference, "hyp_words": e["ref_words"], "errors": 0, "repeated_words": 0,
              "token_loop": False} for e, u in zip(pu, utts)]
    old = [{k: v for k, v in e.items() if k not in ("repeated_words", "token_loop")} for e in pu]
    rows = [{**base, "name": "looping", "per_utterance": pu, "wer": 0.5},
            {**base, "name": "clean", "per_utterance": clean, "wer": 0.0},
            {**base, "name": "scored before the metric", "per_utterance": old, "wer": 0.5}]
    result = {"test_set": {"n_utterances": 3, "seconds": 3, "speakers": 1}, **score_rows(rows, n_resamples=200)}
    assert rows[0]["repeated_words"] == 72 and rows[0]["token_loops"] == 1 and rows[1]["repeated_words"] == 0
    assert "repeated_words" not in rows[2]
    lines = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in markdown(result).splitlines()
             if line.startswith("| ")}
    header = lines["system"]
    at, loops = header.index("repeats"), header.index("loops")
    assert lines["looping"][at] == "72 (2 utt)" and lines["looping"][loops] == "1"
    assert lines["clean"][at] == "0" and lines["clean"][loops] == "0"
    assert lines["scored before the metric"][at] == "—"
    assert len(header) == len(lines["looping"])


@pytest.mark.parametrize("hyp, ref, n", [(TWICE, ONCE, 5), (TWICE, TWICE, 0), ("", ONCE, 0), (ONCE, "", 0)])
def test_empty_and_plain_texts(hyp, ref, n):
    assert utterance_repetition(hyp, ref)["repeated_words"] == n


def test_a_list_of_digits_read_aloud_is_not_a_repeat():
    """Whisper's normaliser joins spelled digits ("zero zero zero zero zero zero" → "000000") but not written ones
    ("0, 0, 0, 0, 0, 0." → "0 0 0 0 0 0"): compared digit by digit, a right transcript of a list repeats nothing."""
    from evaluation.metrics.text import digit_units
    from evaluation.repetition import utterance_repetition

    assert digit_units(["2287", "a", "7"]) == ["2", "2", "8", "7", "a", "7"]
    said = "zero zero zero zero zero zero zero zero one one one one one one"
    assert utterance_repetition("0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1.", said) == {"repeated_words": 0,
                                                                                       "token_loop": False}
    # three zeros more than were said are a repeat the reference does not make
    assert utterance_repetition("0 0 0 0 0 0", "zero zero zero")["repeated_words"] == 3
