"""The live recognizer as a Ray Serve application: WebSocket streams, whole files, a browser page, hot swap.

Routes (one FastAPI ingress, bound to 127.0.0.1 by ``run``):
  ``GET /``             the browser page (microphone → AudioWorklet → 16 kHz → WebSocket; live words, latency)
  ``WS  /ws``           one stream per connection (``serving.protocol``)
  ``POST /transcribe``  a whole audio file (wav/flac/ogg, any rate: resampled) → the transcript (the pyfunc contract)
  ``GET /healthz``      live streams, capacity, the version served and its precision, the CPU, the watcher's state
  ``GET /version``      model name, version, alias, base sha256, dataset versions, chunk sizes, precision (the one
                        running, the one asked for and why they differ: ``streaming.precision``) and the CPU
  ``/v1/…``             OpenAI's transcription API (``serving.openai_routes``)

Concurrency: a replica holds up to ``max_streams`` streams (a socket becomes one with its first config or audio:
sockets that have sent nothing hold no engine and no slot, ``max_pending`` of them, each for ``first_audio_s`` at
most); each has its own engine state on the replica's shared weights, and its steps run on the replica's thread
pool (``compute_threads`` × ``torch_threads`` = the cores the replica asks Ray for). Past ``max_streams`` a
connection is told ``busy`` (close 1013) instead of queueing behind the others: a live stream that waits is
already late. Ray Serve spreads connections over replicas and, with an
autoscaling config (``infra/kuberay/rayservice.yaml``), adds replicas under load.

Back-pressure: frames go from the socket to the engine through a queue bounded by ``max_backlog_ms`` of audio; a
client that sends faster than the engine computes fills it, gets one ``warning`` (``backpressure``) and is then
read only as fast as the engine goes (TCP flow control slows it): nothing is buffered without bound. A live stream
whose engine falls behind catches up instead: every frame waiting when a step ends goes into the next step, its
whole chunks as one feed (``serving.session``; a client may ask for chunk-by-chunk feeding instead).

Hot swap: a watcher thread resolves the alias every ``poll_s``; when it names another version, that version is
loaded next to the current one and then becomes current. A stream keeps the model it started with until it ends
(the old weights are freed when its last stream closes), so no connection is dropped or changes model mid-way. A
version that fails to load leaves the current one serving; ``/healthz`` reports it (``failed_version``,
``watch_error``) and it is not retried until the alias moves.

Limits before work (``serving.settings``; docs/serving.md, "Hardening"): who may connect first (``serving.guard``:
Origin allow-list, bearer token; 403 at the handshake), then capacity (``busy``), then the client's allowance over
every replica (``serving.clients``). A stream's client must send live audio (``StreamGuard``); an upload's body is
read under ``max_body_mb``, its length checked against ``max_upload_s`` from the header before anything is decoded,
and it runs on its own ``upload_threads``, never the live streams'.
"""

# no `from __future__ import annotations`: Ray Serve's class-based view re-creates each route from its signature,
# and FastAPI must see real classes (WebSocket, Request) there, not strings it cannot resolve
import asyncio
import logging
import os
import signal
import socket
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ray
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from ray import serve
from starlette.websockets import WebSocketDisconnect

from data.audio import AudioReject, load_audio_bytes
from serving.channel import DISCONNECTED, END, Backlog, close_with, receive, rss_mb
from serving.clients import ClientLedger
from serving.guard import ClientTable, StreamGuard, offered_token, origin_allowed, token_ok
from serving.metrics import ReplicaMetrics
from serving.models import load, resolve
from serving.openai_routes import OpenAIRoutes
from serving.upkeep import ReplicaUpkeep
from serving.protocol import FORMATS, MAX_FRAME_S, SAMPLE_RATE, ProtocolError, StreamConfig
from serving.session import StreamSession
from serving.settings import ServeSettings
from serving.upload import UploadRefused, read_body

