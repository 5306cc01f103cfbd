"""Hush word: variable-length input, gradients only to the hush word, amplitude bound, save/load reproduces the
evaluation, bad files rejected; a real 2-worker Ray Train job tracked in a real MLflow server via the Prefect flow."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from whisper.tokenizer import get_tokenizer

from configs.hush_word import HushWordConfig
from training.hush_word.evaluate import evaluate_conditions, hallucinated_words
from streaming.hush.frontend import HushWordError, hushed_mel, load_hush_word, save_hush_word
from training.hush_word.objective import hush_loss, target_tokens
from streaming.hush.transcribe import CONDITIONS, condition_mel
from evaluation.sets import load_realspeech
from data.weights import load_model


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    model = load_model("tiny.en").eval()
    model.requires_grad_(False)
    return model


@pytest.fixture(scope="module")
def utterances(realspeech):
    return load_realspeech(realspeech, corpora=("cmu_arctic",), limit={"cmu_arctic": 2})


def test_lengths_hush_word_is_25_encoder_frames(tiny):
    for n in (16000, 16001, 16319):
        speech = torch.zeros(n)
        without = hushed_mel(speech, None, 80).shape[-1]
        with_hush = hushed_mel(speech, torch.zeros(8000), 80).shape[-1]
        assert without % 2 == 0 and with_hush - without == 50  # 0.5 s = 50 mel = 25 encoder frames
    assert condition_mel(tiny, np.zeros(16000, np.float32), "pad30").shape[-1] == 3000


def test_gradient_reaches_only_the_hush_word(tiny, utterances):
    tokenizer = get_tokenizer(False)
    hush = torch.nn.Parameter(torch.empty(8000).uniform_(-1e-3, 1e-3))
    inputs, labels = target_tokens(tokenizer, tokenizer.encode(" " + utterances[0].reference))
    assert labels[-1] == tokenizer.eot and len(labels) == len(inputs)
    loss = hush_loss(tiny, hush, torch.from_numpy(utterances[0].audio), inputs, labels)
    loss.backward()
    assert hush.grad is not None and float(hush.grad.abs().sum()) > 0
    assert all(p.grad is None for p in tiny.parameters())


def test_save_load_reproduces_evaluation_and_rejects_bad_files(tiny, utterances, tmp_path):
    rng = np.random.default_rng(0)
    hush = rng.uniform(-0.05, 0.05, 8000).astype(np.float32)
    save_hush_word(hush, tmp_path / "h", {"base_model": "tiny.en", "amplitude_bound": 0.1})
    loaded = load_hush_word(tmp_path / "h")
    assert np.array_equal(loaded, hush)
    assert np.array_equal(load_hush_word(tmp_path / "h" / "hush_word.wav"), hush)  # float wav is lossless
    a = evaluate_conditions(tiny, utterances, hush, ["hush", "nopad"])
    b = evaluate_conditions(tiny, utterances, loaded, ["hush", "nopad"])
    assert a["hush"]["hypotheses"] == b["hush"]["hypotheses"] and a["hush"]["wer"] == b["hush"]["wer"]
    assert a["hush"]["encoder_gmacs_mean"] > a["nopad"]["encoder_gmacs_mean"]
    np.save(tmp_path / "short.npy", hush[:7999])
    with pytest.raises(HushWordError, match="7999 samples"):
        load_hush_word(tmp_path / "short.npy", samples=8000)
    bad = hush.copy()
    bad[10] = np.nan
    np.save(tmp_path / "nan.npy", bad)
    with pytest.raises(HushWordError, match="NaN"):
        load_hush_word(tmp_path / "nan.npy")
    with pytest.raises(HushWordError, match="amplitude bound"):
        load_hush_word(tmp_path / "h" / "hush_word.npy", bound=0.01)
    (tmp_path / "junk.wav").write_bytes(b"not audio")
    with pytest.raises(HushWordError, match="unreadable"):
        load_hush_word(tmp_path / "junk.wav")


def test_conditions_cost_and_hallucination_count(tiny, utterances):
    scores = evaluate_conditions(tiny, utterances[:1], None, ["pad30", "nopad", "zeros_1s"])
    assert scores["pad30"]["encoder_frames_mean"] == 1500
    assert scores["nopad"]["encoder_gmacs_mean"] < scores["zeros_1s"]["encoder_gmacs_mean"] < \
        scores["pad30"]["encoder_gmacs_mean"]
    assert set(CONDITIONS) >= set(scores)
    assert hallucinated_words("the cat sat", "the cat sat on the mat") == 3
    assert hallucinated_words("the cat sat", "a cat sat") == 0


@pytest.mark.slow
def test_ray_train_job_bounds_registers_and_serves(prefect_server, real_shards, ray_cluster, mlflow_server,
                                                   realspeech, tmp_path):
    import mlflow

    from flows.hush_word import run_hush_word_flow
    from data.tracking import client

    cfg = HushWordConfig(datasets=(str(real_shards),), validation_splits=("train",), allow_held_in_validation=True,
                         validation_limit=2, epochs=2, batch_size=1, average_best=2, amplitude_bound=0.002, lr=1e-2, num_workers=2,
                         storage_path=str(tmp_path / "ray"), output_dir=str(tmp_path / "hush"),
                         tracking_uri=mlflow_server, experiment="test-hush")
    result = run_hush_word_flow(cfg, str(realspeech), eval_skip=33, eval_limit=1)
    summary = result["training"]
    hush = load_hush_word(summary["hush_word_dir"])
    assert hush.shape == (8000,) and float(np.abs(hush).max()) <= 0.002 + 1e-7  # the bound held (lr is large)
    assert float(np.abs(hush).max()) > 1e-3  # and it trained
    c = client(mlflow_server)
    run = c.get_run(summary["run_id"])
    assert run.info.status == "FINISHED" and len(c.get_metric_history(run.info.run_id, "val_loss")) == 2
    artifacts = {Path(a.path).name for a in c.list_artifacts(run.info.run_id, "hush_word")}
    assert {"hush_word.wav", "hush_word.npy", "hush_word.json"} <= artifacts
    assert set(result["evaluation"]) == set(CONDITIONS)
    mlflow.set_tracking_uri(mlflow_server)
    model = mlflow.pyfunc.load_model(f"models:/{cfg.registered_name}/{summary['registered_version']}")
    wav = sorted((realspeech / "cmu_arctic" / "wav").glob("*.wav"))[0]
    out = model.predict(pd.DataFrame({"audio_path": [str(wav)]}))
    assert isinstance(out["text"][0], str) and out["text"][0]


def test_offline_baseline_takes_a_hush_word(tiny, utterances):
    from streaming.baselines.offline import OfflineWhisper, hush_word_mel

    hush = np.zeros(8000, np.float32)
    offline = OfflineWhisper(tiny, padding=hush_word_mel(tiny, hush))
    assert offline.mel(utterances[0].audio).shape[-1] < 3000
    text = offline.transcribe(utterances[0].audio)
    assert text and text == evaluate_conditions(tiny, utterances[:1], hush, ["hush"])["hush"]["hypotheses"][0]


def test_phrase_crop_cuts_between_words_with_matching_tokens():
    from data.utterances import TrainUtterance
    from training.hush_word.loop import phrase_crop

    tokenizer = get_tokenizer(False)
    words = (("the", 100, 300), ("cat", 400, 700), ("sat.", 900, 1200))
    tokens = [t for w, *_ in words for t in tokenizer.encode(" " + w)]
    ends = [300, 700] + [1200] * (len(tokens) - 2)
    utt = TrainUtterance("k", "v", np.ones(24000, np.float32), "the cat sat.", tuple(tokens), tuple(ends), words)
    seen = set()
    for seed in range(40):
        audio, toks = phrase_crop(utt, np.random.default_rng(seed))
        seen.add(len(toks))
        if len(toks) == 1:
            assert len(audio) == (300 + 400) // 2 * 16  # halfway into the pause after "the"
        if len(toks) == 2:
            assert len(audio) == (700 + 900) // 2 * 16
        if len(toks) == len(tokens):
            assert len(audio) == 1200 * 16
        assert tokenizer.decode(toks).strip() in ("the", "the cat", "the cat sat.")
    assert seen == {1, 2, len(tokens)}


def test_log_mel_equals_whisper_and_survives_inference_mode(utterances):
    import whisper

    x = torch.from_numpy(utterances[0].audio[: 320 * 100])
    with torch.inference_mode():  # whisper's cached filter bank is now an inference tensor
        whisper.log_mel_spectrogram(x, 80)
    hush = torch.zeros(8000, requires_grad=True)
    mel = hushed_mel(x, hush, 80)
    assert torch.equal(mel.detach(), whisper.log_mel_spectrogram(torch.cat([x, torch.zeros(8000)]), 80))
    mel.sum().backward()
    assert hush.grad is not None


def test_pad30_features_is_what_faster_whisper_feeds_its_encoder(tiny, utterances):
    """``pad30_features`` (the two-pass last pass's padding option) against faster-whisper's own feature extractor on
    real speech: the same floor, the same zero features past the audio; openai-whisper's ``pad30`` is not that."""
    from faster_whisper.audio import pad_or_trim
    from faster_whisper.feature_extractor import FeatureExtractor

    audio = utterances[0].audio
    theirs = pad_or_trim(FeatureExtractor(feature_size=tiny.dims.n_mels)(audio))
    ours = condition_mel(tiny, audio, "pad30_features").numpy()
    assert ours.shape == theirs.shape == (tiny.dims.n_mels, 3000)
    assert np.abs(ours - theirs).max() < 1e-4
    assert np.abs(condition_mel(tiny, audio, "pad30").numpy() - theirs).max() > 0.5  # past the audio: the floor
