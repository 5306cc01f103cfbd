"""The live-serving commands of the CLI (``whisperline serve-model``, ``whisperline stream-file``), registered on
the one app by ``flows.cli``. Ray Serve, the serving app, the client and the metrics are imported inside the
commands (``whisperline --help`` must not load them)."""

from __future__ import annotations

import json
import signal
import statistics
import threading
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from data.tracking import default_tracking_uri
from serving.settings import TOKEN_ENV, read_token
from streaming.precision import REQUESTS

STOP_SERVE_S = 6.0  # of the 10 s a stop may take: the rest is Ray's own shutdown


def serve_model(
    alias: Annotated[str, typer.Option(help="registry alias to serve (followed: a moved alias is hot-swapped)")] = "champion",
    model: Annotated[str, typer.Option(help="registered model name (the pipeline promotes recognizers here)")] = (
        "whisperline-recognizer-tiny.en"),
    port: Annotated[int, typer.Option(help="HTTP/WebSocket port on 127.0.0.1")] = 8000,
    tracking_uri: Annotated[Optional[str], typer.Option(help="MLflow tracking/registry URI")] = None,
    replicas: Annotated[int, typer.Option(help="Ray Serve replicas")] = 1,
    max_streams: Annotated[int, typer.Option(help="live streams per replica")] = 8,
    compute_threads: Annotated[int, typer.Option(help="engine threads per replica")] = 2,
    torch_threads: Annotated[int, typer.Option(help="torch threads per engine step")] = 1,
    precision: Annotated[Optional[str], typer.Option(
        help="auto | fp32 | bf16-all | bf16-encoder | int8-encoder | int8-all: every version served at it, registered "
             "recognizers too (default: the precision the version names, 'auto' for an adapter version); resolved on "
             "this machine: bf16 only where the CPU has native bf16, else fp32")] = None,
    poll_s: Annotated[float, typer.Option(help="seconds between registry checks of the alias")] = 5.0,
    token_file: Annotated[Optional[str], typer.Option(help="a file holding the bearer token /ws and /transcribe "
                                                         "require (else $WHISPERLINE_SERVE_TOKEN; neither: none)")] = None,
    allowed_origin: Annotated[Optional[list[str]], typer.Option(help="a browser origin allowed to use /ws and "
                                                                      "/transcribe (repeat; default: loopback pages)")] = None,
    max_per_client: Annotated[int, typer.Option(help="open streams + uploads per client address (0: no limit)")] = 4,
) -> None:
    """The registry version behind ALIAS as a live Ray Serve app on 127.0.0.1: browser page at /, WebSocket
    streams at /ws, whole files at POST /transcribe, /healthz and /version (Ctrl-C stops). In front of it on a
    network: an ingress that terminates TLS (docs/serving.md)."""
    if precision is not None and precision not in REQUESTS:  # refused here, not in every replica
        raise typer.BadParameter(f"one of {', '.join(REQUESTS)}, got {precision!r}", param_hint="--precision")

    from serving.app import ServeSettings, run

    settings = ServeSettings(tracking_uri=tracking_uri or default_tracking_uri(), registered_model=model, alias=alias,
                             precision=precision, max_streams=max_streams,
                             torch_threads=torch_threads, compute_threads=compute_threads, poll_s=poll_s,
                             token_file=token_file, max_per_client=max_per_client,
                             **({"allowed_origins": tuple(allowed_origin)} if allowed_origin else {}))
    settings.token()  # an unreadable or empty token file fails here, not in every replica
    from serving.models import ModelNotFound, resolve

    try:  # an unknown model or alias fails here with its name, not as Ray Serve's "deploying application failed"
        resolve(settings.tracking_uri, model, alias)
    except ModelNotFound as err:
        raise typer.BadParameter(str(err), param_hint="--model / --alias") from err
    # SIGTERM (a service manager, `kill`) stops as Ctrl-C does: without it the interpreter died at once and left
    # the Ray processes it had started running with no parent
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        url = run(settings, port, num_replicas=replicas)  # (it keeps this handler over ray.init's)
        typer.echo(f"serving {model}@{alias} at {url} (page {url}/, WebSocket {url.replace('http', 'ws')}/ws, "
                   f"OpenAI API {url}/v1). Ctrl-C stops.")
        typer.echo(_precision_line(url))
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        typer.echo("stopping", err=True)
    finally:
        stop_serving()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def stop_serving(serve_s: float = STOP_SERVE_S) -> None:
    """Serve's app and proxy down (its replicas get ``graceful_shutdown_s`` to close their streams), at most
    ``serve_s``; then the Ray instance this process started, and with it every process Ray started."""
    import ray
    from ray import serve

    if not ray.is_initialized():
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the shutdown short
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    done = threading.Thread(target=serve.shutdown, name="serve-shutdown", daemon=True)
    done.start()
    done.join(serve_s)
    ray.shutdown()