log = logging.getLogger("whisperline.serving")
STATIC = Path(__file__).resolve().parent / "static"
PAGE_FILES = {"index.html", "capture-worklet.js", "page.js"}

api = FastAPI(title="whisperline live recognizer")


@serve.deployment(name="recognizer")
@serve.ingress(api)
class Recognizer(OpenAIRoutes, ReplicaUpkeep):
    def __init__(self, settings: ServeSettings, ledger=None) -> None:
        import torch  # lazy: the replica needs it, not the driver that starts Serve

        torch.set_num_threads(settings.torch_threads)
        self.settings = settings
        self.token = settings.token()
        self.executor = ThreadPoolExecutor(settings.compute_threads, thread_name_prefix="stream-step")
        # uploads never take the live streams' threads: two long files must not stall every live stream
        self.upload_executor = ThreadPoolExecutor(settings.upload_threads, thread_name_prefix="upload")
        self.replica_id = f"{socket.gethostname()}:{os.getpid()}"
        self.metrics = ReplicaMetrics("recognizer", self.replica_id)
        self.current = load(settings.tracking_uri, resolve(settings.tracking_uri, settings.registered_model,
                                                           settings.alias), settings.precision)
        self._loaded(self.current)
        self.live_by_version: dict[str, int] = {}  # open streams per version
        self.uploads = 0  # uploads in progress (with the streams: the replica's load)
        # sockets that have not sent a config or audio yet: no engine, a coroutine each. They do not take a stream
        # slot (a held socket must not lock honest streams out) and are bounded on their own (and by first_audio_s)
        self.pending = 0
        # this replica's connections per client; the limit is the app's (``serving.clients``): a ledger handle,
        # or (no ledger: one replica on its own) this table's own
        self.ledger = ledger
        self.clients = ClientTable(0 if ledger is not None else settings.max_per_client)
        self.refused: Counter[str] = Counter()  # refusals by code, for /healthz
        self.swaps: list[dict[str, Any]] = []
        self.watch_error: str | None = None
        self.failed_version: str | None = None
        self.metrics.track_open("ws", lambda: self.live)
        self.metrics.track_open("upload", lambda: self.uploads)
        self._stop = threading.Event()
        threading.Thread(target=self._watch, name="alias-watcher", daemon=True).start()
        if ledger is not None:
            threading.Thread(target=self._sync_clients, name="client-sync", daemon=True).start()

    @property
    def live(self) -> int:
        return sum(self.live_by_version.values())

    @property
    def load(self) -> int:
        return self.live + self.uploads

    def _observe_rtf(self, route: str, summary: dict[str, Any]) -> None:
        """A finished stream's or upload's compute / audio (none for one that held no audio)."""
        if summary.get("rtf") is not None:
            self.metrics.rtf.labels(**self.metrics.ids, route=route).observe(summary["rtf"])

    def _count_refusal(self, code: str, route: str) -> None:
        """A connection, upload or stream refused or ended with ``code``: /healthz's count and the metric."""
        self.refused[code] += 1
        self.metrics.refused.labels(**self.metrics.ids, route=route, reason=code).inc()

    def __del__(self) -> None:
        self._stop.set()

    # ------------------------------------------------------------------ who may connect
    async def _admit(self, headers, client: str, upload: bool = False) -> tuple[str | None, int, str | None]:
        """(refusal code or None, HTTP status for it, the subprotocol that carried the token). Admitted: the client
        is counted (``_leave`` when it is done) and a place is reserved — an upload slot (``uploads``) or a pending
        socket (``pending``) — before the first await, so that concurrent requests cannot all pass one check."""
        if not origin_allowed(headers.get("origin"), self.settings.allowed_origins):
            return "origin_not_allowed", 403, None
        token, proto = offered_token(headers)
        if not token_ok(self.token, token):
            return "unauthorized", 401, None
        s = self.settings
        if self.load >= s.max_streams or (upload and self.uploads >= s.max_uploads) or (
                not upload and self.pending >= s.max_pending):
            return "busy", 503, proto  # a queue is a queue of late answers: refused now
        if upload:
            self.uploads += 1
        else:
            self.pending += 1
        if self.ledger is not None:
            # counted here first: a table the sync thread sends while the ledger is asked holds this connection
            self.clients.enter(client)
            try:
                code = await self.ledger.enter.remote(self.replica_id, client, self.clients.version)
            except Exception as err:  # no ledger reachable: this replica's own count, at the same limit
                log.warning("client ledger: %s", err)
                code = "client_limit" if self.clients.open.get(client, 0) > s.max_per_client else None
            if code:
                self.clients.leave(client)
        else:
            code = None if self.clients.enter(client) else "client_limit"
        if code:
            if upload:
                self.uploads -= 1
            else:
                self.pending -= 1
            return code, 429, proto
        self.metrics.admitted.labels(**self.metrics.ids, route="upload" if upload else "ws").inc()
        return None, 200, proto

    def _leave(self, client: str) -> None:
        self.clients.leave(client)
        if self.ledger is not None:  # not awaited: the next sync corrects a lost one
            self.ledger.leave.remote(self.replica_id, client, self.clients.version)

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
                "pending_sockets": self.pending,
                "uploads": self.uploads, "pid": os.getpid(), "rss_mb": rss_mb(),
                "max_streams": self.settings.max_streams, "version": self.current.version.version,
                "precision": self.current.precision, "cpu": dict(self.current.resolved.cpu),
                "swaps": self.swaps, "watch_error": self.watch_error, "failed_version": self.failed_version,
                "refused": dict(self.refused), "clients": dict(self.clients.open)}

    @api.get("/version")
    def version(self) -> dict[str, Any]:
        return {**self.current.describe(), "settings": self.settings.public()}

    @api.get("/metrics")
    def prometheus(self) -> Response:
        body, media_type = self.metrics.exposition()
        return Response(body, media_type=media_type)

    # OpenAI's transcription API (serving.openai_routes does the work)
    @api.get("/v1/models")
    def v1_models(self, request: Request) -> JSONResponse:
        return self.openai_models(request)

    @api.post("/v1/audio/transcriptions")
    async def v1_transcriptions(self, request: Request) -> Response:
        return await self.openai_transcriptions(request)

    def _refuse(self, code: str, status: int, message: str) -> JSONResponse:
        self._count_refusal(code, "upload")
        return JSONResponse({"error": code, "message": message}, status_code=status)

    def _refusal_message(self, code: str) -> str:
        """What a client refused by ``_admit`` is told (a stream, an upload, OpenAI's route alike)."""
        s = self.settings
        return {"busy": self._busy_message(), "client_limit": f"at most {s.max_per_client} connections per client",
                "client_rate": f"at most {s.connects_per_minute:g} new connections per minute per client"}.get(
            code, "refused: " + code.replace("_", " "))

    def _end_upload(self, client: str) -> None:
        """The upload slot ``_admit`` reserved is given back."""
        self.uploads -= 1
        self._leave(client)

    @api.post("/transcribe")
    async def transcribe(self, request: Request, chunk_ms: int | None = None) -> JSONResponse:
        s, model = self.settings, self.current
        client = request.client.host if request.client else "?"
        code, status, _ = await self._admit(request.headers, client, upload=True)
        if code:
            return self._refuse(code, status, self._refusal_message(code))
        try:  # the upload slot was reserved by _admit
            if chunk_ms is not None and chunk_ms not in model.chunk_choices:
                return self._refuse("bad_config", 400, f"chunk_ms {chunk_ms} is not one of {list(model.chunk_choices)}")
            try:
                body = await read_body(request, int(s.max_body_mb * 2**20), s.upload_read_s)
            except UploadRefused as err:
                return self._refuse(err.code, err.status, str(err))
            loop = asyncio.get_running_loop()
            try:  # the header is read, and the length checked, before anything is decoded
                audio = await loop.run_in_executor(self.upload_executor, lambda: load_audio_bytes(
                    body, max_duration_s=s.max_upload_s))
            except AudioReject as err:
                return self._refuse(err.reason, 413 if err.reason == "too_long" else 400, err.detail)
            del body
            result = await loop.run_in_executor(self.upload_executor, model.transcribe, audio.samples, chunk_ms)
            del result["word_list"], result["spans"]  # what times words (the OpenAI route's verbose formats)
            self._observe_rtf("upload", result)
            return JSONResponse({**result, "notes": list(audio.notes)})
        finally:
            self._end_upload(client)

    # ------------------------------------------------------------------ WebSocket
    @api.websocket("/ws")
    async def stream(self, ws: WebSocket) -> None:
        client = ws.client.host if ws.client else "?"
        code, _, proto = await self._admit(ws.headers, client)
        if code in ("origin_not_allowed", "unauthorized"):  # refused at the handshake: the page learns nothing
            self._count_refusal(code, "ws")
            await ws.close(code=1008)
            return
        await ws.accept(subprotocol=proto)
        if code:
            self._count_refusal(code, "ws")
            await close_with(ws, ProtocolError(code, self._refusal_message(code)))
            return
        model = self.current  # this stream's model to its end, whatever the alias does meanwhile
        key = model.version.version
        counted = {"live": False}  # pending (reserved by _admit) until it takes a stream slot
        try:
            await self._serve(ws, model, counted)
        finally:
            self._leave(client)
            if counted["live"]:
                self.live_by_version[key] -= 1
                if not self.live_by_version[key]:
                    del self.live_by_version[key]
            else:
                self.pending -= 1

    def _busy_message(self) -> str:
        return f"this replica serves {self.settings.max_streams} streams already; retry shortly"

    def _take_slot(self, key: str, counted: dict) -> bool:
        """A pending socket becomes a stream (an engine is about to be built), if the replica has room."""
        if self.load >= self.settings.max_streams:
            return False
        self.pending -= 1
        self.live_by_version[key] = self.live_by_version.get(key, 0) + 1
        counted["live"] = True
        return True

    async def _serve(self, ws: WebSocket, model, counted: dict) -> None:
        s = self.settings
        await ws.send_json({"type": "ready", "model": model.describe(), "sample_rate": SAMPLE_RATE,
                            "formats": sorted(FORMATS), "max_frame_s": MAX_FRAME_S})
        frames: asyncio.Queue = asyncio.Queue()
        backlog = Backlog(s.max_backlog_ms)
        guard = StreamGuard(s.min_speed, s.slack_s, s.max_frames_per_s, s.frame_burst, s.first_audio_s)
        receiver = asyncio.create_task(receive(ws, model.chunk_choices, frames, backlog, guard, s.idle_timeout_s))
        session: StreamSession | None = None
        loop = asyncio.get_running_loop()
        held: list = []  # a control item met while draining audio frames: handled next
        seen = 0  # the session's steps already counted in the metrics
        try:
            while True:
                item = held.pop() if held else await frames.get()
                if isinstance(item, ProtocolError):
                    self._count_refusal(item.code, "ws")
                    await close_with(ws, item)
                    return
                if item is DISCONNECTED:
                    return
                if not counted["live"] and not self._take_slot(model.version.version, counted):
                    self._count_refusal("busy", "ws")
                    await close_with(ws, ProtocolError("busy", self._busy_message()))
                    return
                # engines are built off the event loop: other streams' frames keep flowing meanwhile
                if isinstance(item, StreamConfig):
                    engine = await loop.run_in_executor(self.executor, model.engine, item.chunk_ms)
                    session = StreamSession(engine, catch_up=item.catch_up)
                    continue
                if session is None:
                    session = StreamSession(await loop.run_in_executor(self.executor, model.engine, None))
                if item is END:
                    events = await loop.run_in_executor(self.executor, session.finish)
                    seen = self._observe(session, events, seen)
                    for event in events:
                        await ws.send_json(event)
                    summary = session.summary()
                    self._observe_rtf("ws", summary)
                    await ws.send_json({**summary, "version": model.version.as_dict()})
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
                # tiny frames wait in the session until a whole piece is there: no thread-pool round trip each
                events = await loop.run_in_executor(self.executor, session.run) if session.ready else []
                seen = self._observe(session, events, seen)
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
            self.metrics.backpressure.labels(**self.metrics.ids).inc(backlog.waits)
            if session is not None:
                self.metrics.catch_up.labels(**self.metrics.ids).inc(session.stats.caught_up)

    def _observe(self, session: StreamSession, events: list[dict[str, Any]], seen: int) -> int:
        """The steps a live stream has run since step ``seen`` and its final words' delays; the steps seen now."""
        self.metrics.steps(session.stats.step_ms[seen:])
        self.metrics.finals(events)
        return len(session.stats.step_ms)


