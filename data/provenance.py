"""Provenance of trained artifacts: the training data an artifact records about itself, and the leakage guard of an
evaluation that reads it from the artifacts being scored instead of trusting the caller.

Each artifact writes, at training time, the dataset versions (``dataset_ref``: name, version id, path, …) and the
splits it trained on into its metadata file:

- a causal LoRA adapter (per-chunk or random-chunk): ``whisperline_adapter.json`` → ``datasets``, ``train_splits``;
- a hush word: ``hush_word.json`` → ``datasets``, ``train_splits``;
- an EMMA policy: ``policy.json`` → ``datasets``, ``train_splits`` (or ``config.datasets`` / ``config.splits``)
  and, for a policy trained on a causal LoRA adapter, that adapter's own provenance (``adapter_provenance``, or
  read from ``config.adapter_dir``): the policy was shaped by what the adapter saw.

An artifact that records no training datasets, or not the splits it trained on, is refused (``ProvenanceError``):
an unknown provenance cannot be shown to be held out. So is one whose recorded dataset version is no longer where it
says, or holds another version id there: its content (the hashes the guard compares) cannot be read, unless the
artifact carries that content itself. An artifact shipped with the code (the served spec's hush word in
``configs/``) travels without its datasets: ``freeze_training_audio`` writes the content hashes of its training
audio beside it (``training_audio.json.gz``), and the guard compares those.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data import fs
from data.leakage import LeakageError, content_hashes

# the metadata files that record an artifact's training data (training.lora.adapter.ADAPTER_META,
# streaming.hush.frontend.save_hush_word, training.emma.artifact.META); named here, so reading them needs no torch
ADAPTER_META, HUSH_META, POLICY_META = "whisperline_adapter.json", "hush_word.json", "policy.json"
KINDS = {ADAPTER_META: "adapter", HUSH_META: "hush word", POLICY_META: "EMMA policy"}
# the content hashes of an artifact's training audio, beside it (an artifact that travels without its datasets); the
# first 64 bits of each hash: a chance match can only refuse an evaluation, never let a leak through
FROZEN, FROZEN_HEX = "training_audio.json.gz", 16


class ProvenanceError(LeakageError):
    """An artifact does not record (resolvably) what it was trained on, so its evaluation cannot be shown held out."""


@dataclass(frozen=True)
class TrainingRef:
    """One dataset version an artifact trained on: where it is, its version id, the splits read, who recorded it."""

    path: str
    version_id: str
    splits: tuple[str, ...]
    name: str | None = None
    recorded_by: str = ""  # "<artifact dir> (<kind>)", or "the caller"


def _meta_file(artifact_dir: Path) -> Path:
    found = [artifact_dir / f for f in KINDS if (artifact_dir / f).is_file()]
    if not found:
        raise ProvenanceError(f"{artifact_dir}: not a trained artifact whisperline can read the training data of "
                              f"(none of {', '.join(KINDS)}); an artifact of unknown provenance is not scored")
    return found[0]


def _refs(datasets: Any, splits: Any, where: str) -> list[TrainingRef]:
    """``datasets`` as recorded (``dataset_ref`` dicts, or plain paths in older EMMA configs) + ``splits``."""
    if not datasets:
        raise ProvenanceError(f"{where} records no training datasets: retrain it with this code (which records "
                              "them), since an artifact of unknown provenance is not scored")
    if not splits or isinstance(splits, str):
        raise ProvenanceError(f"{where} records its training datasets but not the splits it trained on "
                              "(train_splits): retrain it with this code, since held-out audio cannot be ruled out")
    refs = []
    for d in datasets:
        if isinstance(d, str):
            d = {"path": d}
        if not isinstance(d, dict) or not d.get("path"):
            raise ProvenanceError(f"{where}: a recorded training dataset has no path: {d!r}")
        refs.append(TrainingRef(str(d["path"]), str(d.get("version_id") or ""), tuple(splits), d.get("name"), where))
    return refs


def artifact_training_data(artifact_dir: str | Path) -> list[TrainingRef]:
    """The dataset versions and splits ``artifact_dir`` (an adapter, hush word or EMMA policy folder) records it was
    trained on; an EMMA policy also carries its adapter's. ``ProvenanceError`` when it records none."""
    artifact_dir = Path(artifact_dir)
    meta_path = _meta_file(artifact_dir)
    where = f"{artifact_dir} ({KINDS[meta_path.name]})"
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as err:
        raise ProvenanceError(f"{where}: {meta_path.name} is unreadable ({err})") from err
    if meta_path.name != POLICY_META:
        return _refs(meta.get("datasets"), meta.get("train_splits"), where)
    config = meta.get("config") or {}
    refs = _refs(meta.get("datasets") or config.get("datasets"), meta.get("train_splits") or config.get("splits"),
                 where)
    if config.get("encoder", "causal_lora") != "causal_lora":
        return refs
    inherited = meta.get("adapter_provenance")
    adapter_where = f"{where}, its adapter {config.get('adapter_dir')}"
    if inherited:
        return refs + _refs(inherited.get("datasets"), inherited.get("train_splits"), adapter_where)
    adapter = config.get("adapter_dir")
    if adapter and (Path(adapter) / ADAPTER_META).is_file():
        return refs + artifact_training_data(adapter)
    raise ProvenanceError(f"{adapter_where}: the policy was trained on a causal LoRA adapter whose training data it "
                          "does not record, and the adapter is not there to read: retrain the policy with this code")


