"""OpenAI's transcription API in our terms (plain, no I/O): the request's fields checked, a transcript rendered in
each ``response_format``, the Server-Sent Events of ``stream=true``, and OpenAI's error body.

What is accepted and what it does here (docs/serving.md, "OpenAI-compatible API"):
- ``model``: the served registered model, ``NAME@ALIAS``, ``NAME/VERSION`` (``GET /v1/models`` lists them) or
  ``whisper-1`` (what clients written for OpenAI send): each is the version this replica serves now;
- ``language``: English only (``en``, ``english`` or absent): the served weights are English-only;
- ``prompt`` and ``temperature``: accepted and not used (the streaming decoder is greedy and starts from the audio);
- ``response_format``: ``json`` (default), ``text``, ``verbose_json``, ``srt``, ``vtt``;
- ``timestamp_granularities[]``: ``segment`` (default) and/or ``word``, for ``verbose_json``;
- ``stream``: ``transcript.text.delta`` events as the recognizer makes words final, then ``transcript.text.done``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from serving.timestamps import Cue, TimedWord, cues, srt, vtt

FORMATS = ("json", "text", "verbose_json", "srt", "vtt")
GRANULARITIES = ("segment", "word")
ENGLISH = ("en", "english")
OPENAI_MODEL_NAME = "whisper-1"
# our refusal codes → OpenAI's error types (its SDK raises by status; the type says which family of error)
ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "invalid_request_error",
               404: "invalid_request_error", 408: "invalid_request_error", 413: "invalid_request_error",
               429: "rate_limit_error", 503: "server_error", 500: "server_error"}
CODES = {"unauthorized": "invalid_api_key"}


class RequestError(Exception):
    """A request OpenAI's API would refuse: its status, code and the parameter at fault."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.param = status, code, param


def error_body(status: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": ERROR_TYPES.get(status, "invalid_request_error"),
                      "param": param, "code": CODES.get(code, code)}}


@dataclass(frozen=True)
class TranscriptionRequest:
    model: str
    response_format: str = "json"
    granularities: tuple[str, ...] = ("segment",)
    stream: bool = False
    language: str | None = None

    @property
    def needs_times(self) -> bool:
        return self.response_format in ("verbose_json", "srt", "vtt")


def model_ids(registered_model: str, version: str, alias: str) -> list[str]:
    """The names ``model`` may take for the version served: what ``GET /v1/models`` lists, and whisper-1."""
    return [registered_model, f"{registered_model}@{alias}", f"{registered_model}/{version}", OPENAI_MODEL_NAME]


def parse_request(form: Mapping[str, Any], served_ids: Sequence[str]) -> TranscriptionRequest:
    """The multipart form's fields (everything but ``file``), checked; raises ``RequestError`` as OpenAI would."""
    model = str(form.get("model") or "")
    if not model:
        raise RequestError(400, "missing_required_parameter", "you must provide a model parameter", "model")
    if model not in served_ids:
        raise RequestError(404, "model_not_found", f"the model {model!r} is not served here; one of "
                                                   f"{', '.join(served_ids)}", "model")
    fmt = str(form.get("response_format") or "json")
    if fmt not in FORMATS:
        raise RequestError(400, "invalid_value", f"response_format {fmt!r} is not one of {', '.join(FORMATS)}",
                           "response_format")
    grains = tuple(form.get("granularities") or ()) or ("segment",)
    if bad := [g for g in grains if g not in GRANULARITIES]:
        raise RequestError(400, "invalid_value", f"timestamp_granularities {bad} are not among "
                                                 f"{', '.join(GRANULARITIES)}", "timestamp_granularities[]")
    if fmt != "verbose_json" and form.get("granularities"):
        raise RequestError(400, "invalid_value", "timestamp_granularities needs response_format verbose_json",
                           "timestamp_granularities[]")
    language = form.get("language") or None
    if language is not None and str(language).lower() not in ENGLISH:
        raise RequestError(400, "unsupported_language", f"language {language!r}: the served weights are "
                                                        "English-only (en)", "language")
    stream = str(form.get("stream") or "false").lower() in ("true", "1")
    if stream and fmt not in ("json", "text"):
        raise RequestError(400, "invalid_value", "stream=true answers text events; response_format must be json "
                                                 "or text", "stream")
    temperature = form.get("temperature")
    if temperature not in (None, ""):
        try:
            if not 0.0 <= float(temperature) <= 1.0:
                raise ValueError
        except ValueError:
            raise RequestError(400, "invalid_value", f"temperature {temperature!r} is not a number in [0, 1]",
                               "temperature") from None
    return TranscriptionRequest(model, fmt, grains, stream, language)


def usage(duration_s: float) -> dict[str, Any]:
    return {"type": "duration", "seconds": math.ceil(duration_s)}


def render(req: TranscriptionRequest, text: str, duration_s: float,
           words: Sequence[TimedWord] = ()) -> tuple[str, str]:
    """(body, media type) of a transcript in ``req.response_format``; ``words``: the timed words (the formats with
    times need them)."""
    if req.response_format == "text":
        return text + "\n", "text/plain; charset=utf-8"
    if req.response_format == "json":
        return json.dumps({"text": text, "usage": usage(duration_s)}), "application/json"
    groups = cues(words)
    if req.response_format == "srt":
        return srt(groups), "text/plain; charset=utf-8"
    if req.response_format == "vtt":
        return vtt(groups), "text/vtt; charset=utf-8"
    body: dict[str, Any] = {"task": "transcribe", "language": "english", "duration": round(duration_s, 3),
                            "text": text}
    if "word" in req.granularities:
        body["words"] = [{"word": w.word, "start": round(w.start, 3), "end": round(w.end, 3), "aligned": w.aligned}
                         for w in words]
    if "segment" in req.granularities:
        body["segments"] = [segment(i, c) for i, c in enumerate(groups)]
    body["usage"] = usage(duration_s)
    return json.dumps(body), "application/json"


def segment(i: int, cue: Cue) -> dict[str, Any]:
    """One of OpenAI's segments. The decoder statistics it also carries (tokens, log-probability, compression
    ratio, no-speech probability) are not what a streaming recognizer computes: null, never invented."""
    return {"id": i, "seek": 0, "start": round(cue.start, 3), "end": round(cue.end, 3), "text": " " + cue.text,
            "tokens": [], "temperature": 0.0, "avg_logprob": None, "compression_ratio": None,
            "no_speech_prob": None}


def sse(event: Mapping[str, Any]) -> str:
    return f"data: {json.dumps(event)}\n\n"


def delta_event(new_words: Sequence[str], first: bool) -> dict[str, Any]:
    """Words just made final, as the text to append (the deltas joined are the done event's text)."""
    return {"type": "transcript.text.delta", "delta": ("" if first else " ") + " ".join(new_words)}


def done_event(text: str, duration_s: float) -> dict[str, Any]:
    return {"type": "transcript.text.done", "text": text, "usage": usage(duration_s)}


__all__ = ["FORMATS", "OPENAI_MODEL_NAME", "RequestError", "TranscriptionRequest", "delta_event", "done_event",
           "error_body", "model_ids", "parse_request", "render", "segment", "sse", "usage"]