# ---------------------------------------------------------------------- building and running
def build_app(settings: ServeSettings, *, num_replicas: int | str = 1, num_cpus: float | None = None,
              autoscaling: dict[str, Any] | None = None):
    """The bound application; each replica asks Ray for ``num_cpus`` (default: its compute threads × torch
    threads). ``autoscaling`` (Ray Serve's ``autoscaling_config``) replaces ``num_replicas``."""
    cpus = num_cpus if num_cpus is not None else settings.compute_threads * settings.torch_threads
    options: dict[str, Any] = {"ray_actor_options": {"num_cpus": cpus},
                               # every socket is an ongoing request, pending ones too; the HTTP routes must get through
                               # while every slot is taken
                               "max_ongoing_requests": settings.max_streams + settings.max_pending + 8,
                               "graceful_shutdown_timeout_s": settings.graceful_shutdown_s,
                               "graceful_shutdown_wait_loop_s": min(1.0, settings.graceful_shutdown_s)}
    if autoscaling:
        options["autoscaling_config"] = autoscaling
    else:
        options["num_replicas"] = num_replicas
    ledger = None
    if settings.max_per_client or settings.connects_per_minute:
        ledger = ClientLedger.bind(settings.max_per_client, settings.connects_per_minute)
    return Recognizer.options(**options).bind(settings, ledger)


