"""Per-utterance results and the paired bootstrap intervals of the evaluate stage's report.

The per-utterance numbers come from the same code paths as the corpus metrics (checked on hand-written transcripts
against jiwer itself); the intervals are checked on synthetic per-utterance results whose answer is known: a system
with no errors is better than one with many, identical systems are not separable, segments of one recording are
drawn together.
"""

from __future__ import annotations

import json
import math

import jiwer
import numpy as np
import pytest

from evaluation import intervals
from evaluation.report import markdown, plot, score_rows
from evaluation.sets import Utterance
from evaluation.metrics import normalize
from evaluation.streamed import evaluate_records, per_utterance
from streaming.events import Hypothesis, Step, record_from_steps

# (reference, aligned word ends in ms, final hypothesis): numbers, titles, contractions and fillers that the
# normaliser rewrites, and substitutions, deletions and insertions
CASES = [
    ("Mr. Smith bought twenty five apples.", [300, 600, 900, 1200, 1500, 1800],
     "mister smith bought 25 apples"),
    ("It's the 2nd time, uh, that it rained today.", [200, 400, 700, 1000, 1200, 1500, 1700, 2000, 2300],
     "it is the second time that it rain today today"),
    ("The colour of the sky is grey.", [250, 500, 750, 1000, 1250, 1500, 1800], "the color of sky is gray"),
    ("Hello world", [400, 900], "hello there world"),
]


def _utterance(i: int, reference: str, ends: list[int]) -> Utterance:
    words = tuple((w, end - 150, end) for w, end in zip(reference.split(), ends, strict=True))
    return Utterance(f"u{i}", np.zeros(16 * (ends[-1] + 200), np.float32), reference, words)


def _record(hyp: str, audio_ms: float, chunk_ms: int = 300):
    """A stream that commits one more hypothesis word per chunk (compute 10 + 7·k ms), then finishes."""
    words = tuple(hyp.split())
    steps = [Step(min(chunk_ms * (k + 1), audio_ms), 10 + 7 * k, Hypothesis(words[: k + 1]))
             for k in range(len(words))]
    steps.append(Step(audio_ms, 25, Hypothesis(words), final=True))
    return record_from_steps(steps, audio_ms, chunk_ms)


def _hand_case():
    utts = [_utterance(i, ref, ends) for i, (ref, ends, _) in enumerate(CASES)]
    records = [_record(hyp, len(u.audio) / 16) for u, (_, _, hyp) in zip(utts, CASES)]
    return utts, records


# ---------------------------------------------------------------------------------------- per-utterance results


def test_per_utterance_results_add_up_to_the_corpus_metrics():
    utts, records = _hand_case()
    row = evaluate_records(records, utts)
    pu = per_utterance(records, utts)
    assert [e["utt_id"] for e in pu] == [u.utt_id for u in utts]
    assert [e["hyp"] for e in pu] == [hyp for _, _, hyp in CASES]
    # the identity the report relies on: the same jiwer alignment, per utterance and pooled
    assert sum(e["errors"] for e in pu) / sum(e["ref_words"] for e in pu) == row["wer"]
    # ... and that is jiwer's own corpus WER over the normalised text
    refs, hyps = [normalize(ref) for ref, _, _ in CASES], [normalize(hyp) for _, _, hyp in CASES]
    assert row["wer"] == pytest.approx(jiwer.wer(refs, hyps), abs=1e-12)
    assert [e["ref_words"] for e in pu] == [len(r.split()) for r in refs]
    assert [e["errors"] for e in pu] == [jiwer.process_words(r, h).wer * len(r.split()) for r, h in zip(refs, hyps)]
    assert 0 < row["wer"] < 1 and sum(e["errors"] for e in pu) >= 4  # the case has real errors of every kind
    # the latencies pooled for the median, and RTF = Σ compute / Σ audio
    pooled = [x for e in pu for x in e["word_latency_ms"]]
    assert len(pooled) == row["words_matched"] and round(float(np.median(pooled)), 1) == row["word_latency_ms_median"]
    assert round(sum(e["compute_ms"] for e in pu) / sum(e["audio_ms"] for e in pu), 4) == row["rtf"]
    assert [e["compute_ms"] for e in pu] == [sum(r.compute_ms) for r in records]
    for metric in ("wer", "word_latency_ms_median", "rtf"):  # the bootstrap's point estimate is the row's value
        assert intervals.point(pu, metric) == pytest.approx(row[metric], abs=0.051 if "ms" in metric else 5e-5)
    json.dumps(pu)  # what evaluation.json keeps


def test_per_utterance_needs_one_record_per_utterance():
    utts, records = _hand_case()
    with pytest.raises(ValueError, match="records for"):
        per_utterance(records[:-1], utts)


