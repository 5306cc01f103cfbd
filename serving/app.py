"""The live recognizer as a Ray Serve application: WebSocket streams, whole files, a browser page, hot swap.

Routes (one FastAPI ingress, bound to 127.0.0.1 by ``run``):
  ``GET /``             the browser page (microphone → AudioWorklet → 16 kHz → WebSocket; live words, latency)
  ``WS  /ws``           one stream per connection (``serving.protocol``)
  ``POST /transcribe``  a whole audio file (wav/flac/ogg, any rate: resampled) → the transcript (the pyfunc contract)
  ``GET /healthz``      live streams, capacity, the version served, the registry watcher's state
  ``GET /version``      model name, version, alias, base sha256, dataset versions, precision, chunk sizes

Concurrency: a replica holds up to ``max_streams`` streams; each has its own engine state on the replica's shared
weights, and its steps run on the replica's thread pool (``compute_threads`` × ``torch_threads`` = the cores the
replica asks Ray for). Past ``max_streams`` a connection is told ``busy`` (close 1013) instead of queueing behind
the others: a live stream that waits is already late. Ray Serve spreads connections over replicas and, with an
autoscaling config (``infra/kuberay/rayservice.yaml``), adds replicas under load.

Back-pressure: frames go from the socket to the engine through a queue bounded by ``max_backlog_ms`` of audio; a
client that sends faster than the engine computes fills it, gets one ``warning`` (``backpressure``) and is then
read only as fast as the engine goes (TCP flow control slows it): nothing is buffered without bound. A live stream
whose engine falls behind catches up instead: every frame waiting when a step ends goes into the next step, its
whole chunks as one feed (``serving.session``; a client may ask for chunk-by-chunk feeding instead).

Hot swap: a watcher thread resolves the alias every ``poll_s``; when it names another version, that version is
loaded next to the current one and then becomes current. A stream keeps the model it started with until it ends
(the old weights are freed when its last stream closes), so no connection is dropped or changes model mid-way.
"""

# no `from __future__ import annotations`: Ray Serve's class-based view re-creates each route from its signature,
# and FastAPI must see real classes (WebSocket, Request) there, not strings it cannot resolve
import asyncio
import io
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse
from ray import serve
from starlette.websockets import WebSocketDisconnect

from serving.channel import DISCONNECTED, END, Backlog, close_with, rss_mb
from serving.protocol import (FORMATS, MAX_FRAME_S, SAMPLE_RATE, ProtocolError, StreamConfig, decode_frame,
                                       parse_config, parse_text)

log = logging.getLogger("whisperline.serving")
STATIC = Path(__file__).resolve().parent / "static"
PAGE_FILES = {"index.html", "capture-worklet.js", "page.js"}


@dataclass(frozen=True)
class ServeSettings:
    tracking_uri: str
    registered_model: str
    alias: str = "champion"
    precision: str | None = "bf16-all"
    max_streams: int = 8
    torch_threads: int = 1
    compute_threads: int = 2
    poll_s: float = 5.0
    max_backlog_ms: int = 4000
    idle_timeout_s: float = 60.0  # no frame at all for this long: the stream is closed (silence is audio: it counts)


api = FastAPI(title="whisperline live recognizer")


