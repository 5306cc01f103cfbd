"""The test ledger: every time a `test` split is scored, one line says when, at which commit, which systems and why.

`train` trains, `dev` selects, `test` is only reported. A split that is scored again after a change was made because
of its numbers has become a selection set; the ledger makes that visible: the report states how often its test set
(identified by the content hash of its audio) had been scored before, and the ledger is committed beside the
results (``benchmarks/results/test_ledger.jsonl``). Purposes: ``release`` (the one scoring a result is quoted
from) or anything else a caller states (``smoke``, ``pipeline``); only ``release`` rows are counted as spending
the split.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from filelock import FileLock

from data.tracking import git_commit


def read_ledger(path: str | Path) -> list[dict[str, Any]]:
    """The ledger's rows (empty when there is none yet)."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _scorings(path: str | Path, audio_sha256: str, purpose: str | None) -> list[dict[str, Any]]:
    """The ledger's rows for the test set with this audio hash (for ``purpose``; None: any purpose)."""
    return [r for r in read_ledger(path)
            if r.get("audio_sha256") == audio_sha256 and (purpose is None or r.get("purpose") == purpose)]


def times_scored(path: str | Path, audio_sha256: str, purpose: str | None = "release") -> int:
    """How often the test set with this audio hash was scored (for ``purpose``; None: any purpose)."""
    return len(_scorings(path, audio_sha256, purpose))


def scored_per_system(path: str | Path, audio_sha256: str, purpose: str | None = "release") -> dict[str, int]:
    """How often each system was scored on the test set with this audio hash (for ``purpose``): a release scored
    in parts spends the split once per system, and a system scored twice is what the ledger exists to show."""
    return dict(Counter(name for r in _scorings(path, audio_sha256, purpose) for name in r.get("systems", [])))


def record_scoring(path: str | Path, *, test_set: dict[str, Any], systems: Sequence[str], purpose: str,
                   commit: str | None = None, command: str | None = None) -> dict[str, Any]:
    """Append one line for a scoring of ``test_set`` (``describe``'s dict: ``audio_sha256``, ``n_utterances``,
    ``splits``…) and return it with ``times_scored`` (this scoring included, same purpose). Appends under a file
    lock: two evaluations finishing at once both land."""
    if not test_set.get("audio_sha256"):
        raise ValueError("a test-set scoring needs the set's audio_sha256 (evaluation.sets.describe)")
    if commit is None:
        commit = git_commit()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": commit, "purpose": purpose,
           "audio_sha256": test_set["audio_sha256"], "splits": list(test_set.get("splits", [])),
           "n_utterances": test_set.get("n_utterances"), "n_words": test_set.get("n_words"),
           "systems": list(systems), **({"command": command} if command else {})}
    with FileLock(str(path) + ".lock"):
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
        row["times_scored"] = times_scored(path, row["audio_sha256"], purpose)
    return row