# ---------------------------------------------------------------------------------------------------- intervals


def _synthetic(n: int, seed: int, *, error_rate: float = 0.1, latency_ms: float = 800.0, rtf: float = 0.2,
               per_recording: int = 1) -> list[dict]:
    """Per-utterance results drawn at random (what ``per_utterance`` writes): word counts, errors, latencies."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = int(rng.integers(3, 20))
        audio = float(rng.uniform(1500, 8000))
        out.append({"utt_id": f"u{i:03d}", "recording": f"r{i // per_recording:03d}", "ref_words": words,
                    "errors": int(rng.binomial(words, error_rate)), "hyp": "",
                    "word_latency_ms": list(rng.normal(latency_ms, 150, int(rng.integers(0, words + 1)))),
                    "compute_ms": float(audio * rtf * rng.uniform(0.7, 1.3)), "audio_ms": audio})
    return out


def test_the_pooled_median_of_a_resample_is_numpys():
    """The vectorized median (weights on latencies sorted once) is the median of the pooled list, ties and
    utterances without words included."""
    pu = _synthetic(60, seed=13)
    pu[5]["word_latency_ms"] = [pu[4]["word_latency_ms"][0]] * 3  # ties across utterances
    units = intervals._units(pu, None)
    draws = np.random.default_rng(0).integers(0, len(pu), (500, len(pu)))
    pooled = [np.median(np.concatenate([pu[i]["word_latency_ms"] for i in row])) for row in draws]
    assert np.array_equal(intervals._pooled_median(units, draws), np.asarray(pooled))


def test_the_pooled_p90_of_a_resample_is_numpys():
    """The tail metric uses the same sorted-once weights: numpy's linear p90 of the pooled list."""
    pu = _synthetic(60, seed=14)
    units = intervals._units(pu, None)
    draws = np.random.default_rng(1).integers(0, len(pu), (500, len(pu)))
    pooled = [np.percentile(np.concatenate([pu[i]["word_latency_ms"] for i in row]), 90) for row in draws]
    assert np.allclose(intervals._pooled_quantile(units, draws, 0.9), pooled, rtol=1e-12, atol=0)


def test_a_stall_in_a_few_utterances_shows_in_the_p90():
    """Words held seconds in a sixth of the utterances (a stall) move the pooled p90 separably."""
    base = _synthetic(120, seed=3)
    stalled = [dict(u, word_latency_ms=[x + (3000.0 if i % 6 == 0 else 0.0) for x in u["word_latency_ms"]])
               for i, u in enumerate(base)]
    out = intervals.compare(stalled, base, "word_latency_ms_p90")
    pooled = lambda pu: np.percentile(np.concatenate([u["word_latency_ms"] for u in pu]), 90)  # noqa: E731
    assert out["diff"] == pytest.approx(pooled(stalled) - pooled(base)) and out["verdict"] == "worse"


@pytest.mark.parametrize("metric", intervals.METRICS)
def test_interval_contains_the_point_and_is_seeded(metric):
    pu = _synthetic(150, seed=1)
    lo, hi = intervals.ci95(pu, metric, seed=7)
    assert lo < intervals.point(pu, metric) < hi
    assert (lo, hi) == intervals.ci95(pu, metric, seed=7)  # reproducible
    assert (lo, hi) != intervals.ci95(pu, metric, seed=8)  # and really random
    wider = intervals.ci95(pu[:30], metric, seed=7)  # fewer utterances, wider interval
    assert wider[1] - wider[0] > hi - lo


def test_a_clearly_better_system_and_identical_systems():
    ref = _synthetic(120, seed=2, error_rate=0.3, latency_ms=1800, rtf=0.4)
    good = _synthetic(120, seed=3, error_rate=0.0, latency_ms=600, rtf=0.1)
    for metric in intervals.METRICS:
        c = intervals.compare(good, ref, metric)
        assert c["verdict"] == "better" and c["diff"] < 0 and c["ci95"][0] <= c["diff"] <= c["ci95"][1] < 0
        assert intervals.compare(ref, good, metric)["verdict"] == "worse"
        same = intervals.compare(ref, [dict(e) for e in ref], metric)
        assert same == {"diff": 0.0, "ci95": [0.0, 0.0], "verdict": "not separable"}
    assert intervals.compare(good, ref, "wer")["diff"] == -intervals.point(ref, "wer")


def test_close_systems_are_not_separable():
    a, b = _synthetic(40, seed=4), _synthetic(40, seed=5)  # the same distribution, different draws
    for metric in intervals.METRICS:
        c = intervals.compare(a, b, metric)
        assert c["verdict"] == "not separable" and c["ci95"][0] < c["diff"] < c["ci95"][1]


