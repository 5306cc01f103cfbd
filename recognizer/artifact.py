"""One recognizer = one MLflow model version.

A spec names files on the machine that trained it (an adapter, an EMMA policy, a hush word). Registering turns it
into a *portable* spec (every path replaced by the name of an MLflow artifact) plus those artifacts, logged with
the models-from-code pyfunc ``recognizer.pyfunc_model``; loading resolves the names back to the downloaded files.
Whatever loads a version — the pyfunc, the server, ``whisperline evaluate models:/NAME@ALIAS`` — gets the same
spec and builds the recognizer through ``evaluation.systems.build``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from evaluation.systems import SystemSpec

# spec fields that name a folder, and the artifact each becomes
ARTIFACT_FIELDS = {"adapter_dir": "adapter", "emma_dir": "emma_policy", "hush_dir": "hush_word"}
KINDS = ("causal", "two-pass")  # what can be registered: our streaming systems (the peers are not ours to ship)
RECOGNIZER_KINDS = ("causal", "causal-beam", "emma", "two-pass")  # what `recognizer_kind` names a version
SPEC_FILE = "recognizer_spec.json"
REGISTERED_PREFIX = "whisperline-recognizer"


class NotARecognizer(ValueError):
    """A spec that cannot be registered (a peer, an offline reference) or a model version that is not one."""


def registered_name(model: str) -> str:
    """One registered model per base model; its versions are the candidate recognizers."""
    return f"{REGISTERED_PREFIX}-{model}"


def recognizer_kind(spec: SystemSpec) -> str:
    """What a team calls it: causal (greedy/beam), emma, two-pass."""
    if spec.kind == "two-pass":
        return "two-pass"
    if spec.emma_dir:
        return "emma"
    return "causal-beam" if spec.beam_size and spec.beam_size > 1 else "causal"


def portable(spec: SystemSpec) -> tuple[dict[str, Any], dict[str, str]]:
    """(the spec with artifact names in place of paths, {artifact name: local folder})."""
    if spec.kind not in KINDS:
        raise NotARecognizer(f"{spec.name!r} is a {spec.kind!r} system; only {KINDS} are registered recognizers")
    values, artifacts = spec.as_dict(), {}
    for field, artifact in ARTIFACT_FIELDS.items():
        path = values.get(field)
        if path is None:
            continue
        if not Path(path).is_dir():
            raise FileNotFoundError(f"{spec.name!r}: {field} {path} is not a folder")
        artifacts[artifact] = str(Path(path).resolve())
        values[field] = f"artifact:{artifact}"
    return values, artifacts


def from_portable(values: Mapping[str, Any], artifacts: Mapping[str, str]) -> SystemSpec:
    """The spec back, its artifact names resolved to ``artifacts`` (the loaded model's local copies)."""
    known = {f.name for f in fields(SystemSpec)}
    unknown = set(values) - known
    if unknown:
        raise NotARecognizer(f"the recognizer spec has fields this code does not know: {sorted(unknown)}")
    resolved = dict(values)
    for field, artifact in ARTIFACT_FIELDS.items():
        ref = resolved.get(field)
        if isinstance(ref, str) and ref.startswith("artifact:"):
            name = ref.removeprefix("artifact:")
            if name not in artifacts:
                raise NotARecognizer(f"the spec names artifact {name!r} but the model holds {sorted(artifacts)}")
            resolved[field] = str(artifacts[name])
    return SystemSpec(**resolved)


def spec_json(values: Mapping[str, Any]) -> str:
    return json.dumps(dict(values), sort_keys=True)


def with_chunk(spec: SystemSpec, chunk_ms: int | None) -> SystemSpec:
    """The spec at another chunk size (only where the adapter was trained for several)."""
    return spec if chunk_ms in (None, spec.chunk_ms) else replace(spec, chunk_ms=int(chunk_ms))


__all__ = ["ARTIFACT_FIELDS", "KINDS", "RECOGNIZER_KINDS", "NotARecognizer", "SPEC_FILE", "from_portable", "portable",
           "recognizer_kind", "registered_name", "spec_json", "with_chunk"]
