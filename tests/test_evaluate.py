"""The evaluate stage: held-out utterances through our systems and a real PyPI peer in one Prefect flow run, the
report files, the MLflow run, and the refusal to score a test set the models trained on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from data.leakage import LeakageError
from recognizer.spec import Decoding, RecognizerSpec


@pytest.fixture(scope="module")
def test_shards(tmp_path_factory, realspeech, prefect_server) -> Path:
    """A `test`-only dataset version of 3 CMU ARCTIC utterances that the `real_shards` fixture does not hold."""
    from configs.dataset import DatasetConfig
    from flows.build_dataset import run_build

    root = tmp_path_factory.mktemp("held-out") / "cmu_arctic"
    (root / "wav").mkdir(parents=True)
    lines = (realspeech / "cmu_arctic" / "transcripts.tsv").read_text().splitlines()[3:6]
    (root / "transcripts.tsv").write_text("\n".join(lines) + "\n")
    for line in lines:
        utt = line.split("\t")[0]
        shutil.copy(realspeech / "cmu_arctic" / "wav" / f"{utt}.wav", root / "wav" / f"{utt}.wav")
    summary = run_build(str(root.parent), str(tmp_path_factory.mktemp("ds")),
                        DatasetConfig(name="held-out", split_by="utterance", splits={"test": 1.0}), workers=1)
    assert summary["counts"]["accepted"] == 3
    return Path(summary["version_dir"])


SPECS = [RecognizerSpec("offline", "offline", None), RecognizerSpec("causal 300", "causal", 300),
         RecognizerSpec("causal 300 beam 2", "causal", 300, decoding=Decoding(beam_size=2)),
         RecognizerSpec("LA-2 1000", "whisperlivekit-la", 1000)]


def test_evaluate_flow_scores_every_system_on_held_out_speech(test_shards, real_shards, tmp_path, mlflow_server):
    from flows.evaluate import evaluate
    from data.tracking import client

    ledger = tmp_path / "test_ledger.jsonl"
    result = evaluate(SPECS, [str(test_shards)], [str(real_shards)], ["train"], out_dir=str(tmp_path),
                      tracking_uri=mlflow_server, ledger_path=str(ledger), purpose="release")
    ts = result["test_set"]
    assert ts["audio_sha256_overlap_with_training"] == 0
    assert ts["n_utterances"] == 3 and ts["warmup_utterance"]  # warm-up on the first, then every one is scored
    assert ts["n_words"] > 10 and ts["times_scored"] == 1  # the ledger counts this scoring
    (line,) = [json.loads(x) for x in ledger.read_text().splitlines()]
    assert line["purpose"] == "release" and line["systems"] == [s.name for s in SPECS]
    assert line["audio_sha256"] == ts["audio_sha256"] and line["commit"]
    assert ts["speakers"] == 1 and ts["corpora"] == ["cmu_arctic"] and ts["seconds"] > 3
    rows = {r["name"]: r for r in result["systems"]}
    assert rows["offline"]["source"] == "ours" and rows["LA-2 1000"]["source"].startswith("pypi:whisperlivekit==")
    assert result["offline_wer"] == rows["offline"]["wer"] < 0.3 and result["wer_cap_reference"] == "offline"
    assert result["reference_system"] == "LA-2 1000"  # the default: the LocalAgreement peer
    ids = [u["utt_id"] for u in rows["offline"]["per_utterance"]]
    assert len(ids) == 3
    for r in rows.values():
        pu = r["per_utterance"]
        assert [u["utt_id"] for u in pu] == ids  # the same utterances for all, in the same order
        assert sum(u["errors"] for u in pu) / sum(u["ref_words"] for u in pu) == r["wer"]
        assert set(r["ci95"]) == {"wer", "word_latency_ms_median", "rtf"}
        assert ("vs_reference" in r) == (r["name"] != "LA-2 1000")
        if r["chunk_ms"]:
            assert r["step_ms_median"] > 0 and r["rtf"] > 0 and r["word_latency_ms_median"] is not None
            assert r["within_wer_cap"] == (r["wer"] <= result["offline_wer"] + 0.05 + 1e-9)
            assert r["pareto"] is False or r["within_wer_cap"]  # no system over the cap is on the front
    assert rows["LA-2 1000"]["wer"] < 0.3
    saved = json.loads((tmp_path / "evaluation.json").read_text())
    assert [r["name"] for r in saved["systems"]] == [s.name for s in SPECS]
    md = (tmp_path / "evaluation.md").read_text()
    assert "Held-out test set" in md and "scored 1 time(s)" in md
    assert (tmp_path / "evaluation_pareto.png").stat().st_size > 5_000
    run = client(mlflow_server).get_run(result["mlflow_run_id"])
    assert run.data.tags["test_set_overlap_with_training"] == "0" and "offline.wer" in run.data.metrics


def test_evaluate_refuses_a_test_set_seen_in_training(real_shards):
    from flows.evaluate import evaluate

    with pytest.raises(LeakageError, match=r"6 train utterance\(s\) of splits"):
        evaluate(SPECS[:1], [str(real_shards)], [str(real_shards)], ["train"], split="train")


def test_repeats_report_medians_of_the_clock_and_one_transcript(test_shards):
    """Timings are medians over repeats (noisy shared machines); the words come from one repeat and a
    deterministic system writes the same words every time."""
    import statistics

    from recognizer.evaluate import evaluate_systems
    from evaluation.sets import load_split

    utterances = load_split([str(test_shards)], ["test"])[:1]
    # fixed pieces: the transcript depends on the audio only (live feeding would let a step that a loaded machine
    # delays past the next chunk merge two chunks)
    result = evaluate_systems([SPECS[1]], utterances, test_set={}, repeats=3, live=False, log=lambda *_: None)
    row = result["systems"][0]
    assert row["repeats"] == 3 and len(row["runs"]) == 3 and row["transcripts_identical"]
    assert row["feeding"] == "fixed" and result["feeding"] == "fixed"
    # the per-utterance results are the repeat with the median RTF: its RTF is the row's
    chosen = row["runs"][row["per_utterance_repeat"]]
    assert chosen["rtf"] == row["rtf"]
    assert [u["utt_id"] for u in row["per_utterance"]] == [u.utt_id for u in utterances]
    assert row["rtf"] == round(statistics.median(r["rtf"] for r in row["runs"]), 4)
    assert row["step_ms_median"] == round(statistics.median(r["step_ms_median"] for r in row["runs"]), 4)
    with pytest.raises(ValueError, match="repeats"):
        evaluate_systems([SPECS[1]], utterances, test_set={}, repeats=0)


def test_evaluate_cli_tags_a_registered_version_with_its_test_numbers(test_shards, tmp_path):
    """`whisperline evaluate --model models:/NAME@champion` on the test split: the version's row (scored as
    registered, beside offline Whisper) becomes its test_* tags, the numbers of the report it wrote."""
    from typer.testing import CliRunner

    from data.tracking import client
    from flows.cli import app
    from recognizer.registry import register_recognizer

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    reg = register_recognizer(uri, RecognizerSpec("causal 300", "causal", 300))
    client(uri).set_registered_model_alias(reg["registered_model"], "champion", reg["version"])
    out = tmp_path / "report"
    done = CliRunner().invoke(app, ["evaluate", str(test_shards), "--model",
                                    f"models:/{reg['registered_model']}@champion", "--no-peers", "--tracking-uri", uri,
                                    "--out", str(out), "--ledger", str(tmp_path / "ledger.jsonl"),
                                    "--purpose", "smoke"])
    assert done.exit_code == 0, done.output
    report = json.loads((out / "evaluation.json").read_text())
    (row,) = [r for r in report["systems"] if r["name"].endswith("@champion")]
    tags = client(uri).get_model_version(reg["registered_model"], reg["version"]).tags
    assert float(tags["test_wer"]) == row["wer"] and float(tags["test_rtf"]) == row["rtf"]
    assert tags["test_set"].startswith("3 utterances") and tags["selected_on"] == "dev split"
    assert tags["test_set_audio_sha256"] == report["test_set"]["audio_sha256"]

