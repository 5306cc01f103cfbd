"""The EMMA read/write decoder on real tiny.en weights and real speech: the threshold
moves emission times, the stall limit forces writes and restarts, p is read at the audio frontier."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from configs.emma import PChooseSettings
from training.emma.p_choose import EmmaPolicy
from training.emma.decoding import EmmaStreamingDecoder, emma_decoder


@pytest.fixture(scope="module")
def model():
    from data.weights import load_model

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


def test_threshold_reaches_the_decoder_and_moves_emissions(model, frames, one_torch_thread):
    """The smoke run's t_emma = 0.3 and 0.5 gave identical WER/AL. Not a lost threshold: an untrained or few-step
    policy has frontier energies E ~ 0.002, so p = sigmoid((E + b)/tau) sits at sigmoid(b/tau) = 0.076 (b = -0.5,
    tau = 0.2): the 2- and 3-step policies the pipeline tests train give p in [0.076, 0.083] on every decision, so
    every decision is a read (only max_stall forces writes) whichever threshold in (0.083, 1) is set.
    Here b and tau put p on both sides of 0.3 and 0.5: the same audio with the same policy is emitted differently,
    the lower threshold never later, and each run's reads are exactly its decisions with p below its threshold."""
    import whisper
    from whisper.tokenizer import get_tokenizer

    from streaming.engine import CausalStreamingEngine

    tokenizer = get_tokenizer(False, language="en", task="transcribe")
    with torch.inference_mode():
        silence = model.encoder(whisper.log_mel_spectrogram(torch.zeros(16000 * 30))[None])[0]
    # untrained energies at the frontier lie in ~[0.001, 0.003]: this b and tau spread p over ~(0.05, 0.95)
    policy = EmmaPolicy.for_model(model, PChooseSettings(energy_bias=-0.0023, temperature=0.0005), seed=0)

    def stream(t_emma: float):
        decoder = EmmaStreamingDecoder(model, tokenizer, policy, t_emma=t_emma, max_stall=10_000, pad_frames=silence)
        assert decoder.t_emma == t_emma
        decided = []
        write_probability = decoder.write_probability
        decoder.write_probability = lambda *a: decided.append(write_probability(*a)) or decided[-1]
        state, counts = decoder.new_state(), []
        with torch.inference_mode():
            for start in [0, *range(50, frames.shape[0], 15)]:  # a 1 s first block, then 0.3 s chunks
                decoder.update(state, frames[start : start + (50 if start == 0 else 15)])
                counts.append(len(state.tokens))
            decoder.update(state, frames[:0], final=True)
        return counts, decided, decoder.hypothesis(state), state.reads

    low, high = stream(0.3), stream(0.5)
    assert low[0] != high[0], "t_emma 0.3 and 0.5 emitted identically"
    for t_emma, (_, decided, _, reads) in ((0.3, low), (0.5, high)):  # every read is a decision below its threshold
        assert reads == sum(p < t_emma for p in decided), t_emma
    assert all(a >= b for a, b in zip(low[0], high[0])), (low[0], high[0])  # the lower threshold writes no later
    assert low[0][-1] > 0  # words written while the audio is still arriving
    # the two runs take the same decisions up to the first p in [0.3, 0.5): a write at 0.3, a read at 0.5
    split = next(i for i, (a, b) in enumerate(zip(low[1], high[1])) if a >= 0.3 or b >= 0.5)
    assert low[1][: split + 1] == pytest.approx(high[1][: split + 1]) and 0.3 <= low[1][split] < 0.5
    assert len(low[2].words) >= 5 and len(high[2].words) >= 5
    # the engine (what the sweep evaluates through) hands its t_emma to this decoder
    engine = CausalStreamingEngine(model, decoder=emma_decoder(policy, t_emma=0.42, max_stall=5))
    assert (engine.decoder.t_emma, engine.decoder.max_stall) == (0.42, 5)
