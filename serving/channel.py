"""The socket side of a stream: end-of-stream markers, the bounded audio backlog, the receive loop, closing with a
reason."""

import asyncio
import time
from enum import Enum
from pathlib import Path

from fastapi import WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from serving.guard import StreamGuard
from serving.protocol import SAMPLE_RATE, ProtocolError, StreamConfig, decode_frame, parse_config, parse_text


class Signal(Enum):
    """Queue markers. Members, not ``object()``s: Ray Serve pickles the ingress class by value, with the globals its
    methods use, and a plain object would arrive in the replica as a copy that ``is`` nothing here; an Enum member
    is pickled by name and stays itself."""

    END = "end"
    DISCONNECTED = "disconnected"


END, DISCONNECTED = Signal.END, Signal.DISCONNECTED


class Backlog:
    """Audio queued between socket and engine, bounded; ``take`` waits until the engine has freed room (one frame
    is always let through, so a frame longer than the bound cannot wait forever)."""

    def __init__(self, limit_ms: float) -> None:
        self.limit_ms = limit_ms
        self.queued_ms = 0.0
        self.waits = 0  # frames that had to wait for room (the client was slowed down)
        self._room = asyncio.Condition()

    def fits(self, ms: float) -> bool:
        return not self.queued_ms or self.queued_ms + ms <= self.limit_ms

    async def take(self, ms: float) -> None:
        async with self._room:
            if not self.fits(ms):
                self.waits += 1
            await self._room.wait_for(lambda: self.fits(ms))
            self.queued_ms += ms

    async def release(self, ms: float) -> None:
        async with self._room:
            self.queued_ms = max(0.0, self.queued_ms - ms)
            self._room.notify_all()


async def receive(ws: WebSocket, chunk_choices: tuple[int, ...], frames: asyncio.Queue, backlog: Backlog,
                  guard: StreamGuard, idle_timeout_s: float) -> None:
    """Socket → queue: decode and check every frame, hold the client while the backlog is full, end the stream
    (a ``ProtocolError`` on the queue) for a client that goes quiet (``idle``), sends too little audio for a live
    stream (``too_slow``) or too many frames (``rate_limited``)."""
    config = StreamConfig()
    started = warned = False
    try:
        while True:
            wait = min(idle_timeout_s, guard.time_left())
            if wait <= 0:
                raise guard.too_slow()
            try:
                message = await asyncio.wait_for(ws.receive(), wait)
            except TimeoutError:
                # which limit the wait was cut to decides, not the guard's clock read again: asyncio may run a
                # timeout up to its clock resolution early, and a stream the guard timed out was then called idle
                if wait < idle_timeout_s or guard.time_left() <= 0:
                    raise guard.too_slow()
                raise ProtocolError("idle", f"no frame for {idle_timeout_s:.0f} s")
            if message["type"] == "websocket.disconnect":
                frames.put_nowait(DISCONNECTED)
                return
            if message.get("text") is not None:
                parsed = parse_text(message["text"])
                if parsed["type"] == "end":
                    frames.put_nowait(END)
                    return
                if started:
                    raise ProtocolError("bad_config", "config must come before the first audio frame")
                config = parse_config(parsed, chunk_choices)
                frames.put_nowait(config)
                continue
            data = message.get("bytes") or b""
            if not data:  # costs a read and a queue slot, carries nothing: refused, not counted as audio
                raise ProtocolError("bad_frame", "an empty frame: every binary frame carries samples")
            samples = decode_frame(data, config.format)
            ms = len(samples) * 1000 / SAMPLE_RATE
            guard.frame(ms)
            started = True
            if not backlog.fits(ms) and not warned:  # told once; later waits are silent
                warned = True
                await ws.send_json({"type": "warning", "code": "backpressure",
                                    "message": f"audio arrives faster than it is transcribed: more than "
                                               f"{backlog.limit_ms} ms queued; reading slowed to the engine's pace"})
            held = time.monotonic()
            await backlog.take(ms)
            guard.hold(time.monotonic() - held)  # the server held the client back: not the client's slowness
            frames.put_nowait((samples, ms))
    except ProtocolError as err:
        frames.put_nowait(err)
    except (WebSocketDisconnect, RuntimeError):  # RuntimeError: receive after the socket closed
        frames.put_nowait(DISCONNECTED)


def rss_mb() -> float | None:
    """This replica's resident memory (the soak's leak check)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None


async def close_with(ws: WebSocket, err: ProtocolError) -> None:
    if ws.client_state == WebSocketState.CONNECTED:
        try:
            await ws.send_json(err.event())
            await ws.close(err.close_code)
        except (WebSocketDisconnect, RuntimeError):
            pass


__all__ = ["DISCONNECTED", "END", "Backlog", "close_with", "receive", "rss_mb"]
