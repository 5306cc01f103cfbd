"""The real held-out sets read in place from ../shared/data: speechocean762 (L2 English, Ogg Opus) read as a corpus
folder, split by speaker with children and adults in every split, built into a dataset version whose utterances are
the `l2` domain of the dev and test sets; the continuous recordings split by recording into a long-form dev and test
set."""

from __future__ import annotations

import csv
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from benchmarks.evaluation import L2_CORPUS, LONGFORM_SPLITS
from configs.pipeline import PipelineConfig
from data.corpus import read_corpus
from data.splits import assign_split, deal_groups

SHARED = Path(os.environ.get("WHISPERLINE_SHARED_DATA", "../shared/data"))
ROOT = SHARED / L2_CORPUS


@pytest.fixture(scope="module")
def l2_root() -> Path:
    if not (ROOT / "transcripts.tsv").exists():
        pytest.fail(f"speechocean762 not found at {ROOT}; set WHISPERLINE_SHARED_DATA")
    return ROOT


def test_the_corpus_reads_whole_from_its_opus_folder(l2_root):
    scan = read_corpus(l2_root)
    assert len(scan.items) == 4600 and not scan.rejects
    assert {i.corpus for i in scan.items} == {"speechocean762"} and len({i.speaker for i in scan.items}) == 230
    assert all(i.audio_path.endswith(".opus") for i in scan.items)


def test_the_speaker_split_holds_children_and_adults_in_each_split(l2_root):
    from configs.dataset import DatasetConfig

    salt = DatasetConfig().split_salt  # the split the dataset build makes (split_by: speaker)
    info = list(csv.DictReader((l2_root / "speaker_info.tsv").open(), delimiter="\t"))
    split = {r["speaker"]: assign_split(r["speaker"], PipelineConfig().real_train_splits, salt) for r in info}
    groups = Counter((split[r["speaker"]], "child" if int(r["age"]) <= 15 else "adult") for r in info)
    for name in ("dev", "test"):
        assert groups[(name, "child")] + groups[(name, "adult")] >= 20, groups
        assert groups[(name, "child")] >= 5 and groups[(name, "adult")] >= 5, groups
    assert groups[("train", "child")] + groups[("train", "adult")] > 150


def test_a_build_decodes_the_opus_audio_and_keeps_speakers_apart(l2_root, tmp_path, prefect_server):
    from configs.dataset import DatasetConfig
    from evaluation.sets import load_split
    from flows.build_dataset import run_build

    lines = (l2_root / "transcripts.tsv").read_text().splitlines()
    speakers = dict(line.split("\t") for line in (l2_root / "speakers.tsv").read_text().splitlines())
    picked = [ln for ln in lines if speakers[ln.split("\t")[0]] in ("0001", "0003", "0024")][::8]
    corpus = tmp_path / "speechocean762"  # a subset: links to the shared files, never copies
    (corpus / "opus").mkdir(parents=True)
    (corpus / "transcripts.tsv").write_text("\n".join(picked) + "\n")
    (corpus / "speakers.tsv").write_text("".join(f"{ln.split(chr(9))[0]}\t{speakers[ln.split(chr(9))[0]]}\n"
                                                 for ln in picked))
    for ln in picked:
        utt = ln.split("\t")[0]
        (corpus / "opus" / f"{utt}.opus").symlink_to((l2_root / "opus" / f"{utt}.opus").resolve())
    cfg = DatasetConfig(name="l2", split_by="speaker", splits={"train": 0.5, "test": 0.5}, shard_size=4)
    summary = run_build(str(corpus), str(tmp_path / "datasets"), cfg, workers=1)
    counts = summary["counts"]
    assert counts["inputs"] == len(picked) and counts["accepted"] + counts["rejected"] == len(picked), counts
    assert counts["accepted"] >= len(picked) - 2, counts  # a child may skip a word of the prompt: a reject, not a crash
    assert counts["speakers_in_several_splits"] == [], counts  # split by speaker: none shared
    utts = load_split([summary["version_dir"]], list(counts["per_split"]))
    assert utts and all(u.domain == "l2" for u in utts)
    assert all(u.audio.dtype == np.float32 and 0.5 < len(u.audio) / 16000 < 25 for u in utts)


