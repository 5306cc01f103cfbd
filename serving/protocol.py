"""The live streaming protocol: what a WebSocket client sends and what the server answers (plain, no I/O).

Client → server
  - text ``{"type": "config", "sample_rate": 16000, "format": "pcm16" | "f32", "chunk_ms": 300, "catch_up": true}``
    (optional, before any audio: the defaults are 16 kHz PCM16, the model's own chunk size, and catching up —
    several waiting chunks fed as one step when the server has fallen behind; ``false`` feeds chunk by chunk, the
    evaluated transcript exactly, for a client that sends a file faster than real time);
  - binary frames of mono samples in that format, of any size (up to ``MAX_FRAME_S`` of audio each);
  - text ``{"type": "end"}``: the utterance is over (the server then flushes, sends a ``summary`` and closes).
Server → client (JSON text frames)
  - ``ready``: the model version serving this connection, the chunk sizes it supports, the accepted formats;
  - ``partial`` / ``final``: ``words`` (``final``: newly committed, never revised; ``partial``: the whole tentative
    tail, which replaces the previous one), ``index`` (position of the first word), ``start_ms`` / ``end_ms`` (the
    stream audio the step that produced them had heard before and after it: the causal engine has no per-word
    timestamps), ``emitted_at_ms`` (server clock since the stream's first audio: ``emitted_at_ms - end_ms`` is the
    delay the server added to audio sent in real time);
  - ``warning`` (``code`` "backpressure": the client sends faster than the server computes; it is being slowed);
  - ``error`` (``code``, ``message``), then the connection closes with a matching WebSocket close code
    (``CLOSE_CODES``: ``busy`` / ``client_limit`` 1013 try again later; ``idle`` — no frame for a while —, ``too_slow``
    — less audio than a live stream sends —, ``rate_limited`` — too many frames — 1001 / 1008);
  - ``summary``: the transcript, audio and compute totals, the version; then a normal close.

Bad input never reaches the engine: every frame is decoded and checked here first (``ProtocolError`` carries the
code the client sees).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

SAMPLE_RATE = 16_000
FORMATS = {"pcm16": np.dtype("<i2"), "f32": np.dtype("<f4")}
MAX_FRAME_S = 10.0  # one frame of more audio than this is refused (a client must stream, not upload)
# Container headers: a file sent where raw samples are expected (the HTTP endpoint takes files)
_CONTAINERS = {b"RIFF": "WAV", b"fLaC": "FLAC", b"OggS": "Ogg", b"ID3": "MP3", b"\x1aE\xdf\xa3": "WebM/Matroska"}

# WebSocket close codes (RFC 6455 §7.4.1) per error code
CLOSE_CODES = {"bad_message": 1003, "bad_config": 1003, "not_audio": 1007, "non_finite": 1007, "bad_frame": 1007,
               "frame_too_large": 1009, "busy": 1013, "client_limit": 1013, "client_rate": 1013, "idle": 1001, "too_slow": 1008,
               "rate_limited": 1008, "internal": 1011}


class ProtocolError(ValueError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    @property
    def close_code(self) -> int:
        return CLOSE_CODES.get(self.code, 1008)

    def event(self) -> dict[str, Any]:
        return {"type": "error", "code": self.code, "message": str(self)}


@dataclass(frozen=True)
class StreamConfig:
    sample_rate: int = SAMPLE_RATE
    format: str = "pcm16"
    chunk_ms: int | None = None  # None: the model's own
    catch_up: bool = True  # behind real time: every waiting whole chunk in one step (serving.session)


def parse_text(text: str) -> dict[str, Any]:
    """A client text frame as a message with a known ``type``."""
    try:
        message = json.loads(text)
    except json.JSONDecodeError as err:
        raise ProtocolError("bad_message", f"text frames must be JSON messages, got {text[:60]!r} ({err.msg})")
    if not isinstance(message, dict) or message.get("type") not in ("config", "end"):
        raise ProtocolError("bad_message", f"expected a message of type 'config' or 'end', got {str(message)[:80]}")
    return message


def parse_config(message: dict[str, Any], chunk_choices: tuple[int, ...]) -> StreamConfig:
    """A ``config`` message checked against what this server and model accept."""
    unknown = set(message) - {"type", "sample_rate", "format", "chunk_ms", "catch_up"}
    if unknown:
        raise ProtocolError("bad_config", f"unknown config fields {sorted(unknown)}")
    rate = message.get("sample_rate", SAMPLE_RATE)
    if rate != SAMPLE_RATE:
        raise ProtocolError("bad_config", f"sample_rate must be {SAMPLE_RATE} (resample on the client), got {rate}")
    fmt = message.get("format", "pcm16")
    if not isinstance(fmt, str) or fmt not in FORMATS:
        raise ProtocolError("bad_config", f"format must be one of {sorted(FORMATS)}, got {fmt!r}")
    chunk = message.get("chunk_ms")
    if chunk is not None and (type(chunk) is not int or chunk not in chunk_choices):
        raise ProtocolError("bad_config", f"chunk_ms {chunk} is not one this model supports: {list(chunk_choices)}")
    catch_up = message.get("catch_up", True)
    if not isinstance(catch_up, bool):
        raise ProtocolError("bad_config", f"catch_up must be true or false, got {catch_up!r}")
    return StreamConfig(rate, fmt, chunk, catch_up)


def decode_frame(data: bytes, fmt: str) -> np.ndarray:
    """One binary frame as float32 samples in [-1, 1]; refuses files, torn samples, NaN/Inf and oversized frames."""
    for magic, name in _CONTAINERS.items():
        if data.startswith(magic):
            raise ProtocolError("not_audio", f"this looks like a {name} file: send raw {fmt} samples "
                                             "(POST whole files to /transcribe)")
    dtype = FORMATS[fmt]
    if len(data) % dtype.itemsize:
        raise ProtocolError("bad_frame", f"{len(data)} bytes is not a whole number of {fmt} samples")
    n = len(data) // dtype.itemsize
    if n > MAX_FRAME_S * SAMPLE_RATE:
        raise ProtocolError("frame_too_large", f"a frame of {n / SAMPLE_RATE:.1f} s of audio; at most {MAX_FRAME_S} s "
                                               "per frame")
    samples = np.frombuffer(data, dtype=dtype)
    if fmt == "pcm16":
        return samples.astype(np.float32) / 32768.0
    samples = samples.astype(np.float32)
    if not np.isfinite(samples).all():
        raise ProtocolError("non_finite", "the frame holds NaN or Inf samples")
    if n and float(np.abs(samples).max()) > 8.0:  # float audio lives in [-1, 1]; far beyond it is not audio
        raise ProtocolError("not_audio", f"f32 samples reach {float(np.abs(samples).max()):.3g}: float audio must lie "
                                         "in [-1, 1] (was PCM16 sent as f32?)")
    return np.clip(samples, -1.0, 1.0)


__all__ = ["CLOSE_CODES", "FORMATS", "MAX_FRAME_S", "SAMPLE_RATE", "ProtocolError", "StreamConfig", "decode_frame",
           "parse_config", "parse_text"]
