"""Stable train/dev/test assignment by hashing a group id (speaker or utterance), never by position.

Adding or removing other utterances never moves an utterance to another split, and with
`split_by="speaker"` no speaker is in two splits. `split_by="auto"` splits each corpus by speaker when it has
several known speakers and by utterance otherwise (a corpus that grows from one speaker to two switches once).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Sequence

UNKNOWN_SPEAKERS = frozenset({"", "unknown", "none", "n/a"})


def split_groups(items: Sequence, split_by: str) -> list[str]:
    """The id hashed into a split for each item (with ``utt_id``, ``speaker``, ``corpus``): the speaker, the
    utterance, or (auto) whichever holds out within the item's corpus."""
    if split_by == "utterance":
        return [i.utt_id for i in items]
    if split_by == "speaker":
        return [i.speaker for i in items]
    known: dict[str, set[str]] = defaultdict(set)
    for i in items:
        if i.speaker.lower() not in UNKNOWN_SPEAKERS:
            known[i.corpus].add(i.speaker)
    return [f"{i.corpus}/{i.speaker}" if len(known[i.corpus]) >= 2 and i.speaker.lower() not in UNKNOWN_SPEAKERS
            else f"{i.corpus}/{i.utt_id}" for i in items]


def assign_split(group: str, splits: dict[str, float], salt: str) -> str:
    point = int.from_bytes(hashlib.sha256(f"{salt}\x1f{group}".encode()).digest()[:8], "big") / 2**64
    cumulative = 0.0
    names = sorted(splits)  # config dict order must not matter
    for name in names:
        cumulative += splits[name]
        if point < cumulative:
            return name
    return next(n for n in reversed(names) if splits[n] > 0)  # float round-off at the top end
