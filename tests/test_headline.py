"""The partials' headline keys are read off a release report's rows, with intervals that pair the
two-pass finals with the offline reference (rows: tests/test_intervals.py's synthetic per-utterance results)."""

from __future__ import annotations

import pytest
from test_intervals import _rows

from evaluation.headline import OFFLINE, ROWS, partials_headline


def _report() -> list[dict]:
    rows = {r["name"]: r for r in _rows()}
    renamed = [{**rows["faster-whisper"], "name": OFFLINE},
               {**rows["ours 300 ms"], "name": ROWS["causal_only_tuned_300ms_wer"]},
               {**rows["hallucinating"], "name": "a row the headline does not read"},
               {**rows["offline"], "name": ROWS["two_pass_300ms_wer"], "partial_rewrite_rate": 0.07}]
    return renamed


def test_keys_values_and_paired_difference():
    rows = _report()
    out = partials_headline(rows, n_resamples=500)
    by = {r["name"]: r for r in rows}
    assert set(out) == {*ROWS, "offline_reference_wer", "partial_rewrite_rate"}
    for key, name in ROWS.items():
        lo, hi = out[key]["ci95"]
        assert out[key]["value"] == by[name]["wer"] and lo <= out[key]["value"] <= hi
        assert out[key]["vs_offline_ratio"] == pytest.approx(by[name]["wer"] / by[OFFLINE]["wer"], abs=1e-4)
    # the two-pass stand-in (9 % errors) against the offline one (4 %) on the same 80 utterances: separably worse
    two = out["two_pass_300ms_wer"]
    assert two["vs_offline_ci95"][0] > 0 and two["vs_offline_verdict"] == "worse"
    assert out["partial_rewrite_rate"] == 0.07
    assert out["offline_reference_wer"]["value"] == by[OFFLINE]["wer"]


def test_missing_rows_are_left_out_and_no_offline_reference_is_an_error():
    rows = _report()
    partial = partials_headline([r for r in rows if r["name"] != ROWS["two_pass_300ms_wer"]], n_resamples=200)
    assert "two_pass_300ms_wer" not in partial and "partial_rewrite_rate" not in partial
    with pytest.raises(KeyError, match="faster-whisper offline"):
        partials_headline([r for r in rows if r["name"] != OFFLINE])
