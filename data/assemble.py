"""Last stage: shards + manifest.parquet + rejects.parquet + dataset.json, published atomically, streamed.

The batches' Parquet parts (data/parts.py) are read back one at a time in batch order — the build order, sorted by
(split, key) before batching — so shards and the manifest are written while reading, and the driver's memory does
not grow with the corpus (only the rejects, a small minority, are collected to be sorted). The bytes depend only
on the parts and the config, never on which runner (process pool or Ray) built them.

Publishing is atomic. On a local disk everything is written into a hidden sibling folder and renamed into place
under a file lock: a version folder is complete or absent; a killed build leaves a hidden folder that the next build
removes; of two concurrent builds of one version the first wins. Object storage has no rename: the objects are
written once, straight to their final keys, and `dataset.json` — the marker — is written last with one PUT. A
version exists only when its marker does, and a published marker is never deleted: two builders of one version
write the same bytes (the version id is their content), so each object PUT replaces an object with an identical one
and a reader sees the whole version or none, whatever the interleaving.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from filelock import FileLock

from configs.dataset import DatasetConfig
from data import fs
from data.chaos import kill_point, step
from data.manifest import MANIFEST_SCHEMA, REJECTS_SCHEMA
from data.parts import part_paths, read_part, reject_row
from data.records import Reject
from data.shards import ShardSample, ShardWriter
from data.store import WorkStore
from data.tokens import tokenizer_id
from data.types import SAMPLE_RATE

MANIFEST_ROW_GROUP = 4096  # fixed, so the file does not depend on the batch size


class CountMismatch(AssertionError):
    pass


def assemble(version_dir: str | Path, part_keys: Sequence[str], scan_rejects: Sequence[Reject], n_inputs: int,
             cfg: DatasetConfig, store: WorkStore, *, version_id: str, aligner_version: str,
             code_version: str) -> dict:
    """Write the dataset version from the batches' parts (in build order); returns the dataset.json content."""
    version_dir = str(version_dir)
    remote = fs.is_remote(version_dir)
    parent, name = version_dir.rstrip("/").rsplit("/", 1)
    if remote:  # final keys: invisible until the marker is written, and written once
        tmp = version_dir
    else:
        tmp = fs.join(parent, f".{name}.tmp-{os.getpid()}")
        remove_stale_tmp(Path(parent))
        fs.rm_tree(tmp)
    fs.ensure_dir(tmp)
    tokenizer = tokenizer_id(cfg.tokenizer)

    rejects = [reject_row(r) for r in scan_rejects]
    per_split: Counter = Counter()
    words_per_split: Counter = Counter()  # aligned transcript words: what an evaluation set's size is stated in
    speakers_per_split: dict[str, set[tuple[str, str]]] = {}
    recordings: set[str] = set()
    segmented: set[str] = set()
    audio_ms = 0
    with (ShardWriter(tmp, cfg.shard_size) as writer,  # an error removes the open shard's spool file
          tempfile.TemporaryDirectory(prefix="whisperline-manifest-") as spool):
        manifest_path = os.path.join(spool, "manifest.parquet")
        with _RowGroups(manifest_path, MANIFEST_SCHEMA) as manifest:
            for key in part_keys:
                rows_path, rejects_path = part_paths(store, key)
                rejects += read_part(rejects_path)
                for row in read_part(rows_path):
                    if row["split"] != writer.split:
                        if writer.split is not None:
                            kill_point("assemble.split_written")
                        writer.start_split(row["split"])
                    shard, offset = writer.add(ShardSample(
                        row["key"], store.get_blob("audio", row["audio_sha256"], "." + cfg.audio_format),
                        cfg.audio_format, {k: row[k] for k in _SHARD_META}))
                    manifest.add({**row, "shard": shard, "offset": offset})
                    per_split[row["split"]] += 1
                    words_per_split[row["split"]] += len(row["words"])
                    speakers_per_split.setdefault(row["split"], set()).add((row["corpus"], row["speaker"]))
                    audio_ms += row["duration_ms"]
                    if row["recording_id"] != row["id"]:
                        segmented.add(row["recording_id"])
                    recordings.add(row["recording_id"])
            shards = writer.close()
        kill_point("assemble.split_written")
        fs.put_file(manifest_path, fs.join(tmp, "manifest.parquet"))
        step("assemble.manifest_written")
    if n_inputs != len(recordings) + len(rejects):
        raise CountMismatch(f"inputs {n_inputs} != accepted {len(recordings)} + rejected {len(rejects)}")
    rejects.sort(key=lambda r: (r["id"], r["stage"]))
    _write_table(fs.join(tmp, "rejects.parquet"), rejects, REJECTS_SCHEMA)
    step("assemble.rejects_written")

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
            "accepted": len(recordings),
            "rejected": len(rejects),
            "utterances": sum(per_split.values()),
            "segmented_recordings": len(segmented),
            "per_split": dict(sorted(per_split.items())),
            "words_per_split": dict(sorted(words_per_split.items())),
            "speakers_per_split": {k: len(v) for k, v in sorted(speakers_per_split.items())},
            # not speaker-disjoint: a speaker shared on purpose (configs.dataset dominant_speaker_share) or by a
            # split by utterance; a reader of held-out numbers needs to know
            "speakers_in_several_splits": _shared_speakers(speakers_per_split),
            "rejects_by_reason": dict(sorted(Counter(r["reason"] for r in rejects).items())),
            "audio_ms": audio_ms,
        },
        "shards": [{"name": s.name, "split": s.split, "samples": s.samples, "sha256": s.sha256, "bytes": s.bytes}
                   for s in shards],
        "files": {name: {"sha256": fs.sha256(fs.join(tmp, name)), "bytes": fs.size(fs.join(tmp, name))}
                  for name in ("manifest.parquet", "rejects.parquet")},
    }
    marker = json.dumps(info, indent=2, sort_keys=True).encode() + b"\n"
    kill_point("assemble.before_publish")
    if remote:
        _publish_remote(version_dir, marker)
    else:
        _publish_local(tmp, version_dir, marker)
    return info


