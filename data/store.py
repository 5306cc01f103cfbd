"""Content-addressed work store under ``<output root>/.work``.

Per-utterance results (prepared audio, alignments) and batch parts are files named by the hash of everything
that determines them, so a rebuild that changes one input redoes exactly that input. The root may be a local
folder or an object-store prefix (every worker of a cluster shares it); writes are atomic either way (data/fs.py).
A random ``store_id`` names this store: delete the folder and everything keyed on it stops matching.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

from data import fs


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


class WorkStore:
    """Under a local folder or an object-store prefix (``s3://…``): on a cluster every worker shares it."""

    def __init__(self, root: str | Path) -> None:
        self.fs = fs
        self.root = str(root)
        fs.ensure_dir(self.root)
        id_file = fs.join(self.root, "store_id")
        if not fs.exists(id_file):
            fs.write_bytes(id_file, uuid.uuid4().hex.encode())
        self.store_id = fs.read_bytes(id_file).decode().strip()

    def _path(self, kind: str, key: str, suffix: str) -> str:
        return self.fs.join(self.root, kind, key[:2], f"{key}{suffix}")

    def put_blob(self, kind: str, data: bytes, suffix: str) -> str:
        key = hashlib.sha256(data).hexdigest()
        path = self._path(kind, key, suffix)
        if not self.fs.exists(path):
            self.fs.write_bytes(path, data)
        return key

    def get_blob(self, kind: str, key: str, suffix: str) -> bytes:
        return self.fs.read_bytes(self._path(kind, key, suffix))

    def put_json(self, kind: str, key: str, value: object) -> None:
        self.fs.write_bytes(self._path(kind, key, ".json"), json.dumps(value, sort_keys=True).encode())

    def get_json(self, kind: str, key: str) -> object | None:
        try:
            return json.loads(self.fs.read_bytes(self._path(kind, key, ".json")))
        except FileNotFoundError:
            return None
        except (OSError, json.JSONDecodeError, UnicodeDecodeError):  # a torn write from a killed run: recompute
            return None
