"""Integration: the whole DAG as one Prefect flow (real Prefect server, real Ray, real MLflow server, real weights,
espeak-ng speech), its re-run skipping every finished stage, a sweep-space change re-running only the sweep, and
bad configs rejected before any work."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from configs.pipeline import load_pipeline_config
from data.tracking import client

pytestmark = pytest.mark.slow
PROFILE = "configs/smoke.yaml"


def _config(tmp_path, mlflow_server, **kw):
    return load_pipeline_config(
        # one Ray Train worker per stage: each second worker costs ~20 s of start-up per stage here, and 2-worker DDP
        # (a worker killed and restored) is test_finetune_ray.py's drill
        PROFILE, output_root=str(tmp_path), tracking_uri=mlflow_server, n_synth=12, num_workers=1,
        hush_word={"epochs": 1, "batch_size": 4, "splits": ["train"], "experiment": "test-pipe-hush"},
        finetune={"max_steps": 4, "checkpoint_every": 2, "warmup_steps": 1, "validation_limit": 2,
                  "experiment": "test-pipe-causal", "lora": {"r": 4}},
        emma_sweep={"base": {"max_steps": 2, "log_every": 1, "validation_limit": 2}, "t_emma": [0.4],
                    "lambda_latency": [0.05], "lambda_variance": [0.0], "experiment": "test-pipe-sweep",
                    "policy_store": str(tmp_path / "policies"), "storage_path": str(tmp_path / "tune")}, **kw)


def test_pipeline_runs_end_to_end_and_reruns_only_what_changed(prefect_server, ray_cluster, mlflow_server, tmp_path):
    from flows.pipeline import pipeline

    first = pipeline(config=_config(tmp_path, mlflow_server))
    assert set(first["stage_s"]) == {"build_dataset", "train_hush_word", "finetune_causal", "sweep_emma",
                                     "evaluate_dev", "evaluate"}
    assert first["finetune_causal"][0]["status"] == "ok" and not first["sweep_emma"]["skipped"]
    promotion = first["sweep_emma"]["promotion"]  # the session's MLflow server may hold a champion already
    assert promotion["version"] and promotion["decision"].startswith(("champion", "refused"))
    assert any(r["system"].startswith("EMMA") for r in first["evaluate"])
    test = first["evaluate_test"]  # the held-out test split: ours and the real PyPI peers in one run
    assert test["test_set"]["audio_sha256_overlap_with_training"] == 0 and test["test_set"]["n_utterances"] >= 1
    sources = {r["name"]: r["source"] for r in test["systems"]}
    assert sources["causal tuned 300 ms"] == "ours" and sources["offline Whisper (ours, 30 s pad)"] == "ours"
    assert sources["whisperlivekit LocalAgreement-2 1000 ms"].startswith("pypi:whisperlivekit==")
    two_pass = [r for r in test["systems"] if r["kind"] == "two-pass" and not r["name"].startswith("champion")]  # verifier padded with this run's hush word
    assert len(two_pass) == 1 and two_pass[0]["spec"]["second_pass"]["hush_dir"] == first["train_hush_word"]["training"]["hush_word_dir"]
    assert (tmp_path / "evaluation" / "evaluation.json").exists()
    emma = [r for r in test["systems"] if r["spec"]["decoding"]["emma_dir"] and not r["name"].startswith("champion")]  # the dev-selected trial, scored on test
    assert len(emma) == 1 and emma[0]["name"].endswith("(dev-selected)")
    version = client(mlflow_server).get_model_version(promotion["registered_model"], promotion["version"])
    assert version.tags["test_wer"] == str(emma[0]["wer"]) and version.tags["selected_on"] == "dev split"
    # every recognizer the stages made is one registry version; the dev gate's champion is scored on test
    c = client(mlflow_server)
    name = "whisperline-recognizer-tiny.en"
    kinds = {v.tags.get("whisperline.kind") for v in c.search_model_versions(f"name = '{name}'")}
    assert {"causal", "two-pass"} <= kinds
    # EMMA stays out of the candidates by default (dev evidence: selection/dev_emma*); the sweep still promoted its own
    assert not [n for n in first["promote_recognizers_registered"] if "emma" in n]
    champion = first["promote_recognizers"]["aliases"]["champion"]
    assert champion["registered_model"] == name and champion["kind"] in kinds
    champ_rows = [r for r in test["systems"] if r["name"].startswith("champion (dev-selected)")]
    assert len(champ_rows) == 1 and champ_rows[0]["kind"] in ("causal", "two-pass")
    mv = c.get_model_version_by_alias(name, "champion")
    assert mv.version == champion["version"] and mv.tags["dev_wer"] and mv.tags["eval_set"].startswith("dev")
    assert mv.tags["test_wer"] == str(champ_rows[0]["wer"]) and mv.tags["gate"]
    per_domain = {k for k in mv.tags if k.startswith(("dev_wer_", "test_wer_")) and not k.endswith("_ci95")}
    assert {k.split("_", 2)[0] for k in per_domain} == {"dev", "test"}  # its WER per domain, dev and test
    # its model card (issue 67): the spec in words, the datasets, dev and test with intervals, the serve command
    card = mv.description
    assert "**What it is.**" in card and f"{champion['kind']} recognizer" in card and "Base model: Whisper" in card
    assert all(d[:16] in card for d in mv.tags["dataset_versions"].split(",") if d)
    assert "| dev (" in card and "| test (" in card and card.count(" [") >= 4  # pooled and per domain, intervals
    assert f"whisperline serve-model --model {name} --alias champion" in card
    assert c.get_model_version_by_alias(name, "champion-300ms").version and c.get_model_version_by_alias(
        name, "champion-fast").version
    n_versions = len(c.search_model_versions(f"name = '{name}'"))

    # only the sweep space changed: training is reused, the sweep re-runs (the evaluation too: its timings are part
    # of its result), and the recognizers are the ones registered (EMMA is no candidate): no new versions
    changed = _config(tmp_path, mlflow_server, evaluate_peers=False)
    changed = changed.model_copy(update={"emma_sweep": {**changed.emma_sweep, "t_emma": [0.05, 0.5]}})
    again = pipeline(config=changed)
    assert again["build_dataset"]["synthetic"]["skipped"]
    assert again["finetune_causal"][0]["run_id"] == first["finetune_causal"][0]["run_id"]
    assert again["train_hush_word"]["training"]["run_id"] == first["train_hush_word"]["training"]["run_id"]
    assert not again["sweep_emma"]["skipped"]
    assert again["sweep_emma"]["parent_run_id"] != first["sweep_emma"]["parent_run_id"]
    assert sum(t["trained_here"] for t in again["sweep_emma"]["trials"]) == 0  # same policy: thresholds only
    # the threshold trades lag for words: below the short-trained policy's write probability (about sigmoid(b/τ) =
    # 0.08) it writes at once, above it each token waits up to max_stall chunks
    by_t = {t["t_emma"]: t for t in again["sweep_emma"]["trials"]}
    assert by_t[0.5]["al_ms"] > by_t[0.05]["al_ms"]
    assert client(mlflow_server).get_run(again["sweep_emma"]["parent_run_id"]).info.status == "FINISHED"
    assert len(c.search_model_versions(f"name = '{name}'")) == n_versions
    assert all(r["reused"] == "true" for r in again["promote_recognizers_registered"].values())

    # nothing changed: every training stage is a cache hit, the finished sweep is read back from MLflow (the
    # evaluation, which re-scores by design, is left out of this run: the run above scored it)
    training_only = changed.model_copy(update={"stages": ("build_dataset", "train_hush_word", "finetune_causal",
                                                          "sweep_emma")})
    third = pipeline(config=training_only)
    assert third["build_dataset"]["synthetic"]["skipped"] and third["sweep_emma"]["skipped"]
    assert third["finetune_causal"][0]["run_id"] == first["finetune_causal"][0]["run_id"]
    assert third["train_hush_word"]["training"]["run_id"] == first["train_hush_word"]["training"]["run_id"]
    assert third["sweep_emma"]["parent_run_id"] == again["sweep_emma"]["parent_run_id"]
    assert set(third["stage_s"]) == {"build_dataset", "train_hush_word", "finetune_causal", "sweep_emma"}

@pytest.mark.parametrize("bad", [{"chunk_sizes": [250]}, {"model": "enormous"}, {"sweep_chunk_ms": 100},
                                 {"finetune": {"tau0_ms": 100}},
                                 {"emma_sweep": {"base": {"lambda_latency": -1.0}}}])
def test_bad_configs_are_rejected_before_any_work(bad, tmp_path):
    with pytest.raises(ValidationError):
        load_pipeline_config(PROFILE, output_root=str(tmp_path), **bad)
    assert not any(tmp_path.iterdir())


def test_deployment_file_names_real_entrypoints():
    import importlib

    import yaml

    spec = yaml.safe_load(open("infra/prefect.yaml", encoding="utf-8"))
    for deployment in spec["deployments"]:
        module, name = deployment["entrypoint"].split(":")
        flow = getattr(importlib.import_module(module.removesuffix(".py").replace("/", ".")), name)
        params = deployment.get("parameters", {})
        assert set(params) <= set(flow.parameters.properties)
        assert set(flow.parameters.required or []) <= set(params)  # a scheduled run has all it needs
        if "profile" in params:
            load_pipeline_config(params["profile"])  # the profile it names is valid
        for schedule in deployment.get("schedules", []):
            assert len(schedule["cron"].split()) == 5