def _resolve(ref: TrainingRef) -> TrainingRef:
    """The recorded dataset version must still be where it was, with the recorded version id."""
    marker = fs.join(ref.path, "dataset.json")
    if not fs.exists(marker):
        raise ProvenanceError(f"{ref.recorded_by} trained on dataset version {ref.version_id or '?'} at {ref.path}, "
                              "which is no longer there: its audio cannot be compared with the test set (restore the "
                              "version at that path, or retrain the artifact)")
    found = json.loads(fs.read_text(marker)).get("version_id")
    if ref.version_id and found != ref.version_id:
        raise ProvenanceError(f"{ref.recorded_by} trained on dataset version {ref.version_id} at {ref.path}, but "
                              f"that path now holds version {found}: the training audio cannot be compared")
    return ref if ref.version_id else TrainingRef(ref.path, str(found), ref.splits, ref.name, ref.recorded_by)


def _short(key: str) -> str:
    """A content hash (``sha`` or ``sha@offset``) cut to its first ``FROZEN_HEX`` hex digits."""
    sha, at, offset = key.partition("@")
    return sha[:FROZEN_HEX] + at + offset


def freeze_training_audio(artifact_dir: str | Path) -> Path:
    """Write the content hashes of the audio ``artifact_dir`` trained on (its recorded datasets and splits, read while
    they are still there) beside it, so that the guard can check it where those datasets are not."""
    artifact_dir = Path(artifact_dir)
    refs = [_resolve(r) for r in artifact_training_data(artifact_dir)]
    hashes: dict[str, str] = {}
    for ref in refs:
        hashes.update({_short(k): v for k, v in content_hashes([ref.path], ref.splits).items()})
    body = {"datasets": [{"version_id": r.version_id, "name": r.name, "splits": list(r.splits)} for r in refs],
            "hex_digits": FROZEN_HEX, "utterances": len(set(hashes.values())), "hashes": dict(sorted(hashes.items()))}
    path = artifact_dir / FROZEN
    # mtime 0: the same content gives the same bytes (the file is committed with a shipped artifact)
    path.write_bytes(gzip.compress(json.dumps(body, indent=0).encode(), mtime=0))
    return path


def _frozen(artifact_dir: str) -> dict[str, Any] | None:
    path = Path(artifact_dir) / FROZEN
    if fs.is_remote(artifact_dir) or not path.is_file():
        return None
    try:
        body = json.loads(gzip.decompress(path.read_bytes()))
    except (OSError, ValueError) as err:
        raise ProvenanceError(f"{artifact_dir}: {FROZEN} is unreadable ({err})") from err
    if body.get("hex_digits") != FROZEN_HEX or not body.get("hashes"):
        raise ProvenanceError(f"{artifact_dir}: {FROZEN} holds no hashes of {FROZEN_HEX} hex digits")
    return body


