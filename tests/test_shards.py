"""Shard writer: deterministic bytes, fixed tar metadata, read back by webdataset in secure mode."""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np

from data.audio import encode_audio
from data.shards import ShardSample, iter_shard_samples, write_split


def _samples(n: int) -> list[ShardSample]:
    rng = np.random.default_rng(1)
    return [ShardSample(f"utt-{i:03d}", encode_audio((rng.standard_normal(1600) * 0.1).astype(np.float32), "flac"),
                        "flac", {"id": f"utt.{i}", "token_ids": [i, i + 1]}) for i in range(n)]


def test_shards_are_byte_identical_and_readable(tmp_path: Path):
    a = write_split(tmp_path / "a", "train", _samples(7), shard_size=3)
    b = write_split(tmp_path / "b", "train", _samples(7), shard_size=3)
    assert [s.sha256 for s in a] == [s.sha256 for s in b]
    assert [(s.name, s.samples) for s in a] == [(f"shards/train-{i:06d}.tar", n) for i, n in enumerate((3, 3, 1))]

    with tarfile.open(tmp_path / "a" / a[0].name) as tar:
        members = tar.getmembers()
    assert [m.name for m in members[:2]] == ["utt-000.flac", "utt-000.json"]
    assert {(m.mtime, m.uid, m.gid, m.uname, m.mode) for m in members} == {(0, 0, 0, "whisperline", 0o444)}

    samples = list(iter_shard_samples(sorted((tmp_path / "a" / "shards").glob("*.tar"))))
    assert [s["__key__"] for s in samples] == [f"utt-{i:03d}" for i in range(7)]
    assert samples[4]["meta"] == {"id": "utt.4", "token_ids": [4, 5]}
    assert samples[4]["audio"].dtype == np.float32 and len(samples[4]["audio"]) == 1600


def test_the_hash_taken_while_writing_is_the_written_files(tmp_path: Path):
    import hashlib

    infos = write_split(tmp_path, "train", _samples(5), shard_size=2)
    for info in infos:
        raw = (tmp_path / info.name).read_bytes()
        assert (info.sha256, info.bytes) == (hashlib.sha256(raw).hexdigest(), len(raw))


def test_a_failed_assembly_leaves_no_spool_file_behind(tmp_path: Path):
    import pytest

    from data.shards import ShardWriter

    samples = _samples(3)
    with pytest.raises(RuntimeError, match="assembly failed"):
        with ShardWriter(str(tmp_path), shard_size=2) as writer:
            writer.start_split("train")
            for sample in samples:
                writer.add(sample)  # the first shard completes, the second stays open
            raise RuntimeError("assembly failed")
    files = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["shards/train-000000.tar"]  # the finished shard only: no .tmp spool of the open one
