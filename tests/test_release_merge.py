"""A release scored in parts (ours first, then each peer budget) merges into the report one run would have written.

The rows are synthetic per-utterance results (tests/test_intervals.py builds them): what is checked is the merge's
bookkeeping (replacement, ordering, recomputed comparisons, the ledger's per-system counts), not the recognizers.
"""

from __future__ import annotations

import pytest
from test_intervals import _rows

from evaluation.ledger import record_scoring, scored_per_system
from evaluation.merge import MergeError, budget_coverage, merge_release
from evaluation.report import score_rows

SET = {"audio_sha256": "a" * 64, "n_utterances": 80, "n_words": 900, "seconds": 300.0, "speakers": 5,
       "splits": ["test"]}


def _part(names: list[str], created: str, sha: str = SET["audio_sha256"]) -> dict:
    rows = [r for r in _rows() if r["name"] in names]
    return {"test_set": {**SET, "audio_sha256": sha}, "created": created, "systems": rows,
            **score_rows(rows, n_resamples=200)}


def test_parts_merge_into_the_report_of_one_run():
    ref = "LA-2 1000 ms"
    first = merge_release(None, _part(["offline", "faster-whisper", "ours 300 ms"], "t1"), reference=ref,
                          n_resamples=200)
    # the reference peer is not scored yet: no row is compared with a stand-in
    assert first["reference_missing"] == ref and first["reference_system"] is None
    assert all("vs_reference" not in r for r in first["systems"])
    merged = merge_release(first, _part([ref, "hallucinating"], "t2"), reference=ref, n_resamples=200)
    whole = score_rows(_rows(), reference=ref, n_resamples=200)
    assert [r["name"] for r in merged["systems"]] == ["offline", "faster-whisper", "ours 300 ms", "hallucinating", ref]
    assert merged["reference_system"] == ref and merged["reference_missing"] is None
    assert merged["wer_cap_reference"] == whole["wer_cap_reference"] == "faster-whisper"
    by_name = {r["name"]: r for r in whole["systems"]}
    for r in merged["systems"]:  # the intervals and verdicts one run over every row gives
        assert r["ci95"] == by_name[r["name"]]["ci95"]
        assert r.get("vs_reference") == by_name[r["name"]].get("vs_reference")
        assert r["scored_at"] == ("t1" if r["name"] in ("offline", "faster-whisper", "ours 300 ms") else "t2")
    assert [p["created"] for p in merged["parts"]] == ["t1", "t2"]


def test_a_rescored_system_replaces_its_row_and_another_test_set_replaces_the_report():
    ref = "LA-2 1000 ms"
    report = merge_release(None, _part(["offline", ref], "t1"), reference=ref, n_resamples=200)
    again = merge_release(report, _part([ref], "t2"), reference=ref, n_resamples=200)
    assert [r["name"] for r in again["systems"]] == ["offline", ref]
    assert {r["name"]: r["scored_at"] for r in again["systems"]} == {"offline": "t1", ref: "t2"}
    other = merge_release(again, _part(["ours 300 ms"], "t3", sha="b" * 64), reference=ref, n_resamples=200)
    assert [r["name"] for r in other["systems"]] == ["ours 300 ms"] and len(other["parts"]) == 1


def test_a_part_that_scores_one_system_twice_is_refused():
    part = _part(["offline"], "t1")
    part["systems"] = part["systems"] * 2
    with pytest.raises(MergeError, match="twice"):
        merge_release(None, part, reference=None, n_resamples=200)


def test_the_ledger_counts_each_system_and_the_report_lists_unscored_budgets(tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    record_scoring(ledger, test_set=SET, systems=["offline", "ours"], purpose="release", commit="c1")
    record_scoring(ledger, test_set=SET, systems=["ours", "LA 1000"], purpose="release", commit="c2")
    record_scoring(ledger, test_set=SET, systems=["ours"], purpose="smoke", commit="c3")
    assert scored_per_system(ledger, SET["audio_sha256"]) == {"offline": 1, "ours": 2, "LA 1000": 1}
    assert scored_per_system(ledger, SET["audio_sha256"], purpose=None)["ours"] == 3
    chosen = {"whisperlivekit-la@1000": {"name": "LA 1000"}, "whisperlivekit-la@300": {"name": "LA 300"}}
    assert budget_coverage([{"name": "LA 1000"}], chosen) == {"whisperlivekit-la@1000": "LA 1000",
                                                              "whisperlivekit-la@300": None}


def test_the_markdown_says_what_is_not_scored_yet():
    from evaluation.report import markdown

    ref = "LA-2 1000 ms"
    report = merge_release(None, _part(["offline", "ours 300 ms"], "t1"), reference=ref,
                           scored_per_system={"offline": 1, "ours 300 ms": 2}, n_resamples=200)
    report["peers_on_test"] = {"whisperlivekit-la@1000": None}
    text = markdown(report)
    assert f"The reference `{ref}` is not scored yet" in text and "whisperlivekit-la@1000" in text
    assert "ours 300 ms ×2" in text and "t1: " in text
