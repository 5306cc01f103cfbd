"""OpenAI-compatible routes of the live recognizer (mixed into ``serving.app.Recognizer``): existing OpenAI clients,
SDKs and gateways work unchanged against ``serve-model``.

  ``POST /v1/audio/transcriptions``  a file → ``json | text | verbose_json | srt | vtt``, or with ``stream=true``
                                     Server-Sent Events as the recognizer makes words final
  ``GET  /v1/models``                the version served, by each name ``model`` may take

The same app, limits, token and admission control as ``POST /transcribe``: the bearer token is the API key, an
upload takes one of the replica's upload slots (503 ``busy`` past them), its body is read under ``max_body_mb``
(413) and its length checked against ``max_upload_s`` from the header (413) before anything is decoded. Errors are
OpenAI's body (``serving.openai_api.error_body``) with the status codes of ``/transcribe``. The transcript is
``/transcribe``'s: the same engine, fed the same pieces (``ServedModel.transcribe``).
"""

# no `from __future__ import annotations`: Ray Serve re-creates each route from its signature (serving.app)
import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.datastructures import Headers
from starlette.formparsers import MultiPartException, MultiPartParser

from data.audio import AudioReject, load_audio_bytes
from serving.guard import offered_token, token_ok
from serving.openai_api import (RequestError, delta_event, done_event, error_body, model_ids, parse_request, render,
                                sse)
from serving.timestamps import time_words
from serving.upload import UploadRefused, read_body

SAMPLE_RATE = 16_000
MAX_FIELD_BYTES = 64 * 1024  # a form field other than the file (a prompt is text)


async def parse_form(headers: Headers, body: bytes):
    """The multipart form of an upload whose body was already read under the size limit."""
    if not headers.get("content-type", "").startswith("multipart/form-data"):
        raise RequestError(400, "invalid_request", "send the file as multipart/form-data (the field `file`)")

    async def once():
        yield body
        yield b""

    try:
        return await MultiPartParser(headers, once(), max_files=1, max_fields=32,
                                     max_part_size=MAX_FIELD_BYTES).parse()
    except MultiPartException as err:
        raise RequestError(400, "invalid_request", f"malformed multipart body: {err}") from None


