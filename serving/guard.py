"""Who may connect and how much a client may cost, checked before any work is done for it (plain, no I/O).

- :func:`origin_allowed`: the ``Origin`` header of a browser request against an allow-list. A page on another site
  can open a WebSocket from a visitor's browser (browsers do not apply the same-origin policy to sockets): the
  server must refuse it. Clients that are not browsers send no ``Origin`` and are let through (the token is what
  stops them where one is configured).
- :func:`token_ok`: an optional bearer token, from the ``Authorization`` header or, for browsers (which cannot set
  headers on a WebSocket), the ``Sec-WebSocket-Protocol`` offer ``whisperline.bearer.<token>``: never the URL, which
  ends up in logs and histories. Compared in constant time.
- :class:`ClientTable`: open connections (streams and uploads) per client address.
- :class:`StreamGuard`: what one stream's client sends against the wall clock — the frame rate (tiny frames cost a
  socket read and a decode each, whatever audio they carry) and a floor on the audio rate (a stream slot is for live
  audio: a client sending less than ``min_speed`` × real time, after ``slack_s`` of grace, is holding a slot, not
  streaming).
"""

from __future__ import annotations

import hmac
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from serving.protocol import ProtocolError

BEARER_SUBPROTOCOL = "whisperline.bearer."
LOOPBACK_ORIGINS = ("http://127.0.0.1", "http://localhost", "https://127.0.0.1", "https://localhost")


def origin_allowed(origin: str | None, allowed: Iterable[str]) -> bool:
    """No ``Origin`` (not a browser): allowed. Else its scheme and host must match an entry of ``allowed``; an entry
    with a port must match the port too, one without matches any port; ``"*"`` allows every origin."""
    if origin is None:
        return True
    try:
        got = urlsplit(origin.strip().lower())
        got_port = got.port
    except ValueError:
        return False
    for entry in allowed:
        if entry == "*":
            return True
        want = urlsplit(entry.strip().lower())
        if (want.scheme, want.hostname) == (got.scheme, got.hostname) and want.port in (None, got_port):
            return True
    return False


def offered_token(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(token, the subprotocol that carried it or None) from ``Authorization: Bearer …`` or a subprotocol offer."""
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip(), None
    for proto in headers.get("sec-websocket-protocol", "").split(","):
        proto = proto.strip()
        if proto.startswith(BEARER_SUBPROTOCOL):
            return proto[len(BEARER_SUBPROTOCOL):], proto
    return None, None


def token_ok(expected: str | None, offered: str | None) -> bool:
    """True where no token is configured, or the offered one equals it (constant-time comparison)."""
    if not expected:
        return True
    return offered is not None and hmac.compare_digest(expected.encode(), offered.encode())


class ClientTable:
    """Open connections per client address; ``enter`` refuses past ``limit`` (0: no limit).

    ``version`` counts the changes: an app's ledger (``serving.clients``) takes a replica's table only when it is
    at least as new as every change it has already counted. ``snapshot`` is read from the sync thread while the
    event loop changes the table, hence the lock."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open: dict[str, int] = {}
        self.version = 0
        self._lock = threading.Lock()

    def enter(self, client: str) -> bool:
        with self._lock:
            if self.limit and self.open.get(client, 0) >= self.limit:
                return False
            self.open[client] = self.open.get(client, 0) + 1
            self.version += 1
            return True

    def leave(self, client: str) -> None:
        with self._lock:
            left = self.open.get(client, 0) - 1
            if left > 0:
                self.open[client] = left
            else:
                self.open.pop(client, None)
            self.version += 1

    def snapshot(self) -> tuple[int, dict[str, int]]:
        with self._lock:
            return self.version, dict(self.open)


@dataclass
class StreamGuard:
    """One stream's budget. ``frame(ms)`` on every audio frame (raises ``rate_limited`` past the frame budget: a
    bucket of ``frame_burst`` frames refilled at ``max_frames_per_s``); ``time_left()`` is how long the client may
    stay silent before ``too_slow`` — the stream must have sent ``min_speed`` × (wall time − ``slack_s``) of audio
    at every moment, and its first audio within ``first_audio_s`` (a socket opened and held without audio is the
    cheapest way to fill a replica's slots). Time the server itself held the client back (back-pressure) is not counted (``hold``)."""

    min_speed: float = 0.5
    slack_s: float = 10.0
    max_frames_per_s: float = 200.0
    frame_burst: int = 1000
    first_audio_s: float = 3.0  # a connection that has sent no audio at all holds a slot this long at most
    clock: Callable[[], float] = time.monotonic
    audio_s: float = 0.0
    held_s: float = 0.0
    _start: float = field(init=False)
    _tokens: float = field(init=False)
    _refilled: float = field(init=False)

    def __post_init__(self) -> None:
        self._start = self._refilled = self.clock()
        self._tokens = float(self.frame_burst)

    def frame(self, ms: float) -> None:
        now = self.clock()
        self._tokens = min(float(self.frame_burst), self._tokens + (now - self._refilled) * self.max_frames_per_s)
        self._refilled = now
        if self._tokens < 1.0:
            raise ProtocolError("rate_limited", f"more than {self.max_frames_per_s:.0f} frames per second: send "
                                                "fewer, larger frames (20 ms or more each)")
        self._tokens -= 1.0
        self.audio_s += ms / 1000.0

    def hold(self, seconds: float) -> None:
        self.held_s += max(0.0, seconds)

    def time_left(self) -> float:
        """Seconds until the audio sent falls below the floor, if no more arrives."""
        if self.min_speed <= 0:
            return float("inf")
        grace = self.slack_s if self.audio_s else min(self.slack_s, self.first_audio_s)
        deadline = self._start + self.held_s + grace + self.audio_s / self.min_speed
        return deadline - self.clock()

    def too_slow(self) -> ProtocolError:
        elapsed = self.clock() - self._start - self.held_s
        return ProtocolError("too_slow", f"{self.audio_s:.1f} s of audio in {elapsed:.1f} s: a live stream sends at "
                                         f"least {self.min_speed:g}× real time (after {self.slack_s:g} s)")


__all__ = ["BEARER_SUBPROTOCOL", "LOOPBACK_ORIGINS", "ClientTable", "StreamGuard", "offered_token", "origin_allowed",
           "token_ok"]
