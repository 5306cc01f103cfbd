"""Reliability drills, all with real processes killed for real (SIGKILL: no clean-up runs):

- a dataset build killed mid-assemble publishes nothing, and its re-run reuses the finished alignments;
- concurrent builds on one dataset root publish one verified copy per version and never corrupt each other;
- one training through two faults (MLflow on PostgreSQL): the MLflow server stopped mid-training (a bounded,
  clear failure, the run not FINISHED, nothing promoted), then, the server back, the re-run resumes and the whole
  pipeline process is SIGKILLed mid-training; the next re-run skips the finished stages, resumes from the last
  checkpoint (at most one checkpoint interval lost each time) and ends FINISHED with every step's metrics;
- an unreachable tracking server stops the pipeline before any work; promotion refuses runs that did not finish.

With ``WHISPERLINE_DRILL_REPORT`` set, each drill appends what it measured (JSON lines) for
benchmarks/pipeline_smoke.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, copy_realspeech_subset, free_port, record_drill, start_mlflow_server, stop_process

pytestmark = pytest.mark.slow
WL = [sys.executable, "-m", "flows.cli"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The children report to the session's Prefect server and keep task results (the cache) under tmp_path."""
    from prefect.settings import PREFECT_API_URL

    env = {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(),
           "PREFECT_LOCAL_STORAGE_PATH": str(tmp_path / "prefect-results"), "PYTHONUNBUFFERED": "1"}
    env.pop("WHISPERLINE_CHAOS_KILL_AT", None)
    return {**env, **extra}


def _last_json(text: str) -> dict:
    start = text.rfind("\n{")
    return json.loads(text[start + 1 :] if start >= 0 else text)


def _visible(name_dir: Path) -> list[Path]:
    return sorted(p for p in name_dir.iterdir() if not p.name.startswith("."))


def test_build_killed_mid_assemble_publishes_nothing_and_rerun_reuses_work(tmp_path, realspeech, prefect_server):
    from data.assemble import verify_version

    corpus = copy_realspeech_subset(tmp_path / "corpus", realspeech, {"ljspeech": 3, "cmu_arctic": 3})
    root = tmp_path / "datasets"
    cmd = [*WL, "data", "build", str(corpus), "--output-root", str(root), "--shard-size", "2", "--workers", "1",
           "--name", "drill", "--config", "configs/smoke.yaml"]
    killed = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                            env=_env(tmp_path, WHISPERLINE_CHAOS_KILL_AT="assemble.split_written"))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    name_dir = root / "drill"
    assert _visible(name_dir) == []  # no version folder, not even an incomplete one
    hidden = list(name_dir.glob(".*.tmp-*"))
    assert hidden and any((h / "shards").glob("*.tar") for h in hidden)  # it really died mid-write

    t0 = time.perf_counter()
    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, env=_env(tmp_path))
    assert again.returncode == 0, again.stderr[-3000:]
    summary = _last_json(again.stdout)
    assert summary["counts"]["accepted"] == 6 and not summary["skipped"]
    assert summary["aligned_now"] == 0 and summary["reused"] == 6  # the killed run's alignments are reused
    assert not list(name_dir.glob(".*.tmp-*"))  # the dead build's hidden folder is cleaned up
    assert [p.name for p in _visible(name_dir)] == [summary["version_id"]]
    assert verify_version(Path(summary["version_dir"])) is not None
    record_drill("build_killed_mid_assemble", visible_partial_versions=0, realigned_after_kill=summary["aligned_now"],
            reused=summary["reused"], rerun_s=round(time.perf_counter() - t0, 1))


