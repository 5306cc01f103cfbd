"""The live protocol and the per-stream session, without a server: frame decoding and its refusals, events that
add up to the offline-streamed transcript whatever the frame sizes, segments for streams past 30 s
(real tiny.en weights, real speech)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from serving.protocol import ProtocolError, decode_frame, parse_config, parse_text
from serving.session import StreamSession
from streaming.events import run_stream


@pytest.fixture(scope="module")
def engine():
    from streaming.engine import CausalStreamingEngine
    from data.weights import load_model

    return CausalStreamingEngine(load_model("tiny.en"), 300, 600, pad_silence=True)


@pytest.fixture(scope="module")
def utterance(realspeech: Path):
    from evaluation.sets import load_realspeech

    return load_realspeech(realspeech, ("cmu_arctic",), limit={"cmu_arctic": 2})[1]


def test_frames_decode_and_bad_ones_are_refused_with_a_code():
    pcm = (np.array([0, 16384, -32768], dtype="<i2")).tobytes()
    assert np.allclose(decode_frame(pcm, "pcm16"), [0, 0.5, -1.0])
    assert np.allclose(decode_frame(np.array([0.25, -0.5], dtype="<f4").tobytes(), "f32"), [0.25, -0.5])
    cases = {"bad_frame": (b"\x00\x01\x02", "pcm16"),
             "non_finite": (np.array([0.1, np.nan], dtype="<f4").tobytes(), "f32"),
             "not_audio": (b"RIFF\x24\x00\x00\x00WAVEfmt ", "pcm16"),
             "frame_too_large": (np.zeros(11 * 16000, dtype="<i2").tobytes(), "pcm16")}
    for code, (data, fmt) in cases.items():
        with pytest.raises(ProtocolError) as err:
            decode_frame(data, fmt)
        assert err.value.code == code and err.value.event()["type"] == "error"
    with pytest.raises(ProtocolError, match="lie in \\[-1, 1\\]"):  # PCM16 values sent as float
        decode_frame(np.array([1200.0, -3000.0], dtype="<f4").tobytes(), "f32")
    assert ProtocolError("frame_too_large", "").close_code == 1009


def test_messages_and_config_are_checked():
    assert parse_text(json.dumps({"type": "end"})) == {"type": "end"}
    for text in ("hello", "[1, 2]", json.dumps({"type": "play"})):
        with pytest.raises(ProtocolError, match="message"):
            parse_text(text)
    assert parse_config({"type": "config", "format": "f32", "chunk_ms": 300}, (300,)).format == "f32"
    assert parse_config({"type": "config"}, (300,)).catch_up is True
    assert parse_config({"type": "config", "catch_up": False}, (300,)).catch_up is False
    for bad, match in (({"sample_rate": 44100}, "sample_rate must be 16000"), ({"format": "mp3"}, "format"),
                       ({"chunk_ms": 40}, "chunk_ms 40"), ({"volume": 3}, "unknown"),
                       ({"catch_up": "yes"}, "catch_up")):
        with pytest.raises(ProtocolError, match=match) as err:
            parse_config({"type": "config", **bad}, (300,))
        assert err.value.code == "bad_config"


@pytest.mark.parametrize("frame_ms", [7, 300, 2600])
def test_events_add_up_to_the_offline_streamed_transcript(engine, utterance, frame_ms):
    """Whatever the client's frame size, the engine sees run_stream's pieces: the same words, all final at the
    end, each final word announced once and in order."""
    reference = run_stream(engine, utterance.audio, 300).text
    session = StreamSession(engine, catch_up=False)
    events = []
    step = max(1, frame_ms * 16)
    for start in range(0, len(utterance.audio), step):
        session.push(utterance.audio[start : start + step])
        events += session.run()
    events += session.finish()
    finals = [w for e in events if e["type"] == "final" for w in e["words"]]
    assert session.text == " ".join(finals) == reference and reference
    indices = [e["index"] for e in events if e["type"] == "final"]
    assert indices == sorted(indices) and indices[0] == 0
    assert all(e["start_ms"] <= e["end_ms"] for e in events)
    summary = session.summary()
    assert summary["words"] == len(finals) and summary["audio_ms"] == pytest.approx(len(utterance.audio) / 16, abs=0.1)
    assert session.stats.fed_samples == session.stats.audio_samples == len(utterance.audio)


def test_a_session_behind_real_time_catches_up_in_one_step(engine, utterance):
    """Several whole chunks waiting (the engine fell behind, or a long frame): one feed for all of them, as
    run_stream(live=True) feeds; the partial rest waits for its chunk; a session that keeps up is fed chunk by chunk."""
    chunk = 300 * 16
    lookahead = round(engine.lookahead_ms * 16)
    session = StreamSession(engine)
    session.push(utterance.audio[: lookahead + chunk])  # keeps up: exactly one piece
    session.run()
    assert session.stats.steps == 1 and session.stats.caught_up == 0
    session.push(utterance.audio[lookahead + chunk : lookahead + 5 * chunk + 100])  # 4 chunks and a bit: behind
    session.run()
    assert session.stats.steps == 2 and session.stats.caught_up == 1
    assert session.stats.fed_samples == lookahead + 5 * chunk and session.backlog_ms == pytest.approx(100 / 16)
    session.push(utterance.audio[lookahead + 5 * chunk + 100 :])
    session.run()
    session.finish()
    summary = session.summary()
    assert summary["caught_up_steps"] >= 1 and session.stats.fed_samples == len(utterance.audio)
    offline = run_stream(engine, utterance.audio, 300).text.split()
    # the same recognizer in larger steps: not the same words as chunk by chunk, but no worse a transcript
    from evaluation.metrics import wer

    assert session.text.split()[0] == offline[0]
    assert wer([utterance.reference], [session.text]) <= wer([utterance.reference], [" ".join(offline)]) + 0.25


def test_a_long_stream_is_cut_into_segments_inside_the_30_s_context(engine, utterance):
    """70 s: speech, a minute of silence, speech. Every segment stays below 28 s, nothing is lost."""
    silence = np.zeros(60 * 16000, dtype=np.float32)
    audio = np.concatenate([utterance.audio, silence, utterance.audio])
    session = StreamSession(engine, segment_ms=20_000, max_segment_ms=26_000, catch_up=False)
    for start in range(0, len(audio), 16000):
        session.push(audio[start : start + 16000])
        session.run()
        assert session.engine.segment_fed_samples <= 26_000 * 16
    session.finish()
    assert session.stats.segments >= 3 and session.stats.fed_samples == len(audio)
    once = run_stream(engine, utterance.audio, 300).text.split()
    words = session.text.split()
    assert words[: len(once) // 2] == once[: len(once) // 2]  # the first utterance as offline (its own segment)
    assert len(words) >= len(once)  # the second one is transcribed too (after a minute of silence)
    with pytest.raises(ValueError, match="segment_ms"):
        StreamSession(engine, segment_ms=29_000, max_segment_ms=29_000)


def test_engines_on_one_model_share_the_vocabulary_projection(engine):
    """A server builds one engine per stream: the int8 vocabulary copy (20 MB for tiny) is made once per model."""
    from streaming.engine import CausalStreamingEngine

    other = CausalStreamingEngine(engine.model, 300, 600)
    assert other.decoder.decoder._vocab_projection() is engine.decoder.decoder._vocab_projection()


def test_stream_file_reference_takes_long_text_and_files(tmp_path):
    """`stream-file --reference` is text or a file: a transcript longer than a file name may be is text, not a
    crash (the OS refuses names past 255 bytes), and a file's text is read."""
    from flows.cli_serve import reference_text

    long_text = " ".join(["the birch canoe slid on the smooth planks"] * 50)[:2000]
    assert len(long_text) == 2000
    assert reference_text(long_text) == long_text
    assert reference_text("hello world") == "hello world"
    f = tmp_path / "ref.txt"
    f.write_text("glue the sheet to the dark blue background\n", encoding="utf-8")
    assert reference_text(str(f)) == "glue the sheet to the dark blue background\n"
    assert reference_text("a\x00b") == "a\x00b"


