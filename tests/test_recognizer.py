"""A recognizer as one registered MLflow model version (real sqlite registry, real tiny.en weights, real speech):
two-pass and causal specs round-trip through the registry; the pyfunc, ``load_spec`` (what ``whisperline evaluate
models:/…`` uses) and the builder give the same transcript; registering twice returns the same version."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from conftest import original_weights_adapter
from recognizer.artifact import NotARecognizer, from_portable, portable
from recognizer.spec import SchemaError
from recognizer.spec import RecognizerSpec, SecondPass, Weights

pytestmark = pytest.mark.slow
CHUNK_MS = 1000


@pytest.fixture(scope="module")
def adapter(tmp_path_factory) -> Path:
    return original_weights_adapter(tmp_path_factory.mktemp("adapter") / "adapter", CHUNK_MS)


@pytest.fixture(scope="module")
def uri(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('registry') / 'mlflow.db'}"


@pytest.fixture(scope="module")
def speech(realspeech: Path, tmp_path_factory):
    from evaluation.sets import load_realspeech

    utt = load_realspeech(realspeech, ("cmu_arctic",), limit={"cmu_arctic": 1})[0]
    path = tmp_path_factory.mktemp("audio") / "utt.wav"
    sf.write(path, utt.audio, 16000, subtype="FLOAT")
    return path, utt.audio.astype(np.float32)


def two_pass(adapter: Path) -> RecognizerSpec:
    return RecognizerSpec("two-pass", "two-pass", CHUNK_MS, Weights("tiny.en", str(adapter)),
                          second_pass=SecondPass(padding="pad30", final_padding="pad30", every_ms=CHUNK_MS,
                                                heartbeat_ms=0))


def test_portable_spec_names_artifacts_not_paths(adapter):
    values, artifacts = portable(two_pass(adapter))
    assert values["weights"]["adapter_dir"] == "artifact:adapter" and artifacts == {"adapter": str(adapter.resolve())}
    assert from_portable(values, {"adapter": "/x"}).weights.adapter_dir == "/x"
    with pytest.raises(NotARecognizer, match="artifact 'adapter'"):
        from_portable(values, {})
    with pytest.raises(NotARecognizer, match="only"):
        portable(RecognizerSpec("fw", "faster-whisper", None))
    with pytest.raises(SchemaError, match="colour"):
        from_portable({**values, "colour": "red"}, artifacts)


def test_two_pass_round_trips_through_the_registry(uri, adapter, speech, tmp_path):
    import mlflow

    from recognizer.registry import load_spec, register_recognizer
    from recognizer.build import build
    from streaming.events import run_stream
    from data.tracking import client

    path, audio = speech
    spec = two_pass(adapter)
    reg = register_recognizer(uri, spec)
    assert reg["registered_model"] == "whisperline-recognizer-tiny.en" and reg["kind"] == "two-pass"
    again = register_recognizer(uri, spec)
    assert again["version"] == reg["version"] and again["reused"] == "true"  # same spec, files, code: one version
    c = client(uri)
    c.set_registered_model_alias(reg["registered_model"], "champion", reg["version"])
    mv = c.get_model_version(reg["registered_model"], reg["version"])
    assert mv.tags["whisperline.kind"] == "two-pass" and mv.tags["chunk_ms"] == str(CHUNK_MS)
    assert len(mv.tags["recognizer_key"]) == 64 and mv.tags["git_commit"]

    loaded, version = load_spec(uri, f"models:/{reg['registered_model']}@champion", tmp_path / "dl")
    assert version["version"] == reg["version"] and loaded.kind == "two-pass" and loaded.second_pass.padding == "pad30"
    assert Path(loaded.weights.adapter_dir).is_dir()
    assert loaded.weights.adapter_dir != spec.weights.adapter_dir  # the registry's copy
    expected = run_stream(build(spec)[0], audio, CHUNK_MS).text
    assert expected, "the original weights write words on this utterance"
    assert run_stream(build(loaded)[0], audio, CHUNK_MS).text == expected

    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    pyfunc = mlflow.pyfunc.load_model(f"models:/{reg['registered_model']}@champion")
    out = pyfunc.predict(pd.DataFrame({"audio_path": [str(path)]}))
    assert out["text"].tolist() == [expected]
    python_model = pyfunc.unwrap_python_model()
    assert python_model.chunk_choices == (CHUNK_MS,)
    with pytest.raises(ValueError, match="chunk_ms 300"):
        python_model.engine(300)


def test_a_causal_recognizer_is_its_own_version(uri, adapter):
    from recognizer.registry import register_recognizer

    two = register_recognizer(uri, two_pass(adapter))
    causal = register_recognizer(uri, RecognizerSpec("causal", "causal", CHUNK_MS, Weights("tiny.en", str(adapter))))
    assert causal["kind"] == "causal" and causal["version"] != two["version"]


def test_the_model_card_follows_the_registry(uri, adapter):
    """Issue 67: a version's MLflow description says what it is, what trained it, its dev and test numbers with
    intervals (pooled and per domain) and how to serve and evaluate it; written at registration, refreshed when
    numbers are tagged (the gate's dev tags, the test tags), read back through MlflowClient."""
    from data.tracking import client
    from recognizer.card import write_card
    from recognizer.gate import dev_tags
    from recognizer.registry import register_recognizer
    from tasks.pipeline import tag_version_test_numbers

    reg = register_recognizer(uri, two_pass(adapter))
    name, version = reg["registered_model"], reg["version"]
    c = client(uri)
    first = c.get_model_version(name, version).description
    assert "two-pass" in first and f"{CHUNK_MS} ms chunks" in first and "LoRA adapter" in first
    assert "Verifier" in first and "pad30" in first and "Not scored yet" in first
    assert f"whisperline serve-model --model {name}" in first and f"models:/{name}/{version}" in first

    row = {"name": "two-pass", "wer": 0.25, "word_latency_ms_median": 600.0, "word_latency_ms_p90": 900.0, "rtf": 0.3,
           "ci95": {"wer": [0.2, 0.3]}, "per_utterance": [
               {"utt_id": u, "errors": e, "ref_words": 4, "domain": d, "word_latency_ms": [600.0] * 4,
                "compute_ms": 300.0, "audio_ms": 1000.0} for u, e, d in (("a", 1, "read"), ("b", 0, "l2"))]}
    for k, v in dev_tags(row, "dev: 2 utterances").items():
        c.set_model_version_tag(name, version, k, v)
    c.set_registered_model_alias(name, "champion", version)
    dev_card = write_card(uri, name, version)
    assert "| dev (dev: 2 utterances) | 25.0 % [20.0, 30.0] |" in dev_card and "Not scored on the test split" in dev_card
    assert "read " in dev_card and "l2 " in dev_card and "600 / 900 ms" in dev_card
    assert "--alias champion" in dev_card and "**Aliases now.** champion" in dev_card

    tags = tag_version_test_numbers(uri, name, version, {**row, "wer": 0.3, "ci95": {"wer": [0.25, 0.35]}},
                                    {"n_utterances": 2, "seconds": 5.0, "speakers": 2},
                                    ("wer", "word_latency_ms_median", "word_latency_ms_p90", "rtf"))
    assert tags["test_wer_ci95"] == "[0.25, 0.35]"
    final = c.get_model_version(name, version).description
    assert "| test (2 utterances, 5.0 s, 2 speakers) | 30.0 % [25.0, 35.0] |" in final
    assert "never selected on" in final and "Not scored on the test split" not in final
