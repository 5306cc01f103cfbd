"""The partials' headline keys are read off a release report's rows, with intervals that pair the
two-pass finals with the offline reference (rows: tests/test_intervals.py's synthetic per-utterance results)."""

from __future__ import annotations

import pytest
from test_intervals import _rows

from evaluation.headline import OFFLINE, ROWS, SYNTHETIC_CAUSAL_ROW, domains_markdown, partials_headline


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


def _with_domains(rows: list[dict]) -> list[dict]:
    """The same rows with their utterances dealt into two domains (every third utterance `l2`, the rest `read`)."""
    return [{**r, "per_utterance": [{**u, "domain": "l2" if i % 3 == 0 else "read"}
                                    for i, u in enumerate(r["per_utterance"])]} for r in rows]


def test_the_bars_per_domain_are_each_domains_own_numbers():
    rows = _with_domains(_report())
    out = partials_headline(rows, n_resamples=300)["headline_domains"]
    assert set(out) == {"l2", "read"}
    by = {r["name"]: r for r in rows}
    total = 0
    for d, entry in out.items():
        units = {name: [u for u in r["per_utterance"] if u["domain"] == d] for name, r in by.items()}
        off = units[OFFLINE]
        total += entry["utterances"]
        assert entry["utterances"] == len(off) and entry["words"] == sum(u["ref_words"] for u in off)
        off_wer = sum(u["errors"] for u in off) / sum(u["ref_words"] for u in off)
        assert entry["offline_wer"] == pytest.approx(off_wer, abs=1e-4)
        causal = units[ROWS["causal_only_tuned_300ms_wer"]]
        causal_wer = sum(u["errors"] for u in causal) / sum(u["ref_words"] for u in causal)
        assert entry["causal_vs_offline_ratio"] == pytest.approx(causal_wer / off_wer, abs=1e-3)
        two = entry["two_pass"]
        lo, hi = two["vs_offline_ci95"]
        assert lo <= two["vs_offline"] <= hi and two["vs_offline_verdict"] in {"worse", "better", "not separable"}
    assert total == len(by[OFFLINE]["per_utterance"])  # every utterance in exactly one domain


def test_no_domain_table_for_rows_scored_before_domains():
    assert "headline_domains" not in partials_headline(_report(), n_resamples=200)


def test_the_domain_table_has_a_row_per_domain():
    table = domains_markdown(partials_headline(_with_domains(_report()), n_resamples=200)["headline_domains"])
    lines = table.strip().splitlines()
    assert len(lines) == 4 and lines[2].startswith("| l2 |") and lines[3].startswith("| read |")
    assert "×)" in lines[2] and all(any(v in line for v in ("worse", "better", "not separable")) for line in lines[2:])


def test_the_real_speech_gain_pairs_the_causal_pass_with_the_synthetic_only_recipe():
    rows = _report()
    by = {r["name"]: r for r in _rows()}
    # the synthetic-only stand-in: the hallucinating row's utterances (more errors than the causal stand-in's)
    rows.append({**by["hallucinating"], "name": SYNTHETIC_CAUSAL_ROW})
    out = partials_headline(_with_domains(rows), n_resamples=300)
    gain = out["real_speech_gain"]
    causal, synth = by["ours 300 ms"], by["hallucinating"]
    assert gain["causal_minus_synthetic_only"] == pytest.approx(causal["wer"] - synth["wer"], abs=1e-4)
    lo, hi = gain["ci95"]
    assert lo <= gain["causal_minus_synthetic_only"] <= hi and gain["synthetic_only"]["value"] == synth["wer"]
    for d, entry in out["headline_domains"].items():
        units = [u for i, u in enumerate(synth["per_utterance"]) if (i % 3 == 0) == (d == "l2")]
        g = entry["real_speech_gain"]
        assert g["synthetic_only_wer"] == pytest.approx(
            sum(u["errors"] for u in units) / sum(u["ref_words"] for u in units), abs=1e-4)
        assert entry["causal_wer"] - g["synthetic_only_wer"] == pytest.approx(g["causal_minus_synthetic_only"],
                                                                              abs=2e-4)
    table = domains_markdown(out["headline_domains"]).splitlines()
    assert "real-speech gain" in table[0] and all(line.count("|") == 10 for line in table)
    # without the row, no gain anywhere and the table keeps its columns
    assert "real_speech_gain" not in partials_headline(_report(), n_resamples=100)
