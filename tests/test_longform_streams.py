"""Long-form evaluation streams (evaluation/longform.py): recordings joined back from their segments,
one speaker's utterances joined into streams of minutes, word times shifted with the audio."""

from __future__ import annotations

import numpy as np
import pytest

from evaluation.longform import join, speaker_streams, whole_recordings
from evaluation.sets import Utterance


def _utt(utt_id: str, seconds: float, words: tuple[str, ...], recording: str | None = None) -> Utterance:
    audio = np.full(int(seconds * 16_000), 0.01, dtype=np.float32)
    step = int(seconds * 1000) // (len(words) + 1)
    spans = tuple((w, i * step, (i + 1) * step) for i, w in enumerate(words))
    return Utterance(utt_id, audio, " ".join(words), spans, recording=recording or utt_id)


def test_segments_join_back_into_their_recording_with_shifted_word_times():
    parts = [_utt("rec-s001", 20, ("c", "d"), "rec"), _utt("rec-s000", 25, ("a", "b"), "rec"),
             _utt("solo", 3, ("x",))]
    (rec,) = whole_recordings(parts)
    assert rec.utt_id == rec.recording == "rec" and rec.reference == "a b c d"
    assert len(rec.audio) == 45 * 16_000
    assert [w for w, _, _ in rec.words] == ["a", "b", "c", "d"]
    assert rec.words[2][1] == 25_000 + parts[0].words[0][1]  # after the first segment's 25 s
    assert all(a[2] <= b[2] for a, b in zip(rec.words, rec.words[1:]))
    with pytest.raises(ValueError, match="no utterances"):
        join([], "empty")


def test_speaker_streams_are_cut_at_max_s_and_short_ones_dropped():
    utts = [_utt(f"spk1-{i:03d}", 7, ("w",)) for i in range(30)] + [_utt("spk2-000", 7, ("v",))]
    speaker_of = {u.utt_id: u.utt_id.split("-")[0] for u in utts}
    streams = speaker_streams(utts, speaker_of, max_s=100, min_s=60)
    assert [round(len(s.audio) / 16_000) for s in streams] == [98, 98]  # 14 + 14 utterances; the last 2 (14 s) < 60 s
    assert all(s.recording == s.utt_id for s in streams) and streams[0].utt_id == "spk1-000+13"
    assert sum(len(s.words) for s in streams) == 28
