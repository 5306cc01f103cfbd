"""``whisperline serve`` / ``make serve``: a real Prefect server and a process worker on 127.0.0.1 running the
deployments of ``infra/prefect.yaml`` on their schedules.

Everything goes through Prefect's own CLI (``prefect server start``, ``prefect work-pool create``, ``prefect
deploy``, ``prefect worker start``), so this path exercises exactly what an operator runs by hand; the processes
share one ``PREFECT_HOME`` and ``PREFECT_API_URL``. Flow runs execute in subprocesses of the worker, with the
repository as working directory (the ``pull`` step reads ``WHISPERLINE_HOME``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PREFECT_FILE = REPO / "infra" / "prefect.yaml"
POOL = "whisperline-process"


class ServeError(RuntimeError):
    """The local Prefect stack did not come up (the message holds the tail of the failing process's log)."""


def _prefect_bin() -> str:
    candidate = Path(sys.executable).parent / "prefect"
    return str(candidate) if candidate.exists() else "prefect"


def _tail(path: Path, n: int = 3000) -> str:
    return path.read_text(errors="replace")[-n:] if path.exists() else ""


@dataclass
class LocalStack:
    """The server and worker processes of one ``serve``; ``stop()`` ends both."""

    api_url: str
    env: dict[str, str]
    log_dir: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    def api(self, method: str, path: str, body: object | None = None) -> object:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.api_url}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.loads(r.read() or b"null")

    def stop(self, timeout_s: float = 30) -> None:
        for p in reversed(self.processes):
            if p.poll() is None:
                p.terminate()
        deadline = time.time() + timeout_s
        for p in reversed(self.processes):
            try:
                p.wait(timeout=max(1.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()


def _run(args: list[str], env: Mapping[str, str], log: Path) -> None:
    with open(log, "ab") as fh:
        proc = subprocess.run([_prefect_bin(), *args], cwd=REPO, env=dict(env), stdout=fh, stderr=subprocess.STDOUT,
                              timeout=600)
    if proc.returncode != 0:
        raise ServeError(f"`prefect {' '.join(args)}` failed ({proc.returncode}):\n{_tail(log)}")


def wait_healthy(api_url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 300) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise ServeError(f"the Prefect server exited ({proc.returncode}):\n{_tail(log)}")
        try:
            with urllib.request.urlopen(f"{api_url}/health", timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise ServeError(f"the Prefect server did not answer within {timeout_s:.0f} s:\n{_tail(log)}")


def serve(port: int = 4200, *, deployments: Mapping[str, Mapping[str, object]] | None = None,
          interval_s: int | None = None, home: Path | None = None, ui: bool = True,
          extra_env: Mapping[str, str] | None = None, startup_timeout_s: float = 300) -> LocalStack:
    """Start server (127.0.0.1:``port``) → work pool → deploy → worker; returns the running stack.

    ``deployments``: deployment name → parameter overrides (None: every deployment of the file, as written).
    ``interval_s`` adds an interval schedule next to the file's cron schedules (a demo or a test that should not
    wait for 1 am)."""
    home = Path(home or os.environ.get("PREFECT_HOME") or REPO / ".prefect").resolve()
    log_dir = home / "serve-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    api_url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": api_url, "WHISPERLINE_HOME": str(REPO),
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1", "PREFECT_SERVER_API_HOST": "127.0.0.1",
           "PREFECT_SERVER_UI_ENABLED": "true" if ui else "false", **(extra_env or {})}
    env.pop("PREFECT_SERVER_EPHEMERAL_ENABLED", None)  # this server is the API: no throw-away ones
    stack = LocalStack(api_url, env, log_dir)
    server_log = log_dir / "server.log"
    stack.processes.append(subprocess.Popen(
        [_prefect_bin(), "server", "start", "--host", "127.0.0.1", "--port", str(port)], cwd=REPO, env=env,
        stdout=open(server_log, "ab"), stderr=subprocess.STDOUT))
    try:
        wait_healthy(api_url, stack.processes[0], server_log, startup_timeout_s)
        cli_log = log_dir / "cli.log"
        try:
            stack.api("GET", f"/work_pools/{POOL}")
        except OSError:  # 404: not created yet
            _run(["work-pool", "create", POOL, "--type", "process"], env, cli_log)
        for name, params in (deployments or {None: {}}).items():
            args = ["deploy", "--no-prompt", "--prefect-file", str(PREFECT_FILE)]
            args += ["--name", name] if name else ["--all"]
            args += [a for k, v in (params or {}).items() for a in ("--param", f"{k}={v}")]
            args += ["--interval", str(interval_s)] if interval_s else []
            _run(args, env, cli_log)
        worker_log = log_dir / "worker.log"
        stack.processes.append(subprocess.Popen(
            [_prefect_bin(), "worker", "start", "--pool", POOL, "--type", "process"], cwd=REPO, env=env,
            stdout=open(worker_log, "ab"), stderr=subprocess.STDOUT))
    except BaseException:
        stack.stop()
        raise
    return stack


def deployment_runs(stack: LocalStack, flow_name: str, deployment: str,
                    states: tuple[str, ...] = ("RUNNING", "COMPLETED", "FAILED", "CRASHED", "CANCELLED")) -> list[dict]:
    """The flow runs of one deployment in ``states`` (newest first), as the API returns them (an interval schedule
    keeps many future SCHEDULED runs: they are left out by default)."""
    dep = stack.api("GET", f"/deployments/name/{flow_name}/{deployment}")
    runs = stack.api("POST", "/flow_runs/filter", {
        "deployments": {"id": {"any_": [dep["id"]]}}, "flow_runs": {"state": {"type": {"any_": list(states)}}},
        "sort": "EXPECTED_START_TIME_DESC", "limit": 50})
    return list(runs)