def test_concurrent_builds_on_one_dataset_root(tmp_path, realspeech, prefect_server):
    from data.assemble import verify_version

    corpus = copy_realspeech_subset(tmp_path / "corpus", realspeech, {"ljspeech": 2, "cmu_arctic": 2})
    root = tmp_path / "datasets"

    def build(i: int, shard_size: int) -> subprocess.Popen:
        return subprocess.Popen([*WL, "data", "build", str(corpus), "--output-root", str(root), "--name", "shared",
                                 "--shard-size", str(shard_size), "--workers", "1", "--config", "configs/smoke.yaml"],
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=_env(tmp_path / f"p{i}"))

    t0 = time.perf_counter()
    procs = [build(0, 2), build(1, 2), build(2, 3)]  # two identical builds and one with another config, at once
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [o[1][-2000:] for o in outs]
    same_a, same_b, other = (_last_json(o[0]) for o in outs)
    assert same_a["version_id"] == same_b["version_id"] != other["version_id"]
    assert same_a["shards"] == same_b["shards"]  # byte-identical content, whoever published it
    versions = _visible(root / "shared")
    assert sorted(v.name for v in versions) == sorted({same_a["version_id"], other["version_id"]})
    assert all(verify_version(v) is not None for v in versions)
    assert not list((root / "shared").glob(".*.tmp-*"))
    record_drill("concurrent_builds", processes=3, versions=len(versions), all_verified=True,
            wall_s=round(time.perf_counter() - t0, 1))


def _drill_profile(tmp_path: Path, max_steps: int, every: int, stages: list[str]) -> Path:
    profile = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    profile["pipeline"].update({
        # one Ray Train worker per stage: what the drill tests (kill, resume from the checkpoint) does not depend
        # on DDP, which the 2-worker drill of test_finetune_ray.py covers; a second worker
        # costs ~20 s per start on this machine
        "n_synth": 12, "stages": stages, "output_root": str(tmp_path / "out"), "num_workers": 1,
        "finetune": {"max_steps": max_steps, "checkpoint_every": every, "warmup_steps": 1, "validation_limit": 1,
                     "experiment": "drill-causal", "lora": {"r": 4}, "register_model": False,
                     # a dead tracking server fails every worker-group restart alike: fail at once
                     "max_failures": 0}})
    path = tmp_path / "drill.yaml"
    path.write_text(yaml.safe_dump(profile))
    return path


def _newest_step(c, run_id: str) -> int:
    """The newest step at which the run logged `loss` (0 before the first)."""
    return max((m.step for m in c.get_metric_history(run_id, "loss")), default=0)


