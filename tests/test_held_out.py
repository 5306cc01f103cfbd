"""Held-out data: speaker-aware splits of the real corpora, and the leakage guard that refuses to train on
validation audio (real manifests of a real build, a real training entry point)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from data.corpus import read_folder, speaker_from_id
from data.leakage import LeakageError, check_held_out
from data.splits import assign_split, split_groups

SPLITS = {"train": 0.4, "dev": 0.2, "test": 0.4}  # configs/pipeline.py real_splits


def _real_items(realspeech: Path) -> list:
    items = []
    for root in (realspeech, realspeech.parent / "realspeech-more"):
        for folder in sorted(p for p in root.iterdir() if (p / "transcripts.tsv").exists()):
            items += read_folder(folder)[0]
    return items


def test_speaker_ids_from_corpus_conventions():
    assert speaker_from_id("cmu_us_aew_a0002") == "aew"
    assert speaker_from_id("ls-1272-128104-0000") == "1272" and speaker_from_id("1995-1837-0001") == "1995"
    assert speaker_from_id("vctk-p225_001") == "p225"
    assert speaker_from_id("LJ001-0001") is None  # one speaker: the folder name stands for it


def test_auto_split_holds_out_speakers_or_utterances(realspeech):
    items = _real_items(realspeech)
    groups = split_groups(items, "auto")
    split_of = [assign_split(g, SPLITS, "whisperline-v1") for g in groups]
    by_speaker: dict[tuple[str, str], set[str]] = defaultdict(set)
    by_corpus: dict[str, set[str]] = defaultdict(set)
    for item, split in zip(items, split_of):
        by_speaker[(item.corpus, item.speaker)].add(split)
        by_corpus[item.corpus].add(split)
    # multi-speaker corpora: no speaker in two splits
    for corpus in ("an4", "cmu_arctic", "librispeech", "vctk"):
        speakers = {s for c, s in by_speaker if c == corpus}
        assert len(speakers) >= 2, corpus
        assert all(len(by_speaker[(corpus, s)]) == 1 for s in speakers), corpus
    # a single-speaker corpus is split by utterance: LJSpeech reaches every split
    assert by_corpus["ljspeech"] == {"train", "dev", "test"}
    # every split has real speech from several speakers
    for split in SPLITS:
        assert len({(i.corpus, i.speaker) for i, s in zip(items, split_of) if s == split}) >= 5, split
    assert split_groups(items, "speaker") == [i.speaker for i in items]
    assert split_groups(items, "utterance") == [i.utt_id for i in items]


def test_leakage_guard_on_real_manifests(real_shards, tmp_path_factory, realspeech, prefect_server):
    from configs.dataset import DatasetConfig
    from conftest import copy_realspeech_subset
    from flows.build_dataset import run_build

    with pytest.raises(LeakageError, match="6 validation utterance"):
        check_held_out([real_shards], ["train"], [real_shards], ["train"])
    assert check_held_out([real_shards], ["train"], [real_shards], ["train"], allow=True) == 6
    assert check_held_out([real_shards], ["train"], [real_shards], ["dev"]) == 0  # no dev split: nothing shared
    # the same recordings built again under another name and split are still caught (content, not names)
    corpus = copy_realspeech_subset(tmp_path_factory.mktemp("again"), realspeech, {"cmu_arctic": 2})
    other = run_build(str(corpus), str(tmp_path_factory.mktemp("ds")),
                      DatasetConfig(name="other", split_by="utterance", splits={"test": 1.0}), workers=1)
    with pytest.raises(LeakageError, match="2 test utterance"):
        check_held_out([real_shards], ["train"], [other["version_dir"]], ["test"], what="test")


def test_training_refuses_before_any_run(real_shards, tmp_path):
    from configs.finetune import FinetuneConfig
    from training.causal.run import run_finetune
    from data.tracking import client

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    cfg = FinetuneConfig(datasets=(str(real_shards),), validation_datasets=(str(real_shards),),
                         validation_splits=("train",), max_steps=1, tracking_uri=uri, experiment="leak",
                         storage_path=str(tmp_path / "ray"), output_dir=str(tmp_path / "adapters"))
    with pytest.raises(LeakageError, match="validation utterance"):
        run_finetune(cfg)
    assert client(uri).get_experiment_by_name("leak") is None  # nothing was trained or tracked
    assert not (tmp_path / "ray").exists()


def test_training_refuses_datasets_of_another_vocabulary(real_shards, tmp_path):
    """real_shards hold tiny.en's GPT-2 token ids: the multilingual base must not train on them."""
    from configs.finetune import FinetuneConfig
    from data.utterances import DatasetError, check_tokenizer
    from training.causal.run import run_finetune

    check_tokenizer("tiny.en", [real_shards])  # its own vocabulary: accepted
    with pytest.raises(DatasetError, match="tokenizer: multilingual"):
        check_tokenizer("base", [real_shards])
    cfg = FinetuneConfig(model="base", datasets=(str(real_shards),), max_steps=1,
                         tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", storage_path=str(tmp_path / "ray"))
    with pytest.raises(DatasetError, match="real-train \\(whisper-gpt2\\)"):
        run_finetune(cfg)
    assert not (tmp_path / "ray").exists() and not (tmp_path / "mlflow.db").exists()
