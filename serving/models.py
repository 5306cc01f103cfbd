"""What a server serves: the MLflow registry version behind an alias, loaded once per replica.

The version's own pyfunc model (``recognizer.pyfunc_model`` for a registered recognizer, the spec the evaluate stage
scores; ``training.causal.pyfunc_model`` / ``training.emma.pyfunc_model`` for a stage's adapter) does the loading
(artifacts, base weights checked against the recorded sha256), so a served model is exactly what the registry
promoted; the server then asks it for one engine per stream (``engine(chunk_ms)``). For speed the loaded weights
are then made inference-only: the LoRA adapter merged into them and the Linear layers lowered to ``precision``
(``streaming.quantize``; "auto" by default, resolved per CPU path by ``streaming.precision``: bf16 where the CPU has
native bf16, else int8 on the encoder; docs/decisions/precision-per-cpu.md).

A registered recognizer runs the precision its spec names unless the server is given one: then its spec's
precision is replaced at load (MLflow's load-time ``model_config``), before any weight is read. Either way the
precision is resolved on this machine (``streaming.precision.resolve_precision``), as the evaluate stage resolves it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from data.tracking import client
from serving.session import StreamSession
from streaming.precision import resolve_precision

log = logging.getLogger("whisperline.serving")
WARM_UP_S = 10.0


UPLOAD_PIECE = 16_000  # samples an upload is pushed in (1 s)


class UploadCancelled(RuntimeError):
    """An upload's transcription stopped because its client is gone."""


def _hand_out(events: list[dict[str, Any]], on_final: Callable[[list[str]], None] | None) -> None:
    if on_final is not None:
        for event in events:
            if event["type"] == "final":
                on_final(list(event["words"]))


class ModelNotFound(LookupError):
    """No registered version behind the alias (or no such registered model)."""


@dataclass(frozen=True)
class ServedVersion:
    registered_model: str
    version: str
    alias: str
    run_id: str | None
    base_model: str | None
    base_sha256: str | None
    dataset_versions: str | None
    kind: str  # "causal" (stability rule), "emma" (read/write policy); a recognizer's own: "two-pass", "causal-beam"
    created_ms: int | None = None  # when the version was registered (epoch ms)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve(tracking_uri: str, registered_model: str, alias: str) -> ServedVersion:
    """The version behind ``alias`` now, with what it was trained from (its run's tags)."""
    c = client(tracking_uri)
    try:
        mv = c.get_model_version_by_alias(registered_model, alias)
    except Exception as err:  # MLflow raises RestException / MlflowException for both unknown name and alias
        raise ModelNotFound(f"no version of {registered_model!r} has the alias {alias!r} in {tracking_uri} "
                            f"({type(err).__name__}: {str(err)[:200]})") from err
    tags = c.get_run(mv.run_id).data.tags if mv.run_id else {}
    run_kind = tags.get("whisperline.kind", "")
    if run_kind.startswith("recognizer:"):  # a registered recognizer: two-pass, causal, causal-beam, emma
        kind = run_kind.removeprefix("recognizer:")
    else:  # an adapter or a sweep trial registered by its training stage
        kind = "emma" if run_kind.startswith("emma") or "t_emma" in tags else "causal"
    return ServedVersion(registered_model, str(mv.version), alias, mv.run_id, tags.get("base_model"),
                         tags.get("base_sha256"), tags.get("dataset_versions"), kind, mv.creation_timestamp)


