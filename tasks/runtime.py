"""Where flow runs report: the configured Prefect API, or one local server shared by all processes.

With no `PREFECT_API_URL`, Prefect starts an ephemeral API server per *process*: every worker of a
ProcessPoolTaskRunner then starts its own (a database migration check and a uvicorn start each,
seconds apiece) and the runs of one build land in several throw-away databases. `prefect_api()`
starts one server on 127.0.0.1 for the whole build and points the workers at it through the
environment they inherit.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager


def _drain_api_workers(timeout_s: float = 30) -> None:
    """Send the queued logs and events while the server still runs: left for interpreter exit, they would meet a
    stopped server and retry for over a minute ("Error logging to API")."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (APILogWorker, EventsWorker):
        worker.drain_all(timeout=timeout_s, at_exit=False)


@contextmanager
def prefect_api() -> Iterator[str]:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    configured = PREFECT_API_URL.value()
    if configured:
        yield configured
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # binds 127.0.0.1
    server.start(timeout=int(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "300")))
    previous = os.environ.get("PREFECT_API_URL")
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        with temporary_settings({PREFECT_API_URL: server.api_url}):
            try:
                yield server.api_url
            finally:
                _drain_api_workers()
    finally:
        if previous is None:
            os.environ.pop("PREFECT_API_URL", None)
        else:
            os.environ["PREFECT_API_URL"] = previous
        server.stop()