def _precision_line(url: str) -> str:
    """What the replica runs at and why (its /version): the resolution is logged inside the replica, where an
    operator at the console does not see it."""
    import urllib.request  # lazy: http/ssl, not for --help

    try:
        with urllib.request.urlopen(f"{url}/version", timeout=30) as response:
            v = json.loads(response.read())
    except Exception as err:  # the server answers its own clients; a failed look here must not stop it
        return f"precision: not known yet ({type(err).__name__})"
    cpu = v.get("cpu") or {}
    return (f"precision {v.get('precision')} (asked {v.get('precision_requested')}): {v.get('precision_reason')}; "
            f"CPU {cpu.get('model')}")


def reference_text(value: str) -> str:
    """``--reference``: the text of the file it names, else the text itself. A transcript is often longer than a
    file name may be (the OS refuses names past 255 bytes), so only a value that could be a path is tried as one."""
    try:
        path = Path(value)
        if "\n" not in value and path.is_file():
            return path.read_text(encoding="utf-8")
    except (OSError, ValueError):  # too long a name, a NUL byte: not a path, so text
        pass
    return value


def stream_file_cmd(
    path: Annotated[str, typer.Argument(help="an audio file (any rate, any length)")],
    url: Annotated[str, typer.Option(help="the serve-model server")] = "http://127.0.0.1:8000",
    realtime: Annotated[bool, typer.Option(help="send at the audio's own pace, as a microphone")] = True,
    frame_ms: Annotated[int, typer.Option(help="frame size sent")] = 100,
    reference: Annotated[Optional[str], typer.Option(help="a reference transcript (text or a .txt file): WER")] = None,
    token_file: Annotated[Optional[str], typer.Option(help="a file holding the server's bearer token (default: "
                                                      f"${TOKEN_ENV}, else none)")] = None,
) -> None:
    """Stream a file to a running serve-model over its WebSocket; print the final transcript, the version that
    served it and the final-word latencies the server reported."""
    from serving.client import stream_file

    ref = reference_text(reference) if reference else None  # a bad path fails before any audio is sent
    token = read_token(token_file)  # the server's own rule: the file, else the environment
    result = stream_file(url, path, frame_ms=frame_ms, realtime=realtime, token=token)
    out = {"version": result.ready.get("model"), "text": result.text, "audio_ms": result.summary.get("audio_ms"),
           "rtf": result.summary.get("rtf"), "end_lag_ms": result.end_lag_ms}
    lat = result.final_latencies_ms()
    if lat:
        out["final_latency_ms"] = {"median": round(statistics.median(lat), 1),
                                   "p90": round(sorted(lat)[int(0.9 * (len(lat) - 1))], 1), "words": len(lat)}
    if ref is not None:
        from evaluation.metrics import wer
        from evaluation.repetition import utterance_repetition

        out["wer"] = round(wer([ref], [result.text]), 4)
        out.update(utterance_repetition(result.text, ref))  # finals said again that the reference says once
    typer.echo(json.dumps(out, indent=2, default=str))
