"""Integration: an EMMA sweep through a real Prefect flow → real Ray Tune trials → a real MLflow server; thresholds
reuse trained policies; the dashboard lands on the parent run; promotion sets challenger/champion and the gate
refuses a worse model; the champion loads back as a pyfunc model and streams a real utterance."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from configs.emma import EmmaConfig, SweepConfig
from data.tracking import client

pytestmark = pytest.mark.slow
NAME = "whisperline-emma-tiny.en-300ms"


@pytest.fixture(scope="module")
def identity_adapter(tmp_path_factory) -> Path:
    """A freshly initialised LoRA adapter (B = 0: the base function) in whisperline's adapter format."""
    from configs.finetune import LoraSettings
    from training.lora import apply_lora, save_adapter
    from data.weights import checkpoint_sha256, load_model

    settings = LoraSettings(r=4)
    model = load_model("tiny.en")
    apply_lora(model, settings, seed=0)
    return save_adapter(model, settings, tmp_path_factory.mktemp("adapter"), {
        "base_model": "tiny.en", "base_sha256": checkpoint_sha256("tiny.en"), "chunk_ms": 300, "tau0_ms": 600})


@pytest.fixture(scope="module")
def sweep_result(prefect_server, real_shards, ray_cluster, mlflow_server, identity_adapter, tmp_path_factory):
    from flows.sweep_emma import run_sweep_flow

    tmp = tmp_path_factory.mktemp("sweep")
    base = EmmaConfig(datasets=(str(real_shards),), validation_datasets=(str(real_shards),), validation_limit=2,
                      validation_splits=("train",), allow_held_in_validation=True, adapter_dir=str(identity_adapter),
                      max_steps=3, log_every=1, batch_size=2, beta_ramp_steps=2, tracking_uri=mlflow_server)
    sweep = SweepConfig(base=base, t_emma=(0.2, 0.6), lambda_latency=(0.1, 1.0), lambda_variance=(0.0,),
                        max_concurrent_trials=2, policy_store=str(tmp / "policies"), storage_path=str(tmp / "tune"),
                        experiment="test-emma-sweep")
    return sweep, run_sweep_flow(sweep, promote=True)


def test_sweep_trials_are_child_runs_and_thresholds_reuse_policies(sweep_result, mlflow_server):
    sweep, result = sweep_result
    trials = result["trials"]
    assert len(trials) == 4 and all(t["status"] == "ok" for t in trials), trials
    assert sum(t["trained_here"] for t in trials) == 2  # two (λ_latency) trainings; the other thresholds reuse them
    assert len({t["policy_dir"] for t in trials}) == 2
    c = client(mlflow_server)
    parent = c.get_run(result["parent_run_id"])
    assert parent.info.status == "FINISHED" and parent.data.tags["whisperline.kind"] == "emma-sweep"
    children = c.search_runs([parent.info.experiment_id],
                             filter_string=f"tags.`mlflow.parentRunId` = '{result['parent_run_id']}'")
    assert len(children) == 4
    for child in children:
        assert {"wer", "arwer", "al_ms", "laal_ms", "rtf"} <= set(child.data.metrics)
        assert {"t_emma", "lambda_latency", "lambda_variance", "chunk_ms"} <= set(child.data.params)
    trained = [ch for ch in children if ch.data.metrics.get("trained_here") == 1]
    assert len(trained) == 2 and all(c.list_artifacts(ch.info.run_id, "policy") for ch in trained)
    assert len(c.get_metric_history(trained[0].info.run_id, "loss")) >= 3  # the training curve, step by step


