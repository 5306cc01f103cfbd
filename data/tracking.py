"""MLflow conventions of whisperline: where runs go, what every run is tagged with, how runs are found again.

Default tracking store: ``sqlite:///<cwd>/mlruns/mlflow.db`` with artifacts under ``mlruns/artifacts`` (any URI by
config or ``MLFLOW_TRACKING_URI``). Every run carries the tags of ``standard_tags`` (dataset versions, base weights
sha256, git commit, config hash) and a ``whisperline.run_key``: a retried or resumed run reopens the unfinished
run with its key instead of starting a new one.

mlflow is imported inside the functions that call it: light code paths (the CLI, the serving app, the gate) import
this module for its conventions without paying for mlflow.
"""

from __future__ import annotations

import os
import subprocess
import time
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RUN_KEY = "whisperline.run_key"

# MLflow's own client retries a failed HTTP call 7 times with a doubling back-off (about 4 minutes) before it
# raises; a pipeline would hang that long on a dead server. Bounded here (~30 s, env overrides win); Ray workers
# import this module too, so they get the same bound.
os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")
# The main job prints its result table and the UI commands; MLflow's per-run URL lines and artifact progress bars
# (one per logged model) would bury them. The UI command the CLI prints finds every run.
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


class TrackingUnavailable(RuntimeError):
    """The MLflow tracking store cannot be reached: raised before any work starts."""


def require_tracking(tracking_uri: str, attempts: int = 3, wait_s: float = 2.0) -> None:
    """Fail fast, with a message that says what to do, when the tracking store is not usable: an HTTP server must
    answer ``/health`` (a few tries, ``wait_s`` apart, for a server that is still starting), a sqlite file must be
    creatable. Other schemes (databricks, …) are left to MLflow."""
    import urllib.error  # lazy: urllib.request loads http/ssl, which the light importers of this module never use
    import urllib.request

    if tracking_uri.startswith(("http://", "https://")):
        error: Exception | None = None
        for i in range(attempts):
            try:
                with urllib.request.urlopen(f"{tracking_uri.rstrip('/')}/health", timeout=10) as r:
                    if r.status == 200:
                        return
            except (OSError, urllib.error.URLError) as e:
                error = e
            if i + 1 < attempts:
                time.sleep(wait_s)
        raise TrackingUnavailable(
            f"MLflow tracking server {tracking_uri} is not reachable ({attempts} tries, {wait_s:.0f} s apart: {error}); "
            "start it (infra/mlflow/server.sh) or point tracking_uri / MLFLOW_TRACKING_URI at a running one")
    if tracking_uri.startswith("sqlite:///"):
        db = Path(tracking_uri.removeprefix("sqlite:///"))
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TrackingUnavailable(f"cannot create the MLflow store folder {db.parent}: {e}") from e
        if not os.access(db.parent, os.W_OK):
            raise TrackingUnavailable(f"the MLflow store folder {db.parent} is not writable")


def default_tracking_uri() -> str:
    if uri := os.environ.get("MLFLOW_TRACKING_URI"):
        return uri
    root = Path("mlruns").resolve()
    root.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlflow.db'}"