def _unique(dirs: Iterable[str | Path | None]) -> list[str]:
    out: dict[str, str] = {}
    for d in dirs:
        if d:
            out.setdefault(str(Path(d).resolve()) if not fs.is_remote(str(d)) else str(d), str(d))
    return list(out.values())


def check_artifacts_held_out(artifact_dirs: Sequence[str | Path], held_out_dirs: Sequence[str | Path],
                             held_out_splits: Sequence[str], *, extra_train_dirs: Sequence[str | Path] = (),
                             extra_train_splits: Sequence[str] = ("train",), what: str = "test") -> dict[str, Any]:
    """Refuse (``LeakageError``) when held-out audio is in the training data of any artifact being scored, as the
    artifacts themselves record it (``ProvenanceError`` when one records none), or in the caller's extra training
    datasets. Returns the provenance summary for the report: ``{"artifacts": {dir: [version ids]}, "train_splits":
    {dir: [splits]}, "caller_datasets": [version ids], "overlap": 0}``."""
    refs: list[TrainingRef] = []
    summary: dict[str, Any] = {"artifacts": {}, "train_splits": {}, "caller_datasets": [], "overlap": 0}
    frozen: list[tuple[str, dict[str, str]]] = []  # (artifact, its frozen hashes)
    for artifact in _unique(artifact_dirs):
        recorded = artifact_training_data(artifact)
        if body := _frozen(artifact):  # it carries its training audio's hashes: its datasets need not be here
            if {r.version_id for r in recorded} - {d["version_id"] for d in body["datasets"]}:
                raise ProvenanceError(f"{artifact}: {FROZEN} was frozen from other datasets than it records")
            frozen.append((artifact, body["hashes"]))
            mine = [TrainingRef("", d["version_id"], tuple(d["splits"]), d.get("name")) for d in body["datasets"]]
        else:
            mine = [_resolve(r) for r in recorded]
            refs += mine
        summary["artifacts"][artifact] = list(dict.fromkeys(r.version_id for r in mine))
        summary["train_splits"][artifact] = sorted({s for r in mine for s in r.splits})
    for d in _unique(extra_train_dirs):
        ref = _resolve(TrainingRef(d, "", tuple(extra_train_splits), recorded_by="the caller"))
        summary["caller_datasets"].append(ref.version_id)
        refs.append(ref)
    if not held_out_dirs:
        return summary
    held = content_hashes(held_out_dirs, held_out_splits)
    shared: dict[str, set[str]] = {}  # held-out utterance → "training utterance (who trained on it)"
    hashes_of: dict[tuple[str, tuple[str, ...]], dict[str, str]] = {}
    for ref in refs:
        train = hashes_of.setdefault((ref.path, ref.splits), content_hashes([ref.path], ref.splits))
        for h in held.keys() & train.keys():
            shared.setdefault(held[h], set()).add(f"{train[h]} in {ref.version_id} {list(ref.splits)}, "
                                                  f"trained on by {ref.recorded_by}")
    short_held = {_short(h): utt for h, utt in held.items()} if frozen else {}
    for artifact, hashes in frozen:
        for h in short_held.keys() & hashes.keys():
            shared.setdefault(short_held[h], set()).add(f"{hashes[h]}, trained on by {artifact} ({FROZEN})")
    summary["overlap"] = len(shared)
    if shared:
        examples = "; ".join(f"{utt} (= {', '.join(sorted(by))})" for utt, by in sorted(shared.items())[:5])
        raise LeakageError(f"{len(shared)} {what} utterance(s) of splits {list(held_out_splits)} are in the training "
                           f"data of what is being scored: {examples}{' …' if len(shared) > 5 else ''}. Score on "
                           "audio no scored artifact trained on")
    return summary