def test_a_stream_that_falls_behind_and_catches_up_finalizes_no_repeat_and_no_loop(realspeech: Path):
    """A server behind real time feeds every waiting piece as one step (``catch_up``): 1.2 s at a time here, four
    chunks per step, the way a replica 900 ms behind feeds. On 40 s of a continuous real reading, the served two-pass
    spec's finals say no phrase twice that the reading says once, and hold no token loop."""
    import soundfile as sf

    from evaluation.repetition import utterance_repetition
    from recognizer.build import build
    from recognizer.spec import load
    from evaluation.metrics import wer

    longform = realspeech.parent / "longform"
    rows = [line.split("\t") for line in (longform / "segments_ljspeech.tsv").read_text().splitlines()[1:]]
    rec = "lj_LJ001-0033_to_0084"
    clips = [r for r in rows if r[0] == rec and float(r[3]) <= 40.0]
    reference = " ".join(r[4] for r in clips)
    audio, rate = sf.read(longform / "wav" / f"{rec}.wav", dtype="float32")
    audio = audio[: int(float(clips[-1][3]) * rate)]
    recognizer, _ = build(load())
    session = StreamSession(recognizer, catch_up=True)
    block = 1200 * 16
    for i in range(0, len(audio), block):
        session.push(audio[i : i + block])
        session.run()
    session.finish()
    assert session.stats.caught_up > 0  # the steps did take several pieces at once
    text = session.text
    assert wer([reference], [text]) < 0.25, text
    assert utterance_repetition(text, reference) == {"repeated_words": 0, "token_loop": False}, text
