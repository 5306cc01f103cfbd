"""What a replica serves and the limits it enforces before doing any work for a client (one frozen dataclass:
Ray Serve passes it to every replica; it holds no secret — the bearer token is read from a file or the
environment by the replica itself)."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path

from serving.guard import LOOPBACK_ORIGINS

TOKEN_ENV = "WHISPERLINE_SERVE_TOKEN"


def read_token(token_file: str | None) -> str | None:
    """A bearer token, the server's or a client's: the file wins over the environment; None where neither has one."""
    if token_file:
        value = Path(token_file).read_text().strip()
        if not value:
            raise ValueError(f"token file {token_file} is empty")
        return value
    return os.environ.get(TOKEN_ENV) or None


@dataclass(frozen=True)
class ServeSettings:
    tracking_uri: str
    registered_model: str
    alias: str = "champion"
    # every version's Linear layers at this precision (streaming.precision.REQUESTS), registered recognizers too;
    # None: the precision the version names ("auto" for an adapter version). Resolved on the replica's machine
    precision: str | None = None
    max_streams: int = 8  # streams + uploads in progress per replica: past it, `busy`
    max_pending: int = 64  # sockets that have not sent audio yet (no engine: cheap), per replica
    torch_threads: int = 1
    compute_threads: int = 2
    poll_s: float = 5.0
    graceful_shutdown_s: float = 3.0  # a stopping replica's streams get this long to end (a stop takes ≤ 10 s)
    max_backlog_ms: int = 4000
    # --- what one stream may cost (serving.guard.StreamGuard)
    idle_timeout_s: float = 15.0  # no frame at all for this long: closed (silence is audio: a live client sends it)
    min_speed: float = 0.5  # audio seconds per wall second a stream must keep up, after `slack_s`
    slack_s: float = 10.0
    first_audio_s: float = 3.0  # the first audio frame must come this soon after `ready` (a config may come first)
    max_frames_per_s: float = 200.0  # the browser page sends 50 (20 ms frames)
    frame_burst: int = 1000
    # --- uploads (POST /transcribe): their own threads, counted in admission, refused before work
    max_body_mb: float = 32.0
    max_upload_s: float = 600.0
    upload_read_s: float = 60.0  # the whole body must arrive within this
    upload_threads: int = 1
    max_uploads: int = 2  # in progress per replica (past it: 503 busy, not a queue)
    # --- who may connect
    allowed_origins: tuple[str, ...] = LOOPBACK_ORIGINS  # browsers' Origin; ("*",) allows any page
    token_file: str | None = None  # a bearer token for /ws and /transcribe (else $WHISPERLINE_SERVE_TOKEN, if set)
    max_per_client: int = 4  # open streams + uploads per client address, over every replica (0: no limit)
    connects_per_minute: float = 120.0  # new connections per client address (0: no limit)

    def token(self) -> str | None:
        """The bearer token clients must present, or None (no authentication)."""
        return read_token(self.token_file)

    def public(self) -> dict:
        """The settings a client may see (``/version``): no paths."""
        return {k: v for k, v in asdict(self).items() if k not in ("tracking_uri", "token_file")} | {
            "token_required": bool(self.token())}


__all__ = ["TOKEN_ENV", "ServeSettings", "read_token"]
