"""The causal streaming engine end to end: real tiny.en weights, real speech, the events/record contract."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streaming.engine import CausalStreamingEngine
from evaluation.sets import load_realspeech
from evaluation.streamed import evaluate_records, stream_all
from streaming.events import Hypothesis, chunks, run_stream


@pytest.fixture(scope="module")
def tiny():
    from data.weights import load_model

    return load_model("tiny.en")


@pytest.fixture(scope="module")
def utterances(realspeech: Path):
    return load_realspeech(realspeech, ("cmu_arctic", "ljspeech"), limit={"cmu_arctic": 3, "ljspeech": 1})


def test_chunks_carry_the_lookahead_in_the_first_piece():
    audio = np.zeros(16000, dtype=np.float32)
    pieces = list(chunks(audio, 300, 12.5))
    assert len(pieces[0]) == 4800 + 200 and all(len(p) == 4800 for p in pieces[1:-1])
    assert sum(len(p) for p in pieces) == len(audio)


@pytest.mark.parametrize("chunk_ms", [100, 300, 1000])
def test_engine_streams_real_speech_with_monotone_commits(tiny, utterances, chunk_ms):
    engine = CausalStreamingEngine(tiny, chunk_ms, max(600, chunk_ms), pad_silence=True)
    records = stream_all(engine, utterances, chunk_ms)
    for record in records:
        committed: tuple[str, ...] = ()
        for step in record.steps:
            assert step.hypothesis.committed[: len(committed)] == committed  # never revised
            committed = step.hypothesis.committed
        assert record.steps[-1].final and not record.steps[-1].hypothesis.tentative
        # the last partial chunk is decoded: one step per piece plus the end-of-stream step
        assert len(record.steps) == len(list(chunks(np.zeros(int(record.audio_ms * 16)), chunk_ms, 12.5))) + 1
        finals = record.final_words()
        assert [e.word for e in finals] == list(record.steps[-1].hypothesis.words)
        assert all(a.emission_ms <= b.emission_ms for a, b in zip(finals, finals[1:]))
        assert all(e.elapsed_ms >= e.emission_ms for e in finals)
    metrics = evaluate_records(records, utterances)
    assert 0 <= metrics["wer"] < 3 and metrics["rtf"] > 0 and metrics["utterances"] == len(utterances)
    # words are emitted while the audio is still arriving, not only at the end
    early = [e for r in records for e in r.final_words() if e.emission_ms < r.audio_ms]
    assert early, "nothing was committed before the end of the stream"


def test_engine_finish_without_audio_and_reset(tiny):
    engine = CausalStreamingEngine(tiny, 300, 600)
    assert engine.finish() == Hypothesis(())
    engine.reset()
    silence = np.zeros(16000 * 2, dtype=np.float32)
    record = run_stream(engine, silence, 300)
    assert record.text == ""  # no word is forced out of silence


def test_whole_utterance_block_matches_offline_quality(tiny, utterances):
    """With tau0 = 30 s the first block holds the whole utterance (no causality): the engine's plumbing
    (front end, encoder, caches, silence pad, decoder) must then transcribe like offline Whisper, and the
    fast settings (int8 vocabulary projection, reused prefix cache) like the exact ones. The original
    weights under a short block mask are much worse: the gap the causal fine-tuning closes."""
    exact = CausalStreamingEngine(tiny, 1000, 30_000, pad_silence=True, cache_policy="exact", int8_vocab=False)
    fast = CausalStreamingEngine(tiny, 1000, 30_000, pad_silence=True)
    wer_exact = evaluate_records(stream_all(exact, utterances, 1000), utterances)["wer"]
    wer_fast = evaluate_records(stream_all(fast, utterances, 1000), utterances)["wer"]
    assert wer_exact <= 0.12 and abs(wer_fast - wer_exact) <= 0.05, (wer_fast, wer_exact)


def test_engine_rejects_bad_chunk_configs(tiny):
    with pytest.raises(ValueError):
        CausalStreamingEngine(tiny, 30, 600)  # not a multiple of the 20 ms encoder frame
    with pytest.raises(ValueError):
        CausalStreamingEngine(tiny, 1000, 600)  # tau0 shorter than a chunk


def test_finish_flushes_silence_so_a_clip_ending_on_its_last_word_is_decoded_to_the_end(tiny, utterances):
    """A tuned model writes a word once it has heard its end and a margin: finish() feeds `flush_ms` of silence
    first, as one step of whole chunks. Cut on the chunk grid, a clip with the flush decodes exactly like the clip
    followed by that silence in one piece."""
    from streaming.engine import FLUSH_MS

    utt = utterances[1]
    pieces = int(np.ceil((utt.words[-1][2] * 16 - 200) / 4800))  # 300 ms pieces up to the last word's end
    clip = utt.audio[: 200 + 4800 * pieces]
    flushed = CausalStreamingEngine(tiny, 300, 600, pad_silence=True)
    record = run_stream(flushed, clip, 300)
    silence = np.zeros(4800 * int(np.ceil(FLUSH_MS / 300)), dtype=np.float32)
    plain = CausalStreamingEngine(tiny, 300, 600, pad_silence=True, flush_ms=0)
    plain.reset()
    for start in range(0, len(clip), 4800):
        plain.feed(clip[start : start + 4800])
    plain.feed(silence)
    assert record.text == plain.finish().text and record.text
    unflushed = run_stream(CausalStreamingEngine(tiny, 300, 600, pad_silence=True, flush_ms=0), clip, 300)
    assert len(record.steps) == len(unflushed.steps)  # the flush adds no step: it is part of the final one
    assert flushed.frontend.samples_in == len(clip) + len(silence)  # the flush went through the front end
    assert plain.frontend.samples_in == len(clip) + len(silence)
    with pytest.raises(ValueError, match="flush_ms"):
        CausalStreamingEngine(tiny, 300, 600, flush_ms=-1)


def test_flush_stops_at_the_30_s_context(tiny, utterances):
    """A stream that already fills the encoder's 30 s context ends with what it has (no overflow)."""
    engine = CausalStreamingEngine(tiny, 1000, 1000)
    long = np.tile(utterances[0].audio, int(np.ceil(29.9 * 16000 / len(utterances[0].audio))))[: int(29.9 * 16000)]
    record = run_stream(engine, long, 1000)
    assert record.steps[-1].final and engine.frontend.samples_in <= 30 * 16000
