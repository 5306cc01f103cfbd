"""Shared fixtures: the real speech corpus, a session-wide Prefect test server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def realspeech_root() -> Path:
    root = Path(os.environ.get("WHISPERLINE_REALSPEECH", "../shared/data/realspeech"))
    return root if root.is_absolute() else (REPO / root).resolve()


@pytest.fixture(scope="session")
def realspeech() -> Path:
    root = realspeech_root()
    if not (root / "ljspeech" / "transcripts.tsv").exists():
        pytest.fail(f"real speech corpus not found at {root}; set WHISPERLINE_REALSPEECH")
    return root


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """One real Prefect API server (temporary SQLite) for the whole session."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    # Generous start-up: a cold machine runs the database migrations first.
    with prefect_test_harness(server_startup_timeout=300):
        yield
