"""Streams of any length (streaming/segmented.py): segments end in a pause past segment_ms, at
max_segment_ms in any case, no word is lost, and a step's cost does not grow with the stream.

Scripted recognizers (no model) for the rules; the real causal engine on 70 s of real speech for the overflow."""

from __future__ import annotations

import numpy as np
import pytest

from streaming.events import SAMPLE_RATE, Hypothesis, run_stream
from streaming.segmented import MAX_SEGMENT_MS, Segmented, dbfs

CHUNK_MS = 500


class ContextBound:
    """Emits one word per 500 ms chunk that has sound in it; refuses more than 29.5 s of audio before a reset (as
    Whisper's encoder would); every feed costs as much as the audio of the segment so far (full attention)."""

    lookahead_ms = 0.0
    chunk_ms = CHUNK_MS

    def __init__(self) -> None:
        self.costs: list[int] = []
        self.reset()

    def reset(self) -> None:
        self.samples, self.words = 0, []

    def feed(self, samples: np.ndarray) -> Hypothesis:
        self.samples += len(samples)
        if self.samples > 29.5 * SAMPLE_RATE:
            raise RuntimeError("context overflow")
        self.costs.append(self.samples)
        if dbfs(samples) > -45:
            self.words.append(f"w{len(self.words)}")
        return Hypothesis(tuple(self.words[:-1]), tuple(self.words[-1:]))

    def finish(self) -> Hypothesis:
        return Hypothesis(tuple(self.words))


