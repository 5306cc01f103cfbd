"""The socket side of a stream: end-of-stream markers, the bounded audio backlog, closing with a reason."""

import asyncio
from pathlib import Path

from fastapi import WebSocket
from starlette.websockets import WebSocketDisconnect, WebSocketState

from serving.protocol import ProtocolError

END, DISCONNECTED = object(), object()


class Backlog:
    """Audio queued between socket and engine, bounded; ``take`` waits until the engine has freed room (one frame
    is always let through, so a frame longer than the bound cannot wait forever)."""

    def __init__(self, limit_ms: float) -> None:
        self.limit_ms = limit_ms
        self.queued_ms = 0.0
        self._room = asyncio.Condition()

    def fits(self, ms: float) -> bool:
        return not self.queued_ms or self.queued_ms + ms <= self.limit_ms

    async def take(self, ms: float) -> None:
        async with self._room:
            await self._room.wait_for(lambda: self.fits(ms))
            self.queued_ms += ms

    async def release(self, ms: float) -> None:
        async with self._room:
            self.queued_ms = max(0.0, self.queued_ms - ms)
            self._room.notify_all()


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


__all__ = ["DISCONNECTED", "END", "Backlog", "close_with", "rss_mb"]