def _wait_for_step(c, experiment: str, min_step: int, proc: subprocess.Popen, timeout: float = 900) -> tuple[str, int]:
    """(run id, newest logged step) once the experiment's run has logged `loss` at ``min_step`` or later."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        assert proc.poll() is None, f"the process ended early ({proc.returncode})"
        exp = c.get_experiment_by_name(experiment)
        runs = c.search_runs([exp.experiment_id]) if exp else []
        if runs and (newest := _newest_step(c, runs[0].info.run_id)) >= min_step:
            return runs[0].info.run_id, newest
        time.sleep(1)
    raise AssertionError(f"no step {min_step} logged within {timeout} s")


def test_training_survives_a_dead_tracking_server_then_a_killed_pipeline(tmp_path, postgres_uri, prefect_server):
    """One causal training through two faults in turn, MLflow on a real PostgreSQL database (one drill: each fault
    needs a training under way, and starting one costs a minute of process, Ray and model start-up):

    1. the MLflow server is stopped mid-training: the pipeline fails, bounded, saying to re-run once the server is
       back; the run is not FINISHED and nothing is registered;
    2. with the server back (same database, same port) the re-run resumes the training from its checkpoint, and the
       whole pipeline process (its Ray cluster included) is SIGKILLed mid-training;
    3. the next re-run recomputes nothing finished (the dataset) and resumes again, losing at most one checkpoint
       interval each time; the run ends FINISHED with every step's loss.

    The hush word stage is left out: it would add a Ray Train start-up (~40 s) and tests the same run-key cache as
    the fine-tune's, which the pipeline test re-runs (test_pipeline.py)."""
    from data.assemble import verify_version
    from data.tracking import client

    port = free_port()
    url, server = start_mlflow_server(tmp_path / "mlflow", backend_uri=postgres_uri, port=port)
    try:
        # down after step 3, killed one step past the re-run's first own checkpoint: both mid-training, between
        # checkpoints, with room to spare before the last step
        every, max_steps = 2, 10
        profile = _drill_profile(tmp_path, max_steps, every, ["build_dataset", "finetune_causal"])
        cmd = [*WL, "pipeline", "--config", str(profile), "--tracking-uri", url]
        # MLflow's client retries bounded tighter than its defaults (minutes): a server shutting down can hold a
        # request until its timeout
        env = _env(tmp_path, MLFLOW_HTTP_REQUEST_MAX_RETRIES="1", MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR="1",
                   MLFLOW_HTTP_REQUEST_TIMEOUT="5")
        c = client(url)

        # 1. the tracking server goes away mid-training
        # its log goes to a file: minutes of Prefect logging would fill a pipe nobody reads until it exits
        first = subprocess.Popen([*cmd, "--summary-json", str(tmp_path / "first.json")], cwd=REPO, env=env,
                                 start_new_session=True, stdout=subprocess.DEVNULL,
                                 stderr=open(tmp_path / "first.log", "wb"))
        run_id, down_at = _wait_for_step(c, "drill-causal", every + 1, first)
        stop_process(server)
        t0 = time.perf_counter()
        first.wait(timeout=600)
        fail_s = time.perf_counter() - t0
        err = (tmp_path / "first.log").read_text(errors="replace")
        assert first.returncode != 0
        assert "could not log step" in err and "re-run once the tracking server is back" in err, err[-4000:]
        url, server = start_mlflow_server(tmp_path / "mlflow", backend_uri=postgres_uri, port=port)
        assert c.get_run(run_id).info.status != "FINISHED"
        assert c.search_registered_models(filter_string="name LIKE '%drill%'") == []

        # 2. the re-run resumes; the whole process is killed mid-training
        second = subprocess.Popen([*cmd, "--summary-json", str(tmp_path / "second.json")], cwd=REPO, env=env,
                                  start_new_session=True, stdout=subprocess.DEVNULL,
                                  stderr=open(tmp_path / "second.log", "wb"))
        _, seen = _wait_for_step(c, "drill-causal", down_at + 2, second)
        # the first run may have logged and checkpointed one more step while its server was being stopped (a CI run
        # saw it resume from 4 after going down at 3): kill after the re-run's own next checkpoint, so that the
        # next re-run has a later one to resume from
        first_resume = int(c.get_metric_history(run_id, "resumed_from_step")[0].value)
        _, seen = _wait_for_step(c, "drill-causal", first_resume + every + 1, second)
        os.killpg(second.pid, signal.SIGKILL)
        second.wait()
        # the step it died after: the newest one it logged, read once the steps stop changing (Ray's workers are
        # not in the pipeline's process group; one logging as the kill lands may still finish that request)
        killed_at, stable = 0, 0
        while stable < 3:
            time.sleep(1)
            newest = _newest_step(c, run_id)
            stable, killed_at = (stable + 1, killed_at) if newest == killed_at else (0, newest)
        assert killed_at < max_steps  # it really died mid-training
        # nothing trained on after the kill (WorkerSetup.stop_if_orphaned): at most the step logged as it landed
        assert killed_at <= seen + 1, (seen, killed_at)
        assert c.get_run(run_id).info.status == "RUNNING"  # killed: not FINISHED, not FAILED
        for name_dir in _visible(tmp_path / "out" / "datasets"):
            assert all(verify_version(v) is not None for v in _visible(name_dir))

        # 3. the next re-run finishes it
        t0 = time.perf_counter()
        again = subprocess.run([*cmd, "--summary-json", str(tmp_path / "again.json")], cwd=REPO, env=env,
                               capture_output=True, text=True, timeout=900)
        assert again.returncode == 0, again.stderr[-4000:]
        rerun_s = time.perf_counter() - t0
        summary = json.loads((tmp_path / "again.json").read_text())
        assert summary["build_dataset"]["synthetic"]["skipped"]  # the dataset version is not rebuilt
        runs = c.search_runs([c.get_experiment_by_name("drill-causal").experiment_id])
        assert [r.info.run_id for r in runs] == [run_id] and runs[0].info.status == "FINISHED"
        resumed = [int(m.value) for m in c.get_metric_history(run_id, "resumed_from_step")]
        assert len(resumed) == 2 and resumed[0] >= every and down_at - resumed[0] <= every, resumed
        assert resumed[1] > resumed[0] and killed_at - resumed[1] <= every, (resumed, killed_at)
        assert {m.step for m in c.get_metric_history(run_id, "loss")} >= set(range(1, max_steps + 1))
        record_drill("mlflow_down_mid_training", failed_after_s=round(fail_s, 1), killed_after_step=down_at,
                     resumed_from_step=resumed[0], http_retries=1, mlflow_backend="postgresql")
        record_drill("pipeline_killed_mid_training", mlflow_backend="postgresql", killed_after_step=killed_at,
                     resumed_from_step=resumed[1], steps_lost=killed_at - resumed[1], checkpoint_every=every,
                     rerun_s=round(rerun_s, 1), rerun_stage_s=summary["stage_s"], final_status="FINISHED")
    finally:
        stop_process(server)