class ServedModel:
    """One loaded registry version: engines for streams, whole-file transcription for the HTTP endpoint."""

    def __init__(self, version: ServedVersion, python_model: Any, resolved: Any) -> None:
        self.version = version
        self.python_model = python_model
        self.resolved = resolved  # streaming.precision.ResolvedPrecision: what it asked for, what runs, and why
        self.precision = resolved.effective
        self.chunk_choices: tuple[int, ...] = tuple(python_model.chunk_choices)
        self.default_chunk_ms = self.chunk_choices[-1] if version.kind == "emma" and not hasattr(
            python_model, "spec") else int(
            getattr(python_model, "meta", {}).get("chunk_ms", self.chunk_choices[-1]))
        self._lock = threading.Lock()  # engines are built from shared weights: never while they change

    def engine(self, chunk_ms: int | None = None):
        with self._lock:
            return self.python_model.engine(chunk_ms or self.default_chunk_ms)

    def transcribe(self, samples: np.ndarray, chunk_ms: int | None = None,
                   on_final: Callable[[list[str]], None] | None = None,
                   stop: threading.Event | None = None) -> dict[str, Any]:
        """The whole audio streamed through a fresh engine, as a live stream would be (what the pyfunc's
        ``predict`` does for a file, and past 30 s too: in segments). ``on_final`` gets each run of words as it
        becomes final (an upload answered as it is transcribed); ``stop`` set ends the work early (its client
        left). Also returns the words and the segments' spans (``Segmented.spans``: what times words)."""
        session = StreamSession(self.engine(chunk_ms), catch_up=False)  # a file: every chunk its own step
        # pushed a second at a time so that finals come out along the way; the session feeds the engine its own
        # pieces whatever the push size, so the transcript is the same as one push of the whole file
        for i in range(0, len(samples), UPLOAD_PIECE):
            if stop is not None and stop.is_set():
                raise UploadCancelled("the client left")
            session.push(samples[i : i + UPLOAD_PIECE])
            _hand_out(session.run(), on_final)
        _hand_out(session.finish(), on_final)
        return {**session.summary(), "type": "transcript", "version": self.version.as_dict(),
                "word_list": session.words, "spans": list(session.engine.spans)}

    def warm_up(self, seconds: float = WARM_UP_S) -> float:
        """Stream ``seconds`` of noise through a fresh engine once, before the replica takes traffic; returns the
        wall time. A kernel library's first call at each shape is slow (FBGEMM generates its int8 kernels then), and
        without this the first stream a server takes pays for it and falls behind (docs/decisions/
        precision-per-cpu.md). The verifier's window reaches its full length within 8 s, so 10 s meets every shape a
        stream will; noise this loud, not silence, is decoded like speech."""
        started = time.perf_counter()
        noise = np.random.default_rng(0).normal(0.0, 0.05, int(seconds * 16000)).astype(np.float32)
        self.transcribe(noise)
        return time.perf_counter() - started

    def describe(self) -> dict[str, Any]:
        r = self.resolved
        return {**self.version.as_dict(), "precision": r.effective, "precision_requested": r.requested,
                "precision_reason": r.reason, "cpu": dict(r.cpu), "chunk_ms": self.default_chunk_ms,
                "chunk_ms_choices": list(self.chunk_choices)}


def recognizer_spec(model_uri: str) -> dict[str, Any] | None:
    """The portable spec of a registered recognizer (its pyfunc's ``model_config``), None for another pyfunc (an
    adapter version): read from the version's MLmodel file alone, before anything is loaded."""
    # lazy: pulls mlflow, needed only where a version is read
    from mlflow.models import get_model_info
    from mlflow.models.model import MODEL_CONFIG  # the pyfunc flavor's key of its model_config in MLmodel

    config = get_model_info(model_uri).flavors.get("python_function", {}).get(MODEL_CONFIG) or {}
    return config.get("spec")


def load(tracking_uri: str, version: ServedVersion, precision: str | None = None) -> ServedModel:
    """Load ``version`` through its own pyfunc model at ``precision`` (None: what the version names — a recognizer's
    spec, "auto" for an adapter version), resolved on this machine; its weights made inference-only."""
    # lazy: mlflow, and torch through training.lora, only where a version is loaded
    import mlflow

    from training.lora import merge_adapter

    if precision is not None:
        resolve_precision(precision)  # an unknown name is refused before anything is downloaded
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    uri = f"models:/{version.registered_model}/{version.version}"
    spec = recognizer_spec(uri) if precision is not None else None
    # a recognizer whose precision is overridden: its spec with the precision replaced, so its pyfunc loads the
    # weights at that precision the first time (the spec is the only key its model_config has, the only one MLflow
    # lets a load override; every registered copy of the pyfunc reads it, older ones too)
    if spec is not None:  # schema 2 holds it in its weights group, schema 1 (older versions) at the top
        spec = ({**spec, "weights": {**spec["weights"], "precision": precision}} if "weights" in spec
                else {**spec, "precision": precision})
    config = {"spec": spec} if spec is not None else None
    python_model = mlflow.pyfunc.load_model(uri, model_config=config).unwrap_python_model()
    if hasattr(python_model, "spec"):
        # a registered recognizer is served as registered and evaluated (the same words as `whisperline evaluate
        # models:/…` on this machine): its pyfunc loaded every weight through the one resolver
        return _warm(ServedModel(version, python_model, resolve_precision(python_model.spec.weights.precision)))
    resolved = resolve_precision("auto" if precision is None else precision)
    model = python_model.model
    merge_adapter(model)  # no-op where the pyfunc already merged (EMMA's load_tuned)
    if resolved.lowering:
        from streaming.quantize import lower_precision  # lazy: torch

        lower_precision(model, resolved.lowering)
    model.eval()
    return _warm(ServedModel(version, python_model, resolved))


def _warm(served: ServedModel) -> ServedModel:
    """A loaded version warmed up before it is served (a first load and every hot swap alike)."""
    took = served.warm_up()
    log.info("version %s warmed up at %s in %.1f s", served.version.version, served.precision, took)
    return served


__all__ = ["ModelNotFound", "ServedModel", "ServedVersion", "load", "recognizer_spec", "resolve"]