class OpenAIRoutes:
    """The routes' work; their state (settings, the served model, admission, executors) is the Recognizer's, which
    declares the routes themselves (Ray Serve's class-based view answers 422 for a route declared on a base class:
    it asks for ``self`` as a query parameter)."""

    def _openai_error(self, status: int, code: str, message: str, param: str | None = None) -> JSONResponse:
        self._count_refusal(code, "upload")
        return JSONResponse(error_body(status, code, message, param), status_code=status)

    def _served_ids(self) -> list[str]:
        v = self.current.version
        return model_ids(v.registered_model, v.version, v.alias)

    def openai_models(self, request: Request) -> JSONResponse:
        token, _ = offered_token(request.headers)
        if not token_ok(self.token, token):
            return self._openai_error(401, "unauthorized", "a valid API key (the server's bearer token) is needed")
        v = self.current.version
        created = int((v.created_ms or 0) / 1000)
        return JSONResponse({"object": "list", "data": [
            {"id": i, "object": "model", "created": created, "owned_by": "whisperline",
             "version": v.version, "kind": v.kind} for i in self._served_ids()]})

    async def openai_transcriptions(self, request: Request) -> Response:
        s, model = self.settings, self.current
        client = request.client.host if request.client else "?"
        code, status, _ = await self._admit(request.headers, client, upload=True)
        if code:
            return self._openai_error(status, code, self._refusal_message(code))
        release = _once(lambda: self._end_upload(client))
        handed_to_stream = False
        try:
            try:
                body = await read_body(request, int(s.max_body_mb * 2**20), s.upload_read_s)
                form = await parse_form(request.headers, body)
                fields = {k: form.get(k) for k in ("model", "language", "prompt", "response_format", "temperature",
                                                   "stream")}
                req = parse_request(fields | {"granularities": form.getlist("timestamp_granularities[]")},
                                    self._served_ids())
                upload = form.get("file")
                if upload is None or isinstance(upload, str):
                    raise RequestError(400, "missing_required_parameter", "you must provide a file", "file")
                data = await upload.read()
                await form.close()
            except UploadRefused as err:
                return self._openai_error(err.status, err.code, str(err))
            except RequestError as err:
                return self._openai_error(err.status, err.code, str(err), err.param)
            del body
            loop = asyncio.get_running_loop()
            try:  # the header is read, and the length checked, before anything is decoded
                audio = await loop.run_in_executor(self.upload_executor, lambda: load_audio_bytes(
                    data, max_duration_s=s.max_upload_s))
            except AudioReject as err:
                return self._openai_error(413 if err.reason == "too_long" else 400, err.reason, err.detail, "file")
            del data
            duration_s = len(audio.samples) / SAMPLE_RATE
            if req.stream:
                handed_to_stream = True  # the transcription holds the upload slot until it ends
                return StreamingResponse(self._openai_events(model, audio.samples, duration_s, release),
                                         media_type="text/event-stream")
            result = await loop.run_in_executor(self.upload_executor, model.transcribe, audio.samples)
            self._observe_rtf("upload", result)
            words = (await loop.run_in_executor(self.upload_executor, self._time_words, audio.samples, result)
                     if req.needs_times else [])
            text, media = render(req, result["text"], duration_s, words)
            return Response(text, media_type=media)
        finally:
            if not handed_to_stream:
                release()

    def _openai_events(self, model, samples, duration_s: float, release: Callable[[], None]
                       ) -> AsyncIterator[str]:
        """``transcript.text.delta`` per run of words made final, then ``transcript.text.done``. The work starts
        now and gives the upload slot back when it ends, whether or not the events are ever read; a client that
        leaves closes the events, which stops the work at its next second of audio."""
        loop = asyncio.get_running_loop()
        finals: asyncio.Queue = asyncio.Queue()
        stop = threading.Event()

        def finished(job: asyncio.Future) -> None:
            release()
            finals.put_nowait(None)
            if not job.cancelled():
                job.exception()  # retrieved here: a client that left raises UploadCancelled, which is no error

        job = loop.run_in_executor(self.upload_executor, lambda: model.transcribe(
            samples, None, lambda words: loop.call_soon_threadsafe(finals.put_nowait, words), stop))
        job.add_done_callback(finished)

        async def events() -> AsyncIterator[str]:
            try:
                first = True
                while (words := await finals.get()) is not None:
                    if words:
                        yield sse(delta_event(words, first))
                        first = False
                try:
                    result = await job
                except Exception as err:  # the status line is sent: the failure is an event, as OpenAI's are
                    self._count_refusal("internal", "upload")
                    yield sse({"type": "error", **error_body(500, "internal",
                                                             f"{type(err).__name__}: {str(err)[:200]}")})
                    return
                self._observe_rtf("upload", result)
                yield sse(done_event(result["text"], duration_s))
            finally:
                stop.set()
        return events()

    def _time_words(self, samples, result: dict[str, Any]) -> list:
        """The transcript's words timed by the aligner (one per replica, made on first need; pocketsphinx's decoder
        is not thread-safe, hence the lock)."""
        from data.aligners import get_aligner  # lazy: the C library loads only where times are asked for

        lock = self.__dict__.setdefault("_aligner_lock", threading.Lock())
        with lock:
            if self.__dict__.get("_aligner") is None:
                self._aligner = get_aligner("pocketsphinx")
            return time_words(samples, result["word_list"], result["spans"], self._aligner)


def _once(fn: Callable[[], None]) -> Callable[[], None]:
    done = threading.Event()

    def call() -> None:
        if not done.is_set():
            done.set()
            fn()
    return call


__all__ = ["OpenAIRoutes", "parse_form"]
