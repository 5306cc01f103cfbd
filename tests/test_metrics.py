"""Metrics: hand-checked WER/RWER/ARWER fixtures, SimulEval latency examples and a random cross-check."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from evaluation.metrics import (
    ErrorCounts,
    arwer,
    arwer_counts,
    average_lagging,
    average_proportion,
    computation_aware_delays,
    corpus_latency,
    differentiable_average_lagging,
    latency_scores,
    latency_summary,
    length_adaptive_average_lagging,
    mean_rtf,
    normalize,
    reference_length,
    rtf,
    rwer,
    rwer_counts,
    source_length_ms,
    utterance_wer,
    wer,
    wer_counts,
    word_emission_latencies,
    word_emission_summary,
)

# ---------------------------------------------------------------------------------------------------- WER


def test_normalize_is_whispers_english_normalizer():
    assert normalize("Mr. Smith paid twenty five dollars.") == "mister smith paid $25"
    assert normalize("The colour is grey, uh, okay?") == "the color is gray okay"


def test_wer_corpus_counts_by_hand():
    refs = ["The cat sat on the mat.", "Hello world", "Mr. Smith paid twenty five dollars."]
    hyps = ["the cat sat on a mat", "hello there world", "mister smith paid $25"]
    # utt 1: "the" -> "a" is 1 S, N = 6;  utt 2: "there" is 1 I, N = 2;
    # utt 3: both normalise to "mister smith paid $25": 4 H, N = 4.  Corpus: H = 5 + 2 + 4, errors 2 / 12.
    c = wer_counts(refs, hyps)
    assert c.as_dict() == {"S": 1, "D": 0, "I": 1, "H": 11, "N": 12}
    assert wer(refs, hyps) == pytest.approx(2 / 12)
    assert utterance_wer(refs[0], hyps[0]) == pytest.approx(1 / 6)
    # Without normalisation, case and punctuation count: "The"/"the", "mat."/"mat" and all of utt 3 differ.
    assert wer(refs, hyps, normalize_text=False) > wer(refs, hyps)


def test_wer_edge_cases():
    assert utterance_wer("a b c", "") == 1.0  # 3 D / 3
    assert utterance_wer("", "") == 0.0
    assert utterance_wer("", "cat dog") == 2.0  # jiwer 4 convention: insertions when N = 0
    assert utterance_wer("uh", "hmm") == 0.0  # fillers normalise away on both sides
    assert wer_counts(["a b"], ["a b c d"]).as_dict() == {"S": 0, "D": 0, "I": 2, "H": 2, "N": 2}
    with pytest.raises(ValueError):
        wer(["a"], [])


# ---------------------------------------------------------------------------------------------------- RWER / ARWER

REF1 = [("the", 400), ("cat", 700), ("sat", 1000), ("on", 1300), ("the", 1400), ("mat", 1800)]
SNAP1 = [(300, ""), (600, "The"), (900, "the cap"), (1200, "the cat sat"), (1500, "the cat sat on the mat too")]
REF2 = [("hello", 500), ("world", 1000)]
SNAP2 = [(600, ""), (1100, "Hello, world!")]


def test_rwer_by_hand():
    # RWER: y_tau = first |hyp_tau| words of the reference.
    #  300: []            vs []                           -> 0 err, |y_tau| 0
    #  600: [the]         vs [the]                        -> 0 err, 1
    #  900: [the cat]     vs [the cap]                    -> 1 S,   2
    # 1200: [the cat sat] vs [the cat sat]                -> 0,     3
    # 1500: whole ref (6) vs 7 words (longer than ref)    -> 1 I,   6
    # RWER = 2 / 12
    c = rwer_counts(SNAP1, REF1)
    assert (c.substitutions, c.deletions, c.insertions, c.ref_words) == (1, 0, 1, 12)
    assert c.rate == pytest.approx(2 / 12)
    assert rwer_counts(SNAP1, "the cat sat on the mat") == c  # a plain-string reference works too
    # utt 2: 600: [] vs [] ; 1100: [hello world] vs [hello world] -> 0 / 2
    assert rwer_counts(SNAP2, REF2).rate == 0.0
    assert rwer([SNAP1, SNAP2], [REF1, REF2]) == pytest.approx(2 / 14)  # pooled
    assert rwer([SNAP1, SNAP2], [REF1, REF2], aggregate="mean") == pytest.approx((2 / 12 + 0) / 2)


def test_arwer_by_hand():
    # ARWER: y_tau = reference words with end_ms <= tau.
    #  300: []                    vs []                            -> 0,     0
    #  600: [the]                 vs [the]                         -> 0,     1
    #  900: [the cat]             vs [the cap]                     -> 1 S,   2
    # 1200: [the cat sat]         vs [the cat sat]                 -> 0,     3
    # 1500: [the cat sat on the]  vs [the cat sat on the mat too]  -> 2 I,   5
    # ARWER = 3 / 11
    c = arwer_counts(SNAP1, REF1)
    assert (c.substitutions, c.deletions, c.insertions, c.ref_words) == (1, 0, 2, 11)
    assert c.rate == pytest.approx(3 / 11)
    # utt 2: 600: [hello] vs [] -> 1 D, 1 ; 1100: [hello world] vs [hello world] -> 0, 2.  1 / 3
    assert arwer_counts(SNAP2, REF2).rate == pytest.approx(1 / 3)
    assert arwer([SNAP1, SNAP2], [REF1, REF2]) == pytest.approx(4 / 14)
    assert arwer([SNAP1, SNAP2], [REF1, REF2], aggregate="mean") == pytest.approx((3 / 11 + 1 / 3) / 2)


def test_rwer_arwer_edge_cases():
    silent = [(500, ""), (1000, ""), (2000, "")]
    # Nothing emitted: every y_tau of RWER is empty (0 / 0 -> 0); ARWER counts the ended words as deletions:
    # 500: [the] (1 D), 1000: [the cat sat] (3 D), 2000: all 6 (6 D) -> 10 / 10.
    assert rwer_counts(silent, REF1) == ErrorCounts()
    assert rwer([silent], [REF1]) == 0.0
    assert arwer_counts(silent, REF1) == ErrorCounts(deletions=10)
    assert arwer([silent], [REF1]) == 1.0
    # Word objects with .word / .end_ms (data.types.WordSpan) are accepted.
    from data.types import WordSpan

    spans = [WordSpan(w, max(0, e - 200), e) for w, e in REF1]
    assert arwer_counts(SNAP1, spans) == arwer_counts(SNAP1, REF1)
    with pytest.raises(ValueError):
        rwer([SNAP1], [])
    with pytest.raises(ValueError):
        arwer([SNAP1], [REF1], aggregate="median")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------- latency

X = 5000.0  # emma.md §5.4: speech input, |X| = 5000 ms, reference "the cat sat on the mat"
REF = "the cat sat on the mat"


def test_al_worked_example_a():
    d = [1200, 1200, 2500, 3400, 5000, 5000]
    # 1/gamma = 5000/6 = 833.33: 1200 + 366.67 + 833.33 + 900 + 1666.67 (d = |X|: tau = 5) = 4966.67 / 5
    assert average_lagging(d, X, reference_length(REF)) == pytest.approx(993.3333333, abs=1e-6)
    assert length_adaptive_average_lagging(d, X, 6) == pytest.approx(993.3333333, abs=1e-6)
    assert average_proportion(d, X, 6) == pytest.approx(0.61)
    # DAL: d' = 1200, 2033.33, 2866.67, 3700, 5000, 5833.33 minus (i-1)*833.33 -> 8133.33 / 6
    assert differentiable_average_lagging(d, X) == pytest.approx(1355.5555556, abs=1e-6)


def test_al_worked_example_b_over_generation():
    d = [1200, 1200, 2500, 3400, 4000, 5000, 5000, 5000]  # 8 words against a 6-word reference
    assert average_lagging(d, X, 6) == pytest.approx(800.0)  # tau = 6, 1/gamma = 833.33
    assert average_lagging(d, X, None) == pytest.approx(1320.8333333)  # --no-use-ref-len: 1/gamma = 625
    for ref_len in (6, None):
        assert length_adaptive_average_lagging(d, X, ref_len) == pytest.approx(1320.8333333)
    assert differentiable_average_lagging(d, X) == pytest.approx(1540.625)
    assert average_proportion(d, X, 6) == pytest.approx(0.91)
    assert average_proportion(d, X, None) == pytest.approx(0.6825)


def test_al_worked_example_c_and_text_sanity():
    d = [6000.0] * 6  # d_1 > |X|: AL = LAAL = d_1; DAL also 6000; AP = 36000 / 30000
    s = latency_scores(d, X, 6)
    assert s == pytest.approx({"AL": 6000, "LAAL": 6000, "DAL": 6000, "AP": 1.2})
    # wait-3 text example, |X| = |Y| = 5
    w = [3, 4, 5, 5, 5]
    assert average_lagging(w, 5, 5) == 3.0 and differentiable_average_lagging(w, 5) == 3.0
    assert average_proportion(w, 5, 5) == pytest.approx(0.88)


def test_latency_edge_cases():
    # Delays beyond the source: gamma = 3/5000, terms 1000 - 0 and 6000 - 1666.67 (tau = 2, stop) -> 2666.67;
    # the 7000 after the cut-off is ignored by AL but not by DAL.
    d = [1000, 6000, 7000]
    assert average_lagging(d, X, 3) == pytest.approx((1000 + 6000 - 5000 / 3) / 2)
    # DAL: d' = 1000, 6000, 7666.67 (= 6000 + 1666.67) minus 0, 1666.67, 3333.33 -> (1000 + 2 * 4333.33) / 3
    assert differentiable_average_lagging(d, X) == pytest.approx((1000 + 2 * (6000 - 5000 / 3)) / 3)
    # Single word, emitted at the end of the audio: tau = 1, AL = d_1.
    assert average_lagging([5000], X, 6) == 5000
    # No output at all: undefined (SimulEval skips such instances); the corpus mean skips them too.
    with pytest.raises(ValueError):
        average_lagging([], X, 6)
    with pytest.raises(ValueError):
        average_lagging([100], 0.0, 6)
    with pytest.raises(ValueError):
        average_lagging([100], X, 0)
    rows = [latency_scores([1000, 2000], 3000, 2), None, latency_scores([3000], 3000, 1)]
    # AL: (1000 + (2000 - 1500)) / 2 = 750 and 3000 (tau = 1) -> mean 1875
    assert corpus_latency(rows)["AL"] == pytest.approx((750 + 3000) / 2)
    assert corpus_latency([None]) == {}
    assert reference_length("a  b") == 3  # SimulEval's split(" ") counts the empty token
    assert source_length_ms(24000, 16000) == 1500.0


def test_computation_aware_variants():
    d = [1200, 1200, 2500, 3400, 5000, 5000]
    el = computation_aware_delays(d, [100, 100, 250, 400, 600, 600])
    s = latency_scores(d, X, 6, elapsed=el)
    assert s["AL"] == pytest.approx(993.3333333)
    assert s["AL_CA"] == pytest.approx(average_lagging(el, X, 6))
    assert s["AL_CA"] > s["AL"] and set(s) == {"AL", "LAAL", "DAL", "AP", "AL_CA", "LAAL_CA", "DAL_CA", "AP_CA"}


def _random_instance(rng: random.Random) -> tuple[list[float], float, str, list[float]]:
    sr = 16000
    src = source_length_ms(rng.randint(sr // 4, 20 * sr), sr)
    n_hyp = rng.randint(1, 20)
    chunk = rng.choice([40.0, 100.0, 300.0, 320.0, 1000.0])
    steps = sorted(rng.randint(1, int(src * 1.3 / chunk) + 2) for _ in range(n_hyp))
    # Chunked delays capped (mostly) at |X| like a real flush, with some past the end and some unchunked floats.
    delays = [min(k * chunk, src) if rng.random() < 0.9 else k * chunk + rng.random() * 500 for k in steps]
    if rng.random() < 0.2:
        delays = sorted(rng.uniform(0, src * 1.2) for _ in range(n_hyp))
    if rng.random() < 0.07:  # first word already past the end of the source (AL/LAAL return d_1)
        delays = [x + src + 1 for x in delays]
    n_ref = rng.randint(1, 20)
    ref = (" " if rng.random() < 0.9 else "  ").join(f"w{i}" for i in range(n_ref))
    elapsed = [d + rng.uniform(0, 2000) for d in delays]
    return delays, src, ref, elapsed


def test_random_cross_check_against_simuleval():
    pytest.importorskip("simuleval")
    from simuleval.evaluator.instance import LogInstance
    from simuleval.evaluator.scorers.latency_scorer import ALScorer, APScorer, DALScorer, LAALScorer

    rng = random.Random(1234)
    ours_all, instances = [], {}
    for idx in range(200):
        delays, src, ref, elapsed = _random_instance(rng)
        info = {"index": idx, "reference": ref, "source_length": src, "delays": delays, "elapsed": elapsed}
        ins = LogInstance(json.dumps(info), latency_unit="word")
        instances[idx] = ins
        ours = latency_scores(delays, src, reference_length(ref), elapsed=elapsed)
        ours_all.append(ours)
        for ca in (False, True):
            sfx = "_CA" if ca else ""
            for use_ref in (True, False):
                ref_len = reference_length(ref) if use_ref else None
                vals = elapsed if ca else delays
                pairs = [
                    (ALScorer, average_lagging(vals, src, ref_len)),
                    (LAALScorer, length_adaptive_average_lagging(vals, src, ref_len)),
                    (APScorer, average_proportion(vals, src, ref_len)),
                    (DALScorer, differentiable_average_lagging(vals, src)),
                ]
                for cls, mine in pairs:
                    theirs = cls(computation_aware=ca, use_ref_len=use_ref).compute(ins)
                    assert abs(mine - theirs) <= 1e-6, (idx, cls.__name__, ca, use_ref, mine, theirs)
            for name, cls in (("AL", ALScorer), ("LAAL", LAALScorer), ("DAL", DALScorer), ("AP", APScorer)):
                theirs = cls(computation_aware=ca, use_ref_len=True).compute(ins)
                assert abs(ours[name + sfx] - theirs) <= 1e-6
    # Corpus score: SimulEval's scorer __call__ is the mean over instances.
    corpus = corpus_latency(ours_all)
    for name, cls in (("AL", ALScorer), ("LAAL", LAALScorer), ("DAL", DALScorer), ("AP", APScorer)):
        assert abs(corpus[name] - cls(use_ref_len=True)(instances)) <= 1e-6


# ---------------------------------------------------------------------------------------------------- RTF, summaries


def test_rtf_and_latency_summary():
    assert rtf(0.5, 2.0) == 0.25
    assert mean_rtf([0.1, 0.3], 0.3) == pytest.approx((1 / 3 + 1) / 2)
    assert mean_rtf([0.1, 0.3], [0.2, 0.3]) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        rtf(1.0, 0.0)
    # sorted [1, 2, 3, 4, 10]: median 3, mean 4, p90 at rank 3.6 -> 4 + 0.6 * 6 = 7.6
    assert latency_summary([10, 1, 3, 2, 4]) == pytest.approx({"median": 3.0, "p90": 7.6, "mean": 4.0})
    empty = latency_summary([])
    assert set(empty) == {"median", "p90", "mean"} and all(v != v for v in empty.values())


def test_word_emission_latency_by_hand():
    emitted = [("The", 600), ("cat", 900), ("sad", 1300), ("on", 1500), ("the", 1500), ("mat", 2100), ("too", 2100)]
    lats = word_emission_latencies(emitted, REF1)
    # Matched: the 600-400, cat 900-700, on 1500-1300, the 1500-1400, mat 2100-1800;
    # "sad" is a substitution for "sat" and "too" an insertion: neither counts.
    assert [(x.ref_index, x.hyp_index, x.latency_ms) for x in lats] == [
        (0, 0, 200),
        (1, 1, 200),
        (3, 3, 200),
        (4, 4, 100),
        (5, 5, 300),
    ]
    # sorted [100, 200, 200, 200, 300]: p90 at rank 3.6 -> 200 + 0.6 * 100 = 260
    s = word_emission_summary(lats, n_ref_words=len(REF1))
    assert s == pytest.approx({"median": 200, "p90": 260, "mean": 200, "n_matched": 5, "coverage": 5 / 6})


def test_word_emission_latency_edge_cases():
    assert word_emission_latencies([], REF1) == []
    assert word_emission_latencies([("the", 500)], []) == []
    # "it's" normalises to "it is": both reference words match the one emitted word, each against its own end.
    lats = word_emission_latencies([("It's", 900)], [("it", 300), ("is", 600)])
    assert [(x.word, x.latency_ms) for x in lats] == [("it", 600), ("is", 300)]
    # A word emitted before its aligned end gives a negative latency (anticipation), kept as is.
    assert word_emission_latencies([("cat", 650)], [("cat", 700)])[0].latency_ms == -50


def test_metrics_import_no_orchestration_frameworks():
    code = (
        "import sys, evaluation.metrics as m; m.wer(['a b'], ['a c']); "
        "bad = [x for x in ('prefect', 'ray', 'mlflow') if x in sys.modules]; print(bad); sys.exit(bool(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


# ---------------------------------------------------------------------------------------------------- WER gate


def test_wer_gate_and_pareto_front():
    from evaluation.metrics import WER_CAP_POINTS, pareto_front, reference_wer, wer_gate_limit, within_wer_cap

    assert WER_CAP_POINTS == 0.05  # offline + 5 points (absolute)
    assert within_wer_cap(0.12, 0.07) and not within_wer_cap(0.1201, 0.07)  # exactly offline + cap passes
    assert within_wer_cap(0.10, 0.07, cap_points=0.03) and not within_wer_cap(0.10, 0.07, cap_points=0.02)
    assert not within_wer_cap(float("nan"), 0.07) and not within_wer_cap(1.16, 0.07)
    with pytest.raises(ValueError):
        within_wer_cap(0.1, 0.07, cap_points=-0.01)
    assert reference_wer([0.2, 0.1, 1.3], offline_wer=0.07) == 0.07
    assert reference_wer([0.2, 0.1, float("nan")]) == 0.1  # no offline number: the best system
    assert reference_wer([]) != reference_wer([])  # NaN: nothing to compare with
    assert wer_gate_limit([0.2, 0.1]) == pytest.approx(0.15)
    # (lag, WER): the third point is dominated by the second; the first is ineligible and cannot push others off
    pts = [(-800.0, 1.16), (850.0, 0.08), (900.0, 0.09), (1000.0, 0.07)]
    assert pareto_front(pts) == [True, True, False, True]
    assert pareto_front(pts, [False, True, True, True]) == [False, True, False, True]
    with pytest.raises(ValueError):
        pareto_front(pts, [True])