def artifact_root(tracking_uri: str) -> str | None:
    """Artifact location for new experiments of a local sqlite store (next to the database); None: the server's."""
    if tracking_uri.startswith("sqlite:///"):
        # sqlite:///relative/path is relative to the working directory (SQLAlchemy): so is its artifact folder
        return (Path(tracking_uri.removeprefix("sqlite:///")).resolve().parent / "artifacts").as_uri()
    return None


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).resolve().parent.parent)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10, cwd=Path(__file__).resolve().parent.parent)
        return out.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested config → MLflow params (dotted keys, values as strings, at most 6000 characters)."""
    out: dict[str, str] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = str(value)[:6000]
    return out


def client(tracking_uri: str):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)


def experiment_id(tracking_uri: str, name: str) -> str:
    c = client(tracking_uri)
    exp = c.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    return c.create_experiment(name, artifact_location=artifact_root(tracking_uri))


def open_run(tracking_uri: str, experiment: str, run_key: str, run_name: str, tags: Mapping[str, str],
             params: Mapping[str, str]) -> tuple[str, bool]:
    """The unfinished run with ``run_key`` (resumed=True) or a new one with params and tags logged."""
    c = client(tracking_uri)
    exp_id = experiment_id(tracking_uri, experiment)
    found = c.search_runs([exp_id], filter_string=f"tags.`{RUN_KEY}` = '{run_key}' and attributes.status != 'FINISHED'",
                          max_results=1, order_by=["attributes.start_time DESC"])
    if found:
        c.update_run(found[0].info.run_id, status="RUNNING")
        return found[0].info.run_id, True
    run = c.create_run(exp_id, run_name=run_name, tags={**tags, RUN_KEY: run_key})
    from mlflow.entities import Param

    items = list(params.items())
    for i in range(0, len(items), 100):
        c.log_batch(run.info.run_id, params=[Param(k, v) for k, v in items[i : i + 100]])
    return run.info.run_id, False


def finished_run(tracking_uri: str, experiment: str, run_key: str) -> str | None:
    """The newest FINISHED run with ``run_key`` (a stage that is already done), if any."""
    c = client(tracking_uri)
    exp = c.get_experiment_by_name(experiment)
    if exp is None:
        return None
    found = c.search_runs([exp.experiment_id], max_results=1, order_by=["attributes.start_time DESC"],
                          filter_string=f"tags.`{RUN_KEY}` = '{run_key}' and attributes.status = 'FINISHED'")
    return found[0].info.run_id if found else None


def log_metrics(tracking_uri: str, run_id: str, metrics: Mapping[str, float], step: int) -> None:
    from mlflow.entities import Metric

    ts = int(time.time() * 1000)
    client(tracking_uri).log_batch(run_id, metrics=[Metric(k, float(v), ts, step) for k, v in metrics.items()])


def audio_signature(outputs: Mapping[str, str], chunk_param: bool = False):
    """Signature of the whisperline pyfunc models: a DataFrame of ``audio_path`` in, the given columns out
    (``chunk_param``: an optional ``chunk_ms`` parameter, 0 = the model's own)."""
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, ParamSchema, ParamSpec, Schema

    return ModelSignature(inputs=Schema([ColSpec("string", "audio_path")]),
                          outputs=Schema([ColSpec(t, n) for n, t in outputs.items()]),
                          params=ParamSchema([ParamSpec("chunk_ms", "long", 0)]) if chunk_param else None)


def _log_model(mlflow, name: str, code_path: str, artifacts: Mapping[str, str], registered_name: str | None,
               model_config: Mapping[str, Any] | None, signature):
    return mlflow.pyfunc.log_model(name=name, python_model=code_path, artifacts=dict(artifacts),
                                   pip_requirements=["whisperline"], registered_model_name=registered_name,
                                   model_config=dict(model_config) if model_config else None,
                                   signature=signature or audio_signature({"audio_path": "string", "text": "string"}))


def log_pyfunc_model(tracking_uri: str, run_id: str, code_path: str, artifacts: Mapping[str, str],
                     registered_name: str | None, name: str = "model", signature=None,
                     model_config: Mapping[str, Any] | None = None) -> tuple[str, str | None]:
    """Log a "models from code" pyfunc model into the run (and register it); (model URI, registered version)."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    mlflow.start_run(run_id=run_id)
    try:
        with warnings.catch_warnings():
            # the signature is explicit (an audio path in, text out): an input example would be an audio file
            # path that does not exist where the model is loaded, so none is logged, on purpose
            warnings.filterwarnings("ignore", message=".*An input example was not provided")  # ANSI-coloured
            info = _log_model(mlflow, name, code_path, artifacts, registered_name, model_config, signature)
    finally:
        # not FINISHED here (the `with` form would mark it so): the caller still logs metrics and then sets the
        # final state, so a crash in between never leaves a FINISHED run with missing metrics
        mlflow.end_run(status="RUNNING")
    version = getattr(info, "registered_model_version", None)
    return info.model_uri, None if version is None else str(version)