def test_unreachable_tracking_server_stops_the_pipeline_before_any_work(tmp_path, prefect_server):
    from configs.pipeline import load_pipeline_config
    from flows.pipeline import pipeline
    from data.tracking import TrackingUnavailable

    cfg = load_pipeline_config("configs/smoke.yaml", output_root=str(tmp_path / "out"),
                               tracking_uri=f"http://127.0.0.1:{free_port()}")
    t0 = time.perf_counter()
    with pytest.raises(TrackingUnavailable, match="not reachable"):
        pipeline(config=cfg)
    assert not (tmp_path / "out").exists()  # no corpus, no dataset, no training started
    record_drill("mlflow_unreachable_at_start", error="TrackingUnavailable", failed_after_s=round(time.perf_counter() - t0, 1))


def test_promotion_refuses_unfinished_trials(tmp_path, mlflow_server):
    """Only FINISHED trials with all their scores can win: a sweep whose trials did not finish promotes nothing."""
    from training.emma.dashboard import trial_rows
    from training.emma.registry import PromotionRefused, promote
    from data.tracking import client

    c = client(mlflow_server)
    exp = c.create_experiment(f"drill-promote-{tmp_path.name}")
    parent = c.create_run(exp, run_name="sweep").info.run_id
    for status, metrics in (("RUNNING", {"wer": 0.01, "al_ms": 500.0}), ("FAILED", {"wer": 0.02, "al_ms": 400.0}),
                            ("FINISHED", {"wer": 0.03})):  # the finished one lacks al_ms
        run = c.create_run(exp, tags={"mlflow.parentRunId": parent}).info.run_id
        for k, v in metrics.items():
            c.log_metric(run, k, v)
        c.set_terminated(run, status=status) if status != "RUNNING" else None
    assert trial_rows(mlflow_server, parent) == []
    with pytest.raises(PromotionRefused, match="no finished trial"):
        promote(mlflow_server, parent, f"drill-model-{tmp_path.name}", al_budget_ms=None)
    assert c.search_registered_models(filter_string=f"name = 'drill-model-{tmp_path.name}'") == []


def test_a_second_pipeline_on_the_same_root_waits_for_the_first(tmp_path, mlflow_server, prefect_server):
    """Whole pipelines on one output root take turns (file lock); one that cannot get it in time says so before
    any work."""
    from filelock import FileLock

    from configs.pipeline import load_pipeline_config
    from flows.pipeline import PipelineBusy, pipeline

    out = tmp_path / "out"
    cfg = load_pipeline_config("configs/smoke.yaml", output_root=str(out), tracking_uri=mlflow_server,
                               lock_timeout_s=2)
    out.mkdir()
    with FileLock(str(out / ".pipeline.lock")):  # what a running pipeline holds
        with pytest.raises(PipelineBusy, match="another pipeline"):
            pipeline(config=cfg)
    assert [p.name for p in out.iterdir()] == [".pipeline.lock"]  # no corpus, dataset or run was started
    record_drill("pipeline_lock", waited_s=2, outcome="PipelineBusy before any work")