def _segment_ends(seg: Segmented, audio: np.ndarray, piece: int = CHUNK_MS * 16) -> list[int]:
    """Feed ``audio`` to ``seg`` in pieces of ``piece`` samples; the length (ms) of each segment ended (a piece
    split in a pause starts the next segment with its rest)."""
    seg.reset()
    ends = []
    for start in range(0, len(audio), piece):
        before = seg.segments
        fed = seg.segment_fed_samples + len(audio[start:start + piece])
        seg.feed(audio[start:start + piece])
        if seg.segments > before:
            ends.append((fed - seg.segment_fed_samples) // 16)
    return ends


def _speech_with_pauses(total_s: int, speech_s: int, pause_s: int) -> tuple[np.ndarray, int]:
    """Noise bursts (``speech_s``) separated by digital silence (``pause_s``); the number of loud chunks."""
    rng = np.random.default_rng(0)
    audio = np.zeros(total_s * SAMPLE_RATE, dtype=np.float32)
    loud = 0
    t = 0
    while t + speech_s <= total_s:
        audio[t * SAMPLE_RATE:(t + speech_s) * SAMPLE_RATE] = 0.1 * rng.standard_normal(speech_s * SAMPLE_RATE)
        loud += speech_s * 1000 // CHUNK_MS
        t += speech_s + pause_s
    return audio, loud


def test_ten_minutes_stream_in_segments_without_overflow_or_lost_words():
    inner = ContextBound()
    audio, loud = _speech_with_pauses(600, 9, 2)
    seg = Segmented(inner)
    record = run_stream(seg, audio, CHUNK_MS)
    words = record.text.split()
    # every word of every segment; a loud piece split by a cut (a segment begins mid-piece after a pause, so its
    # forced cut can fall inside one) is two feeds, and this scripted recognizer says a word per loud feed
    assert loud <= len(words) <= loud + seg.segments
    assert len(set(words)) < len(words)  # the inner recognizer restarted (its word counter began again)
    assert max(inner.costs) <= MAX_SEGMENT_MS * SAMPLE_RATE // 1000


def test_a_segment_ends_in_the_first_pause_past_segment_ms_else_at_the_maximum():
    inner = ContextBound()
    seg = Segmented(inner, segment_ms=10_000, max_segment_ms=12_000)
    audio, _ = _speech_with_pauses(60, 11, 1)  # quiet from 11 s: the first segment ends there
    lengths = _segment_ends(seg, audio)
    # 10 s reached inside speech: the segment goes on to the first pause (60 ms of quiet frames) and ends in its
    # middle, 11.03 s, inside the 500 ms piece that holds it; the piece's rest starts the next segment
    assert lengths[0] == 11_030
    loud = np.full(30 * SAMPLE_RATE, 0.1, dtype=np.float32)
    seg.reset()
    run = [seg.feed(loud[i:i + 8000]) for i in range(0, len(loud), 8000)]
    assert seg.segments == 2 and run[23].tentative == () and run[24].tentative  # never quiet: cut at 12 s
    with pytest.raises(ValueError, match="segment_ms"):
        Segmented(inner, segment_ms=29_000, max_segment_ms=29_000)


def test_step_cost_does_not_grow_with_the_stream():
    inner = ContextBound()
    audio, _ = _speech_with_pauses(6 * 60, 5, 1)
    run_stream(Segmented(inner), audio, CHUNK_MS)
    per_minute = 60_000 // CHUNK_MS
    first, last = inner.costs[:per_minute], inner.costs[-per_minute:]
    assert np.percentile(last, 90) <= 1.2 * np.percentile(first, 90)


def test_the_causal_engine_streams_past_30_s(realspeech):
    """70 s of real speech through the evaluate stage's own builder: no context overflow, words after 30 s."""
    from evaluation.sets import load_realspeech
    from recognizer.build import build
    from recognizer.spec import RecognizerSpec

    utts = load_realspeech(realspeech, ("cmu_arctic", "ljspeech"), limit={"cmu_arctic": 4, "ljspeech": 4})
    audio = np.concatenate([u.audio for u in utts] * 4)[: 70 * SAMPLE_RATE]
    assert len(audio) == 70 * SAMPLE_RATE
    recognizer, source = build(RecognizerSpec("causal 1 s", "causal", 1000))
    assert source == "ours" and isinstance(recognizer, Segmented)
    record = run_stream(recognizer, audio, 1000)
    late = [e for e in record.final_words() if e.emission_ms > 30_000]
    assert recognizer.segments >= 2 and len(late) >= 10


def test_a_live_piece_of_many_chunks_is_split_at_the_segment_limit():
    """A live feed behind real time brings several chunks at once: the piece that would carry a segment past
    max_segment_ms is split there, so the inner recognizer never sees more than its context."""
    inner = ContextBound()
    seg = Segmented(inner)
    audio = 0.1 * np.random.default_rng(1).standard_normal(70 * SAMPLE_RATE).astype(np.float32)
    seg.reset()
    hyp = seg.feed(audio[: 20 * SAMPLE_RATE])
    hyp = seg.feed(audio[20 * SAMPLE_RATE :])  # 50 s at once: would overflow a 29.5 s context unsplit
    assert max(inner.costs) <= MAX_SEGMENT_MS * SAMPLE_RATE // 1000
    assert seg.segments == 2 and len(seg.finish().words) >= len(hyp.words)


def test_naive_verifier_padding_stays_inside_the_context():
    """Near the end of a segment the verifier's 5 s of zeros would pass 30 s: the padding is shortened instead."""
    import whisper

    from streaming.hush.transcribe import condition_mel

    class Dims:
        n_mels = 80

    class Model:
        dims = Dims()

    for seconds in (27, 29.99, 30):
        mel = condition_mel(Model(), np.zeros(int(seconds * SAMPLE_RATE), dtype=np.float32), "zeros_5s")
        assert mel.shape[-1] <= whisper.audio.N_FRAMES
    assert condition_mel(Model(), np.zeros(10 * SAMPLE_RATE, dtype=np.float32), "zeros_5s").shape[-1] == 1500


def test_spans_tile_the_stream_and_partition_its_words():
    """``spans`` (what an upload's word timestamps align by): the segments' audio back to back from 0 to the end of
    the stream, and their words, in order, the whole transcript."""
    seg = Segmented(ContextBound())
    audio, _ = _speech_with_pauses(100, 9, 2)
    record = run_stream(seg, audio, CHUNK_MS)
    spans = seg.spans
    assert len(spans) == seg.segments >= 3
    assert spans[0][0] == 0 and spans[-1][1] == len(audio)
    assert all(a[1] == b[0] and a[3] == b[2] for a, b in zip(spans, spans[1:]))  # no gap, no overlap
    assert spans[0][2] == 0 and spans[-1][3] == len(record.text.split())
    assert all(end - start <= MAX_SEGMENT_MS * SAMPLE_RATE // 1000 for start, end, _, _ in spans)
    seg.reset()
    assert seg.spans == []
