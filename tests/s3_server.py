"""A real S3-compatible server for tests: moto's standalone server, started as a separate process on 127.0.0.1.

Code under test talks to it over HTTP exactly as it would to AWS or MinIO (s3fs/aiobotocore, in this process, in
subprocesses and in Ray workers): the endpoint and fake credentials are put in the environment.

Fixtures (load them from tests/conftest.py with ``from s3_server import s3_server, s3_bucket  # noqa: F401``):
- ``s3_server`` (session): starts the server, sets os.environ for the whole session, yields
  ``{"endpoint_url": ..., "env": {...}}``; skips when moto's server is not installed;
- ``s3_bucket``: a fresh, empty bucket; yields its ``s3://name`` URL.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _server_command(port: int) -> list[str]:
    exe = Path(sys.executable).with_name("moto_server")
    if exe.exists():
        return [str(exe), "-H", HOST, "-p", str(port)]
    found = shutil.which("moto_server")
    if found:
        return [found, "-H", HOST, "-p", str(port)]
    return [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)]


def s3_env(endpoint_url: str) -> dict[str, str]:
    """What a process needs in its environment to reach the server (fake keys: moto accepts any)."""
    return {
        "AWS_ENDPOINT_URL": endpoint_url,  # read by botocore at client creation (any time)
        "FSSPEC_S3_ENDPOINT_URL": endpoint_url,  # read by fsspec at import (child processes)
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }


@contextlib.contextmanager
def local_s3_server(timeout_s: float = 30.0) -> Iterator[dict]:
    """Start moto's server on a free 127.0.0.1 port, wait until it answers, yield its endpoint and env, stop it."""
    port = _free_port()
    endpoint = f"http://{HOST}:{port}"
    env = {**os.environ, **s3_env(endpoint)}
    proc = subprocess.Popen(_server_command(port), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
                raise RuntimeError(f"moto server exited with {proc.returncode}: {err[-2000:]}")
            try:
                with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2):
                    break
            except urllib.error.HTTPError:
                break  # it answered
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"moto server did not answer on {endpoint} in {timeout_s:.0f} s") from None
                time.sleep(0.2)
        if proc.stderr:  # nobody reads it from here on: do not let a full pipe block the server
            proc.stderr.close()
        yield {"endpoint_url": endpoint, "env": s3_env(endpoint), "pid": proc.pid}
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


_REFUSED_XML = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code>'
                b"<Message>Header x-amz-checksum-sha256 not implemented</Message></Error>")


@contextlib.contextmanager
def checksum_refusing_store(endpoint_url: str) -> Iterator[dict]:
    """An S3-compatible store that refuses SHA-256 checksum headers (501 NotImplemented, as stores without flexible
    checksums answer): a real HTTP reverse proxy on 127.0.0.1 in front of ``endpoint_url`` passing every other request
    through. Yields ``{"endpoint_url": ..., "refused": [paths it refused]}``."""
    import http.client
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    upstream = urllib.parse.urlsplit(endpoint_url)
    refused: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b""
            while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            while self.rfile.readline().strip():  # trailers (an aws-chunked upload's checksum)
                pass
            return body

        def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes, length: int) -> None:
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Content-Length", str(length))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _forward(self) -> None:
            body = self._body()
            sent = {k.lower(): v for k, v in self.headers.items()}
            if sent.get("x-amz-sdk-checksum-algorithm", "").upper() == "SHA256" or "x-amz-checksum-sha256" in sent:
                refused.append(self.path)
                self._reply(501, [("Content-Type", "application/xml")], _REFUSED_XML, len(_REFUSED_XML))
                return
            conn = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "content-length")}
            conn.request(self.command, self.path, body=body, headers={**headers, "Content-Length": str(len(body))})
            answer = conn.getresponse()
            data = answer.read()
            kept = [(k, v) for k, v in answer.getheaders()
                    if k.lower() not in ("transfer-encoding", "content-length", "connection")]
            self._reply(answer.status, kept, data, int(answer.getheader("Content-Length") or len(data)))
            conn.close()

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer((HOST, 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"endpoint_url": f"http://{HOST}:{server.server_address[1]}", "refused": refused}
    finally:
        server.shutdown()
        server.server_close()


def _clear_fsspec_instances() -> None:
    """Drop cached S3 filesystems (made before the endpoint was set, or bound to a stopped server)."""
    try:
        import s3fs
    except ImportError:
        return
    s3fs.S3FileSystem.clear_instance_cache()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[dict]:
    pytest.importorskip("s3fs")
    if not (Path(sys.executable).with_name("moto_server").exists() or shutil.which("moto_server")):
        pytest.importorskip("moto.server")
    import fsspec.config

    with local_s3_server() as server:
        saved = {k: os.environ.get(k) for k in server["env"]}
        saved_conf = dict(fsspec.config.conf.get("s3", {}))
        os.environ.update(server["env"])
        # fsspec read FSSPEC_* at import; give this process the same config its children will get from env.
        fsspec.config.conf.setdefault("s3", {})["endpoint_url"] = server["endpoint_url"]
        _clear_fsspec_instances()
        try:
            yield server
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            if saved_conf:
                fsspec.config.conf["s3"] = saved_conf
            else:
                fsspec.config.conf.pop("s3", None)
            _clear_fsspec_instances()


@pytest.fixture
def s3_bucket(s3_server: dict) -> Iterator[str]:
    """A fresh bucket on the test server; yields ``s3://<name>``."""
    import s3fs

    fs = s3fs.S3FileSystem(endpoint_url=s3_server["endpoint_url"], key="testing", secret="testing")
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    fs.mkdir(bucket)
    yield f"s3://{bucket}"
    with contextlib.suppress(Exception):
        fs.rm(bucket, recursive=True)
