"""Register a recognizer spec as one MLflow model version; read a registered version back as a spec.

The version holds every file the recognizer needs (adapter, EMMA policy, hush word) as artifacts of a models-from-code
pyfunc (``recognizer.pyfunc_model``) whose ``model_config`` is the portable spec. Its tags say what it is
(``whisperline.kind``, ``chunk_ms``), what it was trained on (``dataset_versions``, ``base_sha256``), which code
(``git_commit``) and its key (``recognizer_key``: the spec, the artifacts' contents and the code), so registering
the same recognizer twice returns the existing version instead of a copy.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from data.tracking import audio_signature, client, experiment_id, git_commit, log_pyfunc_model
from recognizer.artifact import (RECOGNIZER_KINDS, SPEC_FILE, NotARecognizer, from_portable, portable, recognizer_kind,
                                 registered_name, spec_json)
from recognizer.card import write_card
from recognizer.spec import RecognizerSpec

EXPERIMENT = "whisperline-recognizers"
KEY_TAG = "recognizer_key"


def folder_sha256(path: str | Path) -> str:
    """Content hash of a folder: every file's relative path and bytes, in sorted order."""
    h = hashlib.sha256()
    root = Path(path)
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()


def recognizer_key(values: Mapping[str, Any], artifacts: Mapping[str, str], code: str) -> str:
    h = hashlib.sha256(spec_json(values).encode())
    for name in sorted(artifacts):
        h.update(f"{name}={folder_sha256(artifacts[name])}".encode())
    h.update(code.encode())
    return h.hexdigest()


def _dataset_versions(spec: RecognizerSpec) -> str:
    """What the recognizer's trained parts were trained on (the adapter's and policy's own records)."""
    # lazy: both pull torch
    from training.emma.artifact import META as POLICY_META
    from training.lora.adapter import ADAPTER_META

    versions: list[str] = []
    for folder, meta_file in ((spec.weights.adapter_dir, ADAPTER_META), (spec.decoding.emma_dir, POLICY_META)):
        if folder and (Path(folder) / meta_file).exists():
            meta = json.loads((Path(folder) / meta_file).read_text())
            for d in meta.get("datasets", []):
                if isinstance(d, dict) and d.get("version_id") and d["version_id"] not in versions:
                    versions.append(d["version_id"])
    return ",".join(versions)


def register_recognizer(tracking_uri: str, spec: RecognizerSpec, *, name: str | None = None,
                        tags: Mapping[str, str] | None = None) -> dict[str, str]:
    """Register ``spec`` (idempotent on its key); returns registered_model, version, run_id, kind, key."""
    # lazy: importing the pyfunc definition registers it with MLflow and pulls torch, as does data.weights
    from data.weights import checkpoint_sha256
    from recognizer import pyfunc_model

    values, artifacts = portable(spec)
    name = name or registered_name(spec.model)
    code = git_commit()
    key = recognizer_key(values, artifacts, code)
    kind = recognizer_kind(spec)
    c = client(tracking_uri)
    try:
        for mv in c.search_model_versions(f"name = '{name}'"):
            if mv.tags.get(KEY_TAG) == key:
                write_card(tracking_uri, name, str(mv.version))  # one registered before cards existed gets one
                return {"registered_model": name, "version": str(mv.version), "run_id": mv.run_id, "kind": kind,
                        "key": key, "reused": "true"}
    except Exception:  # no such registered model yet
        pass
    run_tags = {"whisperline.kind": f"recognizer:{kind}", "base_model": spec.model,
                "base_sha256": checkpoint_sha256(spec.model), "git_commit": code, KEY_TAG: key,
                "dataset_versions": _dataset_versions(spec), "spec": spec_json(values)[:5000], **(tags or {})}
    run = c.create_run(experiment_id(tracking_uri, EXPERIMENT), run_name=f"recognizer-{kind}-{spec.chunk_ms}ms",
                       tags=run_tags)
    with tempfile.TemporaryDirectory() as tmp:
        # the spec travels twice: as the pyfunc's model_config (what loading uses) and as a plain JSON artifact
        # (what `mlflow artifacts download` shows a person)
        spec_dir = Path(tmp) / "spec"
        spec_dir.mkdir()
        (spec_dir / SPEC_FILE).write_text(json.dumps(values, indent=1, sort_keys=True))
        _, version = log_pyfunc_model(
            tracking_uri, run.info.run_id, pyfunc_model.__file__, {**artifacts, "spec": str(spec_dir)}, name,
            name="recognizer", model_config={"spec": values},
            signature=audio_signature({"audio_path": "string", "text": "string", "chunk_ms": "long"},
                                      chunk_param=True))
    c.set_terminated(run.info.run_id, "FINISHED")
    assert version is not None
    for k, v in {"whisperline.kind": kind, "chunk_ms": str(spec.chunk_ms), KEY_TAG: key, "git_commit": code,
                 "dataset_versions": run_tags["dataset_versions"]}.items():
        c.set_model_version_tag(name, version, k, v)
    write_card(tracking_uri, name, version)
    return {"registered_model": name, "version": version, "run_id": run.info.run_id, "kind": kind, "key": key,
            "reused": "false"}


