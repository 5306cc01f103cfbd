"""The dev-split gate over recognizers (pure rule on rows; the registry side is in test_recognizer.py)."""

from __future__ import annotations

import pytest

from recognizer.gate import CHAMPION, FAST, Budget, choose, dev_tags


def row(name, wer, lat, rtf, chunk, capped=True):
    return {"name": name, "wer": wer, "word_latency_ms_median": lat, "rtf": rtf, "chunk_ms": chunk,
            "within_wer_cap": capped}


ROWS = [row("causal 300", 0.20, 600, 0.10, 300), row("two-pass 300", 0.12, 900, 0.30, 300),
        row("emma 300", 0.35, 500, 0.12, 300, capped=False), row("two-pass 1000", 0.11, 1800, 0.20, 1000)]


def test_champion_is_the_lowest_wer_within_cap_and_budget():
    aliases = choose(ROWS, Budget(latency_ms=1000))
    assert aliases[CHAMPION][0] == "two-pass 300"  # 1000 ms two-pass is better but over the latency budget
    assert aliases[f"{CHAMPION}-300ms"][0] == "two-pass 300"
    assert f"{CHAMPION}-1000ms" not in aliases  # nothing at 1000 ms is within the budget
    assert aliases[FAST][0] == "causal 300"  # the low-compute deployment's pick
    assert choose(ROWS)[CHAMPION][0] == "two-pass 1000"  # no budget: the lowest WER
    assert choose(ROWS, Budget(latency_ms=1000, rtf=0.2))[CHAMPION][0] == "causal 300"


def test_no_candidate_within_the_cap_still_names_one_and_says_so():
    rows = [row("a", 0.5, 600, 0.1, 300, capped=False), row("b", 0.4, 700, 0.1, 300, capped=False)]
    name, reason = choose(rows)[CHAMPION]
    assert name == "b" and "outside the WER cap" in reason
    assert "none within the budget" in choose([row("c", 0.1, 5000, 0.1, 300)], Budget(latency_ms=1000))[CHAMPION][1]
    with pytest.raises(ValueError):
        choose([])


def test_ties_go_to_the_lower_latency_and_tags_carry_the_interval():
    rows = [row("slow", 0.1, 900, 0.1, 300), row("quick", 0.1, 400, 0.1, 300)]
    assert choose(rows)[CHAMPION][0] == "quick"
    tags = dev_tags({**rows[0], "ci95": {"wer": [0.05, 0.15]}, "word_latency_ms_p90": 1200}, "dev: 40 utts")
    assert tags["dev_wer"] == "0.1" and tags["dev_wer_ci95"] == "[0.05, 0.15]" and tags["eval_set"] == "dev: 40 utts"