def _shared_speakers(speakers_per_split: dict[str, set[tuple[str, str]]]) -> list[str]:
    seen = Counter(sp for members in speakers_per_split.values() for sp in members)
    return sorted(f"{corpus}/{speaker}" for (corpus, speaker), n in seen.items() if n > 1)


_SHARD_META = ("id", "speaker", "transcript", "normalized_transcript", "words", "token_ids", "token_end_ms",
               "duration_ms", "tokenizer", "aligner_version", "split")


class _RowGroups:
    """A Parquet file written in fixed-size row groups while rows stream in."""

    def __init__(self, path: str, schema: pa.Schema) -> None:
        self.path, self.schema, self.rows = path, schema, []
        self.writer: pq.ParquetWriter | None = None

    def __enter__(self) -> "_RowGroups":
        self.writer = pq.ParquetWriter(self.path, self.schema, compression="zstd", write_statistics=True)
        return self

    def add(self, row: dict) -> None:
        self.rows.append(row)
        if len(self.rows) >= MANIFEST_ROW_GROUP:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows = []

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self._flush()
        self.writer.close()


def _write_table(path: str, rows: Iterable[dict], schema: pa.Schema) -> None:
    with tempfile.TemporaryDirectory(prefix="whisperline-table-") as spool:
        local = os.path.join(spool, "t.parquet")
        with _RowGroups(local, schema) as table:
            for row in rows:
                table.add(row)
        fs.put_file(local, path)


def _publish_local(tmp: str, version_dir: str, marker: bytes) -> None:
    fs.write_bytes(fs.join(tmp, "dataset.json"), marker)
    target = Path(version_dir)
    with FileLock(str(target.with_name(f".{target.name}.lock"))):
        if target.exists() and verify_version(version_dir) is not None:
            shutil.rmtree(tmp)  # a concurrent build of the same version finished first: identical by construction
        else:
            shutil.rmtree(target, ignore_errors=True)  # tampered or incomplete: replace it
            os.replace(tmp, target)


def _publish_remote(version_dir: str, marker: bytes) -> None:
    """The marker, last, with one PUT (the objects are in place). Never a delete: a marker that is there belongs to a
    version published by a concurrent build (the same bytes: rewriting it changes nothing a reader sees) or to a
    tampered one (the objects were just rewritten; the PUT makes the version whole again)."""
    step("publish.marker")
    fs.write_bytes(fs.join(version_dir, "dataset.json"), marker)
    step("publish.marker_written")


def remove_stale_tmp(name_dir: Path) -> list[Path]:
    """Remove the hidden work folders of builds whose process is gone (killed mid-assemble) on this host.
    (On object storage the hidden `.tmp-` prefixes of killed builds are left to a bucket lifecycle rule.)"""
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


def file_hashes(version_dir: str | Path) -> dict[str, str]:
    """{path relative to the version folder: sha256} of every file under it, on a local disk or an object store: what
    "byte-identical versions" compares (two runners, a disturbed and an undisturbed build, local and S3)."""
    root = str(version_dir).rstrip("/")
    return {path[len(root) + 1 :]: fs.sha256(path) for path in fs.find(root)}


def verify_version(version_dir: str | Path, *, deep: bool | None = None) -> dict | None:
    """dataset.json of a complete, untampered version, else None (then it is rebuilt).

    ``deep`` (default: on local disks) re-hashes every file; on object storage the default (the cheap check)
    compares each listed object's size and, where the store keeps one (S3's full-object SHA-256, asked for at
    every write), its checksum with the recorded sha256: re-reading a corpus-scale dataset to decide whether to
    skip its build would cost more than the build."""
    version_dir = str(version_dir)
    deep = not fs.is_remote(version_dir) if deep is None else deep
    marker = fs.join(version_dir, "dataset.json")
    try:
        if not fs.exists(marker):
            return None
        info = json.loads(fs.read_bytes(marker))
        listed = [(s["name"], s["sha256"], s["bytes"]) for s in info["shards"]]
        listed += [(n, f["sha256"], f["bytes"]) for n, f in info["files"].items()]
        for name, digest, size in listed:
            path = fs.join(version_dir, name)
            if deep:
                if fs.sha256(path) != digest:
                    return None
                continue
            stored_size, stored_digest = fs.stored_sha256(path)
            if stored_size != size or stored_digest not in (None, digest):
                return None
    except (OSError, KeyError, ValueError, TypeError):
        return None
    return info
