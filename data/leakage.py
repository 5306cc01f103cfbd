"""Leakage guard: no held-out utterance's audio may be in a run's training data.

`train` trains, `dev` selects (validation, early stopping, sweeps, promotion), `test` is only reported. A split name
is not proof: the same recording can sit in two dataset versions (two builds of one corpus, a corpus copied into
another) or in two splits of versions built with other split settings. So the guard compares content: the sha256
of every stored clip (``audio_sha256``) and of every source file (``source_sha256``: the same recording resampled
or re-encoded by another build still has the same source, plus the segment offset) of the training data against the held-out data, from
the manifests alone (no audio is read).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from data.manifest import read_manifest


class LeakageError(ValueError):
    """Held-out (validation / test) audio is part of the training data."""


def content_hashes(version_dirs: Sequence[str | Path], splits: Sequence[str]) -> dict[str, str]:
    """{sha256 → utterance id} of the clips and source files of ``splits`` in ``version_dirs``."""
    out: dict[str, str] = {}
    for version_dir in version_dirs:
        table = read_manifest(version_dir).select(["id", "split", "audio_sha256", "source_sha256",
                                                   "source_start_ms"]).to_pylist()
        for row in table:
            if row["split"] in splits:
                out[row["audio_sha256"]] = row["id"]
                # a segment of a longer recording is identified by its source file and offset
                out[f"{row['source_sha256']}@{row['source_start_ms']}"] = row["id"]
    return out


def check_held_out(train_dirs: Sequence[str | Path], train_splits: Sequence[str],
                   held_out_dirs: Sequence[str | Path], held_out_splits: Sequence[str], *,
                   what: str = "validation", allow: bool = False) -> int:
    """Refuse (``LeakageError``, before any training) when held-out audio is in the training data; returns the
    number of overlapping utterances (0 unless ``allow``: an explicitly held-in validation, e.g. a smoke test)."""
    if not held_out_dirs:
        return 0
    train = content_hashes(train_dirs, train_splits)
    held = content_hashes(held_out_dirs, held_out_splits)
    shared = sorted({(held[h], train[h]) for h in held.keys() & train.keys()})
    if shared and not allow:
        examples = ", ".join(f"{h} (= training {t})" for h, t in shared[:5])
        raise LeakageError(
            f"{len(shared)} {what} utterance(s) of splits {list(held_out_splits)} are in the training data "
            f"(splits {list(train_splits)}): {examples}{' …' if len(shared) > 5 else ''}. Train on `train`, select "
            "on `dev`, report on `test`; set allow_held_in_validation only for a run whose validation numbers are "
            "labelled held-in")
    return len(shared)
