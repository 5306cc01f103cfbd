"""A WebSocket client of the live recognizer (``serving.app``): stream an audio file as a microphone would.

The file is read (any rate: resampled to 16 kHz mono), sent as PCM16 frames of ``frame_ms`` at their audio time
(``realtime``) or as fast as the socket takes them, then ``end``; the events are collected until the server's
``summary``. ``whisperline stream-file`` prints the final transcript and the word latencies it saw.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from websockets.sync.client import connect

from data.audio import load_audio

SAMPLE_RATE = 16_000


@dataclass
class StreamResult:
    ready: dict[str, Any]
    events: list[dict[str, Any]] = field(default_factory=list)
    # from the end of the audio (the last frame sent, at its audio time when streaming in real time) to the summary,
    # on the client's clock: how far behind real time the server finished
    end_lag_ms: float | None = None

    @property
    def summary(self) -> dict[str, Any]:
        last = self.events[-1] if self.events else {}
        if last.get("type") != "summary":
            raise RuntimeError(f"the stream ended without a summary (last event: {last})")
        return last

    @property
    def text(self) -> str:
        return self.summary["text"]

    def final_latencies_ms(self) -> list[float]:
        """Per final word: when it was committed − when its audio ended (the server's clock for both)."""
        return [e["emitted_at_ms"] - e["end_ms"] for e in self.events if e.get("type") == "final"
                and "emitted_at_ms" in e and "end_ms" in e]


def _take_waiting(ws, result: StreamResult) -> None:
    """Read every event already received. The sync client buffers at most ``max_queue`` (16) messages and then
    stops reading the socket, so a server's pong waits behind unread events and the keepalive closes the stream
    (1011) after ``ping_interval + ping_timeout``: a client that only read after sending would lose every stream
    longer than that."""
    while True:
        try:
            message = ws.recv(timeout=0)
        except TimeoutError:
            return
        result.events.append(json.loads(message))


def stream_samples(url: str, samples: np.ndarray, *, frame_ms: int = 100, realtime: bool = True,
                   catch_up: bool | None = None, timeout_s: float = 120.0,
                   keepalive_s: float = 20.0, token: str | None = None) -> StreamResult:
    """``samples``: mono 16 kHz, float in [-1, 1] or int16 PCM (sent as is). ``url``: the server's base URL.
    ``token``: the bearer token of a server started with one (``serve-model --token-file``).
    ``catch_up``: the stream's config (None: the server's default, catching up when behind; False: chunk by chunk,
    the evaluated transcript exactly, for a file sent faster than real time). ``keepalive_s``: the WebSocket ping
    interval and the time a pong may take."""
    if samples.dtype == np.int16:
        pcm = samples.astype("<i2")
    else:
        pcm = np.clip(np.round(np.asarray(samples, dtype=np.float32) * 32767), -32768, 32767).astype("<i2")
    ws_url = url.replace("http://", "ws://").replace("https://", "wss://").rstrip("/") + "/ws"
    headers = {"Authorization": f"Bearer {token}"} if token else None
    with connect(ws_url, open_timeout=30, close_timeout=10, max_size=2**24, ping_interval=keepalive_s,
                 ping_timeout=keepalive_s, additional_headers=headers) as ws:
        result = StreamResult(json.loads(ws.recv(timeout=timeout_s)))
        if result.ready.get("type") != "ready":
            raise RuntimeError(f"the server did not accept the stream: {result.ready}")
        if catch_up is not None:
            ws.send(json.dumps({"type": "config", "catch_up": catch_up}))
        step, start = frame_ms * SAMPLE_RATE // 1000, time.monotonic()
        for i in range(0, len(pcm), step):
            if realtime:
                time.sleep(max(0.0, start + i / SAMPLE_RATE - time.monotonic()))
            ws.send(pcm[i : i + step].tobytes())
            _take_waiting(ws, result)
        sent = time.monotonic()
        ws.send(json.dumps({"type": "end"}))
        for message in ws:
            result.events.append(json.loads(message))
            if result.events[-1].get("type") == "summary":
                result.end_lag_ms = round((time.monotonic() - sent) * 1000, 1)
    return result


def stream_file(url: str, path: str, **kw) -> StreamResult:
    return stream_samples(url, load_audio(path, max_duration_s=4 * 3600).samples, **kw)


__all__ = ["StreamResult", "stream_file", "stream_samples"]