def test_the_comparison_is_paired():
    """b = a with one more error in every fourth utterance: the systems' own intervals overlap, but drawn on the
    same utterances b is always a bit worse, and the paired interval says so."""
    a = _synthetic(100, seed=6, error_rate=0.15)
    b = [{**e, "errors": e["errors"] + (i % 4 == 0)} for i, e in enumerate(a)]
    c = intervals.compare(b, a, "wer")
    lo_a, hi_a = intervals.ci95(a, "wer")
    lo_b, hi_b = intervals.ci95(b, "wer")
    assert lo_b < hi_a  # the two intervals overlap ...
    assert c["verdict"] == "worse" and c["ci95"][1] - c["ci95"][0] < 0.7 * (hi_a - lo_a)  # ... the paired one not


def test_segments_of_one_recording_are_drawn_together():
    """Three identical segments per recording carry no more information than one: resampling recordings gives
    exactly the interval of one segment per recording; resampling segments would claim a narrower one."""
    one = _synthetic(50, seed=9)
    three = [{**e, "utt_id": f"{e['utt_id']}-{k}"} for e in one for k in range(3)]
    for metric in intervals.METRICS:
        grouped = intervals.ci95(three, metric, groups="recording")
        assert grouped == pytest.approx(intervals.ci95(one, metric), rel=1e-12)
        naive = intervals.ci95(three, metric)
        assert naive[1] - naive[0] < 0.8 * (grouped[1] - grouped[0])
    # paired differences are grouped the same way
    other = _synthetic(50, seed=10)
    other3 = [{**e, "utt_id": f"{e['utt_id']}-{k}"} for e in other for k in range(3)]
    assert intervals.compare(three, other3, "wer", groups="recording")["ci95"] == pytest.approx(
        intervals.compare(one, other, "wer")["ci95"], rel=1e-12)


def test_different_utterances_cannot_be_compared():
    a = _synthetic(20, seed=11)
    with pytest.raises(ValueError, match="different utterances"):
        intervals.compare(a, a[:-1], "wer")
    with pytest.raises(ValueError, match="different utterances"):
        intervals.compare(a, a[::-1], "wer")  # the same ids in another order would pair the wrong utterances
    with pytest.raises(ValueError, match="different utterances"):
        intervals.compare(a, [{**e, "utt_id": e["utt_id"] + "x"} for e in a], "rtf")
    with pytest.raises(ValueError, match="unknown metric"):
        intervals.ci95(a, "laal_ms")


def test_one_utterance_has_no_interval():
    pu = _synthetic(1, seed=12)
    assert all(math.isnan(x) for x in intervals.ci95(pu, "wer"))
    silent = [{**e, "word_latency_ms": []} for e in _synthetic(10, seed=12)]  # no matched word anywhere
    assert all(math.isnan(x) for x in intervals.ci95(silent, "word_latency_ms_median"))
    assert intervals.verdict([math.nan, math.nan], "wer") == "not separable"


# ------------------------------------------------------------------------------------------------------ the report


def _row(name: str, kind: str, chunk_ms: int | None, pu: list[dict], source: str = "ours") -> dict:
    """A report row as evaluate_systems writes it, its metrics computed from its per-utterance results."""
    lat = [x for e in pu for x in e["word_latency_ms"]]
    return {"name": name, "kind": kind, "chunk_ms": chunk_ms, "source": source, "per_utterance": pu,
            "wer": intervals.point(pu, "wer"), "rtf": round(intervals.point(pu, "rtf"), 4),
            "word_latency_ms_median": round(float(np.median(lat)), 1),
            "word_latency_ms_p90": round(float(np.percentile(lat, 90)), 1), "arwer": 0.1, "laal_ms": 900.0,
            "first_word_latency_ms_median": 500.0, "step_ms_median": 12.0, "step_ms_p90": 20.0,
            "end_lag_ms_median": 30.0}


def _rows() -> list[dict]:
    return [_row("offline", "offline", None, _synthetic(80, 20, error_rate=0.09)),
            _row("faster-whisper", "faster-whisper", None, _synthetic(80, 21, error_rate=0.04), "pypi:faster-whisper"),
            _row("ours 300 ms", "causal", 300, _synthetic(80, 22, error_rate=0.06, latency_ms=700, rtf=0.1)),
            _row("LA-2 1000 ms", "whisperlivekit-la", 1000, _synthetic(80, 23, error_rate=0.08, latency_ms=1800,
                                                                       rtf=0.4), "pypi:whisperlivekit"),
            _row("hallucinating", "causal", 300, _synthetic(80, 24, error_rate=0.9, latency_ms=400))]