def test_dashboard_files_on_the_parent_run_and_pareto_is_consistent(sweep_result, mlflow_server, tmp_path):
    from typer.testing import CliRunner

    from flows.cli import app

    _, result = sweep_result
    names = {Path(a.path).name for a in client(mlflow_server).list_artifacts(result["parent_run_id"], "dashboard")}
    assert {"wer_al_pareto.png", "parallel_coordinates.png", "trials.md", "trials.html", "trials.json"} <= names
    rows = result["dashboard_rows"]
    eligible = [r for r in rows if r["eligible"]]  # WER within the cap of the reference, AL not negative
    for r in rows:  # a Pareto row is eligible and dominated by no eligible row; a non-Pareto row is not
        dominated = any(o["al_ms"] <= r["al_ms"] and o["wer"] <= r["wer"] and (o["al_ms"] < r["al_ms"] or
                                                                             o["wer"] < r["wer"]) for o in eligible)
        assert r["pareto"] == (r["eligible"] and not dominated)
        assert r["eligible"] == (r["within_wer_cap"] and not r["al_negative"])
    out = tmp_path / "report"
    done = CliRunner().invoke(app, ["sweep", "report", result["parent_run_id"], "--tracking-uri", mlflow_server,
                                    "--out", str(out)])
    assert done.exit_code == 0, done.output
    assert (out / "wer_al_pareto.png").stat().st_size > 10_000 and "t_emma" in (out / "trials.md").read_text()


def test_promotion_gate_refuses_a_worse_model(sweep_result, mlflow_server):
    from training.emma.registry import PromotionRefused, promote

    sweep, result = sweep_result
    first = result["promotion"]
    c = client(mlflow_server)
    # another test of the session may have promoted a champion on this server first (order-independent)
    expected = first["version"] if first["champion_moved"] else first["champion_version"]
    assert c.get_model_version_by_alias(NAME, "champion").version == expected
    assert c.get_model_version_by_alias(NAME, "challenger").version == first["version"]
    tags = c.get_model_version(NAME, first["version"]).tags
    assert {"wer", "al_ms", "eval_set", "dataset_versions", "promoted_by", "promoted_at", "gate"} <= set(tags)

    # a second sweep whose best trial is worse: the same policy, scores copied from the first sweep's best + 0.1
    best = c.get_run(first["trial"]["run_id"])
    parent = c.create_run(best.info.experiment_id, run_name="worse-sweep",
                          tags={"eval_set": c.get_run(result["parent_run_id"]).data.tags["eval_set"]})
    child = c.create_run(best.info.experiment_id, tags={"mlflow.parentRunId": parent.info.run_id,
                                                        "policy_dir": best.data.tags["policy_dir"]})
    for k, v in best.data.params.items():
        c.log_param(child.info.run_id, k, v)
    for k in ("arwer", "al_ms", "laal_ms", "rtf"):
        c.log_metric(child.info.run_id, k, best.data.metrics[k])
    c.log_metric(child.info.run_id, "wer", best.data.metrics["wer"] + 0.1)
    c.set_terminated(child.info.run_id)
    decision = promote(mlflow_server, parent.info.run_id, NAME, al_budget_ms=None)
    assert decision["decision"].startswith("refused") and not decision["champion_moved"]
    # another test of the session may have promoted a champion on this server first (order-independent)
    expected = first["version"] if first["champion_moved"] else first["champion_version"]
    assert c.get_model_version_by_alias(NAME, "champion").version == expected
    assert c.get_model_version_by_alias(NAME, "challenger").version == decision["version"] != first["version"]
    with pytest.raises(PromotionRefused):
        promote(mlflow_server, parent.info.run_id, NAME, al_budget_ms=1.0)  # no trial that fast


def test_champion_streams_a_real_utterance(sweep_result, mlflow_server, realspeech):
    import mlflow

    mlflow.set_tracking_uri(mlflow_server)
    mlflow.set_registry_uri(mlflow_server)
    model = mlflow.pyfunc.load_model(f"models:/{NAME}@champion")
    wav = sorted((realspeech / "cmu_arctic" / "wav").glob("*.wav"))[0]
    out = model.predict(pd.DataFrame({"audio_path": [str(wav)]}), params={"t_emma": 0.05})
    assert out["t_emma"][0] == pytest.approx(0.05) and len(out["text"][0].split()) >= 3
