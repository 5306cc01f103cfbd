"""data.longform: long recordings segmented at aligned pauses, with real speech and the real pocketsphinx aligner."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from data.aligners import get_aligner
from data.corpus import read_folder
from data.longform import Segment, cut, segment_recording
from data.longform_fixture import make_longform_recording, part_intervals_ms, read_corpus_parts, write_longform_corpus
from data.synth import ALIGNMENT_FILE, read_word_alignments, write_synthetic_corpus
from data.text import transcript_words
from data.types import AlignmentError


@pytest.fixture(scope="module")
def aligner():
    return get_aligner("pocketsphinx")


@pytest.fixture(scope="module")
def lj_parts(realspeech: Path) -> list[tuple[str, np.ndarray, str]]:
    return read_corpus_parts(realspeech / "ljspeech")


def _norms(text: str) -> list[str]:
    return [w.norm for w in transcript_words(text)]


def _check_structure(segments: list[Segment], words: list[str], total_ms: int, audio: np.ndarray) -> None:
    """Counts reconcile, segments are contiguous and ≤ 30 s, spans carry the input words."""
    assert segments[0].start_ms == 0 and segments[-1].end_ms == total_ms
    assert segments[0].word_slice[0] == 0 and segments[-1].word_slice[1] == len(words)
    for a, b in zip(segments, segments[1:]):
        assert a.end_ms == b.start_ms and a.word_slice[1] == b.word_slice[0]
    for seg in segments:
        assert 0 < seg.duration_ms <= 30_000
        lo, hi = seg.word_slice
        assert lo < hi and [s.word for s in seg.spans] == words[lo:hi]
        assert all(0 <= s.start_ms <= s.end_ms <= seg.duration_ms for s in seg.spans)
        assert abs(len(cut(audio, seg)) - seg.duration_ms * 16) <= 16


def _check_cuts(segments: list[Segment], words_at: list[tuple[int, int, int]]) -> None:
    """Every cut lies in an inserted pause: after the last word of one part and before the first of the next,
    with 50 ms to spare on either side. ``words_at``: (part index, start_ms, end_ms) per word, in the recording."""
    for seg in segments[:-1]:
        last, nxt = words_at[seg.word_slice[1] - 1], words_at[seg.word_slice[1]]
        assert nxt[0] == last[0] + 1, f"cut at {seg.end_ms} ms is inside part {last[0]}, not between two parts"
        assert last[2] + 50 <= seg.end_ms <= nxt[1] - 50, (seg.end_ms, last, nxt)


def test_real_speech_recording_is_cut_in_the_inserted_pauses(lj_parts, aligner):
    """~100 s of LJSpeech with 0.6–1.1 s pauses: every word comes back once, in order; cuts lie in the
    inserted pauses; each segment's spans agree with aligning every original utterance alone."""
    parts = lj_parts[:14]
    pauses = [int(p) for p in np.random.default_rng(1).integers(600, 1100, len(parts) - 1)]
    audio, text = make_longform_recording([(a, t) for _, a, t in parts], pauses, seed=3)
    words = _norms(text)
    total_ms = -(-len(audio) // 16)
    assert 90_000 < total_ms < 120_000

    segments = segment_recording(audio, words, aligner)

    _check_structure(segments, words, total_ms, audio)
    assert len(segments) == 4  # 104 s: as few segments as 30 s allows
    intervals = part_intervals_ms([len(a) for _, a, _ in parts], pauses)
    reference = [(i, start + s.start_ms, start + s.end_ms)
                 for i, ((_, a, t), (start, _)) in enumerate(zip(parts, intervals))
                 for s in aligner.align(a, _norms(t))]
    assert len(reference) == len(words)
    _check_cuts(segments, reference)
    got_ends = np.array([seg.start_ms + s.end_ms for seg in segments for s in seg.spans])
    got_starts = np.array([seg.start_ms + s.start_ms for seg in segments for s in seg.spans])
    assert np.median(np.abs(got_ends - [r[2] for r in reference])) < 50
    assert np.median(np.abs(got_starts - [r[1] for r in reference])) < 50
    assert np.mean(np.abs(got_ends - [r[2] for r in reference]) > 100) < 0.05


def test_synthetic_recording_matches_espeak_timings(tmp_path, aligner):
    """~65 s of espeak-ng speech: cuts in the inserted pauses, word times close to the synthesizer's own."""
    corpus = write_synthetic_corpus(tmp_path / "synth", 16, seed=5, progress=False, workers=1)
    parts = read_corpus_parts(corpus)
    truth = read_word_alignments(corpus / ALIGNMENT_FILE)
    pauses = [int(p) for p in np.random.default_rng(2).integers(400, 900, len(parts) - 1)]
    audio, text = make_longform_recording([(a, t) for _, a, t in parts], pauses, seed=1)
    words = _norms(text)
    total_ms = -(-len(audio) // 16)
    assert total_ms > 45_000

    segments = segment_recording(audio, words, aligner)

    _check_structure(segments, words, total_ms, audio)
    assert len(segments) >= 3
    intervals = part_intervals_ms([len(a) for _, a, _ in parts], pauses)
    words_at = [(i, start + a, start + b) for i, ((utt, _, _), (start, _)) in enumerate(zip(parts, intervals))
                for _, a, b in truth[utt]]
    assert len(words_at) == len(words)
    _check_cuts(segments, words_at)
    ends = np.array([seg.start_ms + s.end_ms for seg in segments for s in seg.spans])
    assert np.median(np.abs(ends - [w[2] for w in words_at])) < 50


def test_speech_without_long_enough_pauses_is_rejected(lj_parts, aligner):
    """~45 s whose pauses (natural ones and the 300 ms inserted) are all shorter than min_pause_ms."""
    parts = lj_parts[:6]
    audio, text = make_longform_recording([(a, t) for _, a, t in parts], 300, seed=0)
    assert len(audio) > 40 * 16_000
    with pytest.raises(AlignmentError) as err:
        segment_recording(audio, _norms(text), aligner, min_pause_ms=2000)
    assert err.value.reason == "no_pause_to_split"
    assert "between 0 and 30000 ms" in err.value.detail


def test_short_recording_is_one_segment(lj_parts, aligner):
    parts = lj_parts[:3]
    audio, text = make_longform_recording([(a, t) for _, a, t in parts], 500, seed=0)
    words = _norms(text)
    assert len(audio) <= 30 * 16_000
    segments = segment_recording(audio, words, aligner)
    assert len(segments) == 1
    assert segments[0].word_slice == (0, len(words)) and segments[0].start_ms == 0
    assert list(segments[0].spans) == aligner.align(audio, words)
    assert np.array_equal(cut(audio, segments[0]), audio)


def test_trailing_audio_without_words_is_left_out(lj_parts, aligner):
    """Speech then 25 s of noise: one segment up to the 30 s limit holds every word."""
    speech = np.concatenate([lj_parts[0][1], lj_parts[1][1]])
    noise = (np.random.default_rng(0).standard_normal(25 * 16_000) * 1e-3).astype(np.float32)
    words = _norms(lj_parts[0][2]) + _norms(lj_parts[1][2])
    segments = segment_recording(np.concatenate([speech, noise]), words, aligner)
    assert [(s.start_ms, s.end_ms, s.word_slice) for s in segments] == [(0, 30_000, (0, len(words)))]


def test_fixture_recording_and_corpus_folder(tmp_path, lj_parts):
    parts = [(a, t) for _, a, t in lj_parts[:3]]
    audio, text = make_longform_recording(parts, [400, 900], seed=7)
    again, _ = make_longform_recording(parts, [400, 900], seed=7)
    assert np.array_equal(audio, again) and audio.dtype == np.float32
    assert text == " ".join(t for _, t in parts)
    intervals = part_intervals_ms([len(a) for a, _ in parts], [400, 900])
    assert [b - a for (_, a), (b, _) in zip(intervals, intervals[1:])] == [400, 900]
    assert intervals[-1][1] == int(len(audio) / 16)
    pause = audio[intervals[0][1] * 16 + 16: intervals[1][0] * 16 - 16]
    assert np.count_nonzero(pause) > 0.99 * len(pause)  # low-level noise, not digital zeros
    assert 20 * np.log10(np.sqrt(np.mean(pause.astype(np.float64) ** 2))) == pytest.approx(-60, abs=1)
    with pytest.raises(ValueError):
        make_longform_recording(parts, [400], seed=0)

    out = write_longform_corpus(tmp_path / "longform", {"long-0001": (audio, text)})
    items, rejects = read_folder(out)
    assert not rejects and [(i.utt_id, i.transcript) for i in items] == [("long-0001", text)]
    written, rate = sf.read(out / "wav" / "long-0001.wav", dtype="float32")
    assert rate == 16_000 and sf.info(out / "wav" / "long-0001.wav").subtype == "PCM_16"
    assert np.max(np.abs(written - audio)) < 1e-4


def test_multi_word_items_stay_one_unit(lj_parts, aligner):
    """An item holding several spoken words ("one thousand dollars") is passed through as one unit."""
    parts = lj_parts[3:8]
    audio, text = make_longform_recording([(a, t) for _, a, t in parts], 800, seed=4)
    spoken = _norms(text)
    words = [" ".join(spoken[i:i + 2]) if i % 6 == 0 else w for i, w in enumerate(spoken) if i % 6 != 1]
    assert sum(len(w.split()) for w in words) == len(spoken) and len(audio) > 30 * 16_000
    segments = segment_recording(audio, words, aligner)
    _check_structure(segments, words, -(-len(audio) // 16), audio)
    assert len(segments) >= 2
