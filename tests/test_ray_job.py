"""Scale-out path: a separately started Ray cluster (`ray start --head`, as on a VM or in a KubeRay pod) and the
training submitted to it as a Ray *job* through the dashboard's job server (what a KubeRay RayJob does). The job
runs the unchanged CLI; it finds the cluster through RAY_ADDRESS, which the job supervisor sets."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml
from conftest import REPO, free_port, wait_http

pytestmark = pytest.mark.slow


@pytest.fixture
def ray_head():
    """`ray start --head --block` in its own temp dir (so other tests' `ray.init()` never find it) and its own
    ports; terminating the blocking process takes the whole cluster down (never `ray stop`: that would kill every
    Ray process on the machine)."""
    import secrets

    temp = tempfile.mkdtemp(prefix="rayh-")  # short: Ray's unix sockets live there
    port, dash = free_port(), free_port()
    token = secrets.token_hex(16)  # Ray's token authentication, as a cluster should run it
    env = {**os.environ, "RAY_TMPDIR": temp, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": token}
    env.pop("RAY_ADDRESS", None)
    ray_bin = str(Path(sys.executable).parent / "ray")
    proc = subprocess.Popen([ray_bin, "start", "--head", "--block", "--port", str(port), "--num-cpus", "3",
                             "--node-ip-address", "127.0.0.1", "--include-dashboard", "true", "--dashboard-host", "127.0.0.1",
                             "--dashboard-port", str(dash), "--temp-dir", temp, "--disable-usage-stats",
                             # every port its own: another Ray on this machine (the session's) holds the defaults,
                             # e.g. the dashboard agent's 52365, and the job agent would never come up
                             *[a for flag in ("--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                                              "--runtime-env-agent-port", "--metrics-export-port",
                                              "--ray-client-server-port") for a in (flag, str(free_port()))]],
                            env=env,
                            stdout=open(Path(temp) / "head.log", "wb"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    url, headers = f"http://127.0.0.1:{dash}", {"Authorization": f"Bearer {token}"}
    wait_http(f"{url}/api/version", proc, Path(temp) / "head.log", "ray head", headers=headers)
    yield url, headers
    # SIGKILL to the session the head leads: on SIGTERM `ray start --block` stops its services one by one (~30 s
    # on this machine); every process of this cluster runs in that session (raylet, GCS, dashboard, workers), so
    # none should outlive it; any process still naming the cluster's temp dir is killed too
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    left = subprocess.run(["pgrep", "-f", temp], capture_output=True, text=True).stdout.split()
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), signal.SIGKILL)
    shutil.rmtree(temp, ignore_errors=True)


def test_finetune_runs_unchanged_as_a_job_on_a_started_cluster(tmp_path, ray_head, real_shards, mlflow_server,
                                                               prefect_server):
    from prefect.settings import PREFECT_API_URL
    from ray.job_submission import JobStatus, JobSubmissionClient

    from data.tracking import client

    cfg = {"finetune": {"model": "tiny.en", "chunk_ms": 300, "splits": ["train"], "validation_splits": ["train"],
                        "allow_held_in_validation": True,
                        "max_steps": 2, "checkpoint_every": 2, "warmup_steps": 1, "batch_size": 2,
                        "validation_limit": 1, "lora": {"r": 4}, "num_workers": 1,
                        "experiment": f"ray-job-{tmp_path.name}", "register_model": False,
                        "storage_path": str(tmp_path / "ray"), "output_dir": str(tmp_path / "adapters")}}
    (tmp_path / "ft.yaml").write_text(yaml.safe_dump(cfg))
    entrypoint = (f"cd {REPO} && {sys.executable} -m flows.cli finetune {real_shards} --config {tmp_path / 'ft.yaml'} "
                  f"--tracking-uri {mlflow_server}")
    url, headers = ray_head
    jobs = JobSubmissionClient(url, headers=headers)
    env_vars = {"PREFECT_API_URL": PREFECT_API_URL.value(), "PREFECT_LOCAL_STORAGE_PATH": str(tmp_path / "results")}
    deadline = time.time() + 120
    while True:  # the head's job agent registers a little after the dashboard answers ("No available agent")
        try:
            job = jobs.submit_job(entrypoint=entrypoint, runtime_env={"env_vars": env_vars})
            break
        except RuntimeError as err:
            if "No available agent" not in str(err) or time.time() > deadline:
                raise
            time.sleep(2)
    deadline = time.time() + 900
    while (status := jobs.get_job_status(job)) not in {JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED}:
        assert time.time() < deadline, "job did not finish"
        time.sleep(1)
    logs = jobs.get_job_logs(job)
    assert status == JobStatus.SUCCEEDED, logs[-4000:]
    rows, _ = json.JSONDecoder().raw_decode(logs[logs.rfind("\n[\n") + 1 :])  # the CLI's table; logs may follow
    assert [r["status"] for r in rows] == ["ok"] and rows[0]["steps"] == 2
    run = client(mlflow_server).get_run(rows[0]["run_id"])
    assert run.info.status == "FINISHED" and run.data.metrics["step"] == 2
    assert jobs.get_job_info(job).driver_node_id  # the driver ran on the cluster, not in this process