def app_builder(args: dict[str, Any]):
    """Ray Serve's application-builder entry point (``import_path: serving.app:app_builder`` in a
    Serve config / KubeRay RayService): ``args`` are ``ServeSettings`` fields plus ``num_replicas``/``autoscaling``."""
    args = dict(args)
    scale = {k: args.pop(k) for k in ("num_replicas", "num_cpus", "autoscaling") if k in args}
    return build_app(ServeSettings(**args), **scale)


def run(settings: ServeSettings, port: int = 8000, *, num_replicas: int = 1, num_cpus: float | None = None,
        blocking: bool = False, name: str = "whisperline") -> str:
    """Start (or join) Ray, Serve's HTTP proxy on 127.0.0.1:``port``, and the app; returns its base URL."""
    if not ray.is_initialized():
        main = threading.current_thread() is threading.main_thread()
        caller_sigterm = signal.getsignal(signal.SIGTERM) if main else None
        ray.init(include_dashboard=False, log_to_driver=False)
        if main:  # ray.init installs a SIGTERM handler that aborts the driver and leaves its processes running; a
            # SIGTERM before this returned (a service manager stopping a server just started) hit it
            signal.signal(signal.SIGTERM, caller_sigterm)
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(build_app(settings, num_replicas=num_replicas, num_cpus=num_cpus), name=name, route_prefix="/",
              blocking=blocking)
    return f"http://127.0.0.1:{port}"


__all__ = ["Recognizer", "ServeSettings", "app_builder", "build_app", "run"]
