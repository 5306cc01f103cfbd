"""An upload's body, read under a size limit before anything is buffered past it (the declared length is checked
before the first byte is read; the received length as it arrives), within a time limit (a client trickling a body
holds an upload slot)."""

from __future__ import annotations

import asyncio

from fastapi import Request


class UploadRefused(Exception):
    def __init__(self, code: str, status: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.status = status


async def _read(request: Request, max_bytes: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise UploadRefused("bad_request", 400, f"Content-Length {declared[:40]!r} is not a number")
        if int(declared) > max_bytes:
            raise UploadRefused("body_too_large", 413, f"{int(declared)} bytes declared; at most {max_bytes} bytes "
                                                       "(send FLAC, or stream over /ws)")
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > max_bytes:
            raise UploadRefused("body_too_large", 413, f"more than {max_bytes} bytes; at most {max_bytes} bytes "
                                                       "(send FLAC, or stream over /ws)")
        parts.append(part)
    if not size:
        raise UploadRefused("empty_audio", 400, "the request has no body: POST the audio file itself")
    return b"".join(parts)


async def read_body(request: Request, max_bytes: int, timeout_s: float = 60.0) -> bytes:
    """The body, or ``UploadRefused`` (413 past ``max_bytes``, 408 past ``timeout_s``)."""
    try:
        return await asyncio.wait_for(_read(request, max_bytes), timeout_s)
    except TimeoutError:
        raise UploadRefused("too_slow", 408, f"the body took more than {timeout_s:.0f} s to arrive") from None


__all__ = ["UploadRefused", "read_body"]