def test_report_rows_get_intervals_and_a_verdict_against_the_reference(tmp_path):
    rows = _rows()
    result = {"test_set": {"n_utterances": 80, "seconds": 300, "speakers": 5}, **score_rows(rows, n_resamples=2000)}
    # the WER cap is measured from the best offline system, whichever implementation it is
    assert result["wer_cap_reference"] == "faster-whisper" and result["offline_wer"] == rows[1]["wer"]
    assert result["reference_system"] == "LA-2 1000 ms"  # the default: the LocalAgreement peer
    for r in rows:
        assert set(r["ci95"]) == {"wer", "word_latency_ms_median", "rtf"}
        lo, hi = r["ci95"]["wer"]
        assert lo <= r["wer"] <= hi
        assert ("vs_reference" in r) == (r["name"] != "LA-2 1000 ms")
    ours = rows[2]["vs_reference"]
    assert ours["word_latency_ms_median"]["verdict"] == "better" and ours["rtf"]["verdict"] == "better"
    assert rows[4]["vs_reference"]["wer"]["verdict"] == "worse" and not rows[4]["within_wer_cap"]
    text = markdown(result)
    assert "reference" in text and "better" in text and "95 % paired bootstrap" in text
    assert f"{100 * rows[2]['wer']:.2f} % [{100 * rows[2]['ci95']['wer'][0]:.1f}, " in text
    json.dumps(result)
    assert plot(result, tmp_path / "p.png").stat().st_size > 5_000

    explicit = score_rows(_rows(), reference="offline", n_resamples=500)
    assert explicit["reference_system"] == "offline"
    assert "vs_reference" not in explicit["systems"][0] and "vs_reference" in explicit["systems"][3]


def test_a_report_of_utterances_with_domains_gives_each_domain_its_rows():
    rows = _rows()
    for r in rows:
        for i, u in enumerate(r["per_utterance"]):
            u["domain"] = "l2" if i < 30 else "read"
    result = {"test_set": {"n_utterances": 80, "seconds": 300, "speakers": 5}, **score_rows(rows, n_resamples=500)}
    dom = result["domains"]
    assert list(dom) == ["l2", "read"] and dom["l2"]["utterances"] == 30 and dom["read"]["utterances"] == 50
    for d in dom.values():
        assert set(d["wer"]) == {r["name"] for r in rows} and set(d["vs_reference"]) == set(d["wer"]) - {"LA-2 1000 ms"}
    # the domains' counts add up to the pooled row's
    words = sum(u["ref_words"] for u in rows[0]["per_utterance"])
    errors = sum(d["wer"]["offline"] * d["words"] for d in dom.values())
    assert sum(d["words"] for d in dom.values()) == words and abs(errors / words - rows[0]["wer"]) < 1e-3
    assert "## Per domain" in markdown(result) and "| ours 300 ms |" in markdown(result)
    assert "domains" not in score_rows(_rows(), n_resamples=200)  # no domain on an utterance: no per-domain rows


def test_without_a_peer_the_reference_is_the_best_offline_system():
    rows = [r for r in _rows() if not r["kind"].startswith("whisperlivekit")]
    assert score_rows(rows, n_resamples=200)["reference_system"] == "faster-whisper"


def test_the_partials_metrics_pool_their_own_counts_and_latencies():
    """``partial_rewrite_rate`` is Σ rewritten / Σ shown and ``display_latency_ms_median`` the pooled median of the
    display latencies, not of the word latencies; a policy that rewrites far less is better, paired."""
    rng = np.random.default_rng(4)
    often, rarely = _synthetic(120, seed=4), _synthetic(120, seed=4)
    for a, b in zip(often, rarely, strict=True):
        shown = int(rng.integers(5, 15))
        a.update(partials_shown=shown, partials_rewritten=int(rng.binomial(shown, 0.8)),
                 display_latency_ms=list(rng.normal(500, 100, 3)))
        b.update(partials_shown=shown, partials_rewritten=int(rng.binomial(shown, 0.2)),
                 display_latency_ms=list(rng.normal(200, 100, 3)))
    rate = sum(u["partials_rewritten"] for u in often) / sum(u["partials_shown"] for u in often)
    assert intervals.point(often, "partial_rewrite_rate") == pytest.approx(rate)
    assert intervals.point(often, "display_latency_ms_median") == pytest.approx(
        np.median([x for u in often for x in u["display_latency_ms"]]))
    for metric in intervals.PARTIAL_METRICS:
        lo, hi = intervals.ci95(often, metric, seed=7)
        assert lo < intervals.point(often, metric) < hi
        assert intervals.compare(rarely, often, metric)["verdict"] == "better"
