"""Issue 64's acceptance: a champion registered with a bf16 preference, served where bf16 is not native, keeps up
with a real-time stream.

``whisperline serve-model`` runs as a real process (its own local Ray, a real sqlite MLflow registry, the real
tiny.en weights) capped as an AVX2-only CPU (``streaming.precision.AVX2_MACHINE``: oneDNN, MKL, FBGEMM and ATen,
each read at start-up), a CPU without native bf16, where a bf16 Linear is emulated and several times slower than
fp32. It serves the
selected two-pass recognizer (configs/recognizer.yaml with precision "bf16-all", the original
weights) behind ``champion``. The server must resolve the preference to fp32 and say so (``/version``,
``/healthz``), and a ~12 s stream of real speech sent in real time over the WebSocket must not leave it behind: the
last words arrive soon after the audio ends (client clock), the server's compute stays under real time, and the
words are the speech's. Served in bf16 under the same cap (the resolver bypassed by hand, never here), the same
stream fell behind (the numbers are in the issue's report).

The bounds here tell fp32 from emulated bf16 (server RTF 6.4: ~65 s behind at the end of this stream); they are not
the speed target. A shared CI machine at a load of 3.6 on 2 cores served this stream in fp32 at RTF 1.06 and 2.0 s
behind, so a tight real-time bar would judge the machine. The real-time target of the AVX2-only path lives in the
benchmark (`benchmarks/serve_load.py`, `benchmarks/results/serve_load_avx2.{json,md}`)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import realspeech_root
from serve_process import get_json, signal_stop, start_server, stop_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
CAP = "AVX2"  # oneDNN's cap in streaming.precision.AVX2_MACHINE: no native bf16
MIN_AUDIO_S = 11.5  # two LJSpeech sentences (11.8 s); 12.0 took a third (21.7 s)
END_LAG_S = 20.0  # fp32 on a loaded machine: ~2 s; emulated bf16: ~65 s
MAX_RTF = 3.0  # fp32 on a loaded machine: ~1.1; emulated bf16: 6.4
MAX_WER = 0.30


def _pcm(audio: np.ndarray) -> np.ndarray:
    return np.clip(np.round(audio * 32767), -32768, 32767).astype("<i2")


@pytest.fixture(scope="module")
def speech() -> dict:
    """Consecutive LJSpeech utterances (0.3 s apart, as a reader pauses) until ≥ 11.5 s: PCM16 and the reference."""
    from evaluation.sets import load_realspeech

    root = realspeech_root()
    if not (root / "ljspeech" / "transcripts.tsv").exists():
        pytest.skip(f"real speech corpus not found at {root} (set WHISPERLINE_REALSPEECH)")
    gap = np.zeros(4800, dtype=np.float32)
    pieces, texts = [], []
    for utt in load_realspeech(root, ("ljspeech",), limit={"ljspeech": 12}):
        pieces += [utt.audio.astype(np.float32), gap]
        texts.append(utt.reference)
        if sum(len(p) for p in pieces[:-1]) >= MIN_AUDIO_S * 16000:  # (the trailing pause is not sent)
            break
    audio = np.concatenate(pieces[:-1])  # no pause after the last sentence: the audio ends with the speech
    assert len(audio) >= MIN_AUDIO_S * 16000, f"not enough LJSpeech for a {MIN_AUDIO_S:.0f} s stream"
    return {"pcm": _pcm(audio), "reference": " ".join(texts), "seconds": len(audio) / 16000}


def register_served_spec(root: Path, alias: str = "champion") -> dict:
    """The served two-pass spec with its bf16 preference, on the original weights, registered in a fresh sqlite
    store under ``root`` as the pipeline registered a champion before precision was resolved per machine."""
    from recognizer.registry import register_recognizer
    from recognizer.spec import load
    from data.tracking import client

    spec = load(weights={"precision": "bf16-all"})
    assert spec.kind == "two-pass" and spec.weights.adapter_dir is None
    uri = f"sqlite:///{root / 'mlflow.db'}"
    reg = register_recognizer(uri, spec)
    client(uri).set_registered_model_alias(reg["registered_model"], alias, reg["version"])
    return {"uri": uri, "alias": alias, **reg}


def stream_timed(url: str, pcm: np.ndarray, frame_ms: int = 100) -> dict:
    """``pcm`` sent as a microphone would (frames at their audio time, as ``serving.client.stream_samples`` sends
    them, its events read while sending), then ``end``; every event with its arrival on this (monotonic) clock."""
    from websockets.sync.client import connect

    events: list[dict] = []

    def take(message) -> None:
        event = json.loads(message)
        event["_arrived"] = time.monotonic()
        events.append(event)

    ws_url = url.replace("http://", "ws://") + "/ws"
    with connect(ws_url, open_timeout=30, close_timeout=10, max_size=2**24) as ws:
        ready = json.loads(ws.recv(timeout=60))
        assert ready.get("type") == "ready", ready
        step, start = frame_ms * 16, time.monotonic()
        for i in range(0, len(pcm), step):
            time.sleep(max(0.0, start + i / 16000 - time.monotonic()))
            ws.send(pcm[i : i + step].tobytes())
            while True:  # read what is waiting (the client's buffer must not fill: the keepalive would close it)
                try:
                    take(ws.recv(timeout=0))
                except TimeoutError:
                    break
        last_sent = time.monotonic()
        ws.send(json.dumps({"type": "end"}))
        for message in ws:
            take(message)
    assert events and events[-1]["type"] == "summary", events[-3:]
    summary, finals = events[-1], [e for e in events if e["type"] == "final"]
    audio_end = start + len(pcm) / 16000
    # while the audio streamed: how late each word event came after its audio (a server falling behind: growing)
    live = [e["_arrived"] - (start + e["end_ms"] / 1000) for e in events
            if e["type"] in ("partial", "final") and e["_arrived"] <= last_sent]
    return {
        "ready": ready, "events": events, "summary": summary, "text": summary["text"],
        "end_lag_s": summary["_arrived"] - last_sent,  # last frame sent -> the summary (every word final)
        "last_final_lag_s": (finals[-1]["_arrived"] - last_sent) if finals else None,
        "after_audio_end_s": summary["_arrived"] - audio_end,
        "server_last_final_lag_ms": (finals[-1]["emitted_at_ms"] - summary["audio_ms"]) if finals else None,
        "live_lag_max_s": max(live) if live else None, "live_events": len(live),
        "rtf": summary["rtf"], "caught_up_steps": summary["caught_up_steps"], "steps": summary["steps"],
    }


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> dict:
    return register_served_spec(tmp_path_factory.mktemp("slow-bf16-registry"))


@pytest.fixture(scope="module")
def served(registry, tmp_path_factory):
    log = tmp_path_factory.mktemp("slow-bf16-server") / "serve-model.log"
    from streaming.precision import AVX2_MACHINE

    url, proc, ray_tmp = start_server(registry, log, AVX2_MACHINE)
    try:
        yield url, proc, ray_tmp
    finally:
        stop_server(proc, ray_tmp)


@pytest.fixture(scope="module")
def server(served) -> str:
    return served[0]


def test_bf16_champion_served_without_native_bf16_keeps_up_in_fp32(server, registry, speech):
    from evaluation.metrics import wer

    version = get_json(f"{server}/version")
    assert version["version"] == registry["version"] and version["kind"] == "two-pass"
    # the replica saw the cap (Ray's workers inherit the server's environment) and resolved the preference away
    assert version["cpu"]["onednn_max_cpu_isa"] == CAP, version["cpu"]
    assert version["precision_requested"] == "bf16-all"
    assert version["precision"] == "fp32", version
    reason = version["precision_reason"]
    assert "no native bf16" in reason, reason
    if "amx_bf16" in version["cpu"]["flags"]:  # an AMX CPU: native but for the cap, which the reason names
        assert CAP in reason, reason
    health = get_json(f"{server}/healthz")
    assert health["precision"] == "fp32" and health["cpu"] == version["cpu"], health

    result = stream_timed(server, speech["pcm"])
    report = {k: result[k] for k in ("end_lag_s", "last_final_lag_s", "after_audio_end_s", "server_last_final_lag_ms",
                                     "live_lag_max_s", "rtf", "caught_up_steps", "steps")}
    # real time on a shared machine: what else ran says whether a miss is the server's or the machine's
    report["loadavg_1m"] = round(os.getloadavg()[0], 2)
    print(f"\n{speech['seconds']:.1f} s streamed in real time at {version['precision']}: {report}")
    assert result["summary"]["audio_ms"] == pytest.approx(speech["seconds"] * 1000, abs=1)
    assert result["end_lag_s"] < END_LAG_S, report  # not the emulated path's backlog
    # the server's own compute: its summary RTF counts the end-of-stream pass and the steps of both engine threads
    assert result["rtf"] < MAX_RTF, report
    words = result["text"].split()
    assert len(words) >= 0.7 * len(speech["reference"].split()), result["text"]
    error = wer([speech["reference"]], [result["text"]])
    assert error < MAX_WER, (error, result["text"], speech["reference"])
    assert get_json(f"{server}/healthz")["live_streams"] == 0


def test_sigterm_stops_the_server_and_every_process_it_started(served):
    """Issue 67: `serve-model` under a service manager gets SIGTERM. It used to die at once and leave Ray's
    dashboard and runtime-env agents running with no parent; it must stop as Ctrl-C does, within 10 s, whole."""
    _, proc, ray_tmp = served
    stopped = signal_stop(proc, ray_tmp, signal.SIGTERM)
    assert stopped["seconds"] is not None and stopped["seconds"] <= 10.0, stopped
    assert stopped["left"] == [], stopped