def parse_model_uri(uri: str) -> tuple[str, str | None, str | None]:
    """``models:/NAME@ALIAS`` or ``models:/NAME/VERSION`` → (name, alias, version)."""
    if not uri.startswith("models:/"):
        raise ValueError(f"expected models:/NAME@ALIAS or models:/NAME/VERSION, got {uri!r}")
    rest = uri.removeprefix("models:/")
    if "@" in rest:
        name, alias = rest.split("@", 1)
        return name, alias, None
    name, _, version = rest.partition("/")
    if not version:
        raise ValueError(f"{uri!r} names no version or alias")
    return name, None, version


def load_spec(tracking_uri: str, uri: str, dst: str | Path | None = None) -> tuple[RecognizerSpec, dict[str, str]]:
    """A registered recognizer's spec with its artifacts downloaded (under ``dst``); and the version it came from."""
    import mlflow  # lazy: parse_model_uri's callers need no MLflow
    from mlflow.models import Model

    name, alias, version = parse_model_uri(uri)
    c = client(tracking_uri)
    mv = c.get_model_version_by_alias(name, alias) if alias else c.get_model_version(name, version)
    kind = mv.tags.get("whisperline.kind", "")
    if kind not in RECOGNIZER_KINDS:
        raise NotARecognizer(f"{name} v{mv.version} is not a registered recognizer (kind {kind!r}): the pipeline's "
                             "promote stage registers them (recognizer.registry.register_recognizer)")
    mlflow.set_tracking_uri(tracking_uri)
    mlflow.set_registry_uri(tracking_uri)
    dst = Path(dst or tempfile.mkdtemp(prefix="recognizer-"))
    local = Path(mlflow.artifacts.download_artifacts(f"models:/{name}/{mv.version}", dst_path=str(dst)))
    # the pyfunc flavor lists each artifact's place in the downloaded model folder
    listed = Model.load(str(local)).flavors["python_function"].get("artifacts", {})
    artifacts = {a: str(local / entry["path"]) for a, entry in listed.items()}
    if "spec" not in artifacts:
        raise NotARecognizer(f"{name} v{mv.version} holds no recognizer spec (artifacts: {sorted(artifacts)})")
    values = json.loads((Path(artifacts.pop("spec")) / SPEC_FILE).read_text())
    spec = from_portable(values, artifacts)
    spec = replace(spec, name=f"{name} v{mv.version}" + (f" @{alias}" if alias else ""))
    return spec, {"registered_model": name, "version": str(mv.version), "alias": alias or "", "run_id": mv.run_id,
                  "kind": kind}


__all__ = ["EXPERIMENT", "KEY_TAG", "folder_sha256", "load_spec", "parse_model_uri", "recognizer_key",
           "register_recognizer"]
