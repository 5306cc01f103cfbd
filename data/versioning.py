"""Identity of code and datasets: a dataset version id is a hash of everything that made it."""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib.metadata import version
from pathlib import Path

from configs.dataset import DatasetConfig

_ROOT = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=8)
def code_version(*folders: str) -> str:
    """Package version + hash of the source files that shape a result: by default a dataset's (data/,
    configs/dataset.py); ``folders`` (relative to the repository) for others, e.g. a training run's."""
    digest = hashlib.sha256()
    if folders:
        files = sorted(p for f in folders for p in (_ROOT / f).rglob("*.py"))
    else:
        files = sorted((_ROOT / "data").rglob("*.py")) + [_ROOT / "configs" / "dataset.py"]
    for path in files:
        digest.update(path.relative_to(_ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return f"{version('whisperline')}+{digest.hexdigest()[:12]}"


def dataset_version_id(inputs_digest: str, cfg: DatasetConfig, aligner_version: str, tokenizer: str) -> str:
    """sha256 over the inputs table's digest (every input's content key and split, in build order, and the scan's
    rejects: ``data.inputs.write_inputs``), the config, the aligner, the tokenizer and the code."""
    payload = {
        "inputs": inputs_digest,
        "config": json.loads(cfg.canonical_json()),
        "aligner": aligner_version,
        "tokenizer": tokenizer,
        "code": code_version(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
