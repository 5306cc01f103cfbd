"""The inputs table (data/inputs.py): what the scan writes is what the batches read back, by row range."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from configs.dataset import DatasetConfig
from data import inputs
from data.corpus import CorpusItem, sample_key
from data.records import Reject, Scanned
from data.scan import item_table


def _scanned(n: int, seed: int = 0) -> list[Scanned]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        item = CorpusItem(f"utt-{i:05d}", f"/audio/{i}.wav", f"words of utterance {i}", f"spk{rng.randrange(7)}",
                          rng.choice(["ljspeech", "arctic"]), 0.0 if i % 3 else 1.5, None if i % 2 else 2.25)
        out.append(Scanned(item, f"{i:064x}"))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(0, 90), batch=st.integers(1, 40), group=st.integers(1, 33))
def test_batches_read_back_every_input_once_in_build_order(tmp_path_factory, monkeypatch, n, batch, group):
    monkeypatch.setattr(inputs, "ROW_GROUP", group)  # batches straddle row groups
    cfg = DatasetConfig(name="t", align_batch_size=batch)
    scanned = _scanned(n)
    ref = inputs.write_inputs(scanned, [], cfg, str(tmp_path_factory.mktemp("work")))
    assert (ref.rows, ref.rejects) == (n, 0)
    back, splits = [], []
    for b in inputs.plan_batches(ref, batch):
        assert 0 < b.stop - b.start <= batch
        rows, row_splits = inputs.read_batch(b)
        back += rows
        splits += row_splits
    expected = dict(zip([s.item.utt_id for s in scanned],
                        inputs.assign_splits(item_table(s.item for s in scanned), cfg).to_pylist()))
    assert sorted(back, key=lambda s: s.item.utt_id) == scanned  # every field survives, nothing lost or doubled
    assert splits == [expected[s.item.utt_id] for s in back]
    assert [(sp, sample_key(s.item.utt_id)) for s, sp in zip(back, splits)] == sorted(
        (sp, sample_key(s.item.utt_id)) for s, sp in zip(back, splits))


def test_the_table_is_named_by_its_content(tmp_path):
    cfg = DatasetConfig(name="t")
    scanned = _scanned(50)
    rejects = [Reject("bad-1", "/audio/bad.wav", None, "scan", "unreadable_audio", "no such file")]
    a = inputs.write_inputs(scanned, rejects, cfg, str(tmp_path / "a"))
    b = inputs.write_inputs(list(reversed(scanned)), rejects, cfg, str(tmp_path / "b"))
    assert a.digest == b.digest  # the corpus's listing order does not matter
    assert open(a.path, "rb").read() == open(b.path, "rb").read()
    assert inputs.read_scan_rejects(a) == rejects
    assert a.n_inputs == 51
    changed = [*scanned[:-1], Scanned(scanned[-1].item, "f" * 64)]  # one input's bytes changed
    assert inputs.write_inputs(changed, rejects, cfg, str(tmp_path / "a")).digest != a.digest
    resplit = DatasetConfig(name="t", split_salt="other")
    assert inputs.write_inputs(scanned, rejects, resplit, str(tmp_path / "a")).digest != a.digest
    assert inputs.write_inputs(scanned, [], cfg, str(tmp_path / "a")).digest != a.digest


def test_a_batch_outside_the_table_is_refused(tmp_path):
    ref = inputs.write_inputs(_scanned(10), [], DatasetConfig(name="t"), str(tmp_path))
    with pytest.raises(ValueError, match=r"rows \[8, 12\) are not in"):
        inputs.read_batch(inputs.BatchRef(0, ref.path, 8, 12))
    with pytest.raises(ValueError, match="batch_size"):
        inputs.plan_batches(ref, 0)


def test_a_dominant_speaker_is_shared_through_the_config():
    # 60 utterances of one speaker among 40 single-utterance ones: the speaker holds 60 % of the words
    items = [Scanned(CorpusItem(f"utt-{i:03d}", f"/a/{i}.wav", "one two three", "big" if i < 60 else f"s{i}",
                                "mfa", 0.0, None), f"{i:064x}") for i in range(100)]
    table = item_table(s.item for s in items)
    whole = DatasetConfig(name="t", split_by="speaker", splits={"dev": 0.4, "test": 0.6}, split_balance="words")
    split = inputs.assign_splits(table, whole).to_pylist()
    assert len({split[i] for i in range(60)}) == 1  # a speaker split keeps the speaker whole
    shared = inputs.assign_splits(table, whole.model_copy(update={"dominant_speaker_share": 0.3})).to_pylist()
    assert {shared[i] for i in range(60)} == {"dev", "test"}
    assert shared[60:] == split[60:]
    with pytest.raises(ValueError):
        DatasetConfig(name="t", dominant_speaker_share=1.0)
