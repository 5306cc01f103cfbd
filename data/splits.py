"""Stable train/dev/test assignment by hashing a group id (speaker or utterance), never by position.

Adding or removing other utterances never moves an utterance to another split, and with
`split_by="speaker"` no speaker is in two splits.
"""

from __future__ import annotations

import hashlib


def assign_split(group: str, splits: dict[str, float], salt: str) -> str:
    point = int.from_bytes(hashlib.sha256(f"{salt}\x1f{group}".encode()).digest()[:8], "big") / 2**64
    cumulative = 0.0
    names = sorted(splits)  # config dict order must not matter
    for name in names:
        cumulative += splits[name]
        if point < cumulative:
            return name
    return next(n for n in reversed(names) if splits[n] > 0)  # float round-off at the top end