@serve.deployment(name="recognizer")
@serve.ingress(api)
class Recognizer:
    def __init__(self, settings: ServeSettings) -> None:
        import torch

        from serving.models import load, resolve

        torch.set_num_threads(settings.torch_threads)
        self.settings = settings
        self.executor = ThreadPoolExecutor(settings.compute_threads, thread_name_prefix="stream-step")
        self.current = load(settings.tracking_uri, resolve(settings.tracking_uri, settings.registered_model,
                                                           settings.alias), settings.precision)
        self.live_by_version: dict[str, int] = {}  # open streams per version (their sum: the replica's load)
        self.swaps: list[dict[str, Any]] = []
        self.watch_error: str | None = None
        self._stop = threading.Event()
        threading.Thread(target=self._watch, name="alias-watcher", daemon=True).start()

    @property
    def live(self) -> int:
        return sum(self.live_by_version.values())

    # ------------------------------------------------------------------ hot swap
    def _watch(self) -> None:
        from serving.models import load, resolve

        s = self.settings
        while not self._stop.wait(s.poll_s):
            try:
                found = resolve(s.tracking_uri, s.registered_model, s.alias)
                if found.version != self.current.version.version:
                    started = time.perf_counter()
                    loaded = load(s.tracking_uri, found, s.precision)
                    old, self.current = self.current.version.version, loaded  # one reference swap: atomic
                    self.swaps.append({"from": old, "to": found.version, "load_s": round(time.perf_counter() - started, 2),
                                       "at": time.time()})
                    log.info("alias %s moved: version %s -> %s", s.alias, old, found.version)
                self.watch_error = None
            except Exception as err:  # the registry is down or the new version fails to load: keep serving
                self.watch_error = f"{type(err).__name__}: {str(err)[:300]}"
                log.warning("alias watcher: %s", self.watch_error)

    def __del__(self) -> None:
        self._stop.set()

    # ------------------------------------------------------------------ HTTP
    @api.get("/")
    def page(self) -> HTMLResponse:
        return HTMLResponse((STATIC / "index.html").read_text())

    @api.get("/static/{name}")
    def static(self, name: str) -> FileResponse:
        if name not in PAGE_FILES:
            return JSONResponse({"error": f"no such file {name!r}"}, status_code=404)
        return FileResponse(STATIC / name, media_type="text/javascript")

    @api.get("/healthz")
    def healthz(self) -> dict[str, Any]:
        return {"status": "ok", "live_streams": self.live, "live_by_version": dict(self.live_by_version),
                "pid": os.getpid(), "rss_mb": rss_mb(),
                "max_streams": self.settings.max_streams, "version": self.current.version.version,
                "swaps": self.swaps, "watch_error": self.watch_error}

    @api.get("/version")
    def version(self) -> dict[str, Any]:
        return {**self.current.describe(), "settings": {k: v for k, v in asdict(self.settings).items()
                                                         if k != "tracking_uri"}}

    @api.post("/transcribe")
    async def transcribe(self, request: Request, chunk_ms: int | None = None) -> JSONResponse:
        import soundfile as sf

        from data.audio import AudioReject, prepare_samples

        model = self.current
        if chunk_ms is not None and chunk_ms not in model.chunk_choices:
            return JSONResponse({"error": "bad_config", "message": f"chunk_ms {chunk_ms} is not one of "
                                 f"{list(model.chunk_choices)}"}, status_code=400)
        body = await request.body()
        try:
            try:
                data, rate = sf.read(io.BytesIO(body), dtype="float32", always_2d=True)
            except Exception as err:  # libsndfile: RuntimeError / LibsndfileError / TypeError for junk
                raise AudioReject("unreadable_audio", f"not an audio file soundfile reads ({type(err).__name__})")
            audio = prepare_samples(data, rate, max_duration_s=600.0)
        except AudioReject as err:
            return JSONResponse({"error": err.reason, "message": err.detail}, status_code=400)
        result = await asyncio.get_running_loop().run_in_executor(self.executor, model.transcribe,
                                                                  audio.samples, chunk_ms)
        return JSONResponse({**result, "notes": list(audio.notes)})

    # ------------------------------------------------------------------ WebSocket
    @api.websocket("/ws")
    async def stream(self, ws: WebSocket) -> None:
        await ws.accept()
        if self.live >= self.settings.max_streams:
            await close_with(ws, ProtocolError("busy", f"this replica serves {self.settings.max_streams} streams "
                                                        "already; retry shortly"))
            return
        model = self.current  # this stream's model to its end, whatever the alias does meanwhile
        key = model.version.version
        self.live_by_version[key] = self.live_by_version.get(key, 0) + 1
        try:
            await self._serve(ws, model)
        finally:
            self.live_by_version[key] -= 1
            if not self.live_by_version[key]:
                del self.live_by_version[key]

    async def _serve(self, ws: WebSocket, model) -> None:
        from serving.session import StreamSession

        s = self.settings
        await ws.send_json({"type": "ready", "model": model.describe(), "sample_rate": SAMPLE_RATE,
                            "formats": sorted(FORMATS), "max_frame_s": MAX_FRAME_S})
        frames: asyncio.Queue = asyncio.Queue()
        backlog = Backlog(s.max_backlog_ms)
        receiver = asyncio.create_task(self._receive(ws, model, frames, backlog))
        session: "StreamSession | None" = None
        loop = asyncio.get_running_loop()
        held: list = []  # a control item met while draining audio frames: handled next
        try:
            while True:
                item = held.pop() if held else await frames.get()
                if isinstance(item, StreamConfig):
                    session = StreamSession(model.engine(item.chunk_ms), catch_up=item.catch_up)
                    continue
                if isinstance(item, ProtocolError):
                    await close_with(ws, item)
                    return
                if item is DISCONNECTED:
                    return
                if session is None:
                    session = StreamSession(model.engine(None))
                if item is END:
                    for event in await loop.run_in_executor(self.executor, session.finish):
                        await ws.send_json(event)
                    await ws.send_json({**session.summary(), "version": model.version.as_dict()})
                    await ws.close(1000)
                    return
                samples, ms = item
                session.push(samples)
                while not frames.empty():  # every frame that arrived while the last step ran: one catch-up step
                    item = frames.get_nowait()
                    if not isinstance(item, tuple):
                        held.append(item)
                        break
                    session.push(item[0])
                    ms += item[1]
                events = await loop.run_in_executor(self.executor, session.run)
                await backlog.release(ms)
                for event in events:
                    await ws.send_json(event)
        except WebSocketDisconnect:
            return
        except Exception as err:  # an engine failure ends this stream with a reason, never the replica
            log.exception("stream failed")
            await close_with(ws, ProtocolError("internal", f"{type(err).__name__}: {str(err)[:200]}"))
        finally:
            receiver.cancel()

    async def _receive(self, ws: WebSocket, model, frames: asyncio.Queue, backlog: Backlog) -> None:
        """Socket → queue: decode and check every frame, hold the client while the backlog is full."""
        config = StreamConfig()
        started = warned = False
        try:
            while True:
                try:
                    message = await asyncio.wait_for(ws.receive(), self.settings.idle_timeout_s)
                except TimeoutError:
                    raise ProtocolError("idle", f"no frame for {self.settings.idle_timeout_s:.0f} s")
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
                    config = parse_config(parsed, model.chunk_choices)
                    frames.put_nowait(config)
                    continue
                samples = decode_frame(message.get("bytes") or b"", config.format)
                started = True
                ms = len(samples) * 1000 / SAMPLE_RATE
                if not backlog.fits(ms) and not warned:  # told once; later waits are silent
                    warned = True
                    await ws.send_json({"type": "warning", "code": "backpressure",
                                        "message": f"audio arrives faster than it is transcribed: more than "
                                                   f"{backlog.limit_ms} ms queued; reading slowed to the engine's pace"})
                await backlog.take(ms)
                frames.put_nowait((samples, ms))
        except ProtocolError as err:
            frames.put_nowait(err)
        except (WebSocketDisconnect, RuntimeError):  # RuntimeError: receive after the socket closed
            frames.put_nowait(DISCONNECTED)


