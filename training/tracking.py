"""MLflow conventions of whisperline: where runs go, what every run is tagged with, how runs are found again.

Default tracking store: ``sqlite:///<cwd>/mlruns/mlflow.db`` with artifacts under ``mlruns/artifacts`` (any URI by
config or ``MLFLOW_TRACKING_URI``). Every run carries the tags of ``standard_tags`` (dataset versions, base weights
sha256, git commit, config hash) and a ``whisperline.run_key``: a retried or resumed run reopens the unfinished
run with its key instead of starting a new one.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

RUN_KEY = "whisperline.run_key"


def default_tracking_uri() -> str:
    if uri := os.environ.get("MLFLOW_TRACKING_URI"):
        return uri
    root = Path("mlruns").resolve()
    root.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{root / 'mlflow.db'}"


def artifact_root(tracking_uri: str) -> str | None:
    """Artifact location for new experiments of a local sqlite store (next to the database); None: the server's."""
    if tracking_uri.startswith("sqlite:///"):
        return (Path(tracking_uri.removeprefix("sqlite:///")).parent / "artifacts").as_uri()
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
    import time

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


def log_pyfunc_model(tracking_uri: str, run_id: str, code_path: str, artifacts: Mapping[str, str],
                     registered_name: str | None, name: str = "model", signature=None,
                     model_config: Mapping[str, Any] | None = None) -> tuple[str, str | None]:
    """Log a "models from code" pyfunc model into the run (and register it); (model URI, registered version)."""
    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    with mlflow.start_run(run_id=run_id):
        info = mlflow.pyfunc.log_model(name=name, python_model=code_path, artifacts=dict(artifacts),
                                       pip_requirements=["whisperline"], registered_model_name=registered_name,
                                       model_config=dict(model_config) if model_config else None,
                                       signature=signature or audio_signature({"audio_path": "string", "text": "string"}))
    # leaving start_run(run_id=…) marks the run FINISHED: callers set the final state afterwards
    version = getattr(info, "registered_model_version", None)
    return info.model_uri, None if version is None else str(version)
