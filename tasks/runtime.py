"""Where flow runs report: the configured Prefect API, or one local API server per ``PREFECT_HOME`` that every
process on the machine shares.

With no `PREFECT_API_URL`, Prefect starts an ephemeral API server per *process*. Two top-level processes on one
``PREFECT_HOME`` (a build beside a training run) then mean two servers writing one SQLite file: SQLite's WAL lets
only one writer in, and a deferred transaction that read before the other server committed fails at once with
"database is locked" (the busy timeout does not help there). Each throw-away server is also killed as soon as
its flow returns, before its in-memory event queue is flushed, so most task runs never reach the database.

`prefect_api()` therefore attaches to (or starts) one detached server for the ``PREFECT_HOME``, kept in
``$PREFECT_HOME/whisperline-api/``: ``server.json`` (pid, port, url), ``lock`` (an flock serialising start-up and
shut-down), ``clients/<pid>.<nonce>`` (one file per attachment) and ``server.log``. The server is no client's child:
a client exiting first changes nothing for the others. It stops by itself once no client has been alive and its
event queues have been empty for ``WHISPERLINE_PREFECT_IDLE_S`` seconds (default 30). Workers of a
ProcessPoolTaskRunner inherit `PREFECT_API_URL` and report to the same server, so every run of every process lands
in the one database (browse it with ``prefect server start`` on the same ``PREFECT_HOME`` once the runs are done,
or run that UI server first and point the runs at it with ``PREFECT_API_URL=http://127.0.0.1:4200/api``).

Third-party modules (prefect, httpx, uvicorn) are imported inside the functions: the server process runs this file
as a script, and only after its ``__main__`` block has taken ``tasks/`` off ``sys.path`` (so that ``dataset``,
``evaluate``, … shadow nothing) may they load.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

STATE_DIR_NAME = "whisperline-api"


def _drain_api_workers(timeout_s: float = 30) -> None:
    """Send the queued logs and events while the server still runs: left for interpreter exit, they would meet a
    stopped server and retry for over a minute ("Error logging to API")."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=timeout_s, at_exit=False)


def state_dir(home: str | Path | None = None) -> Path:
    """``$PREFECT_HOME/whisperline-api`` (the shared server's pid/port file, lock, clients and log)."""
    if home is None:
        from prefect.settings import PREFECT_HOME

        home = PREFECT_HOME.value()
    return Path(home).expanduser().resolve() / STATE_DIR_NAME


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # an exited child its parent has not reaped yet is a zombie, not a client
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True


def _live_clients(clients: Path) -> list[int]:
    """Pids of the processes using the server; files of dead ones are removed."""
    alive = []
    for entry in clients.glob("*"):
        try:
            pid = int(entry.name.split(".")[0])
        except ValueError:
            continue
        if _pid_alive(pid):
            alive.append(pid)
        else:
            entry.unlink(missing_ok=True)
    return alive


@contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _healthy(url: str, timeout_s: float = 5) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/health", timeout=timeout_s).status_code == 200
    except httpx.HTTPError:
        return False


def _read_state(sdir: Path) -> dict | None:
    try:
        state = json.loads((sdir / "server.json").read_text())
    except (OSError, ValueError):
        return None
    if not _pid_alive(int(state.get("pid", 0))) or not _healthy(state["url"]):
        return None
    return state


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_server(sdir: Path, timeout_s: float) -> dict:
    """Start a detached server (own session, output to server.log) and wait for its health check."""
    from prefect.settings import get_current_settings

    idle_s = os.environ.get("WHISPERLINE_PREFECT_IDLE_S", "30")
    env = {**os.environ, **get_current_settings().to_environment_variables(exclude_unset=True),
           # as Prefect's own ephemeral server: API only, the ephemeral set of services
           "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
    env.pop("PREFECT_API_URL", None)
    last_error = ""
    for _attempt in range(3):  # the port picked may be taken before the server binds it
        port = _free_port()
        with (sdir / "server.log").open("ab") as log:
            proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "_serve", str(sdir), str(port),
                                     idle_s], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    start_new_session=True, close_fds=True)
        url = f"http://127.0.0.1:{port}/api"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                last_error = f"server exited with code {proc.returncode}"
                break
            if _healthy(url, timeout_s=2):
                state = {"pid": proc.pid, "port": port, "url": url, "started": time.time()}
                tmp = sdir / "server.json.tmp"
                tmp.write_text(json.dumps(state))
                tmp.replace(sdir / "server.json")
                return state
            time.sleep(0.2)
        else:
            proc.kill()
            last_error = f"no answer from {url} within {timeout_s} s"
    raise RuntimeError(f"could not start the shared Prefect API server ({last_error}); see {sdir / 'server.log'}")


