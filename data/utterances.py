"""The utterances of a dataset version (WebDataset shards read in secure mode, the manifest's rows): what training,
validation and evaluation read. A version dir may be a local path or an ``s3://…`` URL (data/fs.py)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data import fs
from data.manifest import read_manifest
from data.shards import iter_shard_samples
from data.tokens import tokenizer_id


class DatasetError(ValueError):
    """A dataset version is unusable for training (missing files, samples not matching the manifest)."""


@dataclass(frozen=True)
class TrainUtterance:
    key: str
    dataset_id: str
    audio: np.ndarray  # float32, 16 kHz
    transcript: str
    token_ids: tuple[int, ...]
    token_end_ms: tuple[int, ...]
    words: tuple[tuple[str, int, int], ...]

    @property
    def speech_end_ms(self) -> int:
        return max(self.token_end_ms[-1] if self.token_end_ms else 0, self.words[-1][2] if self.words else 0)


def dataset_ref(version_dir: str | Path) -> dict:
    """What a run records about a dataset version: name, version id, counts, shard hashes."""
    info = json.loads(fs.read_text(fs.join(version_dir, "dataset.json")))
    return {"name": info["config"]["name"], "version_id": info["version_id"], "path": str(version_dir),
            "accepted": info["counts"]["accepted"], "tokenizer": info.get("tokenizer", info["config"]["tokenizer"])}


def check_tokenizer(model_name: str, version_dirs: Sequence[str | Path]) -> None:
    """Every dataset's token ids must come from the model's own vocabulary: tiny.en's GPT-2 ids fed to the
    multilingual base would train on the wrong tokens without any error."""
    want = tokenizer_id("english" if model_name.endswith(".en") else "multilingual")
    wrong = [f"{ref['name']} ({ref['tokenizer']})" for ref in map(dataset_ref, version_dirs) if ref["tokenizer"] != want]
    if wrong:
        family = "english" if model_name.endswith(".en") else "multilingual"
        raise DatasetError(f"{model_name} reads {want} token ids, but {', '.join(wrong)} hold others: build them "
                           f"with the dataset setting tokenizer: {family}")


def read_utterances(version_dir: str | Path, splits: Sequence[str]) -> list[TrainUtterance]:
    """All accepted samples of ``splits``, sorted by key; every manifest row must come back from the shards."""
    root = str(version_dir) if fs.is_remote(str(version_dir)) else Path(version_dir)
    if not fs.exists(fs.join(root, "dataset.json")):
        raise DatasetError(f"{root}: not a dataset version (dataset.json missing)")
    version_id = json.loads(fs.read_text(fs.join(root, "dataset.json")))["version_id"]
    manifest = read_manifest(root).to_pylist()
    wanted = {r["key"] for r in manifest if r["split"] in splits}
    shards = sorted({r["shard"] for r in manifest if r["split"] in splits})
    if not shards:
        raise DatasetError(f"{root}: no samples in splits {list(splits)} (this version has "
                           f"{sorted({r['split'] for r in manifest})})")
    out = []
    for sample in iter_shard_samples([fs.join(root, s) for s in shards]):
        if sample["__key__"] not in wanted:
            continue
        meta = sample["meta"]
        words = tuple((w["word"], int(w["start_ms"]), int(w["end_ms"])) for w in meta["words"])
        out.append(TrainUtterance(sample["__key__"], version_id, sample["audio"], meta["transcript"],
                                  tuple(meta["token_ids"]), tuple(meta["token_end_ms"]), words))
    found = {u.key for u in out}
    if found != wanted:
        raise DatasetError(f"{root}: {len(wanted - found)} manifest rows missing from the shards, e.g. "
                           f"{sorted(wanted - found)[:3]}")
    return sorted(out, key=lambda u: u.key)


def read_all(version_dirs: Sequence[str], splits: Sequence[str], limit: int | None = None,
             fraction: float = 1.0, fractions: Mapping[str, float] | None = None) -> list[TrainUtterance]:
    """Every dataset's utterances of ``splits`` (each dataset's :func:`key_subset` at ``fraction``, or at
    ``fractions[its name]``), then the first ``limit``."""
    def share(d: str) -> float:
        return fractions.get(dataset_ref(d)["name"], fraction) if fractions else fraction

    utts = [u for d in version_dirs for u in key_subset(read_utterances(d, splits), share(d))]
    return utts[:limit] if limit else utts


def key_subset(utts: list[TrainUtterance], fraction: float) -> list[TrainUtterance]:
    """The utterances of :func:`subset_keys`, in their order."""
    if fraction == 1:
        return utts
    keep = subset_keys([u.key for u in utts], fraction)
    return [u for u in utts if u.key in keep]


def subset_keys(keys: Sequence[str], fraction: float) -> set[str]:
    """The ceil(fraction·n) keys that hash lowest. Hashing keys, not drawing with the run's seed, keeps the subset
    the same for every seed (a learning curve compares data sizes, not draws) and nested (each fraction's subset
    lies inside every larger one's)."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    ranked = sorted(keys, key=lambda k: hashlib.sha256(k.encode()).hexdigest())
    return set(ranked[: math.ceil(fraction * len(ranked))])
