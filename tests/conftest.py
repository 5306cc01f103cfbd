"""Shared fixtures: the real speech corpus, a session-wide Prefect test server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# a real S3-compatible server (moto, a separate process on 127.0.0.1) for the object-storage tests
from s3_server import s3_bucket, s3_server  # noqa: E402,F401  (fixtures)
from upload_bomb import silent_flac  # noqa: E402,F401  (the tests import it from here)


def original_weights_adapter(directory: Path, chunk_ms: int) -> Path:
    """A zero-initialised LoRA adapter on the real tiny.en weights (B = 0: exactly the original model) saved as a
    registrable adapter: the original model as a registry version, with no training in the test."""
    from configs.finetune import LoraSettings
    from training.lora import apply_lora, save_adapter
    from data.weights import checkpoint_sha256, load_model

    model = load_model("tiny.en")
    apply_lora(model, LoraSettings(r=4), seed=0)
    return save_adapter(model, LoraSettings(r=4), directory, {
        "base_model": "tiny.en", "base_sha256": checkpoint_sha256("tiny.en"), "chunk_ms": chunk_ms,
        "tau0_ms": chunk_ms})


def record_drill(drill: str, **values) -> None:
    """A reliability drill's measurements, appended (JSON lines) to ``$WHISPERLINE_DRILL_REPORT`` when it is set:
    benchmarks/pipeline_smoke.py collects them into its result file."""
    import json

    if path := os.environ.get("WHISPERLINE_DRILL_REPORT"):
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"drill": drill, **values}) + "\n")


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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mlflow_server(root: Path, backend_uri: str | None = None, port: int | None = None):
    """A real `mlflow server` process on 127.0.0.1 (sqlite under ``root`` unless ``backend_uri``; proxied artifacts
    under ``root``); (url, process) once /health answers."""
    import subprocess
    import sys

    root.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = root / "server.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", backend_uri or f"sqlite:///{root / 'mlflow.db'}", "--serve-artifacts",
         "--artifacts-destination", str(root / "artifacts")],
        stdout=open(log, "ab"), stderr=subprocess.STDOUT,
        # MLflow 3's server also starts three huey job consumers (GenAI evaluation jobs, ~250 MB and a CPU burst
        # each) that nothing here uses: on a 2-core machine they slow every test that starts a server.
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})
    url = f"http://127.0.0.1:{port}"
    wait_http(f"{url}/health", proc, log, "MLflow server", timeout=180)
    return url, proc


def wait_http(url: str, proc, log: Path, what: str, timeout: float = 120, headers: dict | None = None) -> None:
    """Until ``url`` answers 200; a clear failure with the log's tail if ``proc`` exits or time runs out."""
    import time
    import urllib.request

    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail(f"{what} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.5)


def stop_process(proc, timeout: float = 20) -> None:
    import subprocess

    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory) -> str:
    """A real MLflow tracking server (sqlite backend, proxied artifacts) on 127.0.0.1."""
    url, proc = start_mlflow_server(tmp_path_factory.mktemp("mlflow"))
    yield url
    stop_process(proc)


def _pg_bin(name: str) -> str | None:
    import glob
    import shutil

    found = shutil.which(name) or sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found if isinstance(found, str) else (found[-1] if found else None)


@pytest.fixture(scope="session")
def postgres_uri():
    """A real PostgreSQL server (Debian's postgresql, installed by scripts/setup.sh) on 127.0.0.1 with a fresh
    cluster in a temporary folder; run as the `postgres` user when the tests run as root (PostgreSQL refuses root)."""
    import os
    import shutil
    import subprocess
    import tempfile
    import time

    initdb, postgres = _pg_bin("initdb"), _pg_bin("postgres")
    if not (initdb and postgres):
        pytest.fail("PostgreSQL binaries not found (scripts/setup.sh installs Debian's postgresql)")
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    root = Path(tempfile.mkdtemp(prefix="whisperline-pg-"))
    if as_user:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", free_port()
    subprocess.run([*as_user, initdb, "-D", str(data), "-U", "mlflow", "-A", "trust", "-E", "UTF8", "--no-sync"],
                   check=True, capture_output=True)
    proc = subprocess.Popen([*as_user, postgres, "-D", str(data), "-k", str(root), "-p", str(port),
                             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
                            stdout=open(os.devnull, "wb"), stderr=subprocess.STDOUT)
    import psycopg2

    deadline = time.time() + 60
    while True:
        try:
            conn = psycopg2.connect(host="127.0.0.1", port=port, user="mlflow", dbname="postgres")
            break
        except psycopg2.OperationalError:
            if proc.poll() is not None or time.time() > deadline:
                pytest.fail("PostgreSQL did not start")
            time.sleep(0.5)
    conn.autocommit = True
    conn.cursor().execute("CREATE DATABASE mlflow")
    conn.close()
    yield f"postgresql://mlflow@127.0.0.1:{port}/mlflow"
    stop_process(proc)
    shutil.rmtree(root, ignore_errors=True)




def messages_until_closed(ws) -> list[dict]:
    """Every JSON message a (sync) WebSocket client receives until the server closes it."""
    import json

    from websockets.exceptions import ConnectionClosed

    messages = []
    try:
        for message in ws:
            messages.append(json.loads(message))
    except ConnectionClosed:
        pass
    return messages
