"""Deterministic WebDataset shards: same samples in → byte-identical tars out.

Samples are written sorted by key, `shard_size` per tar, with fixed tar metadata (mtime 0,
uid/gid 0, fixed user/group names and mode) and canonical JSON; nothing depends on the clock.
Reading uses webdataset with secure mode on (no pipe:/file: URLs, no pickle decoding).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import webdataset as wds


@dataclass(frozen=True, slots=True)
class ShardSample:
    key: str
    audio: bytes
    audio_ext: str  # "flac" | "wav"
    meta: dict


@dataclass(frozen=True, slots=True)
class ShardInfo:
    name: str  # relative to the dataset version dir, e.g. shards/train-000000.tar
    split: str
    samples: int
    sha256: str
    bytes: int


def canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def write_split(root: Path, split: str, samples: Sequence[ShardSample], shard_size: int) -> list[ShardInfo]:
    """Write one split's samples (already sorted by key) as shards/<split>-%06d.tar."""
    (root / "shards").mkdir(parents=True, exist_ok=True)
    infos = []
    for index, start in enumerate(range(0, len(samples), shard_size)):
        name = f"shards/{split}-{index:06d}.tar"
        buf = io.BytesIO()
        writer = wds.TarWriter(buf, user="whisperline", group="whisperline", mode=0o444, mtime=0, encoder=False)
        for sample in samples[start : start + shard_size]:
            writer.write({"__key__": sample.key, sample.audio_ext: sample.audio, "json": canonical_json(sample.meta)})
        writer.close()
        data = buf.getvalue()
        (root / name).write_bytes(data)
        infos.append(ShardInfo(name, split, len(samples[start : start + shard_size]),
                               hashlib.sha256(data).hexdigest(), len(data)))
    return infos


def _all_shards(src: Iterator) -> Iterator:
    yield from src


def iter_shard_samples(paths: Sequence[str | Path]) -> Iterator[dict]:
    """Yield {'__key__', 'audio': float32 16 kHz array, 'meta': dict} from shards, in order."""
    from data.audio import decode_audio

    wds.utils.enforce_security = True
    # Every caller gets every listed shard, also inside a distributed job: training ranks choose their samples
    # afterwards (equal counts per rank), so webdataset must not split (or refuse to split) by node.
    dataset = wds.WebDataset([str(p) for p in paths], shardshuffle=False, nodesplitter=_all_shards,
                             workersplitter=_all_shards, empty_check=False)
    for sample in dataset:
        ext = "flac" if "flac" in sample else "wav"
        yield {"__key__": sample["__key__"], "audio": decode_audio(sample[ext]),
               "meta": json.loads(sample["json"])}
