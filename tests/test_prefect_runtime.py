"""Two top-level processes on one PREFECT_HOME share one API server (tasks/runtime.py `prefect_api()`).

Before: each process started its own ephemeral server on the same SQLite file ("database is locked" when a build
ran beside a training run), and stopped it before its event queue was written, losing most task runs (3 processes
x 100 tasks: 35 to 90 of the 300 task runs reached the database).
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SCRIPT = textwrap.dedent('''
    import json, os, sys, time
    from pathlib import Path
    from prefect import flow, task
    from prefect.task_runners import ThreadPoolTaskRunner
    from tasks.runtime import prefect_api, state_dir

    name, n_tasks, barrier, wait_for = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]

    @task
    def work(i: int) -> int:
        return i * i

    # persisted: a loaded machine can end the run with its final state read back from the API, whose result is
    # then read from storage (in memory only, state.result() raised MissingResult in one CI run)
    @flow(name="runtime-" + name, task_runner=ThreadPoolTaskRunner(max_workers=8), persist_result=True)
    def many(n: int) -> int:
        return sum(f.result() for f in [work.submit(i) for i in range(n)])

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    with prefect_api() as url:
        print("api", url, flush=True)
        print("server_pid", json.loads((state_dir() / "server.json").read_text())["pid"], flush=True)
        (barrier / name).touch()  # both processes attached before either runs a flow
        deadline = time.monotonic() + 90
        while not all((barrier / n).exists() for n in ("short", "long")) and time.monotonic() < deadline:
            time.sleep(0.1)
        state = many(n_tasks, return_state=True)
        print("flow_run", state.state_details.flow_run_id, flush=True)
        print("result", state.result(), flush=True)
        if wait_for != "-":  # run one more flow once the other process (which may have started the server) is gone
            marker = barrier / f"{wait_for}.exited"
            while not (marker.exists() and gone(int(marker.read_text()))) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert marker.exists(), "the other process never exited"
            state = many(n_tasks, return_state=True)
            print("flow_run_after", state.state_details.flow_run_id, flush=True)
            print("result_after", state.result(), flush=True)
    (barrier / f"{name}.exited").write_text(str(os.getpid()))
''')

QUERY = textwrap.dedent('''
    import asyncio, json
    from prefect.client.orchestration import get_client
    from tasks.runtime import prefect_api

    async def main():
        async with get_client() as client:
            return [(r.name, str(r.id), r.state_type.value) for r in await client.read_flow_runs()]

    with prefect_api() as url:
        print(json.dumps({"api": url, "runs": asyncio.run(main())}), flush=True)
''')


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", DO_NOT_TRACK="1",
               WHISPERLINE_PREFECT_IDLE_S="2", PYTHONPATH=str(REPO))
    return env


def _server_pid(home: Path) -> int | None:
    try:
        return json.loads((home / "whisperline-api" / "server.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def prefect_home(tmp_path):
    home = tmp_path / "prefect-home"
    home.mkdir()
    started: set[int] = set()
    yield home, started
    for pid in started | {_server_pid(home) or 0}:  # only the servers of this temporary PREFECT_HOME
        if pid and _alive(pid):
            os.kill(pid, signal.SIGTERM)


def test_two_processes_share_one_server_and_all_runs_are_kept(tmp_path, prefect_home):
    home, started = prefect_home
    script = tmp_path / "run_flow.py"
    script.write_text(SCRIPT)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = _env(home)
    t0 = time.monotonic()
    procs = {}
    # both run a flow at the same time; then "short" exits and "long" runs a second flow: the server must outlive
    # whichever process started it
    for name, n_tasks, wait_for in (("short", 15, "-"), ("long", 30, "short")):
        log = (tmp_path / f"{name}.log").open("w")
        procs[name] = (subprocess.Popen([sys.executable, str(script), name, str(n_tasks), str(barrier), wait_for],
                                        cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT), log, n_tasks)
    out = {}
    for name, (proc, log, _) in procs.items():
        proc.wait(timeout=150)
        log.close()
        out[name] = (tmp_path / f"{name}.log").read_text()
        assert proc.returncode == 0, f"{name} failed:\n{out[name][-4000:]}"
    server_log = home / "whisperline-api" / "server.log"
    for name, text in out.items():
        assert "database is locked" not in text, f"{name}:\n{text[-4000:]}"
    assert "database is locked" not in server_log.read_text()

    lines = {name: dict(ln.split(" ", 1) for ln in text.splitlines() if ln.split(" ", 1)[0] in
                        ("api", "server_pid", "flow_run", "result", "flow_run_after",
                                                         "result_after")) for name, text in out.items()}
    assert lines["short"]["api"] == lines["long"]["api"], "each process started its own server"
    assert lines["short"]["server_pid"] == lines["long"]["server_pid"]
    assert lines["short"]["result"] == str(sum(i * i for i in range(15)))
    assert lines["long"]["result"] == lines["long"]["result_after"] == str(sum(i * i for i in range(30)))

    # the server outlives its clients only until their events are written, then stops by itself
    pid = int(lines["long"]["server_pid"])
    started.add(pid)
    deadline = time.monotonic() + 45
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _alive(pid), "the shared server did not stop once idle"
    assert not (home / "whisperline-api" / "server.json").exists()

    # every run of both processes is in the one database, task runs included
    db = sqlite3.connect(home / "prefect.db")
    try:
        runs = [(lines[name][key], n_tasks) for name, (_, _, n_tasks) in procs.items()
                for key in ("flow_run", "flow_run_after") if key in lines[name]]
        assert len(runs) == 3
        for run_id, n_tasks in runs:
            (state,) = db.execute("SELECT state_type FROM flow_run WHERE id = ?", (run_id,)).fetchone()
            assert state == "COMPLETED"
            task_states = db.execute("SELECT state_type, count(*) FROM task_run WHERE flow_run_id = ? GROUP BY 1",
                                     (run_id,)).fetchall()
            assert task_states == [("COMPLETED", n_tasks)], (run_id, task_states)
    finally:
        db.close()

    # and visible through the API afterwards: a later process starts a fresh shared server on the same database
    query = subprocess.run([sys.executable, "-c", QUERY], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=120)
    assert query.returncode == 0, query.stdout[-2000:] + query.stderr[-4000:]
    seen = json.loads(query.stdout.strip().splitlines()[-1])
    started.add(_server_pid(home) or 0)
    by_id = {run_id: (flow_name, state) for flow_name, run_id, state in seen["runs"]}
    for run_id, _ in runs:
        assert by_id[run_id][1] == "COMPLETED"
    print(f"two processes + query: {time.monotonic() - t0:.1f} s")


def test_dead_clients_are_forgotten(tmp_path):
    from tasks.runtime import _live_clients

    clients = tmp_path / "clients"
    clients.mkdir()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (clients / f"{gone.pid}.dead").touch()
    (clients / f"{os.getpid()}.me").touch()
    (clients / "junk").touch()
    assert _live_clients(clients) == [os.getpid()]
    assert sorted(p.name for p in clients.iterdir()) == [f"{os.getpid()}.me", "junk"]


def test_builds_under_two_prefect_homes_run_clean_and_their_pool_workers_report_home(tmp_path, realspeech):
    """Issue 30: two `whisperline data build` processes at once, each with its own PREFECT_HOME and no
    PREFECT_API_URL, each with a 2-process pool. Before, every pool worker started a temporary server of its own
    (two builds collided on one port, "address already in use", and lost log batches). Now each build's workers
    report to their home's one server: no temporary server, lock or port error in either output, and each home's
    database holds its build's flow run with every batch task run (the ones that ran in the pool) COMPLETED."""
    from conftest import copy_realspeech_subset

    corpus = copy_realspeech_subset(tmp_path / "corpus", realspeech, {"ljspeech": 2, "cmu_arctic": 2})
    homes = [tmp_path / f"home-{i}" for i in range(2)]
    procs = []
    for i, home in enumerate(homes):
        home.mkdir()
        config = tmp_path / f"build-{i}.yaml"
        config.write_text("dataset: {align_batch_size: 1, shard_size: 2, split_by: utterance}\n")  # 4 batches
        log = (tmp_path / f"build-{i}.log").open("w")
        procs.append((subprocess.Popen([sys.executable, "-m", "flows.cli", "data", "build", str(corpus),
                                        "--output-root", str(tmp_path / f"out-{i}"), "--name", "two-homes",
                                        "--config", str(config), "--workers", "2"],
                                       cwd=REPO, env=_env(home), stdout=log, stderr=subprocess.STDOUT), log))
    try:
        for proc, log in procs:
            proc.wait(timeout=300)
            log.close()
    finally:
        for proc, _ in procs:
            proc.kill() if proc.poll() is None else None
    summaries = []
    for i, (proc, _) in enumerate(procs):
        text = (tmp_path / f"build-{i}.log").read_text()
        assert proc.returncode == 0, text[-4000:]
        for bad in ("address already in use", "database is locked", "Error logging to API", "Starting temporary server",
                    "Traceback"):
            assert bad not in text, f"build {i}: {bad!r}\n{text[-4000:]}"
        summaries.append(json.loads(text[text.rindex("\n{") + 1:]))
    assert summaries[0]["version_id"] == summaries[1]["version_id"] and summaries[0]["counts"]["accepted"] == 4

    for home in homes:
        deadline = time.monotonic() + 60  # the home's server writes its queued events, then stops once idle
        while (pid := _server_pid(home)) and _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        db = sqlite3.connect(home / "prefect.db")
        try:
            flows = db.execute("SELECT id, state_type FROM flow_run").fetchall()
            assert [state for _, state in flows] == ["COMPLETED"], flows
            batches = db.execute("SELECT state_type FROM task_run WHERE flow_run_id = ? AND name LIKE 'prepare-align-%'",
                                 (flows[0][0],)).fetchall()
            assert batches == [("COMPLETED",)] * 4, batches
        finally:
            db.close()