# ---------------------------------------------------------------------- building and running
def build_app(settings: ServeSettings, *, num_replicas: int | str = 1, num_cpus: float | None = None,
              autoscaling: dict[str, Any] | None = None):
    """The bound application; each replica asks Ray for ``num_cpus`` (default: its compute threads × torch
    threads). ``autoscaling`` (Ray Serve's ``autoscaling_config``) replaces ``num_replicas``."""
    cpus = num_cpus if num_cpus is not None else settings.compute_threads * settings.torch_threads
    options: dict[str, Any] = {"ray_actor_options": {"num_cpus": cpus},
                               # the HTTP routes must get through while every stream slot is taken
                               "max_ongoing_requests": settings.max_streams + 8}
    if autoscaling:
        options["autoscaling_config"] = autoscaling
    else:
        options["num_replicas"] = num_replicas
    return Recognizer.options(**options).bind(settings)


def app_builder(args: dict[str, Any]):
    """Ray Serve's application-builder entry point (``import_path: serving.app:app_builder`` in a
    Serve config / KubeRay RayService): ``args`` are ``ServeSettings`` fields plus ``num_replicas``/``autoscaling``."""
    args = dict(args)
    scale = {k: args.pop(k) for k in ("num_replicas", "num_cpus", "autoscaling") if k in args}
    return build_app(ServeSettings(**args), **scale)


def run(settings: ServeSettings, port: int = 8000, *, num_replicas: int = 1, num_cpus: float | None = None,
        blocking: bool = False, name: str = "whisperline") -> str:
    """Start (or join) Ray, Serve's HTTP proxy on 127.0.0.1:``port``, and the app; returns its base URL."""
    import ray

    if not ray.is_initialized():
        ray.init(include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(build_app(settings, num_replicas=num_replicas, num_cpus=num_cpus), name=name, route_prefix="/",
              blocking=blocking)
    return f"http://127.0.0.1:{port}"


__all__ = ["Recognizer", "ServeSettings", "app_builder", "build_app", "run"]
