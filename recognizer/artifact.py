"""One recognizer = one MLflow model version.

A spec names files on the machine that trained it (an adapter, an EMMA policy, a hush word). Registering turns it
into a *portable* spec (every path replaced by the name of an MLflow artifact) plus those artifacts, logged with
the models-from-code pyfunc ``recognizer.pyfunc_model``; loading resolves the names back to the downloaded files.
Whatever loads a version — the pyfunc, the server, ``whisperline evaluate models:/NAME@ALIAS`` — gets the same
spec and builds the recognizer through ``recognizer.build.build``. A version registered under an older spec schema
is read through ``recognizer.spec.from_dict``: it builds the same recognizer or is refused, naming its schema.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from recognizer.spec import OURS, RecognizerSpec, folders, from_dict, with_folders

# spec fields that name a folder, and the artifact each becomes
ARTIFACT_FIELDS = {("weights", "adapter_dir"): "adapter", ("decoding", "emma_dir"): "emma_policy",
                   ("second_pass", "hush_dir"): "hush_word"}
_V1_FIELDS = {field: artifact for (_, field), artifact in ARTIFACT_FIELDS.items()}  # schema 1: the same, flat
KINDS = OURS  # what can be registered: our streaming systems (the peers are not ours to ship)
RECOGNIZER_KINDS = ("causal", "causal-beam", "emma", "two-pass")  # what `recognizer_kind` names a version
SPEC_FILE = "recognizer_spec.json"
REGISTERED_PREFIX = "whisperline-recognizer"


class NotARecognizer(ValueError):
    """A spec that cannot be registered (a peer, an offline reference) or a model version that is not one."""


def registered_name(model: str) -> str:
    """One registered model per base model; its versions are the candidate recognizers."""
    return f"{REGISTERED_PREFIX}-{model}"


def recognizer_kind(spec: RecognizerSpec) -> str:
    """What a team calls it: causal (greedy/beam), emma, two-pass."""
    if spec.kind == "two-pass":
        return "two-pass"
    if spec.decoding.emma_dir:
        return "emma"
    return "causal-beam" if spec.decoding.beam_size > 1 else "causal"


def portable(spec: RecognizerSpec) -> tuple[dict[str, Any], dict[str, str]]:
    """(the spec with artifact names in place of paths, {artifact name: local folder})."""
    if spec.kind not in KINDS:
        raise NotARecognizer(f"{spec.name!r} is a {spec.kind!r} system; only {KINDS} are registered recognizers")
    artifacts, names = {}, {}
    for key, path in folders(spec).items():
        if not Path(path).is_dir():
            raise FileNotFoundError(f"{spec.name!r}: {'.'.join(key)} {path} is not a folder")
        artifacts[ARTIFACT_FIELDS[key]] = str(Path(path).resolve())
        names[key] = f"artifact:{ARTIFACT_FIELDS[key]}"
    return with_folders(spec, names).as_dict(), artifacts


def from_portable(values: Mapping[str, Any], artifacts: Mapping[str, str]) -> RecognizerSpec:
    """The spec back (any schema ``recognizer.spec.from_dict`` reads), its artifact names resolved to
    ``artifacts`` (the loaded model's local copies)."""
    values = dict(values)
    if values.get("schema", 1) == 1:  # flat: resolve before converting, as it was registered
        values.update({f: _resolve(values[f], artifacts) for f in _V1_FIELDS if isinstance(values.get(f), str)})
        return from_dict(values)
    spec = from_dict(values)
    return with_folders(spec, {key: _resolve(ref, artifacts) for key, ref in folders(spec).items()})


def _resolve(ref: str, artifacts: Mapping[str, str]) -> str:
    if not ref.startswith("artifact:"):
        return ref
    name = ref.removeprefix("artifact:")
    if name not in artifacts:
        raise NotARecognizer(f"the spec names artifact {name!r} but the model holds {sorted(artifacts)}")
    return str(artifacts[name])


def spec_json(values: Mapping[str, Any]) -> str:
    return json.dumps(dict(values), sort_keys=True)


def with_chunk(spec: RecognizerSpec, chunk_ms: int | None) -> RecognizerSpec:
    """The spec at another chunk size (only where the adapter was trained for several)."""
    return spec if chunk_ms in (None, spec.chunk_ms) else replace(spec, chunk_ms=int(chunk_ms))


__all__ = ["ARTIFACT_FIELDS", "KINDS", "RECOGNIZER_KINDS", "NotARecognizer", "SPEC_FILE", "from_portable", "portable",
           "recognizer_kind", "registered_name", "spec_json", "with_chunk"]
