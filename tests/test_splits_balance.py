"""Words-balanced splits for small evaluation corpora, and transcriber annotations kept out of references."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from data.corpus import read_folder, strip_annotations
from data.splits import assign_balanced, assign_split


def test_one_large_speaker_no_longer_decides_the_split_sizes():
    # five speakers, one of them holding most of the words (the mfa folder: 504 of 525 words)
    groups = ["big"] * 50 + [f"s{i}" for i in range(40) for _ in range(2)]
    weights = [10] * 50 + [5] * 80
    splits = {"train": 0.0, "dev": 0.4, "test": 0.6}
    chosen = assign_balanced(groups, weights, splits, "whisperline-v1")
    words = Counter()
    for s, w in zip(chosen, weights):
        words[s] += w
    assert set(chosen) == {"dev", "test"}  # a zero fraction gets nothing
    assert abs(words["test"] / sum(weights) - 0.6) < 0.03
    # every group stays whole: no speaker in two splits
    by_group = {}
    for g, s in zip(groups, chosen):
        assert by_group.setdefault(g, s) == s
    # deterministic, and independent of the order the items come in
    again = assign_balanced(groups[::-1], weights[::-1], splits, "whisperline-v1")[::-1]
    assert again == chosen


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(1, 40)), min_size=1, max_size=80))
def test_balanced_shares_are_within_the_largest_group(items):
    groups = [f"g{g}" for g, _ in items]
    weights = [w for _, w in items]
    splits = {"dev": 0.4, "test": 0.6}
    chosen = assign_balanced(groups, weights, splits, "salt")
    total = sum(weights)
    size = Counter()
    for g, w in zip(groups, weights):
        size[g] += w
    got = Counter()
    for s, w in zip(chosen, weights):
        got[s] += w
    # longest-first dealing: each split misses its target by at most the largest group
    for name, frac in splits.items():
        assert abs(got[name] - frac * total) <= max(size.values()) + 1e-9



def test_annotations_are_dropped_and_an_annotation_only_line_is_rejected(tmp_path):
    assert strip_annotations("<cutoff-montreal> montreal [laughter] forced <unk> aligner") == \
        "montreal forced aligner"
    assert strip_annotations("a<b> [x y] c") == "a<b> [x y] c"  # only whole tokens are annotations
    import numpy as np
    import soundfile as sf

    (tmp_path / "wav").mkdir()
    for utt in ("u1", "u2"):
        sf.write(tmp_path / "wav" / f"{utt}.wav", np.zeros(1600, dtype=np.float32), 16_000)
    (tmp_path / "transcripts.tsv").write_text("u1\t[laughter] hello <unk> world\nu2\t[noise] <unk>\n")
    items, rejects = read_folder(tmp_path)
    assert [(i.utt_id, i.transcript) for i in items] == [("u1", "hello world")]
    assert [(r.utt_id, r.reason) for r in rejects] == [("u2", "annotations_only")]
