"""The load generator's client side: one utterance streamed in real time over a WebSocket to our server
(``serving.protocol``) or to WhisperLiveKit's (``/asr``), and N such clients at once. What each client saw is kept
as snapshots (time, committed words, tentative words), from which ``benchmarks.serve_load`` derives word latencies."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field

import numpy as np
import websockets

FRAME_MS = 100


@dataclass
class Stream:
    """One utterance over one connection, as the client saw it."""

    utt_id: str
    audio_ms: float
    snapshots: list[tuple[float, tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)  # t, committed, tentative
    done_ms: float | None = None  # last message, ms after the first frame was sent
    server_delay_ms: list[float] = field(default_factory=list)  # ours: receive − send time of the step's audio
    error: str | None = None


def word_times(snapshots) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(word, first shown ms) and (word, committed ms) for every word of the final transcript."""
    if not snapshots:
        return [], []
    final_words = list(snapshots[-1][1]) + list(snapshots[-1][2])
    first, committed = [], []
    for i, w in enumerate(final_words):
        shown = [t for t, c, p in snapshots if i < len(c) + len(p) and (list(c) + list(p))[i] == w]
        fixed = [t for t, c, _ in snapshots if i < len(c) and c[i] == w]
        end = snapshots[-1][0]
        first.append((w, shown[0] if shown else end))
        committed.append((w, fixed[0] if fixed else end))
    return first, committed


async def _send_realtime(ws, pcm: np.ndarray, t0: float) -> None:
    step = FRAME_MS * 16
    for i in range(0, len(pcm), step):
        await asyncio.sleep(max(0.0, t0 + i / 16000 - time.monotonic()))
        await ws.send(pcm[i : i + step].tobytes())


async def stream_ours(url: str, utt, pcm: np.ndarray, *, source: str | None = None,
                      headers: dict[str, str] | None = None) -> Stream:
    """One utterance streamed in real time; ``source``: the client's loopback address (127.0.0.x: a distinct client
    to the server's per-client limits), ``headers``: e.g. the bearer token."""
    s = Stream(utt.utt_id, len(pcm) / 16)
    committed: list[str] = []
    tentative: tuple[str, ...] = ()
    extra = {"local_addr": (source, 0)} if source else {}
    async with websockets.connect(url.replace("http", "ws") + "/ws", max_size=2**22, open_timeout=60,
                                  additional_headers=headers, **extra) as ws:
        json.loads(await ws.recv())  # ready
        t0 = time.monotonic()

        async def send() -> None:
            await _send_realtime(ws, pcm, t0)
            await ws.send(json.dumps({"type": "end"}))

        sender = asyncio.create_task(send())
        async for message in ws:
            now = (time.monotonic() - t0) * 1000
            ev = json.loads(message)
            if ev["type"] == "final":
                committed[ev["index"]: ev["index"] + len(ev["words"])] = ev["words"]
                tentative = ()
            elif ev["type"] == "partial":
                tentative = tuple(ev["words"])
            elif ev["type"] == "error":
                s.error = f"{ev['code']}: {ev['message']}"
            if ev["type"] in ("final", "partial"):
                s.server_delay_ms.append(now - ev["end_ms"])
            s.snapshots.append((now, tuple(committed), tentative))
            s.done_ms = now
        await sender
    return s


async def stream_wlk(url: str, utt, pcm: np.ndarray) -> Stream:
    """WhisperLiveKit's /asr protocol with --pcm-input: raw s16le frames, an empty frame ends the stream, the
    server answers with the whole state (``lines`` committed, ``buffer_transcription`` tentative) and finally
    ``ready_to_stop``."""
    s = Stream(utt.utt_id, len(pcm) / 16)
    async with websockets.connect(url.replace("http", "ws") + "/asr", max_size=2**22, open_timeout=60) as ws:
        json.loads(await ws.recv())  # {"type": "config", ...}
        t0 = time.monotonic()

        async def send() -> None:
            await _send_realtime(ws, pcm, t0)
            await ws.send(b"")

        sender = asyncio.create_task(send())
        async for message in ws:
            now = (time.monotonic() - t0) * 1000
            ev = json.loads(message)
            if ev.get("type") == "ready_to_stop":
                s.done_ms = now
                break
            if ev.get("error"):
                s.error = str(ev["error"])
            committed = tuple(" ".join(line["text"] for line in ev.get("lines", []) if line.get("text")).split())
            s.snapshots.append((now, committed, tuple((ev.get("buffer_transcription") or "").split())))
            s.done_ms = now
        await sender
    return s


