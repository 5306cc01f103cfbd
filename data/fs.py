"""A tiny fsspec layer for the data path: every path is a ``str``, either a local path or a URL (``s3://bucket/key``).

Local paths take the plain ``os``/``shutil`` route; URLs go through fsspec (s3fs for ``s3://``). Every path or URL
returned keeps the scheme it was given (``s3://…``).

Object storage configuration comes from the environment, so that it reaches subprocesses and Ray workers:

- ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` (and ``AWS_SESSION_TOKEN`` if any): credentials, read by botocore
  whenever a client is created;
- ``AWS_DEFAULT_REGION`` (e.g. ``us-east-1``): the region;
- ``AWS_ENDPOINT_URL`` (or the S3-only ``AWS_ENDPOINT_URL_S3``) = ``http://127.0.0.1:PORT`` for an S3-compatible
  server other than AWS (MinIO, Ceph, moto): botocore reads it when a client is created, so it also works when set
  after ``fsspec`` was imported;
- ``FSSPEC_S3_ENDPOINT_URL`` works too, but fsspec reads ``FSSPEC_*`` variables once, when ``fsspec`` is imported:
  set it before the process starts (it then reaches child processes the same way). Other ``FSSPEC_S3_<KWARG>``
  variables pass any ``S3FileSystem`` keyword argument the same way.

fsspec caches one filesystem instance per set of options; S3 listings are not cached here (``listdir``, ``glob``,
``exists`` always ask the server), so a marker object published by another process is seen at once.
"""

from __future__ import annotations

import contextlib
import glob as _glob
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import IO

import fsspec
from fsspec.core import split_protocol

from data.s3_checksum import full_object_sha256, upload

BLOCK = 1 << 20  # 1 MiB
_LOCAL_PROTOCOLS = (None, "file", "local")


def _str(path: str | os.PathLike) -> str:
    return os.fspath(path)


def protocol(path: str | os.PathLike) -> str | None:
    """``"s3"`` for ``s3://b/k``; None for a local path."""
    proto, _ = split_protocol(_str(path))
    return proto


def is_remote(path: str | os.PathLike) -> bool:
    """True for a URL with a non-local scheme (``s3://…``); False for local paths and ``file://`` URLs."""
    return protocol(path) not in _LOCAL_PROTOCOLS


def _local(path: str | os.PathLike) -> str:
    """A local path (``file://`` stripped)."""
    return split_protocol(_str(path))[1]


def absolute(path: str | os.PathLike) -> str:
    """A local path made absolute (other processes, e.g. Ray workers, have other working directories); URLs as is."""
    text = _str(path)
    return text if is_remote(text) else os.path.abspath(_local(text))


def join(base: str | os.PathLike, *parts: str | os.PathLike) -> str:
    """``base/part/…``: os.path.join locally; for URLs '/'-joined without doubled slashes (the scheme kept)."""
    text = _str(base)
    if not is_remote(text):
        return os.path.join(text, *map(_str, parts))
    out = text.rstrip("/")
    for part in map(_str, parts):
        part = part.strip("/")
        if part:
            out = f"{out}/{part}"
    return out


def name(path: str | os.PathLike) -> str:
    """The last path component (``a/b/c.wav`` → ``c.wav``), URLs included."""
    text = _str(path)
    return PurePosixPath(text.rstrip("/")).name if is_remote(text) else os.path.basename(text.rstrip(os.sep))


def parent(path: str | os.PathLike) -> str:
    """The folder holding ``path`` (``s3://b/p/x`` → ``s3://b/p``; never above the bucket)."""
    text = _str(path)
    if not is_remote(text):
        return os.path.dirname(text.rstrip(os.sep)) or "."
    proto, rest = split_protocol(text)
    rest = rest.rstrip("/")
    head = rest.rsplit("/", 1)[0] if "/" in rest else rest
    return f"{proto}://{head}"


