"""Corpus recipes: folder, JSONL, CSV and lhotse manifests; reader-level rejects."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from data.audio import AudioReject, load_audio, prepare_samples
from data.corpus import read_corpus, sample_key


def _wav(path: Path, seconds: float = 1.0, rate: int = 16000) -> Path:
    t = np.arange(int(seconds * rate)) / rate
    sf.write(path, 0.3 * np.sin(2 * np.pi * 220 * t), rate, subtype="PCM_16")
    return path


def test_realspeech_folder_of_folders(realspeech: Path):
    scan = read_corpus(realspeech)
    assert len(scan.items) == 39 and not scan.rejects
    speakers = {i.corpus for i in scan.items}
    assert speakers == {"ljspeech", "cmu_arctic"}
    assert [i.utt_id for i in scan.items] == sorted(i.utt_id for i in scan.items)


def test_jsonl_and_csv_manifests(tmp_path: Path):
    _wav(tmp_path / "a.wav")
    _wav(tmp_path / "b.wav", 2.0)
    rows = [{"id": "a", "audio": "a.wav", "text": "hello there", "speaker": "s1"},
            {"id": "b", "audio_path": "b.wav", "transcript": "second one", "start_s": 0.5, "duration_s": 1.0},
            {"id": "c", "audio": "missing.wav", "text": "x"},
            {"text": "no id"}]
    (tmp_path / "m.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n{not json\n")
    scan = read_corpus(tmp_path / "m.jsonl")
    assert [i.utt_id for i in scan.items] == ["a", "b"]
    assert scan.items[1].start_s == 0.5 and scan.items[1].duration_s == 1.0
    assert sorted(r.reason for r in scan.rejects) == ["bad_manifest_line", "bad_manifest_line", "missing_audio"]
    assert scan.n_inputs == 5

    (tmp_path / "m.csv").write_text("utt_id,path,text,speaker\na,a.wav,hello there,s1\nb,b.wav,second one,s2\n")
    assert [i.speaker for i in read_corpus(tmp_path / "m.csv").items] == ["s1", "s2"]


def test_lhotse_manifests(tmp_path: Path):
    lhotse = pytest.importorskip("lhotse")
    wav = _wav(tmp_path / "rec1.wav", 3.0)
    rec = lhotse.Recording.from_file(wav, recording_id="rec1")
    sups = lhotse.SupervisionSet.from_segments([
        lhotse.SupervisionSegment("rec1-0", "rec1", start=0.0, duration=1.2, text="first part", speaker="spk"),
        lhotse.SupervisionSegment("rec1-1", "rec1", start=1.5, duration=1.0, text="second part", speaker="spk"),
        lhotse.SupervisionSegment("ghost-0", "ghost", start=0.0, duration=1.0, text="no recording"),
    ])
    lhotse.RecordingSet.from_recordings([rec]).to_file(tmp_path / "recordings.jsonl.gz")
    sups.to_file(tmp_path / "supervisions.jsonl.gz")
    scan = read_corpus(f"lhotse:{tmp_path / 'recordings.jsonl.gz'},{tmp_path / 'supervisions.jsonl.gz'}")
    assert [(i.utt_id, i.start_s, i.duration_s) for i in scan.items] == [("rec1-0", 0.0, 1.2), ("rec1-1", 1.5, 1.0)]
    assert [r.reason for r in scan.rejects] == ["unsupported_recording"]
    segment = load_audio(scan.items[1].audio_path, start_s=1.5, duration_s=1.0)
    assert segment.duration_ms == 1000


def test_duplicate_keys_are_rejected(tmp_path: Path):
    _wav(tmp_path / "a.b.wav")
    _wav(tmp_path / "a_b.wav")
    (tmp_path / "transcripts.tsv").write_text("a.b\tone\na_b\ttwo\n")
    scan = read_corpus(tmp_path)
    assert sample_key("a.b") == "a_b"
    assert len(scan.items) == 1 and [r.reason for r in scan.rejects] == ["duplicate_id"]


def test_audio_fixes_and_rejects():
    rate = 8000
    stereo = np.stack([np.ones(rate) * 0.2, np.ones(rate) * -0.1], axis=1).astype(np.float32)
    stereo[::2] *= -1
    fixed = prepare_samples(stereo, rate)
    assert fixed.notes == ("downmixed 2->1 channels", "resampled 8000->16000 Hz")
    assert abs(len(fixed.samples) - 16000) <= 1
    with pytest.raises(AudioReject) as err:
        prepare_samples(np.zeros((16000, 1), np.float32), 16000)
    assert err.value.reason == "silent_audio"
    with pytest.raises(AudioReject) as err:
        prepare_samples(np.full((100, 1), np.inf, np.float32), 16000)
    assert err.value.reason == "non_finite_audio"
    loud = prepare_samples(np.full((16000, 1), 2.0, np.float32) * np.sign(np.sin(np.arange(16000)))[:, None], 16000)
    assert np.abs(loud.samples).max() <= 1.0 and loud.notes[0].startswith("peak-normalized")


def test_files_decode_in_blocks_as_one_piece_would(tmp_path: Path, monkeypatch):
    """The loader decodes, down-mixes and resamples block by block (bounded memory for long recordings); the
    samples equal a whole-array decode's, a segment's included, across block edges."""
    import data.audio as audio

    monkeypatch.setattr(audio, "_BLOCK_S", 0.7)  # many blocks, edges mid-signal
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((44100 * 5, 2)) * 0.2).astype(np.float32)
    path = tmp_path / "x.wav"
    sf.write(path, x, 44100, subtype="FLOAT")
    blocks = load_audio(path, max_duration_s=60)
    whole = prepare_samples(x, 44100, max_duration_s=60)
    assert blocks.notes == whole.notes == ("downmixed 2->1 channels", "resampled 44100->16000 Hz")
    np.testing.assert_allclose(blocks.samples, whole.samples, atol=1e-6)
    segment = load_audio(path, start_s=1.3, duration_s=2.1, max_duration_s=60)
    np.testing.assert_allclose(segment.samples, prepare_samples(x[int(1.3 * 44100): int(1.3 * 44100) + int(
        round(2.1 * 44100))], 44100).samples, atol=1e-6)
    bad = x.copy()
    bad[44100 * 4, 0] = np.nan  # in a late block
    sf.write(path, bad, 44100, subtype="FLOAT")
    with pytest.raises(AudioReject, match="non_finite_audio"):
        load_audio(path, max_duration_s=60)
