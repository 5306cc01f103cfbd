"""Integration: a real 2-worker Ray Train run (gloo, CPU) on real shards, with a worker SIGKILLed mid-run, tracked
in a real MLflow server; the registered model is loaded back and streams a real utterance; the Prefect flow
`finetune_causal` maps over chunk sizes and a re-run hits its cache."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
import torch

from configs.finetune import FinetuneConfig
from training.lora import adapter_state_dict, load_adapter
from data.tracking import client
from data.weights import load_model

from conftest import record_drill

pytestmark = pytest.mark.slow


def _config(real_shards: Path, tmp_path: Path, tracking_uri: str, **kw) -> FinetuneConfig:
    # the 6-utterance fixture is all `train`: validation on it is held-in, and says so (leakage guard)
    values = dict(datasets=(str(real_shards),), validation_datasets=(str(real_shards),), validation_limit=1,
                  validation_splits=("train",), allow_held_in_validation=True,
                  max_steps=5, checkpoint_every=2, batch_size=2, warmup_steps=1, lora={"r": 4},
                  num_workers=2, max_failures=1, storage_path=str(tmp_path / "ray"),
                  output_dir=str(tmp_path / "adapters"), tracking_uri=tracking_uri, experiment="test-causal")
    values.update(kw)
    return FinetuneConfig(**values)


@pytest.fixture(scope="module")
def fault_run(real_shards, ray_cluster, mlflow_server, tmp_path_factory):
    from training.causal.run import run_finetune

    tmp = tmp_path_factory.mktemp("fault")
    marker = tmp / "killed.txt"
    cfg = _config(real_shards, tmp, mlflow_server, chaos={"rank": 1, "at_step": 3, "marker": str(marker)})
    return cfg, marker, run_finetune(cfg)


def test_two_worker_run_survives_a_killed_worker(fault_run, mlflow_server, real_shards):
    cfg, marker, summary = fault_run
    assert marker.exists() and "killed rank 1" in marker.read_text()  # the worker really died (SIGKILL)
    assert summary["metrics"]["step"] == cfg.max_steps
    c = client(mlflow_server)
    run = c.get_run(summary["run_id"])
    assert run.info.status == "FINISHED"
    # resumed from the checkpoint at step 2, not from scratch
    resumed = c.get_metric_history(summary["run_id"], "resumed_from_step")
    assert [m.value for m in resumed] == [2.0]
    record_drill("ray_worker_killed", killed_rank=1, killed_at_step=3, resumed_from_step=2, steps_lost=1,
                 checkpoint_every=cfg.checkpoint_every, final_status=run.info.status)
    losses = c.get_metric_history(summary["run_id"], "loss")
    assert {m.step for m in losses} == set(range(1, cfg.max_steps + 1))
    assert all(torch.isfinite(torch.tensor(m.value)) for m in losses)
    # both ranks contributed sample points (the value is summed over ranks)
    assert c.get_metric_history(summary["run_id"], "sample_points")[-1].value >= 2
    # every start (the first, and the restore from step 2) logs the run's data size: all 6 fixture utterances
    sizes = sorted((m.step, m.value) for m in c.get_metric_history(summary["run_id"], "train_utterances"))
    assert sizes == [(0, 6.0), (2, 6.0)]
    # params and tags identify exactly what was trained
    tags, params = run.data.tags, run.data.params
    dataset_id = (real_shards / "dataset.json").read_text()
    assert tags["dataset_versions"] in dataset_id and len(tags["base_sha256"]) == 64
    assert tags["git_commit"] and params["chunk_ms"] == "300" and params["lora.r"] == "4"
    for key in ("val_wer", "val_arwer", "val_al_ms"):
        assert key in summary["metrics"]


def test_adapter_round_trips_through_mlflow_and_streams(fault_run, mlflow_server, realspeech, tmp_path):
    import mlflow

    cfg, _, summary = fault_run
    assert summary["registered_model"] == "whisperline-causal-tiny.en-300ms"
    c = client(mlflow_server)
    version = c.get_model_version(summary["registered_model"], summary["registered_version"])
    assert version.run_id == summary["run_id"]
    # the adapter artifact equals the trained one and loads strictly into fresh base weights
    local = Path(c.download_artifacts(summary["run_id"], "adapter", str(tmp_path)))
    a, b = load_model("tiny.en"), load_model("tiny.en")
    load_adapter(a, local)
    load_adapter(b, summary["adapter_dir"])
    sa, sb = adapter_state_dict(a), adapter_state_dict(b)
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert any(float(v.abs().max()) > 0 for k, v in sa.items() if "lora_B" in k)  # it was trained
    # the registered pyfunc model streams a real utterance
    mlflow.set_tracking_uri(mlflow_server)
    model = mlflow.pyfunc.load_model(f"models:/{summary['registered_model']}/{summary['registered_version']}")
    wav = sorted((realspeech / "cmu_arctic" / "wav").glob("*.wav"))[0]
    out = model.predict(pd.DataFrame({"audio_path": [str(wav)]}))
    assert list(out.columns) == ["audio_path", "text", "chunk_ms"] and out["chunk_ms"][0] == 300
    assert isinstance(out["text"][0], str)
    with pytest.raises(Exception, match="audio_path"):
        model.predict(pd.DataFrame({"path": [str(wav)]}))


def test_flow_maps_chunk_sizes_and_reruns_from_cache(prefect_server, real_shards, ray_cluster, mlflow_server,
                                                      tmp_path):
    """The flow maps one Ray Train run per variant (a fixed chunk size, and the random-chunk adapter of the CLI's
    --random-chunk-ms with every utterance augmented in the Ray workers); a re-run hits the cache. Two variants, not
    three: each Ray Train run costs about a minute of start-up on this machine, and the fixed 300 ms size is trained
    by the killed-worker drill above. Both distil from the full-context teacher (the recipe) and train on half the
    data (``train_fraction``)."""
    from configs.finetune import AugmentSettings
    from flows.finetune_causal import run_finetune_flow

    # one worker each: the 2-worker run (and its killed worker) is the drill above; a second worker costs ~20 s of
    # start-up per run
    cfg = _config(real_shards, tmp_path, mlflow_server, max_steps=2, checkpoint_every=2, validation_limit=1,
                  experiment="test-flow", augment=AugmentSettings(p=1.0),
                  train_fraction=0.5, num_workers=1)
    rows = run_finetune_flow(cfg, chunk_sizes=[200], random_chunk_ms=[100, 200])
    assert [r["variant"] for r in rows] == ["200ms", "rcs"] and all(r["status"] == "ok" for r in rows)
    for r in rows:
        run = client(mlflow_server).get_run(r["run_id"])
        assert run.data.params["distill.weight"] == "0.5"
        # half the fixture's 6 utterances (a learning curve's point), in the params and logged by the workers
        assert run.data.params["train_fraction"] == "0.5"
        assert [m.value for m in client(mlflow_server).get_metric_history(r["run_id"], "train_utterances")] == [3.0]
        assert all(m.value > 0 for m in client(mlflow_server).get_metric_history(r["run_id"], "loss_kd"))
    assert rows[0]["run_id"] != rows[1]["run_id"] and rows[1]["chunk_ms"] == 200
    assert "whisperline-causal-tiny.en-200ms" in {m.name for m in client(mlflow_server).search_registered_models()}
    n_runs = len(client(mlflow_server).search_runs([client(mlflow_server).get_experiment_by_name("test-flow")
                                                     .experiment_id]))
    again = run_finetune_flow(cfg, chunk_sizes=[200], random_chunk_ms=[100, 200])  # cached: no new training or runs
    assert [r["run_id"] for r in again] == [r["run_id"] for r in rows]
    assert len(client(mlflow_server).search_runs([client(mlflow_server).get_experiment_by_name("test-flow")
                                                   .experiment_id])) == n_runs
    assert all(os.path.isdir(r["adapter_dir"]) for r in rows)
