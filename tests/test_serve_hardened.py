"""The live recognizer against hostile clients and faults, for real: a Ray Serve app with two replicas on the
session's local Ray cluster, bound to 127.0.0.1, with a bearer token (from a file), the loopback Origin allow-list
and small limits; real WebSocket and HTTP clients, some from other loopback addresses (127.0.0.2, …: distinct
clients to the per-client limit); a registry version whose files are broken promoted during service; a replica
SIGKILLed mid-stream.

The registered versions hold a zero-initialized LoRA adapter on the real tiny.en weights (tests/conftest.py), as in
tests/test_serve_model.py.
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from conftest import free_port, messages_until_closed, original_weights_adapter, silent_flac

pytestmark = pytest.mark.slow
NAME = "whisperline-causal-tiny.en-1000ms"
TOKEN = "t0k3n-for-the-test"


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    from training.causal.run import register_adapter
    from data.tracking import client

    root = tmp_path_factory.mktemp("registry")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    adapter = original_weights_adapter(root / "adapter", 1000)
    (name, v1), (_, broken) = (register_adapter(uri, adapter, "serve-hardened", {"dataset_versions": f"test-{t}"})
                               for t in "ab")
    assert name == NAME
    # the second version's files break after registration (a bad upload, a half-synced store): it cannot load
    source = client(uri).get_model_version(NAME, broken).source  # models:/m-<id>
    weights = next((root / "artifacts" / "models" / source.split("/")[-1]).rglob("adapter_model.safetensors"))
    weights.write_bytes(b"not a safetensors file")
    client(uri).set_registered_model_alias(NAME, "champion", v1)
    return {"uri": uri, "v1": v1, "broken": broken, "root": root}


@pytest.fixture(scope="module")
def server(registry, ray_cluster, tmp_path_factory):
    from ray import serve

    from serving.app import ServeSettings, run

    token_file = tmp_path_factory.mktemp("secret") / "token"
    token_file.write_text(TOKEN + "\n")
    settings = ServeSettings(tracking_uri=registry["uri"], registered_model=NAME, alias="champion", max_streams=3,
                             compute_threads=1, torch_threads=1, poll_s=1.0, idle_timeout_s=6, slack_s=3,
                             min_speed=0.5, max_body_mb=2, max_upload_s=20, max_uploads=1, max_per_client=2,
                             token_file=str(token_file))
    port = free_port()
    url = run(settings, port, num_replicas=2, num_cpus=1)
    yield {"url": url, "port": port}
    serve.shutdown()


@pytest.fixture(scope="module")
def speech(realspeech: Path):
    from evaluation.sets import load_realspeech

    utt = load_realspeech(realspeech, ("cmu_arctic",), limit={"cmu_arctic": 1})[0]
    return np.clip(np.round(utt.audio * 32767), -32768, 32767).astype("<i2")


_next_client = iter(range(2, 250))


def _ws(server, *, token: str | None = TOKEN, origin: str | None = None, source: str | None = None):
    """A WebSocket client from loopback address ``source`` (a fresh one per call by default: separate clients)."""
    from websockets.sync.client import connect

    sock = socket.socket()
    sock.bind((source or f"127.0.0.{next(_next_client)}", 0))
    sock.connect(("127.0.0.1", server["port"]))
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return connect(server["url"].replace("http://", "ws://") + "/ws", sock=sock, open_timeout=30, close_timeout=10,
                   additional_headers=headers, origin=origin)


def _health(server) -> dict:
    with urllib.request.urlopen(f"{server['url']}/healthz", timeout=10) as r:
        return json.loads(r.read())


def _wait(predicate, timeout: float = 60.0, what: str = "condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            value = predicate()
        except (OSError, urllib.error.URLError):
            value = None
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def _post(server, body: bytes, token: str | None = TOKEN, origin: str | None = None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if origin:
        headers["Origin"] = origin
    req = urllib.request.Request(f"{server['url']}/transcribe", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_who_may_connect(server, speech):
    from websockets.exceptions import InvalidStatus

    for kwargs in ({"token": None}, {"token": "wrong"}, {"origin": "https://evil.example"}):
        with pytest.raises(InvalidStatus) as err:
            _ws(server, **kwargs)
        assert err.value.response.status_code == 403, kwargs
    # a browser on the page's own origin, the token as a subprotocol offer (browsers cannot set headers)
    from websockets.sync.client import connect

    with connect(server["url"].replace("http://", "ws://") + "/ws", origin="http://127.0.0.1:1234",
                 subprotocols=[f"whisperline.bearer.{TOKEN}"], open_timeout=30) as ws:
        assert json.loads(ws.recv(timeout=30))["type"] == "ready"
    buf = io.BytesIO()
    sf.write(buf, speech, 16000, format="WAV", subtype="PCM_16")
    assert _post(server, buf.getvalue(), token=None)[0] == 401
    assert _post(server, buf.getvalue(), origin="https://evil.example")[0] == 403
    status, result = _post(server, buf.getvalue())
    assert status == 200 and result["type"] == "transcript" and result["audio_ms"] > 1000
    # per client: two connections from one address, the third refused with a reason
    holders = [_ws(server, source="127.0.0.200") for _ in range(2)]
    try:
        for ws in holders:
            json.loads(ws.recv(timeout=30))
        with _ws(server, source="127.0.0.200") as third:
            messages = messages_until_closed(third)
            assert messages[-1]["code"] == "client_limit" and third.close_code == 1013
    finally:
        for ws in holders:
            ws.close()
    refused = _wait(lambda: _health(server)["refused"].get("unauthorized"), what="refusals counted")
    assert refused >= 1


def test_abusive_streams_are_closed_with_a_reason(server, speech):
    cases = [  # (what the client does after `ready`, code, close code)
        (lambda ws: ws.send(b""), "bad_frame", 1007),  # empty frames cost a read each, carry nothing
        (lambda ws: [ws.send(b"\x00\x00") for _ in range(3000)], "rate_limited", 1008),  # 1-sample frames
        (lambda ws: ws.send(speech[:1600].tobytes()), "too_slow", 1008),  # 0.1 s, then holds the slot
    ]
    for send, code, close_code in cases:
        with _ws(server) as ws:
            json.loads(ws.recv(timeout=30))
            started = time.monotonic()
            try:
                send(ws)
            except Exception:  # the server may close while the flood is still being sent
                pass
            messages = messages_until_closed(ws)
            assert messages and messages[-1]["type"] == "error" and messages[-1]["code"] == code, messages
            assert ws.close_code == close_code
            if code == "too_slow":  # 3 s of slack + 0.1 s of audio / 0.5: gone well before the 6 s idle limit
                assert time.monotonic() - started < 5.5
    # sockets that never send audio take no stream slot: with 6 of them open (2 replicas × max_streams 3), a
    # stream is still served
    holders = [_ws(server, source=f"127.0.0.{150 + i}") for i in range(6)]
    try:
        for ws in holders:
            json.loads(ws.recv(timeout=30))
        with _ws(server) as ws:
            assert json.loads(ws.recv(timeout=30))["type"] == "ready"
            ws.send(speech.tobytes())
            ws.send(json.dumps({"type": "end"}))
            assert messages_until_closed(ws)[-1]["type"] == "summary"
    finally:
        for ws in holders:
            ws.close()
    # an idle holder that never sends audio is closed too (no slot is held forever)
    with _ws(server) as ws:
        json.loads(ws.recv(timeout=30))
        assert messages_until_closed(ws)[-1]["code"] in ("too_slow", "idle")
    _wait(lambda: _health(server)["live_streams"] == 0, what="every abusive stream freed")


def test_uploads_are_refused_before_work(server):
    before = _health(server)["rss_mb"]
    status, body = _post(server, silent_flac(2 * 3600))  # 2 h of 48 kHz stereo silence in ~1.4 MB of FLAC
    assert (status, body["error"]) == (413, "too_long"), body
    status, body = _post(server, b"\x00" * (3 * 2**20))  # over the 2 MB body limit: refused before it is read
    assert (status, body["error"]) == (413, "body_too_large")
    health = _health(server)
    assert health["uploads"] == 0 and health["rss_mb"] < before + 300, (before, health["rss_mb"])


def test_a_version_that_fails_to_load_leaves_the_current_one_serving(server, registry, speech):
    from data.tracking import client

    client(registry["uri"]).set_registered_model_alias(NAME, "champion", registry["broken"])
    try:
        for _ in range(4):  # every replica reports it, and keeps the version it had
            health = _wait(lambda: (h := _health(server))["failed_version"] == registry["broken"] and h,
                           what="the failed swap reported")
            assert health["version"] == registry["v1"] and health["watch_error"], health
        with _ws(server) as ws:
            ready = json.loads(ws.recv(timeout=30))
            assert ready["model"]["version"] == registry["v1"]
            ws.send(speech.tobytes())
            ws.send(json.dumps({"type": "end"}))
            summary = messages_until_closed(ws)[-1]
            assert summary["type"] == "summary" and summary["version"]["version"] == registry["v1"], summary
    finally:
        client(registry["uri"]).set_registered_model_alias(NAME, "champion", registry["v1"])
    _wait(lambda: _health(server)["watch_error"] is None, what="the watcher to settle")


def _replica_pids(server, want: int = 2) -> set[int]:
    pids: set[int] = set()
    deadline = time.time() + 120
    while len(pids) < want and time.time() < deadline:
        try:
            pids.add(_health(server)["pid"])
        except (OSError, urllib.error.URLError):
            time.sleep(0.5)
    return pids


def test_a_replica_killed_mid_stream(server, speech):
    from ray import serve

    old = _replica_pids(server)
    assert len(old) == 2, old
    ws = _ws(server)
    json.loads(ws.recv(timeout=30))
    ws.send(speech[: len(speech) // 2].tobytes())  # a stream in progress
    victim = _wait(lambda: next((h["pid"] for h in (_health(server) for _ in range(6)) if h["live_streams"]), None),
                   what="the stream's replica")
    os.kill(victim, signal.SIGKILL)
    messages = messages_until_closed(ws)  # the stream ends, with a close code that is not a clean 1000
    assert ws.close_code != 1000, (ws.close_code, messages)
    # the other replica keeps serving while Ray Serve replaces the dead one
    with _ws(server) as again:
        assert json.loads(again.recv(timeout=60))["type"] == "ready"
        again.send(speech.tobytes())
        again.send(json.dumps({"type": "end"}))
        last = messages_until_closed(again)[-1]
        assert last["type"] == "summary", last
    _wait(lambda: serve.status().applications["whisperline"].deployments["recognizer"].replica_states.get(
        "RUNNING") == 2, timeout=180, what="a replacement replica")
    new = _replica_pids(server)
    assert victim not in new and len(new) == 2, (victim, new)
