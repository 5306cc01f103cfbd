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


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for a test module (restored afterwards): robust timings on a shared 2-core machine."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def prefect_server(tmp_path_factory):
    """One real Prefect API server (temporary SQLite) for the whole session."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    # Generous start-up: a cold machine runs the database migrations first.
    with prefect_test_harness(server_startup_timeout=300):
        yield


def copy_realspeech_subset(root: Path, source: Path, counts: dict[str, int]) -> Path:
    """The first N utterances of each real-speech corpus copied to a temp folder (never into the repo)."""
    import shutil

    for name, count in counts.items():
        src, dst = source / name, root / name
        (dst / "wav").mkdir(parents=True)
        lines = src.joinpath("transcripts.tsv").read_text().splitlines()[:count]
        dst.joinpath("transcripts.tsv").write_text("\n".join(lines) + "\n")
        for line in lines:
            utt = line.split("\t")[0]
            shutil.copy(src / "wav" / f"{utt}.wav", dst / "wav" / f"{utt}.wav")
    return root


@pytest.fixture(scope="session")
def real_shards(tmp_path_factory, realspeech: Path, prefect_server) -> Path:
    """A dataset version (WebDataset shards + manifests) of 4 LJSpeech + 2 CMU ARCTIC utterances."""
    from configs.dataset import DatasetConfig
    from flows.build_dataset import run_build

    corpus = copy_realspeech_subset(tmp_path_factory.mktemp("train-corpus"), realspeech,
                                    {"ljspeech": 4, "cmu_arctic": 2})
    cfg = DatasetConfig(name="real-train", shard_size=2, align_batch_size=3, split_by="utterance",
                        splits={"train": 1.0})
    summary = run_build(str(corpus), str(tmp_path_factory.mktemp("datasets")), cfg, workers=1)
    assert summary["counts"]["accepted"] == 6, summary
    return Path(summary["version_dir"])


@pytest.fixture(scope="session")
def ray_cluster():
    """A real local Ray cluster: 2 Train workers + the Train controller."""
    import ray

    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory) -> str:
    """A real MLflow tracking server (sqlite backend, proxied artifacts) on 127.0.0.1."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    root = tmp_path_factory.mktemp("mlflow")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}", "--serve-artifacts",
         "--artifacts-destination", str(root / "artifacts")],
        stdout=open(root / "server.log", "wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail(f"MLflow server did not start: {(root / 'server.log').read_text()[-2000:]}")
        time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(timeout=30)
