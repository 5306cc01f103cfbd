"""The evaluation's leakage guard reads the training data recorded inside every artifact being scored (adapter,
hush word, EMMA policy, registered version), not the caller's list: real dataset versions built from real speech,
artifact metadata written by the real training-side writers."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from data.leakage import LeakageError
from data.provenance import ProvenanceError, artifact_training_data, check_artifacts_held_out


def _copy_slice(root: Path, source: Path, corpus: str, start: int, stop: int) -> Path:
    """Utterances [start, stop) of one real-speech corpus copied to a temp folder."""
    src, dst = source / corpus, root / corpus
    (dst / "wav").mkdir(parents=True)
    lines = src.joinpath("transcripts.tsv").read_text().splitlines()[start:stop]
    dst.joinpath("transcripts.tsv").write_text("\n".join(lines) + "\n")
    for line in lines:
        utt = line.split("\t")[0]
        shutil.copy(src / "wav" / f"{utt}.wav", dst / "wav" / f"{utt}.wav")
    return root


def _version_id(version_dir) -> str:
    return json.loads((Path(version_dir) / "dataset.json").read_text())["version_id"]


@pytest.fixture(scope="module")
def versions(real_shards, realspeech, tmp_path_factory):
    """train: real_shards (4 LJSpeech + 2 CMU ARCTIC, all `train`); leaky: the same 2 ARCTIC recordings built again
    as a `test` split under another name; clean: 2 other LJSpeech utterances as `test`."""
    from configs.dataset import DatasetConfig
    from flows.build_dataset import run_build

    out = {"train": str(real_shards)}
    for name, corpus, start, stop in (("leaky", "cmu_arctic", 0, 2), ("clean", "ljspeech", 4, 6)):
        src = _copy_slice(tmp_path_factory.mktemp(f"{name}-corpus"), realspeech, corpus, start, stop)
        summary = run_build(str(src), str(tmp_path_factory.mktemp(f"{name}-ds")),
                            DatasetConfig(name=f"{name}-test", split_by="utterance", splits={"test": 1.0}), workers=1)
        assert summary["counts"]["accepted"] == 2, summary
        out[name] = summary["version_dir"]
    return out


@pytest.fixture(scope="module")
def lora_model():
    from configs.finetune import LoraSettings
    from training.lora import apply_lora
    from data.weights import load_model

    model = load_model("tiny.en")
    apply_lora(model, LoraSettings(r=4), seed=0)
    return model


@pytest.fixture(scope="module")
def adapter(versions, lora_model, tmp_path_factory) -> Path:
    """An adapter whose metadata is what a causal fine-tuning run records (run_meta), trained on `train` of the
    training version."""
    from configs.finetune import FinetuneConfig, LoraSettings
    from training.causal.run import run_meta
    from training.lora import save_adapter

    cfg = FinetuneConfig(datasets=(versions["train"],), chunk_ms=300)
    meta = run_meta(cfg)
    assert meta["train_splits"] == ["train"] and meta["datasets"][0]["version_id"] == _version_id(versions["train"])
    return save_adapter(lora_model, LoraSettings(r=4), tmp_path_factory.mktemp("adapter"), meta)


@pytest.fixture(scope="module")
def hush_dir(versions, tmp_path_factory) -> Path:
    """A hush word with the metadata a hush-word run records (run_meta), trained on `train` of the training version."""
    from configs.hush_word import HushWordConfig
    from streaming.hush.frontend import save_hush_word
    from training.hush_word.run import run_meta

    meta = run_meta(HushWordConfig(datasets=(versions["train"],)))
    return save_hush_word(np.zeros(8000, dtype=np.float32), tmp_path_factory.mktemp("hush") / "hush_word",
                          {**meta, "amplitude_bound": 0.1})


def _policy(directory: Path, lora_model, cfg) -> Path:
    from training.emma.artifact import save_policy
    from training.emma.p_choose import EmmaPolicy

    return save_policy(directory, EmmaPolicy.for_model(lora_model, cfg.p_choose, seed=0), lora_model, cfg,
                       {"train_metrics": {}})


def test_adapter_trained_on_the_test_audio_is_refused_without_caller_datasets(versions, adapter):
    refs = artifact_training_data(adapter)
    assert [(r.version_id, r.splits) for r in refs] == [(_version_id(versions["train"]), ("train",))]
    # the caller passes no training datasets at all: the adapter's own record catches the 2 ARCTIC recordings
    with pytest.raises(LeakageError, match=r"2 test utterance\(s\).*trained on by .*\(adapter\)"):
        check_artifacts_held_out([adapter], [versions["leaky"]], ["test"])


def test_evaluate_stage_refuses_before_streaming(versions, adapter):
    """The evaluate stage (Prefect task body) refuses a spec whose adapter trained on the test audio, with an empty
    caller list: nothing is loaded or streamed."""
    from tasks.evaluate import evaluate_held_out
    from recognizer.spec import RecognizerSpec, Weights

    specs = [RecognizerSpec("causal tuned 300 ms", "causal", 300, Weights(adapter_dir=str(adapter)))]
    with pytest.raises(LeakageError, match="test utterance"):
        evaluate_held_out.fn(specs, [versions["leaky"]], [], ["train"])


def test_artifact_recording_no_training_data_is_refused(versions, lora_model, tmp_path):
    from configs.finetune import LoraSettings
    from training.lora import save_adapter

    bare = save_adapter(lora_model, LoraSettings(r=4), tmp_path / "bare", {"base_model": "tiny.en", "chunk_ms": 300})
    with pytest.raises(ProvenanceError, match="records no training datasets"):
        check_artifacts_held_out([bare], [versions["clean"]], ["test"], extra_train_dirs=[versions["train"]])
    assert issubclass(ProvenanceError, LeakageError)
    with pytest.raises(ProvenanceError, match="not a trained artifact"):
        artifact_training_data(tmp_path)
    # datasets but not the splits trained on (what adapters recorded before): refused too
    meta = json.loads((bare / "whisperline_adapter.json").read_text())
    no_splits = tmp_path / "no_splits"
    shutil.copytree(bare, no_splits)
    (no_splits / "whisperline_adapter.json").write_text(json.dumps({
        **meta, "datasets": [{"path": versions["train"], "version_id": _version_id(versions["train"])}]}))
    with pytest.raises(ProvenanceError, match="not the splits"):
        artifact_training_data(no_splits)
    # a recorded dataset version that is no longer there: its audio cannot be compared
    gone = tmp_path / "gone"
    shutil.copytree(bare, gone)
    (gone / "whisperline_adapter.json").write_text(json.dumps({
        **meta, "datasets": [{"path": str(tmp_path / "deleted" / "abc"), "version_id": "abc"}],
        "train_splits": ["train"]}))
    with pytest.raises(ProvenanceError, match="no longer there"):
        check_artifacts_held_out([gone], [versions["clean"]], ["test"])


def test_clean_artifacts_pass_and_the_summary_names_their_versions(versions, adapter, hush_dir):
    train_id = _version_id(versions["train"])
    summary = check_artifacts_held_out([adapter, hush_dir, str(adapter)], [versions["clean"]], ["test"],
                                       extra_train_dirs=[versions["leaky"]], extra_train_splits=["train"])
    assert summary["overlap"] == 0
    assert summary["artifacts"] == {str(adapter): [train_id], str(hush_dir): [train_id]}  # each artifact once
    assert summary["train_splits"][str(hush_dir)] == ["train"]
    assert summary["caller_datasets"] == [_version_id(versions["leaky"])]  # its `train` split: empty, no overlap
    # the caller's datasets stay a source of their own
    with pytest.raises(LeakageError, match=r"trained on by the caller"):
        check_artifacts_held_out([], [versions["leaky"]], ["test"], extra_train_dirs=[versions["train"]])


def test_hush_word_and_emma_policy_are_read(versions, adapter, hush_dir, lora_model, tmp_path):
    from configs.emma import EmmaConfig

    with pytest.raises(LeakageError, match=r"\(hush word\)"):
        check_artifacts_held_out([hush_dir], [versions["leaky"]], ["test"])
    # a policy whose own training data holds no test audio (the leaky version has no `dev` split), trained on the
    # adapter that saw the test audio: the policy inherits the adapter's provenance, and is refused on its own
    cfg = EmmaConfig(datasets=(versions["leaky"],), splits=("dev",), adapter_dir=str(adapter))
    policy = _policy(tmp_path / "policy", lora_model, cfg)
    recorded = json.loads((policy / "policy.json").read_text())
    assert recorded["train_splits"] == ["dev"] and recorded["adapter_provenance"]["train_splits"] == ["train"]
    refs = artifact_training_data(policy)
    assert {(r.version_id, r.splits) for r in refs} == {(_version_id(versions["leaky"]), ("dev",)),
                                                        (_version_id(versions["train"]), ("train",))}
    with pytest.raises(LeakageError, match=r"trained on by .*\(EMMA policy\), its adapter"):
        check_artifacts_held_out([policy], [versions["leaky"]], ["test"])
    summary = check_artifacts_held_out([policy], [versions["clean"]], ["test"])
    assert summary["artifacts"][str(policy)] == [_version_id(versions["leaky"]), _version_id(versions["train"])]
    # a policy on the original weights records only its own data
    own = _policy(tmp_path / "own", lora_model, EmmaConfig(datasets=(versions["train"],), encoder="original"))
    assert [r.version_id for r in artifact_training_data(own)] == [_version_id(versions["train"])]
    with pytest.raises(LeakageError, match=r"\(EMMA policy\)"):
        check_artifacts_held_out([own], [versions["leaky"]], ["test"])


def test_a_dev_decision_refuses_an_arm_whose_hush_word_heard_dev(versions, hush_dir, realspeech, tmp_path):
    """Dev selects, so it is held out too: a decision (benchmarks/decide.py) refuses, before any audio is streamed, an
    arm whose artifact trained on its dev audio (the hush word saw the 2 ARCTIC recordings this dev split holds)."""
    from benchmarks.decide import Decision, score
    from configs.dataset import DatasetConfig
    from flows.build_dataset import run_build

    src = _copy_slice(tmp_path / "corpus", realspeech, "cmu_arctic", 0, 2)
    dev = run_build(str(src), str(tmp_path / "ds"), DatasetConfig(name="leaky-dev", split_by="utterance",
                                                                  splits={"dev": 1.0}), workers=1)["version_dir"]
    d = Decision(name="t", question="q", rule="r", reference="zeros",
                 arms={"zeros": {}, "hush": {"second_pass": {"padding": "hush", "hush_dir": str(hush_dir)}}})
    with pytest.raises(LeakageError, match=r"2 dev utterance\(s\).*\(hush word\)"):
        score(d, [dev], {"zeros": None, "hush": None})


def test_a_shipped_artifact_is_checked_by_the_training_audio_it_carries(versions, hush_dir, tmp_path):
    """An artifact shipped with the code (the served spec's hush word in configs/) travels without its datasets: the
    hashes frozen beside it (`whisperline data freeze-provenance`) stand in for them, for clean and leaky sets alike."""
    from typer.testing import CliRunner

    from data.provenance import FROZEN
    from flows.cli import app

    shipped = tmp_path / "shipped"
    shutil.copytree(hush_dir, shipped)
    meta = json.loads((shipped / "hush_word.json").read_text())
    for d in meta["datasets"]:  # as on another machine: the recorded dataset folder is not there
        d["path"] = str(tmp_path / "elsewhere" / d["version_id"])
    (shipped / "hush_word.json").write_text(json.dumps(meta))
    with pytest.raises(ProvenanceError, match="no longer there"):
        check_artifacts_held_out([shipped], [versions["clean"]], ["test"])
    refused = CliRunner().invoke(app, ["data", "freeze-provenance", str(shipped)])  # nor frozen where they are not
    assert refused.exit_code == 1 and "no longer there" in refused.output and not (shipped / FROZEN).exists()

    frozen = CliRunner().invoke(app, ["data", "freeze-provenance", str(hush_dir)], catch_exceptions=False)
    assert frozen.exit_code == 0 and frozen.stdout.strip().endswith(FROZEN)
    shutil.copy(hush_dir / FROZEN, shipped / FROZEN)
    (hush_dir / FROZEN).unlink()  # the module's other tests read the fixture's own datasets
    summary = check_artifacts_held_out([shipped], [versions["clean"]], ["test"])
    assert summary["overlap"] == 0 and summary["artifacts"][str(shipped)] == [_version_id(versions["train"])]
    with pytest.raises(LeakageError, match=rf"2 test utterance\(s\).*{FROZEN}"):
        check_artifacts_held_out([shipped], [versions["leaky"]], ["test"])
