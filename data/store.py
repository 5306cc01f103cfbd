"""Content-addressed work store under ``<output root>/.work``.

Per-utterance results (prepared audio, alignments) are files named by the hash of everything
that determines them, so a rebuild that changes one input redoes exactly that input. A random
``store_id`` names this store in Prefect cache keys: delete the folder and every cached task
result that points into it stops matching.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import uuid
from pathlib import Path


def file_sha256(path: str | Path, block: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_text(*parts: str) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode())
        digest.update(b"\x1f")  # unit separator: ("ab","c") and ("a","bc") hash differently
    return digest.hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class WorkStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        id_file = self.root / "store_id"
        if not id_file.exists():
            atomic_write(id_file, uuid.uuid4().hex.encode())
        self.store_id = id_file.read_text().strip()

    def _path(self, kind: str, key: str, suffix: str) -> Path:
        return self.root / kind / key[:2] / f"{key}{suffix}"

    def put_blob(self, kind: str, data: bytes, suffix: str) -> str:
        key = hashlib.sha256(data).hexdigest()
        path = self._path(kind, key, suffix)
        if not path.exists():
            atomic_write(path, data)
        return key

    def get_blob(self, kind: str, key: str, suffix: str) -> bytes:
        return self._path(kind, key, suffix).read_bytes()

    def put_json(self, kind: str, key: str, value: object) -> None:
        atomic_write(self._path(kind, key, ".json"), json.dumps(value, sort_keys=True).encode())

    def get_json(self, kind: str, key: str) -> object | None:
        path = self._path(kind, key, ".json")
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):  # a torn write from a killed run: recompute
            return None
