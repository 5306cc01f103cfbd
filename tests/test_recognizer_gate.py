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


def test_two_pass_candidates_cover_each_verifier_padding_and_need_a_hush_word_only_for_it():
    # the served spec pads the mid-stream verifier with 5 s of zeros and ends each segment on a 30 s padding;
    # the pipeline registers that recognizer beside the hush-word one, so the dev gate can promote either
    from configs.pipeline import PipelineConfig
    from tasks.recognizer import recognizer_candidates

    config = PipelineConfig(stages=["finetune_causal", "promote"])
    with_hush = recognizer_candidates.fn(config, {300: "adapter"}, None, "hush-dir")
    two_pass = {s.name: s for s in with_hush if s.kind == "two-pass"}
    assert len(two_pass) == 4
    hush = [s for s in two_pass.values() if s.verifier == "hush"]
    zeros = [s for s in two_pass.values() if s.verifier == "zeros_5s"]
    assert len(hush) == len(zeros) == 2 and {s.self_agreement for s in zeros} == {None, True}
    assert all(s.hush_dir == "hush-dir" and s.final_verifier is None for s in hush)
    assert all(s.hush_dir is None and s.final_verifier == config.two_pass_final_verifier for s in zeros)
    assert all(s.restart_words == config.two_pass_restart_words == 0 for s in two_pass.values())
    assert all((s.verifier_restart_words or 0) == config.two_pass_verifier_restart_words for s in two_pass.values())
    assert all(s.verifier_restart_distinct == config.two_pass_verifier_restart_distinct for s in two_pass.values())
    assert all((bool(s.verifier_restart_whole), s.verifier_restart_long or 0) == (
        config.two_pass_verifier_restart_whole, config.two_pass_verifier_restart_long) for s in two_pass.values())
    assert all((s.partial_min_prob or 0.0) == config.two_pass_partial_min_prob for s in two_pass.values())
    assert all((s.final_min_prob or 0.0) == config.two_pass_final_min_prob for s in two_pass.values())
    assert all((s.heartbeat_ms, s.hold_last_edge_ms) == (config.two_pass_heartbeat_ms,
                                                         config.two_pass_hold_last_edge_ms) for s in two_pass.values())
    assert all(s.window_ms == config.verifier_window_ms and s.precision == config.two_pass_precision
               for s in two_pass.values())
    without = recognizer_candidates.fn(config, {300: "adapter"}, None, None)
    assert {s.verifier for s in without if s.kind == "two-pass"} == {"zeros_5s"}


def test_the_config_offers_only_verifier_paddings_the_verifier_knows():
    # configs/ spells them out as a Literal (no torch on config parsing): a subset of the verifier's conditions
    from typing import get_args

    from configs.pipeline import PipelineConfig
    from training.hush_word.transcribe import CONDITIONS

    annotation = PipelineConfig.model_fields["two_pass_verifiers"].annotation
    names = set(get_args(get_args(annotation)[0]))
    assert names and names <= set(CONDITIONS)
    last = set(get_args(PipelineConfig.model_fields["two_pass_final_verifier"].annotation))
    assert last and last <= set(CONDITIONS)


def test_emma_is_a_candidate_only_where_the_profile_keeps_it(monkeypatch):
    # dev evidence (selection/dev_emma*) left EMMA off the front: the default registers no EMMA recognizer, and the
    # sweep's trial is not even looked up (no tracking server is reachable here)
    from configs.pipeline import PipelineConfig
    from tasks.recognizer import recognizer_candidates

    sweep = {"tracking_uri": "http://127.0.0.1:9", "promotion": {"trial": {"run_id": "r", "t_emma": 0.4}}}
    config = PipelineConfig(stages=["finetune_causal", "sweep_emma", "promote"])
    assert not config.emma_candidate
    assert not [s for s in recognizer_candidates.fn(config, {300: "adapter"}, sweep, None) if s.emma_dir]
    kept = config.model_copy(update={"emma_candidate": True})
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with pytest.raises(Exception):  # now the trial is looked up, and the server is not there
        recognizer_candidates.fn(kept, {300: "adapter"}, sweep, None)


def test_the_served_spec_carries_the_pipelines_dev_choices():
    # benchmarks/results/selection/served_two_pass.json is what `whisperline registry register` registers and what
    # the dev and test runs score as "two-pass (served)": the profile's two-pass choices and it must not drift apart
    import json
    from pathlib import Path

    from configs.pipeline import PipelineConfig

    served = json.loads((Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "selection" /
                         "served_two_pass.json").read_text())
    config = PipelineConfig()
    assert served["final_verifier"] == config.two_pass_final_verifier
    assert served["restart_words"] == config.two_pass_restart_words
    assert served.get("verifier_restart_words", 0) == config.two_pass_verifier_restart_words
    assert served.get("verifier_restart_distinct", 1) == config.two_pass_verifier_restart_distinct
    assert served.get("verifier_restart_whole", False) == config.two_pass_verifier_restart_whole
    assert served.get("verifier_restart_long", 0) == config.two_pass_verifier_restart_long
    assert served.get("partial_min_prob", 0.0) == config.two_pass_partial_min_prob
    assert served.get("final_min_prob", 0.0) == config.two_pass_final_min_prob
    assert served.get("heartbeat_ms") == config.two_pass_heartbeat_ms
    assert served.get("hold_last_edge_ms") == config.two_pass_hold_last_edge_ms
    assert served["window_ms"] == config.verifier_window_ms and served["partials"] == config.two_pass_partials