def pcm16(audio: np.ndarray) -> np.ndarray:
    return np.clip(np.round(audio * 32767), -32768, 32767).astype("<i2")


def rotated(utterances: list, k: int, n: int) -> list:
    """Every utterance once, client k of n starting k/n of the way through the list."""
    start = k * len(utterances) // n
    return utterances[start:] + utterances[:start]


async def run_level(client, url: str, utterances, n: int) -> list[list[Stream]]:
    """N clients, each streaming every utterance once, back to back; client k starts k/N of the way through the
    list (so the clients are never in step), which gives every stream the same words to be judged on."""

    async def one(k: int) -> list[Stream]:
        out = []
        for utt in rotated(utterances, k, n):
            try:
                out.append(await client(url, utt, pcm16(utt.audio)))
            except Exception as err:  # a refused or dropped connection is a result, not a crash of the benchmark
                out.append(Stream(utt.utt_id, len(utt.audio) / 16, error=f"{type(err).__name__}: {err}"))
                await asyncio.sleep(1.0)
        return out

    return await asyncio.gather(*(one(k) for k in range(n)))


# ------------------------------------------------------------------ uploads: /transcribe and OpenAI's route
def wav_bytes(pcm: np.ndarray) -> bytes:
    import io

    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, pcm, 16000, format="WAV", subtype="PCM_16")
    return buf.getvalue()


async def upload_native(http, url: str, body: bytes) -> dict:
    """``POST /transcribe``: ms until the whole transcript is back."""
    t0 = time.monotonic()
    r = await http.post(f"{url}/transcribe", content=body)
    r.raise_for_status()
    return {"done_ms": (time.monotonic() - t0) * 1000, "text": r.json()["text"]}


async def upload_openai(oai, body: bytes, stream: bool) -> dict:
    """OpenAI's route through the official client (``AsyncOpenAI``): ms until the transcript (``stream``: until the
    first delta, and until the done event)."""
    t0 = time.monotonic()
    if not stream:
        r = await oai.audio.transcriptions.create(model="whisper-1", file=("u.wav", body, "audio/wav"))
        return {"done_ms": (time.monotonic() - t0) * 1000, "text": r.text}
    first = None
    async for event in await oai.audio.transcriptions.create(model="whisper-1", file=("u.wav", body, "audio/wav"),
                                                             stream=True):
        if event.type == "transcript.text.delta" and first is None:
            first = (time.monotonic() - t0) * 1000
        if event.type == "transcript.text.done":
            return {"done_ms": (time.monotonic() - t0) * 1000, "first_ms": first, "text": event.text}
    raise RuntimeError("the event stream ended without transcript.text.done")


async def run_upload_level(url: str, utterances, n: int, route: str) -> list[list[dict]]:
    """N clients, each uploading every utterance once, back to back (client k starts k/N of the way through), on
    ``route``: native, openai or openai-stream."""
    import httpx
    from openai import AsyncOpenAI

    bodies = {u.utt_id: wav_bytes(pcm16(u.audio)) for u in utterances}
    async with httpx.AsyncClient(timeout=600) as http:
        oai = AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=600)

        async def one(k: int) -> list[dict]:
            out = []
            for utt in rotated(utterances, k, n):
                try:
                    r = await (upload_native(http, url, bodies[utt.utt_id]) if route == "native" else
                               upload_openai(oai, bodies[utt.utt_id], route == "openai-stream"))
                    out.append({"utt_id": utt.utt_id, "audio_ms": len(utt.audio) / 16, **r})
                except Exception as err:  # a refusal is a result
                    out.append({"utt_id": utt.utt_id, "error": f"{type(err).__name__}: {str(err)[:200]}"})
            return out

        return await asyncio.gather(*(one(k) for k in range(n)))