def fs_and_path(path: str | os.PathLike) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec filesystem of ``path`` and the path as that filesystem names it (no scheme for s3)."""
    text = _str(path)
    if is_remote(text) and protocol(text) in ("s3", "s3a"):
        # Listings are never cached: other processes (Ray workers, a publishing build) change the bucket.
        return fsspec.core.url_to_fs(text, use_listings_cache=False)
    return fsspec.core.url_to_fs(text)


def _with_scheme(path: str, like: str) -> str:
    """Put back the scheme of ``like`` on a path an fsspec filesystem returned."""
    proto = protocol(like)
    if proto in _LOCAL_PROTOCOLS:
        return path
    return path if "://" in path else f"{proto}://{path.lstrip('/')}"


def exists(path: str | os.PathLike) -> bool:
    text = _str(path)
    if not is_remote(text):
        return os.path.exists(_local(text))
    fs, p = fs_and_path(text)
    return fs.exists(p)


def isdir(path: str | os.PathLike) -> bool:
    """A folder locally; on S3, a prefix holding at least one object (or a bucket)."""
    text = _str(path)
    if not is_remote(text):
        return os.path.isdir(_local(text))
    fs, p = fs_and_path(text)
    return fs.isdir(p)


def read_bytes(path: str | os.PathLike) -> bytes:
    text = _str(path)
    if not is_remote(text):
        with open(_local(text), "rb") as fh:
            return fh.read()
    fs, p = fs_and_path(text)
    return fs.cat_file(p)


def read_text(path: str | os.PathLike, encoding: str = "utf-8") -> str:
    return read_bytes(path).decode(encoding)


def write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write a whole file atomically: readers see the old content or the new one, never a part.

    Locally a temporary file in the same folder, then os.replace; on S3 one PUT (atomic per object). Parent folders
    are created locally.
    """
    text = _str(path)
    if is_remote(text):
        fs, p = fs_and_path(text)
        upload(fs, text, protocol(text) in ("s3", "s3a"), len(data), lambda **kw: fs.pipe_file(p, bytes(data), **kw))
        return
    target = _local(text)
    folder = os.path.dirname(os.path.abspath(target))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path: str | os.PathLike, text: str, encoding: str = "utf-8") -> None:
    write_bytes(path, text.encode(encoding))


def put_file(local: str | os.PathLike, path: str | os.PathLike) -> None:
    """Copy a local file to ``path`` atomically, streamed (not held in memory).

    Locally a temporary copy in the target folder, then os.replace; on S3 an upload that becomes visible whole
    when it completes (one PUT, or a multipart upload for large files: S3 shows the object only once completed).
    """
    src, text = _local(_str(local)), _str(path)
    if is_remote(text):
        fs, p = fs_and_path(text)
        upload(fs, text, protocol(text) in ("s3", "s3a"), os.path.getsize(src), lambda **kw: fs.put_file(src, p, **kw))
        return
    target = _local(text)
    folder = os.path.dirname(os.path.abspath(target))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out, open(src, "rb") as fh:
            shutil.copyfileobj(fh, out, BLOCK)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def rm(path: str | os.PathLike) -> None:
    """Remove one file (one object on S3); no error if it is missing. Folders: rm_tree."""
    text = _str(path)
    if not is_remote(text):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_local(text))
        return
    fs, p = fs_and_path(text)
    with contextlib.suppress(FileNotFoundError):
        fs.rm_file(p)


def open_read(path: str | os.PathLike, *, block_size: int | None = None) -> IO[bytes]:
    """A seekable binary file object (a context manager). On S3 it reads ranges on demand with read-ahead of
    ``block_size`` bytes (s3fs's default, 50 MiB, when None), so a long file is not downloaded whole to read its
    header or a segment."""
    text = _str(path)
    if not is_remote(text):
        return open(_local(text), "rb")
    fs, p = fs_and_path(text)
    return fs.open(p, "rb", **({"block_size": block_size} if block_size else {}))