def test_the_long_form_recordings_split_whole_into_a_dev_and_a_test_set():
    """What the long-form dataset's build deals (``split_by: utterance`` = recording, ``split_balance: words``):
    dev at least 6 minutes, test at least 12 minutes in at least 3 recordings."""
    from configs.dataset import DatasetConfig

    root = SHARED / "longform"
    if not (root / "transcripts.tsv").exists():
        pytest.fail(f"long-form recordings not found at {root}; set WHISPERLINE_SHARED_DATA")
    words = {ln.split("\t")[0]: len(ln.split("\t")[1].split()) for ln in root.joinpath("transcripts.tsv")
             .read_text().splitlines()}
    seconds = {r["id"]: float(r["seconds"]) for r in csv.DictReader((root / "SOURCES.tsv").open(), delimiter="\t")}
    split = deal_groups(words, LONGFORM_SPLITS, DatasetConfig().split_salt)
    minutes = {name: sum(seconds[r] for r in words if split[r] == name) / 60 for name in LONGFORM_SPLITS}
    assert set(split) == set(seconds) and minutes["dev"] >= 6 and minutes["test"] >= 12, minutes
    assert sum(split[r] == "test" for r in words) >= 3


def test_the_real_training_speech_trains_by_the_adopted_share_only():
    """`make run REAL=1`: speechocean762 split by speaker, its prompts in written form, in the one place the release
    reads too; its train speakers train by the profile's adopted share, passed to the finetune stage as a dataset
    fraction."""
    from configs.pipeline import load_pipeline_config

    profile = load_pipeline_config("configs/smoke.yaml")
    data = profile.real_train_dataset("speechocean762")
    assert data.split_by == "speaker" and data.splits == profile.real_train_splits and data.name == "speechocean762"
    assert data.text_form == "written" and profile.real_train_fraction == 1.0  # docs/decisions/real-speech-written.md
    cfg = profile.finetune_config(["a", "b"], ["b"], {"speechocean762": 0.25})
    assert cfg.dataset_fractions == {"speechocean762": 0.25} and cfg.datasets == ("a", "b")
    assert profile.finetune_config(["a"]).dataset_fractions == {}
    with pytest.raises(ValueError):
        load_pipeline_config("configs/smoke.yaml", real_train_fraction=1.5)


def test_the_written_prompts_score_as_the_corpus_prompts(l2_root, tmp_path):
    """The L2 prompts stored in written form (the adopted training targets) are, once normalised for scoring, the
    corpus's own words on every one of its 4,600 prompts: dev and test WER cannot move by it. The inputs table holds
    them so, and is another version than the prompts as they are."""
    from configs.dataset import DatasetConfig
    from data import inputs
    from data.scan import scan
    from data.text import written_form
    from evaluation.metrics.text import normalize

    prompts = [ln.split("\t", 1)[1] for ln in (l2_root / "transcripts.tsv").read_text().splitlines()]
    assert len(prompts) == 4600 and all(normalize(written_form(p)) == normalize(p) for p in prompts)
    assert sum(written_form(p) != p for p in prompts) == 4600  # every prompt is in capitals

    table, rejects = scan(str(l2_root), hash_file=lambda path: path)  # ids, not bytes: the table is the point here
    written = DatasetConfig(name="l2", split_by="speaker", text_form="written")
    refs = {form: inputs.write_inputs_table(table, rejects, written.model_copy(update={"text_form": form}),
                                            str(tmp_path / form)) for form in ("as_is", "written")}
    assert refs["as_is"].digest != refs["written"].digest
    rows = [r for b in inputs.plan_batches(refs["written"], 4600) for r in inputs.read_batch(b)[0]]
    assert len(rows) == 4600 and rows[0].item.transcript.endswith(".") and not rows[0].item.transcript.isupper()
