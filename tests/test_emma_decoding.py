"""The EMMA read/write decoder on real tiny.en weights and real speech: the threshold
moves emission times, the stall limit forces writes and restarts, p is read at the audio frontier."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from configs.emma import PChooseSettings
from training.emma.p_choose import EmmaPolicy
from training.emma.decoding import EmmaStreamingDecoder


@pytest.fixture(scope="module")
def model():
    from training.weights import load_model

    return load_model("tiny.en").eval()


@pytest.fixture(scope="module")
def audio(realspeech):
    import soundfile as sf

    wav = sorted((realspeech / "cmu_arctic" / "wav").glob("*.wav"))[0]
    samples, _ = sf.read(wav, dtype="float32")
    return samples


@pytest.fixture(scope="module")
def frames(model, audio):
    """Whisper's own (bidirectional, 30 s padded) encoder frames of the utterance, cut to its length: the
    original decoder reads these well, so the policy mechanics are tested on sensible text."""
    import whisper

    mel = whisper.log_mel_spectrogram(whisper.pad_or_trim(torch.from_numpy(audio)))
    with torch.inference_mode():
        return model.encoder(mel[None])[0, : len(audio) // 320]


def decode(model, frames, bias: float, t_emma: float = 0.5, max_stall: int = 10_000, chunk: int = 15):
    """Feed the frames chunk by chunk; returns the decoder, its state and the token count after each chunk."""
    from whisper.tokenizer import get_tokenizer

    tokenizer = get_tokenizer(False, language="en", task="transcribe")
    policy = EmmaPolicy.for_model(model, PChooseSettings(energy_bias=bias), seed=0)
    decoder = EmmaStreamingDecoder(model, tokenizer, policy, t_emma=t_emma, max_stall=max_stall)
    state = decoder.new_state()
    counts = []
    with torch.inference_mode():
        for start in range(0, frames.shape[0], chunk):
            decoder.update(state, frames[start : start + chunk])
            counts.append(len(state.tokens))
        decoder.update(state, frames[:0], final=True)
    return decoder, state, counts


def test_never_write_waits_for_the_end_and_always_write_does_not(model, frames, one_torch_thread):
    _, reading, counts = decode(model, frames, -50.0)
    assert set(counts) == {0} and len(reading.tokens) >= 5  # everything at the end of the stream
    decoder, writing, counts = decode(model, frames, 50.0)
    assert counts[len(counts) // 2] >= 3  # words written while the audio is still arriving
    assert len(decoder.hypothesis(writing).words) >= 5


def test_stall_limit_forces_one_write_and_restarts_the_count(model, frames, one_torch_thread):
    _, state, counts = decode(model, frames, -50.0, max_stall=2)
    writes = [i for i in range(len(counts)) if counts[i] > (counts[i - 1] if i else 0)]
    assert state.forced == len(writes) >= 2
    assert all(counts[i] - (counts[i - 1] if i else 0) == 1 for i in writes)  # one forced token per write
    assert set(np.diff([-1, *writes]).tolist()) == {3}  # 2 reads, then the forced write: the count restarts


def test_write_probability_is_read_at_the_frontier_frame(model, frames):
    decoder, state, _ = decode(model, frames[:40], 0.0, chunk=40)
    with torch.inference_mode():
        expected = [layer.keys(frames[39:40][None]) for layer in decoder.policy.layers]
    for got, want in zip(state.frontier_keys, expected, strict=True):
        assert torch.allclose(got, want)
