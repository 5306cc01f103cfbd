"""Last stage: shards + manifest.parquet + rejects.parquet + dataset.json, published atomically.

Everything is written into a temporary sibling folder (hidden: dot-prefixed) and renamed into place at the end, so
a version folder either is complete or does not exist: a killed build leaves no half dataset, only a hidden folder
that the next build of that name removes. Concurrent builds of the same version (two pipelines on one dataset
root) publish under a file lock: the first complete one wins, the others' identical copies are dropped.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from filelock import FileLock

from configs.dataset import DatasetConfig
from data.chaos import kill_point
from data.corpus import sample_key
from data.manifest import MANIFEST_SCHEMA, REJECTS_SCHEMA, write_table
from data.records import Aligned, Reject
from data.shards import ShardSample, canonical_json, write_split
from data.splits import assign_split, split_groups
from data.store import WorkStore
from data.tokens import token_end_times, tokenizer_id, word_tokens
from data.types import SAMPLE_RATE


class CountMismatch(AssertionError):
    pass


def assemble(version_dir: Path, aligned: Sequence[Aligned], rejects: Sequence[Reject], n_inputs: int,
             cfg: DatasetConfig, store: WorkStore, *, version_id: str, aligner_version: str,
             code_version: str) -> dict:
    """Write the dataset version; returns the dataset.json content."""
    if n_inputs != len(aligned) + len(rejects):
        raise CountMismatch(f"inputs {n_inputs} != accepted {len(aligned)} + rejected {len(rejects)}")
    tmp = version_dir.with_name(f".{version_dir.name}.tmp-{os.getpid()}")
    remove_stale_tmp(version_dir.parent)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tokenizer = tokenizer_id(cfg.tokenizer)

    by_split: dict[str, list[tuple[str, Aligned]]] = defaultdict(list)
    items = [a.prepared.scanned.item for a in aligned]
    for a, item, group in zip(aligned, items, split_groups(items, cfg.split_by), strict=True):
        by_split[assign_split(group, cfg.splits, cfg.split_salt)].append((sample_key(item.utt_id), a))

    rows: list[dict] = []
    shards = []
    for split in sorted(by_split):
        members = sorted(by_split[split], key=lambda kv: kv[0])
        samples = []
        for offset, (key, a) in enumerate(members):
            row = _row(a, key, split, cfg, tokenizer, aligner_version)
            row["shard"] = f"shards/{split}-{offset // cfg.shard_size:06d}.tar"
            row["offset"] = offset % cfg.shard_size
            rows.append(row)
            meta = {k: row[k] for k in ("id", "speaker", "transcript", "normalized_transcript", "words", "token_ids",
                                        "token_end_ms", "duration_ms", "tokenizer", "aligner_version", "split")}
            samples.append(ShardSample(key, store.get_blob("audio", a.prepared.audio_sha256, "." + cfg.audio_format),
                                       cfg.audio_format, meta))
        shards += write_split(tmp, split, samples, cfg.shard_size)
        kill_point("assemble.split_written")

    write_table(tmp / "manifest.parquet", rows, MANIFEST_SCHEMA)
    reject_rows = [{"id": r.utt_id, "source_path": r.source_path, "source_sha256": r.source_sha256, "stage": r.stage,
                    "reason": r.reason, "detail": r.detail} for r in sorted(rejects, key=lambda r: (r.utt_id, r.stage))]
    write_table(tmp / "rejects.parquet", reject_rows, REJECTS_SCHEMA)

    info = {
        "version_id": version_id,
        "name": cfg.name,
        "code_version": code_version,
        "config": json.loads(cfg.canonical_json()),
        "config_hash": cfg.config_hash(),
        "aligner": {"name": cfg.aligner, "version": aligner_version},
        "tokenizer": tokenizer,
        "sample_rate": SAMPLE_RATE,
        "counts": {
            "inputs": n_inputs,
            "accepted": len(aligned),
            "rejected": len(rejects),
            "per_split": {s: len(v) for s, v in sorted(by_split.items())},
            "rejects_by_reason": dict(sorted(Counter(r.reason for r in rejects).items())),
            "audio_ms": sum(r["duration_ms"] for r in rows),
        },
        "shards": [{"name": s.name, "split": s.split, "samples": s.samples, "sha256": s.sha256, "bytes": s.bytes}
                   for s in shards],
        "files": {name: _sha256(tmp / name) for name in ("manifest.parquet", "rejects.parquet")},
    }
    (tmp / "dataset.json").write_bytes(json.dumps(info, indent=2, sort_keys=True).encode() + b"\n")
    kill_point("assemble.before_publish")
    with FileLock(str(version_dir.with_name(f".{version_dir.name}.lock"))):
        if version_dir.exists() and verify_version(version_dir) is not None:
            shutil.rmtree(tmp)  # a concurrent build of the same version finished first: identical by construction
        else:
            shutil.rmtree(version_dir, ignore_errors=True)  # tampered: replace it
            os.replace(tmp, version_dir)
    return info


def remove_stale_tmp(name_dir: Path) -> list[Path]:
    """Remove the hidden work folders of builds whose process is gone (killed mid-assemble) on this host."""
    removed = []
    for tmp in name_dir.glob(".*.tmp-*") if name_dir.exists() else ():
        try:
            os.kill(int(tmp.name.rsplit("-", 1)[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
        except (ValueError, PermissionError):
            continue  # not ours, or a live process of another user
    return removed


def _row(a: Aligned, key: str, split: str, cfg: DatasetConfig, tokenizer: str, aligner_version: str) -> dict:
    p = a.prepared
    item = p.scanned.item
    tokens = word_tokens(cfg.tokenizer, [w.text for w in p.words])
    return {
        "id": item.utt_id, "key": key, "speaker": item.speaker, "corpus": item.corpus,
        "source_path": item.audio_path, "source_sha256": p.scanned.source_sha256,
        "source_start_ms": int(round(item.start_s * 1000)), "audio_sha256": p.audio_sha256,
        "duration_ms": p.duration_ms, "sample_rate": SAMPLE_RATE, "orig_sample_rate": p.orig_sample_rate,
        "orig_channels": p.orig_channels, "notes": list(p.notes), "transcript": item.transcript,
        "normalized_transcript": " ".join(w.norm for w in p.words),
        "words": [{"word": s.word, "start_ms": s.start_ms, "end_ms": s.end_ms} for s in a.spans],
        "token_ids": [t for ts in tokens for t in ts],
        "token_end_ms": token_end_times(tokens, a.spans, cfg.tokenizer),
        "tokenizer": tokenizer, "aligner": cfg.aligner, "aligner_version": aligner_version, "split": split,
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verify_version(version_dir: Path) -> dict | None:
    """dataset.json of a complete, untampered version folder, else None (then it is rebuilt)."""
    meta_path = version_dir / "dataset.json"
    if not meta_path.exists():
        return None
    try:
        info = json.loads(meta_path.read_text())
        for shard in info["shards"]:
            if _sha256(version_dir / shard["name"]) != shard["sha256"]:
                return None
        for name, digest in info["files"].items():
            if _sha256(version_dir / name) != digest:
                return None
    except (OSError, KeyError, ValueError):
        return None
    return info