@contextmanager
def shared_server(home: str | Path | None = None) -> Iterator[str]:
    """Attach this process to the ``PREFECT_HOME``'s shared API server (started if none runs); yields its URL."""
    sdir = state_dir(home)
    clients = sdir / "clients"
    clients.mkdir(parents=True, exist_ok=True)
    me = clients / f"{os.getpid()}.{uuid.uuid4().hex[:8]}"  # one per attachment: threads may attach twice
    timeout_s = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300"))
    with _flock(sdir / "lock"):
        me.touch()  # registered before the server can look for clients
        state = _read_state(sdir) or _start_server(sdir, timeout_s)
    try:
        yield state["url"]
    finally:
        me.unlink(missing_ok=True)


@contextmanager
def prefect_api() -> Iterator[str]:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    configured = PREFECT_API_URL.value()
    if configured:
        yield configured
        return
    from prefect.context import refresh_global_settings_context

    with shared_server() as api_url:
        previous = os.environ.get("PREFECT_API_URL")
        os.environ["PREFECT_API_URL"] = api_url  # inherited by task-runner worker processes
        # Threads do not inherit the settings context below: they read Prefect's global settings, made at import
        # from the environment of then. Refreshed, every thread of this process (the process pool's log/event
        # forwarding thread among them) reports to the shared server instead of starting a temporary one.
        refresh_global_settings_context()
        try:
            with temporary_settings({PREFECT_API_URL: api_url}):
                try:
                    yield api_url
                finally:
                    _drain_api_workers()
        finally:
            if previous is None:
                os.environ.pop("PREFECT_API_URL", None)
            else:
                os.environ["PREFECT_API_URL"] = previous
            refresh_global_settings_context()


def _broker_backlog() -> int:
    """Messages still queued in this server's in-memory broker (client events on their way to the task-run
    recorder and the event persister): stopping before they are handled loses those runs' states. Prefect's
    internals, read-only; 0 if they change."""
    try:
        from prefect.server.utilities.messaging.memory import Topic

        return sum(sub._queue.qsize() + sub._retry.qsize()
                   for topic in list(Topic._topics.values()) for sub in list(topic._subscriptions))
    except Exception:
        return 0


def _serve(sdir: Path, port: int, idle_s: float) -> None:
    """The shared server's process: uvicorn with Prefect's API, and a watcher that stops it once no client has
    been alive and nothing has waited in its event queues for `idle_s` seconds."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config("prefect.server.api.server:create_app", factory=True, host="127.0.0.1",
                                           port=port, log_level="error", lifespan="on"))

    def watch() -> None:
        idle_since = time.monotonic()
        while not server.should_exit:
            time.sleep(1)
            if _live_clients(sdir / "clients") or _broker_backlog():
                idle_since = time.monotonic()
                continue
            if time.monotonic() - idle_since < idle_s:
                continue
            with _flock(sdir / "lock"):  # no client can attach while this decides
                if _live_clients(sdir / "clients"):
                    idle_since = time.monotonic()
                    continue
                state = sdir / "server.json"
                try:
                    if json.loads(state.read_text()).get("pid") == os.getpid():
                        state.unlink()
                except (OSError, ValueError):
                    pass
                server.should_exit = True

    threading.Thread(target=watch, name="whisperline-api-idle", daemon=True).start()
    server.run()


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "_serve":
    # run as a script: this folder is first on sys.path, and its modules (dataset, evaluate, …) must shadow nothing
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]
    _serve(Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
