"""The `whisperline serve` path: a real `prefect server start` and `prefect worker start` on 127.0.0.1, the
deployment created by `prefect deploy` from infra/prefect.yaml, and a run created by the server's *scheduler*
(not by the test) executed by the worker in a subprocess, building a real dataset version."""

from __future__ import annotations

import socket
import time

import pytest

from conftest import copy_realspeech_subset

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_scheduled_deployment_runs_on_a_real_server_and_worker(tmp_path, realspeech):
    from data.assemble import verify_version
    from flows.serve import deployment_runs, serve

    corpus = copy_realspeech_subset(tmp_path / "corpus", realspeech, {"cmu_arctic": 2})
    out = tmp_path / "datasets"
    stack = serve(_free_port(), deployments={"dataset-refresh": {"corpus": str(corpus), "output_root": str(out)}},
                  interval_s=30, home=tmp_path / "prefect", ui=False,
                  extra_env={"PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS": "5", "PREFECT_WORKER_QUERY_SECONDS": "3"})
    try:
        assert stack.api_url.startswith("http://127.0.0.1:")
        deadline, runs = time.time() + 400, []
        while time.time() < deadline and not any(r["state_type"] == "COMPLETED" for r in runs):
            assert all(p.poll() is None for p in stack.processes), "server or worker exited"
            runs = deployment_runs(stack, "dataset-refresh", "dataset-refresh")
            failed = [r for r in runs if r["state_type"] in ("FAILED", "CRASHED")]
            assert not failed, (failed, (stack.log_dir / "worker.log").read_text()[-3000:])
            time.sleep(3)
        done = [r for r in runs if r["state_type"] == "COMPLETED"]
        assert done, f"no completed run: {(stack.log_dir / 'worker.log').read_text()[-3000:]}"
        assert done[0]["auto_scheduled"]  # created by the server's scheduler from the deployment's schedule
        assert done[0]["parameters"]["corpus"] == str(corpus)
        dep = stack.api("GET", "/deployments/name/dataset-refresh/dataset-refresh")
        crons = [s["schedule"].get("cron") for s in dep["schedules"]]
        assert "0 1 * * *" in crons  # the file's nightly schedule is there too
        assert dep["work_pool_name"] == "whisperline-process"
    finally:
        stack.stop()
    versions = [d for d in (out / "whisperline").iterdir() if not d.name.startswith(".")]
    assert len(versions) == 1 and verify_version(versions[0]) is not None
