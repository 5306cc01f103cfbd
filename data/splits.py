"""Stable train/dev/test assignment by hashing a group id (speaker or utterance), never by position.

Adding or removing other utterances never moves an utterance to another split, and with
`split_by="speaker"` no speaker is in two splits.

`split_balance="words"` (``assign_balanced``) trades that stability for sizes: a small real corpus has a few large
groups, and a plain hash can land most of them on one side. Balanced assignment deals the groups largest first (ties
in hash order) to the split furthest below its share of the words (longest-first: a large group dealt late cannot be
balanced). The result depends on the whole corpus (a new speaker can move others): fine for an evaluation corpus that
is rebuilt as one version, not for a growing training corpus. `split_by="auto"` splits each corpus by speaker when it
has several known speakers and by utterance otherwise (a corpus that grows from one speaker to two switches once).

`dominant_speaker_share` (``share_dominant_groups``): a speaker who holds a large share of all the words is a domain
of their own, and a speaker split would put that whole domain in one split, out of sight of every dev choice
(docs/decisions/dev-test-split.md). Such a speaker's utterances are hashed into the splits one by one, after every
other group has been placed, so that no other utterance moves. The price, that speaker in dev and test, is stated in
the dataset card (``speakers_in_several_splits``).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Sequence

UNKNOWN_SPEAKERS = frozenset({"", "unknown", "none", "n/a"})


def split_groups(items: Sequence, split_by: str) -> list[str]:
    """The id hashed into a split for each item (with ``utt_id``, ``speaker``, ``corpus``): the speaker, the
    utterance, or (auto) whichever holds out within the item's corpus."""
    known = known_speakers((i.speaker, i.corpus) for i in items) if split_by == "auto" else {}
    return [split_group(i.utt_id, i.speaker, i.corpus, split_by, known) for i in items]


def known_speakers(pairs: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """{corpus: its named speakers} from (speaker, corpus) pairs: what ``split_by: auto`` decides by."""
    known: dict[str, set[str]] = defaultdict(set)
    for speaker, corpus in pairs:
        if speaker.lower() not in UNKNOWN_SPEAKERS:
            known[corpus].add(speaker)
    return known


def split_group(utt_id: str, speaker: str, corpus: str, split_by: str, known: dict[str, set[str]]) -> str:
    """One item's group (:func:`split_groups`; ``known``: :func:`known_speakers` of the whole corpus, for auto)."""
    if split_by == "utterance":
        return utt_id
    if split_by == "speaker":
        return speaker
    if len(known.get(corpus, ())) >= 2 and speaker.lower() not in UNKNOWN_SPEAKERS:
        return f"{corpus}/{speaker}"
    return f"{corpus}/{utt_id}"


def share_dominant_groups(chosen: Sequence[str], groups: Sequence[str], utt_ids: Sequence[str],
                          weights: Sequence[float], splits: dict[str, float], salt: str, share: float
                          ) -> tuple[list[str], list[str]]:
    """(the split per item, the groups shared). Items of a group that holds more than ``share`` of all the weight
    (words), and that is more than one utterance, are placed by their own utterance hash; every other item keeps its
    split in ``chosen``."""
    if not 0 < share < 1:
        raise ValueError(f"dominant_speaker_share must be in (0, 1), got {share}")
    group_w: dict[str, float] = defaultdict(float)
    group_n: dict[str, int] = defaultdict(int)
    for g, w in zip(groups, weights, strict=True):
        group_w[g] += w
        group_n[g] += 1
    total = sum(group_w.values())
    dominant = {g for g, w in group_w.items() if group_n[g] > 1 and w > share * total}
    out = [assign_split(f"{g}/{u}", splits, salt) if g in dominant else s
           for s, g, u in zip(chosen, groups, utt_ids, strict=True)]
    return out, sorted(dominant)


def assign_split(group: str, splits: dict[str, float], salt: str) -> str:
    point = int.from_bytes(hashlib.sha256(f"{salt}\x1f{group}".encode()).digest()[:8], "big") / 2**64
    cumulative = 0.0
    names = sorted(splits)  # config dict order must not matter
    for name in names:
        cumulative += splits[name]
        if point < cumulative:
            return name
    return next(n for n in reversed(names) if splits[n] > 0)  # float round-off at the top end


def assign_balanced(groups: Sequence[str], weights: Sequence[float], splits: dict[str, float], salt: str
                    ) -> list[str]:
    """A split per item such that every group stays in one split and each split's share of the total weight (words)
    is as close to its fraction as whole groups allow (:func:`deal_groups`)."""
    if len(groups) != len(weights):
        raise ValueError(f"{len(groups)} groups for {len(weights)} weights")
    size: dict[str, float] = defaultdict(float)
    for g, w in zip(groups, weights, strict=True):
        size[g] += w
    chosen = deal_groups(size, splits, salt)
    return [chosen[g] for g in groups]


def deal_groups(size: dict[str, float], splits: dict[str, float], salt: str) -> dict[str, str]:
    """{group: split} from each group's weight. Groups are dealt largest first, equal sizes in the order of their
    hash (``salt``); what decides is the sizes, never the content; deterministic for one corpus."""
    total = sum(size.values()) or 1.0
    names = sorted(n for n in splits if splits[n] > 0)
    filled = {n: 0.0 for n in names}
    chosen: dict[str, str] = {}
    for g in sorted(size, key=lambda g: (-size[g], hashlib.sha256(f"{salt}\x1f{g}".encode()).digest())):
        # the split whose remaining room (target minus filled) is largest takes the group; ties by name
        name = max(names, key=lambda n: (splits[n] * total - filled[n], -names.index(n)))
        chosen[g] = name
        filled[name] += size[g]
    return chosen