def listdir(path: str | os.PathLike) -> list[str]:
    """Entries of a folder (files and sub-folders) as full paths/URLs, sorted; [] if it does not exist."""
    text = _str(path)
    if not is_remote(text):
        local = _local(text)
        if not os.path.isdir(local):
            return []
        return sorted(os.path.join(text, entry) for entry in os.listdir(local))
    fs, p = fs_and_path(text)
    try:
        entries = fs.ls(p.rstrip("/"), detail=False)
    except FileNotFoundError:
        return []
    base = p.rstrip("/")
    return sorted(_with_scheme(e.rstrip("/"), text) for e in entries if e.rstrip("/") != base)


def glob(pattern: str | os.PathLike) -> list[str]:
    """Paths/URLs matching a glob pattern (``**`` recurses), sorted, the scheme kept."""
    text = _str(pattern)
    if not is_remote(text):
        return sorted(_glob.glob(text, recursive=True))
    fs, p = fs_and_path(text)
    return sorted(_with_scheme(m, text) for m in fs.glob(p))


def find(path: str | os.PathLike) -> list[str]:
    """All files under a folder (recursively) as full paths/URLs, sorted; [] if it does not exist."""
    text = _str(path)
    if not is_remote(text):
        local = _local(text)
        out = [os.path.join(text, os.path.relpath(os.path.join(d, f), local))
               for d, _, files in os.walk(local) for f in files]
        return sorted(out)
    fs, p = fs_and_path(text)
    try:
        return sorted(_with_scheme(m, text) for m in fs.find(p.rstrip("/") + "/"))
    except FileNotFoundError:
        return []


def rm_tree(path: str | os.PathLike) -> None:
    """Remove a folder (or on S3 every object under the prefix ``path/``) and all it holds; no error if missing."""
    text = _str(path)
    if not is_remote(text):
        local = _local(text)
        if os.path.isdir(local) and not os.path.islink(local):
            shutil.rmtree(local)
        elif os.path.lexists(local):
            os.unlink(local)
        return
    fs, p = fs_and_path(text)
    # Only keys under "p/": a sibling "p-other/" shares the string prefix and must survive.
    keys = [k for k in fs.find(p.rstrip("/") + "/")]
    if keys:
        fs.rm(keys)
    with contextlib.suppress(FileNotFoundError):
        if fs.isfile(p):
            fs.rm_file(p)


def sha256(path: str | os.PathLike) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open_read(path) as fh:
        while block := fh.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def stored_sha256(path: str | os.PathLike) -> tuple[int, str | None]:
    """(size, hex SHA-256 the store keeps for the object, or None where it keeps none) in one request: S3's
    full-object checksum (written by `write_bytes` / `put_file`); a local file or another store: (size, None)."""
    text = _str(path)
    if protocol(text) not in ("s3", "s3a"):
        return size(text), None
    fs, p = fs_and_path(text)
    bucket, key, _ = fs.split_path(p)
    head = fs.call_s3("head_object", Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    return int(head["ContentLength"]), full_object_sha256(head)


def size(path: str | os.PathLike) -> int:
    text = _str(path)
    if not is_remote(text):
        return os.path.getsize(_local(text))
    fs, p = fs_and_path(text)
    return int(fs.size(p))


def ensure_dir(path: str | os.PathLike) -> None:
    """Create a local folder (and its parents); a no-op on S3, which has no folders."""
    text = _str(path)
    if not is_remote(text):
        os.makedirs(_local(text), exist_ok=True)


@contextlib.contextmanager
def local_copy(path: str | os.PathLike) -> Iterator[str]:
    """A local file path holding ``path``'s bytes (the path itself when local; a temporary download otherwise),
    for libraries that only take file names."""
    text = _str(path)
    if not is_remote(text):
        yield _local(text)
        return
    # the same file name in a temporary folder: libraries pick the format by the full suffix (".jsonl.gz")
    with tempfile.TemporaryDirectory(prefix="whisperline-fetch-") as folder:
        tmp = os.path.join(folder, name(text))
        with open(tmp, "wb") as out, open_read(text) as src:
            shutil.copyfileobj(src, out, BLOCK)
        yield tmp
