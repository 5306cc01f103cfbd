"""The dev-decision runner (benchmarks.decide): a decision file is checked before anything runs, the rule is applied
to per-utterance rows only (adopt where separably better at the same words, else the reference stays), each arm
becomes a run in a real MLflow store, and the record names the rule, the intervals and the verdict."""

from __future__ import annotations

from dataclasses import replace

import pytest

from benchmarks.decide import judge, load_decision, log_arms, record, with_emma

N = 12  # utterances / streams


def _row(name: str, errors: list[int], latency_ms: list[float], rtf: float = 0.3) -> dict:
    per = [{"utt_id": f"s{i}", "ref_words": 50, "errors": e, "word_latency_ms": [lat] * 10,
            "compute_ms": rtf * 1000, "audio_ms": 1000} for i, (e, lat) in enumerate(zip(errors, latency_ms))]
    return {"name": name, "wer": sum(errors) / (50 * N), "rtf": rtf, "per_utterance": per,
            "word_latency_ms_median": sorted(latency_ms)[N // 2], "word_latency_ms_p90": max(latency_ms)}


def _decision(tmp_path, **over) -> object:
    text = """
name: heartbeat-300
question: Do more verifier passes make finals sooner?
rule: Adopt an arm separably sooner on the streams within 1 WER point on every set.
reference: served
arms:
  served: {}
  sooner: {second_pass: {heartbeat_ms: 300}}
  worse: {second_pass: {heartbeat_ms: 300, every_ms: 600}}
sets: [real, streams]
adopt: {better: word_latency_ms_median, set: streams, wer_margin: 0.01}
"""
    path = tmp_path / "d.yaml"
    path.write_text(text + "".join(f"{k}: {v}\n" for k, v in over.items()))
    return load_decision(path)


def _rows(sooner_errors: list[int]) -> dict:
    base, lat = [5] * N, [1200.0 + 10 * i for i in range(N)]
    return {which: {"served": _row("served", base, lat),
                    "sooner": _row("sooner", sooner_errors, [x - 300 + (i % 3) * 20 for i, x in enumerate(lat)]),
                    "worse": _row("worse", [e + 3 for e in base], [x + 100 for x in lat])}
            for which in ("real", "streams")}


def test_a_separably_sooner_arm_at_the_same_words_is_adopted(tmp_path):
    d = _decision(tmp_path)
    verdict = judge(d, _rows([5] * N))
    assert verdict["chosen"] == "sooner" and verdict["arms"]["sooner"]["qualifies"]
    assert not verdict["arms"]["worse"]["qualifies"]  # later, and more errors
    assert verdict["arms"]["sooner"]["better_vs_reference_ci95"][1] < 0


def test_an_arm_past_the_wer_margin_is_not_adopted_and_the_reference_stays(tmp_path):
    d = _decision(tmp_path)
    verdict = judge(d, _rows([6 + i % 3 for i in range(N)]))  # sooner, but 2-4 points of WER worse everywhere
    assert verdict["chosen"] == "served" and not verdict["arms"]["sooner"]["qualifies"]
    assert verdict["arms"]["sooner"]["wer_vs_reference_ci95"]["real"][1] > 0.01


def test_an_arm_past_a_guard_is_not_adopted(tmp_path):
    # sooner at the same words: a guard of 0 on the WER difference lets it through, one below 0 does not
    allowed = judge(_decision(tmp_path, adopt="{better: word_latency_ms_median, set: streams, guard: {wer: 0.0}}"),
                    _rows([5] * N))
    assert allowed["chosen"] == "sooner" and allowed["arms"]["sooner"]["guards_vs_reference_ci95"]["wer"][1] == 0
    d = _decision(tmp_path, adopt="{better: word_latency_ms_median, set: streams, guard: {wer: -0.001}}")
    strict = judge(d, _rows([5] * N))
    assert strict["chosen"] == "served" and not strict["arms"]["sooner"]["qualifies"]
    assert "wer (guard: at most -0.001 more)" in record(d, strict, "abc1234")
    # a guard on another set than the one the arm must be better on: sooner on the streams, at most 0 WER more on real
    on_real = _decision(tmp_path, adopt="{better: word_latency_ms_median, set: streams, guard: {real.wer: 0.0}}")
    assert judge(on_real, _rows([5] * N))["chosen"] == "sooner"
    assert "- sooner: word_latency_ms_median" in record(on_real, judge(on_real, _rows([5] * N)), "abc1234")


def test_no_domain_worse_judges_the_sets_with_domains_and_needs_them_on_the_adopt_set(tmp_path):
    d = _decision(tmp_path, adopt="{better: word_latency_ms_median, set: real, no_domain_worse: true}")
    rows = _rows([5] * N)
    with pytest.raises(ValueError, match="domain on every utterance of 'real'"):
        judge(d, rows)
    for r in rows["real"].values():  # the real set's utterances carry domains; the joined streams mix them
        for i, u in enumerate(r["per_utterance"]):
            u["domain"] = "read" if i % 2 else "l2"
    verdict = judge(d, rows)
    assert set(verdict["domains"]) == {"real"} and verdict["chosen"] == "sooner"


def test_a_bad_decision_file_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="reference"):
        _decision(tmp_path, reference="nobody")
    with pytest.raises(ValueError, match="sets"):
        _decision(tmp_path, sets="[test]")  # test is never a set a decision reads
    with pytest.raises(ValueError, match="adopt.better"):
        _decision(tmp_path, adopt="{better: vibes, set: streams}")
    with pytest.raises(ValueError, match="adopt.guard"):
        _decision(tmp_path, adopt="{better: wer, set: streams, guard: {vibes: 1}}")
    with pytest.raises(ValueError, match="adopt.guard"):
        _decision(tmp_path, adopt="{better: wer, set: streams, guard: {test.wer: 0}}")
    with pytest.raises(Exception, match="colour"):
        _decision(tmp_path, arms="{served: {}, odd: {second_pass: {colour: red}}}")


def test_each_arm_is_an_mlflow_run_and_the_record_names_rule_intervals_and_verdict(tmp_path):
    from data.tracking import client

    d = _decision(tmp_path)
    verdict = judge(d, _rows([5] * N))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    runs = log_arms(d, verdict, uri, "abc1234")
    assert set(runs) == set(d.arms)
    run = client(uri).get_run(runs["sooner"])
    assert run.data.tags["chosen"] == "True" and run.data.tags["decision"] == "heartbeat-300"
    assert run.data.metrics["streams.word_latency_ms_median"] < run.data.metrics["streams.wer"] + 1e6
    assert "heartbeat_ms" in run.data.params["overrides"]
    text = record(d, verdict, "abc1234")
    assert d.rule in text and "**Verdict.** sooner adopted" in text and "abc1234" in text
    assert "[" in text.split("| sooner | real |")[1].splitlines()[0]  # the WER interval against the reference


def _recipe(tmp_path, seeds: str = "[1, 2]", train: str = "{datasets: [synth, l2]}") -> object:
    path = tmp_path / "r.yaml"
    path.write_text(f"""
name: real-speech
question: Does real L2 speech beside the synthetic corpus lower the causal adapter's dev WER?
rule: Adopt the arm whose WER is separably lower at every seed.
reference: synthetic
seeds: {seeds}
arms:
  synthetic: {{kind: causal, train: {{datasets: [synth]}}}}
  real: {{kind: causal, train: {train}}}
""")
    return load_decision(path)


def test_a_recipe_decision_trains_per_seed_and_adopts_only_what_every_seed_carries(tmp_path):
    from benchmarks.decide import judge_seeds

    d = _recipe(tmp_path)
    assert d.trains and d.seeds == (1, 2)

    def rows(real_errors: list[int]) -> dict:
        lat = [1000.0] * N
        out = {"real": {"synthetic": _row("synthetic", [8] * N, lat), "real": _row("real", real_errors, lat)}}
        for r in out["real"].values():  # the first half read English, the rest L2
            for i, u in enumerate(r["per_utterance"]):
                u["domain"] = "read" if i < N // 2 else "l2"
        return out

    better = [3 + i % 2 for i in range(N)]
    both = judge_seeds(d, {1: rows(better), 2: rows(better)})
    assert both["chosen"] == "real" and all(v["arms"]["real"]["qualifies"] for v in both["seeds"].values())
    one = judge_seeds(d, {1: rows(better), 2: rows([8 + i % 2 for i in range(N)])})  # seed 2 does not carry it
    assert one["chosen"] == "synthetic"
    # the L2 half gains, the read half loses: adopted on the pooled rule, refused where no domain may get worse
    mixed = [9 + i % 2 for i in range(N // 2)] + [0] * (N // 2)  # read: 8 → 9-10 errors; l2: 8 → 0
    assert judge_seeds(d, {1: rows(mixed), 2: rows(mixed)})["chosen"] == "real"
    strict = replace(d, adopt=replace(d.adopt, no_domain_worse=True))
    refused = judge_seeds(strict, {1: rows(mixed), 2: rows(mixed)})
    assert refused["chosen"] == "synthetic" and refused["seeds"][1]["arms"]["real"]["domains_worse"] == ["real/read"]
    part = judge_seeds(d, {1: rows(better)})  # a seed at a time: no verdict before every seed has rows
    assert part["chosen"] == "pending" and part["pending_seeds"] == [2]
    assert "**Verdict.** pending: seed(s) [2]" in record(d, part, "abc1234")
    settled = judge_seeds(strict, {1: rows(mixed)})  # no arm can qualify any more: seed 2 cannot change that
    assert settled["chosen"] == "synthetic" and settled["settled_without_seeds"] == [2]
    assert "seed(s) [2] could not change the verdict" in record(strict, settled, "abc1234")
    text = record(d, both, "abc1234")
    assert "Seed 1:" in text and "Seed 2:" in text and "**Verdict.** real adopted" in text
    l2 = both["seeds"][1]["domains"]["real"]["l2"]  # each domain's WER and the difference to the reference
    assert l2["utterances"] == N // 2 and l2["wer"]["synthetic"] == 8 / 50 and l2["vs_reference"]["real"]["diff"] < 0
    assert "Per domain (real):" in text and "| l2 (6 utts, 300 words)" in text
    runs = log_arms(d, both, f"sqlite:///{tmp_path / 'mlflow.db'}", "abc1234")
    assert set(runs) == {f"{a} (seed {s})" for a in d.arms for s in (1, 2)}
    from data.tracking import client

    logged = client(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(runs["real (seed 1)"]).data.metrics
    assert logged["real.wer.l2"] == both["seeds"][1]["domains"]["real"]["l2"]["wer"]["real"]


def test_a_recipe_decision_without_seeds_or_with_an_unknown_setting_is_refused(tmp_path):
    with pytest.raises(ValueError, match="seeds"):
        _recipe(tmp_path, seeds="[]")
    with pytest.raises(Exception, match="learning_rate"):
        _recipe(tmp_path, train="{datasets: [l2], learning_rate: 1}")


def test_the_emma_placeholder_takes_the_policy_given_at_run_time_and_is_refused_without_one():
    arm = {"kind": "causal", "decoding": {"emma_dir": "$EMMA", "t_emma": 0.3}}
    assert with_emma(arm, "/policies/p1") == {"kind": "causal", "decoding": {"emma_dir": "/policies/p1",
                                                                             "t_emma": 0.3}}
    assert arm["decoding"]["emma_dir"] == "$EMMA"  # the decision's own arms are not changed
    assert with_emma({"second_pass": {"heartbeat_ms": 0}}, None) == {"second_pass": {"heartbeat_ms": 0}}
    with pytest.raises(SystemExit, match="--emma"):
        with_emma(arm, None)
