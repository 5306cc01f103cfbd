"""Deterministic WebDataset shards: same samples in → byte-identical tars out.

Samples are written in build order, `shard_size` per tar, while they stream in (`ShardWriter`), with fixed tar
metadata (mtime 0, uid/gid 0, fixed user/group names and mode) and canonical JSON; nothing depends on the clock.
A shard is written sample by sample into a spool file — beside its final name locally, renamed into place when
complete; in a temporary folder for object storage, then uploaded whole — so a reader never sees a half-written tar
and the writer holds one sample in memory, not a shard.
Reading uses webdataset with secure mode on (no pipe:/file: URLs, no pickle decoding); shards on object storage
(``s3://…``) are opened through fsspec (data/fs.py), registered as webdataset's opener for those schemes: no shell
pipes, no curl.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import webdataset as wds
from webdataset.gopen import gopen_schemes  # the dispatch table gopen() reads

from data import fs
from data.audio import decode_audio
from data.chaos import step


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


class _HashingFile:
    """The spool file, hashing and counting the bytes as they pass: a finished shard is not read back to hash it.
    The tar is written in stream mode (``w|``), which only ever calls ``write``."""

    def __init__(self, file: BinaryIO) -> None:
        self.file, self.sha256, self.size = file, hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.size += len(data)
        return self.file.write(data)


@dataclass
class _OpenShard:
    name: str  # shards/<split>-%06d.tar
    spool: str  # the file it is written to until complete
    hashing: _HashingFile  # wraps the open spool file (``hashing.file``)
    tar: wds.TarWriter


def _tar_writer(fileobj) -> wds.TarWriter:
    return wds.TarWriter(fileobj, user="whisperline", group="whisperline", mode=0o444, mtime=0, encoder=False)


class ShardWriter:
    """Splits arrive one after another (all of a split's samples, in order): shards/<split>-%06d.tar.

    Use it as a context manager: leaving the block by an exception removes the open shard's spool file and the
    temporary folder of an object-store build (``close`` does the same on success)."""

    def __init__(self, root: str, shard_size: int) -> None:
        self.root, self.shard_size = root, shard_size
        self.split: str | None = None
        self.in_split = 0  # samples of the current split so far
        self.infos: list[ShardInfo] = []
        self.done: set[str] = set()
        self._open: _OpenShard | None = None
        self._count = 0  # samples in the open shard
        self._spool_dir: str | None = None  # for object storage

    def start_split(self, split: str) -> None:
        self._flush()
        if split in self.done:
            raise ValueError(f"split {split!r} came back after another one: the parts are not in build order")
        if self.split is not None:
            self.done.add(self.split)
        self.split, self.in_split = split, 0

    def add(self, sample: ShardSample) -> tuple[str, int]:
        """Write a sample into its shard; returns (the shard's name, the sample's offset in it)."""
        assert self.split is not None, "start_split first"
        name = f"shards/{self.split}-{self.in_split // self.shard_size:06d}.tar"
        offset = self.in_split % self.shard_size
        if self._open is None:
            self._start(name)
        self._open.tar.write({"__key__": sample.key, sample.audio_ext: sample.audio,
                              "json": canonical_json(sample.meta)})
        self._count += 1
        self.in_split += 1
        if self._count == self.shard_size:
            self._flush()
        return name, offset

    def _start(self, name: str) -> None:
        target = fs.join(self.root, name)
        if fs.is_remote(target):
            if self._spool_dir is None:
                self._spool_dir = tempfile.mkdtemp(prefix="whisperline-shards-")
            folder = self._spool_dir
        else:
            folder = os.path.dirname(os.path.abspath(target))
            os.makedirs(folder, exist_ok=True)
        fd, spool = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(name)}.", suffix=".tmp")
        fh = os.fdopen(fd, "wb")
        hashing = _HashingFile(fh)
        self._open, self._count = _OpenShard(name, spool, hashing, _tar_writer(hashing)), 0

    def _flush(self) -> None:
        if self._open is None:
            return
        shard, self._open = self._open, None
        try:
            shard.tar.close()
            shard.hashing.file.close()
            digest, size = shard.hashing.sha256.hexdigest(), shard.hashing.size
            target = fs.join(self.root, shard.name)
            if fs.is_remote(target):
                fs.put_file(shard.spool, target)
            else:
                os.replace(shard.spool, target)
        finally:
            shard.hashing.file.close()  # on an error before the close above
            with contextlib.suppress(FileNotFoundError):
                os.unlink(shard.spool)
        step("assemble.shard_written")
        self.infos.append(ShardInfo(shard.name, self.split, self._count, digest, size))

    def close(self) -> list[ShardInfo]:
        try:
            self._flush()
        finally:
            self._remove_spool_dir()
        return list(self.infos)

    def abort(self) -> None:
        """Drop the open shard unwritten and remove every spool file (the assembly failed; nothing is renamed into
        place or uploaded)."""
        shard, self._open = self._open, None
        if shard is not None:
            with contextlib.suppress(Exception):  # its end of archive goes into the spool file deleted below; closed
                shard.tar.close()  # here, the tar stream's __del__ does not write to the closed file later
            shard.hashing.file.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(shard.spool)
        self._remove_spool_dir()

    def _remove_spool_dir(self) -> None:
        if self._spool_dir is not None:
            shutil.rmtree(self._spool_dir, ignore_errors=True)
            self._spool_dir = None

    def __enter__(self) -> ShardWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:  # noqa: ANN001
        if exc_type is not None:
            self.abort()


def write_split(root: str | Path, split: str, samples: Sequence[ShardSample], shard_size: int) -> list[ShardInfo]:
    """Write one split's samples (already in order) as shards/<split>-%06d.tar."""
    with ShardWriter(str(root), shard_size) as writer:
        writer.start_split(split)
        for sample in samples:
            writer.add(sample)
        return writer.close()


def _all_shards(src: Iterator) -> Iterator:
    yield from src


# URL schemes whose shards webdataset opens through fsspec (webdataset itself knows s3 only through `pipe:` commands,
# which secure mode forbids).
FSSPEC_SCHEMES = ("s3", "s3a")


def _gopen_fsspec(url: str, mode: str = "rb", bufsize: int = 8192, **_kw):
    if mode != "rb":
        raise ValueError(f"{url}: shards are only read through webdataset (mode {mode!r})")
    return fs.open_read(url)


def _register_fsspec_openers() -> None:
    for scheme in FSSPEC_SCHEMES:
        gopen_schemes[scheme] = _gopen_fsspec


def iter_shard_samples(paths: Sequence[str | Path]) -> Iterator[dict]:
    """Yield {'__key__', 'audio': float32 16 kHz array, 'meta': dict} from shards, in order.

    ``paths`` are local paths or ``s3://…`` URLs (read through fsspec, see data/fs.py for the S3 settings)."""
    wds.utils.enforce_security = True
    _register_fsspec_openers()
    # Every caller gets every listed shard, also inside a distributed job: training ranks choose their samples
    # afterwards (equal counts per rank), so webdataset must not split (or refuse to split) by node.
    dataset = wds.WebDataset([str(p) for p in paths], shardshuffle=False, nodesplitter=_all_shards,
                             workersplitter=_all_shards, empty_check=False)
    for sample in dataset:
        ext = "flac" if "flac" in sample else "wav"
        yield {"__key__": sample["__key__"], "audio": decode_audio(sample[ext]),
               "meta": json.loads(sample["json"])}
