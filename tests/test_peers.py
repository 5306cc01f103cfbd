"""The whisperlivekit adapters on real speech and the real tiny.en weights (no mocks).

Each peer is loaded once; two real utterances are streamed in 1 s chunks through `run_stream`. Checked: the final
text is accurate, committed words never change between steps, and the adapter's final words are exactly the
raw whisperlivekit processor's text when that processor is driven directly with the same chunks.
"""

from __future__ import annotations

import base64
import gzip
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from evaluation.peers import (
    PEER_SOURCE,
    WhisperLiveKitLocalAgreement,
    WhisperLiveKitSimulStreaming,
    _PeerWords,
)
from evaluation.metrics import wer_counts
from streaming.events import SAMPLE_RATE, Hypothesis, StreamRecord, chunks, run_stream

UTTERANCES = [("cmu_arctic", "cmu_us_aew_a0002"), ("ljspeech", "LJ001-0008")]
CHUNK_MS = 1000


@pytest.fixture(scope="module")
def utterances(realspeech: Path) -> list[tuple[np.ndarray, str]]:  # realspeech: conftest ($WHISPERLINE_REALSPEECH)
    out = []
    for folder, utt in UTTERANCES:
        lines = (realspeech / folder / "transcripts.tsv").read_text(encoding="utf-8").splitlines()
        refs = dict(line.split("\t", 1) for line in lines)
        audio, rate = sf.read(realspeech / folder / "wav" / f"{utt}.wav", dtype="float32")
        assert rate == SAMPLE_RATE
        out.append((audio, refs[utt]))
    return out


@pytest.fixture(scope="module")
def local_agreement() -> WhisperLiveKitLocalAgreement:
    return WhisperLiveKitLocalAgreement(CHUNK_MS)


@pytest.fixture(scope="module")
def simul_streaming() -> WhisperLiveKitSimulStreaming:
    return WhisperLiveKitSimulStreaming(CHUNK_MS)


def _check_stream(peer, utterances) -> list[StreamRecord]:
    records = [run_stream(peer, audio, CHUNK_MS) for audio, _ in utterances]
    for record in records:
        assert record.steps[-1].final and not record.steps[-1].hypothesis.tentative
        for before, after in zip(record.steps, record.steps[1:]):  # committed words are never revised
            assert after.hypothesis.committed[: len(before.hypothesis.committed)] == before.hypothesis.committed
    errors = wer_counts([ref for _, ref in utterances], [r.text for r in records])
    assert errors.rate <= 0.25, [r.text for r in records]
    return records


def _raw_text(processor, audio: np.ndarray, flush) -> str:
    """Drive a whisperlivekit processor directly, as a server would: insert, process_iter, flush at the end."""
    texts, fed = [], 0
    for piece in chunks(audio, CHUNK_MS):
        fed += len(piece)
        processor.insert_audio_chunk(piece, fed / SAMPLE_RATE)
        texts += [t.text for t in processor.process_iter()[0]]
    texts += [t.text for t in flush(processor)[0]]
    return " ".join("".join(texts).split())


def test_source_names_the_installed_release():
    assert PEER_SOURCE.startswith("pypi:whisperlivekit==0.2.")


def test_peer_tokens_become_words_that_are_never_rewritten():
    # whisperlivekit joins token texts with "": a token without a leading space continues the previous word
    words = _PeerWords()
    words.commit([" Not", " at"])
    assert words.hypothesis() == Hypothesis(("Not",), ("at",))  # "at" may still be continued
    words.commit([" this", ","])
    assert words.hypothesis(" case") == Hypothesis(("Not", "at"), ("this,", "case"))
    words.commit([" Whit"])
    words.commit(["more"])  # SimulStreaming emits word pieces in separate steps
    assert words.hypothesis() == Hypothesis(("Not", "at", "this,"), ("Whitmore",))
    words.close_if_followed_by(" Tom")  # LocalAgreement's unconfirmed buffer starts a new word: complete
    assert words.hypothesis() == Hypothesis(("Not", "at", "this,", "Whitmore"))
    words.commit(["."])  # after that, a glued token becomes a word of its own rather than rewriting one
    assert words.finish() == Hypothesis(("Not", "at", "this,", "Whitmore", "."))


def test_local_agreement_streams_real_speech(local_agreement, utterances):
    records = _check_stream(local_agreement, utterances)
    assert any(s.hypothesis.tentative for r in records for s in r.steps)  # the unconfirmed buffer is shown

    from whisperlivekit.local_agreement.online_asr import OnlineASRProcessor

    audio, _ = utterances[0]
    raw = _raw_text(OnlineASRProcessor(local_agreement.asr), audio, lambda p: p.finish())
    assert records[0].text == raw


def test_simul_streaming_streams_real_speech(simul_streaming, utterances):
    records = _check_stream(simul_streaming, utterances)

    from whisperlivekit.simul_whisper.backend import SimulStreamingOnlineProcessor

    audio, _ = utterances[0]
    raw = _raw_text(SimulStreamingOnlineProcessor(simul_streaming.asr), audio, lambda p: p.process_iter(is_last=True))
    assert records[0].text == raw

    # English-only tokenizer (whisperlivekit picks it from the checkpoint's file name) and openai-whisper's
    # tiny.en alignment heads on the decoder it loaded.
    import whisper

    assert not simul_streaming.asr.cfg.tokenizer_is_multilingual
    model = simul_streaming.asr.shared_model
    packed = whisper._ALIGNMENT_HEADS["tiny.en"]  # noqa: SLF001
    expected = np.frombuffer(gzip.decompress(base64.b85decode(packed)), dtype=bool)
    assert np.array_equal(model.alignment_heads.to_dense().numpy().reshape(-1), expected)


def test_voice_activity_controller_skips_silence_and_keeps_the_words(local_agreement, utterances):
    """whisperlivekit's VAC in front of LocalAgreement-2 (the server's default): two utterances with 2 s of silence
    between them in one stream. The silent chunks run no ASR step, a speech end commits the segment, and the words
    are as accurate as without VAC."""
    from evaluation.vac import VoiceActivityController

    (a, ref_a), (b, ref_b) = utterances
    gap = np.zeros(2 * SAMPLE_RATE, dtype=np.float32)
    audio = np.concatenate([a, gap, b, gap])
    vac_peer = WhisperLiveKitLocalAgreement.__new__(WhisperLiveKitLocalAgreement)
    vac_peer.__dict__.update(local_agreement.__dict__)  # same loaded model, VAC on
    vac_peer.vac = True
    vac_peer.reset()
    steps = []
    original = vac_peer._step

    def counted():
        steps.append(vac_peer._samples)
        original()

    vac_peer._step = counted
    record = run_stream(vac_peer, audio, CHUNK_MS)
    n_chunks = -(-audio.size // (CHUNK_MS * SAMPLE_RATE // 1000))
    assert len(steps) < n_chunks  # chunks of pure silence ran no process_iter
    counts = wer_counts([f"{ref_a} {ref_b}"], [record.text])
    # the VAC's speech starts are clamped to the 40 ms piece they are detected in, as in the server, so a first
    # syllable can be clipped ("Not at" for "Nat"): a word or two more than without VAC
    assert counts.rate <= 0.3, record.text
    # the segmenter itself: silence only → no speech piece; speech → a start, pieces, and an end after the speech
    vad = VoiceActivityController()
    assert all(kind != "speech" for kind, _ in vad.split(np.zeros(SAMPLE_RATE, dtype=np.float32)))
    events = [kind for kind, _ in vad.split(np.concatenate([a, gap]))]
    assert events[0] == "silence_end" and "speech" in events and events[-1] == "silence_start"
