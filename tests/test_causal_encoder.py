"""The causal streaming encoder: block mask, causal log-mel front end, exact streaming (Theorem 2), MAC counts.

Real tiny.en weights and real speech throughout (the ``realspeech`` fixture)."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import soundfile as sf
import torch
import torch.nn.functional as F
import whisper
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from streaming import macs
from streaming.encoder import ROW_MULTIPLE, CausalEncoder, ContextOverflowError
from streaming.frontend import LOOKAHEAD_MS, StreamingLogMel, causal_log_mel
from streaming.mask import block_causal_mask, block_ends, ms_to_frames

CONFIGS = [(40, 600), (100, 600), (300, 600), (1000, 1000)]
SR = 16_000

# Streaming and the full masked forward add the same float32 products in different orders (other matmul shapes,
# other key-block lengths in the attention kernel, and whatever SIMD path MKL/oneDNN/ATen pick on this CPU), so
# they agree to rounding, not bit for bit (bit equality held on some CPUs only: issue 14). One float32 reduction of
# length K differs between two summation orders by ~sqrt(K)·2^-24 relative to its magnitude (random walk; the
# worst case is K·2^-24). The longest reductions are K = 1536 (MLP) and up to 1500 keys; ~6 of them per layer over
# 4 layers (tiny.en) give ~1.2e-5 relative to the largest activation. RTOL_STREAM = 1e-4 of max |output| is ~10×
# that, and 5-40× above what was seen across kernel paths (1.5e-5 .. 2.7e-5 absolute on outputs of max ~11).
# A real causality or cache bug moves outputs by ≥ 4e-2 of max |output| (a frame seen one block early, a key
# missing from the cache, blocks shifted by one frame: measured, and asserted in test_tolerance_catches_bugs),
# i.e. ≥ 400× the tolerance.
RTOL_STREAM = 1e-4


def assert_stream_close(got: torch.Tensor, ref: torch.Tensor, rtol: float = RTOL_STREAM) -> None:
    """max |got − ref| ≤ rtol · max |ref| (the float32 bound above), with the numbers in the message."""
    assert got.shape == ref.shape, (got.shape, ref.shape)
    diff, scale = (got - ref).abs().max().item(), ref.abs().max().item()
    assert diff <= rtol * scale, f"max |Δ| {diff:.3g} > {rtol:g} · max |ref| {scale:.3g}"


# one thread: timing-robust on a shared 2-core machine (exactness at 2 threads: test_streaming_exact_with_two_threads)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model():
    from data.weights import load_model

    torch.manual_seed(0)
    return load_model("tiny.en").eval()


def _wav(root, corpus: str, name: str) -> torch.Tensor:
    audio, sr = sf.read(root / corpus / "wav" / f"{name}.wav", dtype="float32")
    assert sr == SR and audio.ndim == 1
    return torch.from_numpy(audio)


@pytest.fixture(scope="module")
def utterance(realspeech) -> torch.Tensor:
    return _wav(realspeech, "ljspeech", "LJ001-0001")  # 9.66 s


@pytest.fixture(scope="module")
def utterance2(realspeech) -> torch.Tensor:
    return _wav(realspeech, "cmu_arctic", "cmu_us_aew_a0002")  # 4.02 s, another speaker and corpus


def _full_mel(audio: torch.Tensor, n_mels: int = 80) -> torch.Tensor:
    mel = causal_log_mel(audio, n_mels, pad_end=True)
    return F.pad(mel, (0, mel.shape[1] % 2))[None]  # zero-padded to an even length, [1, n_mels, T]


def _stream_audio(enc: CausalEncoder, audio: torch.Tensor, piece: int) -> tuple[torch.Tensor, list[int]]:
    """Audio → StreamingLogMel → CausalEncoder.stream, ``piece`` samples at a time; returns frames and block sizes."""
    front, state, outs = StreamingLogMel(enc.n_mels), enc.new_state(), []
    for i in range(0, audio.shape[0], piece):
        outs.append(enc.stream(state, front.feed(audio[i:i + piece])))
    outs.append(enc.stream(state, front.finish()))
    outs.append(enc.flush(state))
    return torch.cat(outs), [o.shape[0] for o in outs if o.shape[0]]


# ---------------------------------------------------------------------------------------------------------- mask
def test_ms_to_frames():
    assert ms_to_frames(20) == 1 and ms_to_frames(600) == 30 and ms_to_frames(0) == 0
    for bad in (30, 10, 25.0, 20.5):
        with pytest.raises(ValueError):
            ms_to_frames(bad)


def test_block_mask_semantics():
    # τ0 = 3 frames (60 ms), τ = 2 frames (40 ms), n = 8 → blocks [0,3) [3,5) [5,7) [7,8)
    m = block_causal_mask(8, 40, 60)
    assert m.dtype == torch.bool and m.shape == (8, 8)
    expected_end = [3, 3, 3, 5, 5, 7, 7, 8]
    for i, end in enumerate(expected_end):
        assert m[i].tolist() == [j < end for j in range(8)], i
    assert block_ends(8, 40, 60) == [3, 5, 7, 8]
    assert block_ends(6, 40, 60) == [3, 5, 6]
    assert block_ends(2, 40, 60) == [2]
    assert block_ends(0, 40, 60) == []
    # every row's allowed set is a prefix; full attention inside each block; nothing crosses into a later block
    for i, end in enumerate(expected_end):
        assert m[i, :end].all() and not m[i, end:].any()


@pytest.mark.parametrize("tau,extra", [(2, 14), (5, 5), (10, 2), (15, 1)])
def test_block_mask_equals_paper(tau, extra):
    n = 1500
    tau0 = tau * (extra + 1)
    m = block_causal_mask(n, 20 * tau, 20 * tau0)
    row, col = torch.arange(n)[:, None], torch.arange(n)[None, :]
    appendix = col < tau * (torch.clamp(row // tau, min=extra) + 1)  # public-code invariant
    i, j = row + 1, col + 1  # eq. 11 is 1-based: ⌈i/τ⌉ ≥ ⌈j/τ⌉ ∨ (i, j) ∈ [1, τ0]²
    eq11 = ((i + tau - 1) // tau >= (j + tau - 1) // tau) | ((i <= tau0) & (j <= tau0))
    assert torch.equal(m, appendix)
    assert torch.equal(m, eq11)


@pytest.mark.parametrize("chunk_ms,tau0_ms", [(30, 600), (40, 610), (0, 600), (-40, 600), (40, 0), (300, 200)])
def test_invalid_configs_raise(chunk_ms, tau0_ms):
    with pytest.raises(ValueError):
        block_causal_mask(10, chunk_ms, tau0_ms)
    with pytest.raises(ValueError):
        block_ends(10, chunk_ms, tau0_ms)


def test_invalid_encoder_config_raises(model):
    with pytest.raises(ValueError):
        CausalEncoder(model.encoder, 300, 200)


# ---------------------------------------------------------------------------------------------------------- front end
def test_frontend_frame_counts_and_lookahead(utterance):
    assert LOOKAHEAD_MS == 12.5
    n = utterance.shape[0]
    assert causal_log_mel(utterance).shape == (80, (n + 200 - 400) // 160 + 1)
    assert causal_log_mel(utterance, pad_end=True).shape == (80, math.ceil(n / 160))
    assert causal_log_mel(torch.zeros(480_000), pad_end=True).shape[1] == 3000  # 30 s → Whisper's 3000 frames
    # frame t (centred at t·10 ms) is emitted exactly when the audio reaches t·10 ms + 12.5 ms
    front = StreamingLogMel(80)
    assert front.feed(utterance[:10 * 160 + 199]).shape[1] == 10
    assert front.feed(utterance[10 * 160 + 199:10 * 160 + 200]).shape[1] == 1


@pytest.mark.parametrize("piece", [1, 37, 160, 4800, 10_007])
def test_frontend_chunked_equals_full(utterance, piece):
    audio = utterance[:SR] if piece == 1 else utterance  # 1-sample feeding on the first second (speed)
    full = causal_log_mel(audio, 80, pad_end=True)
    front = StreamingLogMel(80)
    parts = [front.feed(audio[i:i + piece]) for i in range(0, audio.shape[0], piece)]
    complete = torch.cat(parts, dim=1)
    assert torch.allclose(complete, causal_log_mel(audio, 80), atol=1e-5, rtol=0)
    out = torch.cat([complete, front.finish()], dim=1)
    assert out.shape == full.shape
    assert (out - full).abs().max().item() <= 1e-5
    front.reset()
    assert front.feed(audio[:piece]).shape[1] == causal_log_mel(audio[:piece]).shape[1]


def test_frontend_running_max_and_whisper_sanity(utterance):
    audio = utterance
    out = causal_log_mel(audio, 80)
    # independent reference: zero left padding, uncentred STFT, Whisper's filters, log10 with the 1e-10 floor
    padded = F.pad(audio, (200, 0))
    stft = torch.stft(padded, 400, 160, window=torch.hann_window(400), center=False, return_complex=True)
    log_spec = torch.clamp(whisper.audio.mel_filters("cpu", 80) @ stft.abs() ** 2, min=1e-10).log10()
    assert log_spec.shape == out.shape
    running = torch.cummax(log_spec.amax(dim=0), dim=0).values
    assert torch.allclose(out, (torch.maximum(log_spec, running - 8.0) + 4.0) / 4.0, atol=1e-5, rtol=0)
    global_version = (torch.maximum(log_spec, log_spec.max() - 8.0) + 4.0) / 4.0
    assert (out - global_version).abs().max() > 0.1  # the running max really differs from the global one here

    # Whisper's own (non-causal) features differ: reflect padding at the start, the global max
    ref = whisper.log_mel_spectrogram(audio)
    n = min(ref.shape[1], out.shape[1])
    assert (ref[:, :n] - out[:, :n]).abs().max() > 0.1
    # ... but away from the start, after the loudest frame (running max == global max), they coincide
    t0 = int(torch.argmax(log_spec.amax(dim=0))) + 1
    assert torch.allclose(ref[:, t0:n], out[:, t0:n], atol=1e-4, rtol=0)


# ---------------------------------------------------------------------------------------------------------- encoder
@pytest.mark.parametrize("chunk_ms,tau0_ms", CONFIGS)
def test_streaming_equals_full_masked_forward(model, utterance, utterance2, chunk_ms, tau0_ms):
    """Theorem 2: the streamed frames equal the full-sequence block-masked forward (to float32 rounding)."""
    enc = CausalEncoder(model.encoder, chunk_ms, tau0_ms)
    tau, tau0 = ms_to_frames(chunk_ms), ms_to_frames(tau0_ms)
    cases = [(utterance[:int(3.1 * SR)], chunk_ms * 16), (utterance[:int(7.04 * SR)], 37 * 16 + 5),
             (utterance2, chunk_ms * 16)]
    with torch.inference_mode():
        for audio, piece in cases:
            mel = _full_mel(audio)
            full = enc(mel)[0]
            streamed, blocks = _stream_audio(enc, audio, piece)
            assert streamed.shape == full.shape == (mel.shape[-1] // 2, model.dims.n_audio_state)
            assert_stream_close(streamed, full)
            # whole blocks only: τ0 first, then τ, a shorter last block at the end of the stream
            assert blocks[0] == tau0 and all(b == tau for b in blocks[1:-1]) and 0 < blocks[-1] <= tau
            assert blocks == [e - s for s, e in zip([0] + block_ends(full.shape[0], chunk_ms, tau0_ms),
                                                    block_ends(full.shape[0], chunk_ms, tau0_ms))]
            unmasked = enc(mel, mask=None)[0]
            assert (unmasked - full).abs().max().item() > 1e-2  # the test can fail: masking matters


@pytest.mark.parametrize("chunk_ms,tau0_ms", [(40, 600), (300, 600)])
def test_tolerance_catches_bugs(model, utterance2, chunk_ms, tau0_ms):
    """The relative tolerance stays sharp: the bugs it must catch move outputs by ≥ 100× RTOL_STREAM, whether in the
    mask (a frame seen one frame early, blocks shifted by one frame, a key lost) or in the streaming cache."""
    enc = CausalEncoder(model.encoder, chunk_ms, tau0_ms)
    mel = _full_mel(utterance2)
    with torch.inference_mode():
        full = enc(mel)[0]
        n, tau0 = full.shape[0], ms_to_frames(tau0_ms)
        right = block_causal_mask(n, chunk_ms, tau0_ms)
        peek = right.clone()
        peek[:, 1:] |= right[:, :-1]  # every row sees one frame past its block
        shifted = block_causal_mask(n + 1, chunk_ms, tau0_ms)[1:, 1:]  # blocks end one frame early
        lost = right.clone()
        lost[tau0:, 0] = False  # the first key missing for every later block
        assert_stream_close(enc(mel, mask=right)[0], full)  # the custom-mask path itself is fine
        for bad in (peek, shifted, lost):
            with pytest.raises(AssertionError):
                assert_stream_close(enc(mel, mask=bad)[0], full, rtol=100 * RTOL_STREAM)
        # a streaming cache bug: the first block's keys and values written one row late, in every layer
        front, state, outs = StreamingLogMel(enc.n_mels), enc.new_state(), []
        outs.append(enc.stream(state, front.feed(utterance2[: int((tau0_ms + LOOKAHEAD_MS) * SR / 1000)])))
        for cache in (*state.k_cache, *state.v_cache):
            cache[:, 1:tau0] = cache[:, : tau0 - 1].clone()
        outs += [enc.stream(state, front.feed(utterance2[front.samples_in:])), enc.stream(state, front.finish()),
                 enc.flush(state)]
        with pytest.raises(AssertionError):
            assert_stream_close(torch.cat(outs), full, rtol=100 * RTOL_STREAM)


def test_streaming_exact_with_two_threads(model, utterance2):
    enc = CausalEncoder(model.encoder, 100, 600)
    torch.set_num_threads(2)
    try:
        with torch.inference_mode():
            full = enc(_full_mel(utterance2))[0]
            streamed = _stream_audio(enc, utterance2, 1600 + 37)[0]
    finally:
        torch.set_num_threads(1)
    assert_stream_close(streamed, full)


def test_fast_mode_and_batched_forward(model, utterance, utterance2):
    """exact=False (the default: keys padded to 16 only) agrees with exact=True (512) to float32 rounding; a batch
    equals its items."""
    fast = CausalEncoder(model.encoder, 300, 600)
    exact = CausalEncoder(model.encoder, 300, 600, exact=True)
    audio = utterance2[:3 * SR]
    with torch.inference_mode():
        reference = exact(_full_mel(audio))[0]
        full = fast(_full_mel(audio))[0]
        streamed = _stream_audio(fast, audio, 4800)[0]
        assert (full - reference).abs().max().item() <= 1e-3
        assert (streamed - full).abs().max().item() <= 1e-3
        assert (streamed - full).abs().max().item() <= 1e-4 * full.abs().max().item()
        mels = torch.cat([_full_mel(utterance[:3 * SR]), _full_mel(audio)])
        batch = exact(mels)
    assert_stream_close(batch[1], reference)


def test_stream_irregular_mel_feeds(model, utterance2):
    enc = CausalEncoder(model.encoder, 100, 600)
    mel = causal_log_mel(utterance2, 80, pad_end=True)
    full = enc(_full_mel(utterance2))[0]
    rng = np.random.default_rng(0)
    state, outs, i = enc.new_state(), [], 0
    while i < mel.shape[1]:
        k = int(rng.integers(0, 12))
        outs.append(enc.stream(state, mel[:, i:i + k]))
        i += k
    outs.append(enc.flush(state))
    assert_stream_close(torch.cat(outs), full)
    with pytest.raises(RuntimeError):
        enc.stream(state, mel[:, :2])
    with pytest.raises(RuntimeError):
        enc.flush(state)
    empty = enc.new_state()
    assert enc.flush(empty).shape == (0, model.dims.n_audio_state)


def test_block_emitted_exactly_after_lookahead(model, utterance):
    """A block ending at E ms is emitted once the audio reaches E + 12.5 ms, not one sample earlier."""
    enc = CausalEncoder(model.encoder, 300, 600)
    front, state = StreamingLogMel(80), enc.new_state()
    done = 0
    for end in (30, 45, 60):  # block ends in frames: 600, 900, 1200 ms
        boundary = int((end * 20 + LOOKAHEAD_MS) * SR / 1000)
        enc.stream(state, front.feed(utterance[front.samples_in:boundary - 1]))
        assert state.frames_out == done
        got = enc.stream(state, front.feed(utterance[boundary - 1:boundary]))
        assert got.shape[0] == end - done and state.frames_out == end
        done = end


def test_causality_of_masked_encoder(model, utterance):
    """Changing audio after block end + look-ahead leaves earlier blocks untouched (masked), not unmasked."""
    enc = CausalEncoder(model.encoder, 300, 600)
    audio = utterance[:6 * SR]
    end_frame = 60  # the block [45, 60) ends at 1.2 s
    cut = int((end_frame * 20 + LOOKAHEAD_MS) * SR / 1000)
    changed = audio.clone()
    changed[cut:] = torch.flip(audio, [0])[: audio.shape[0] - cut]
    with torch.inference_mode():
        a, b = enc(_full_mel(audio))[0], enc(_full_mel(changed))[0]
        assert torch.equal(a[:end_frame], b[:end_frame])
        assert (a[end_frame:] - b[end_frame:]).abs().max() > 1e-2
        ua, ub = enc(_full_mel(audio), mask=None)[0], enc(_full_mel(changed), mask=None)[0]
        assert (ua[:end_frame] - ub[:end_frame]).abs().max() > 1e-2
        # one sample earlier, inside the 12.5 ms look-ahead, changes that block (its frames attend to each other)
        early = audio.clone()
        early[cut - 1] += 0.5
        c = enc(_full_mel(early))[0]
        assert torch.equal(a[:45], c[:45])
        assert (a[45:end_frame] - c[45:end_frame]).abs().max() > 0


def test_unmasked_30s_equals_whisper_encoder(model, utterance):
    mel = whisper.log_mel_spectrogram(whisper.pad_or_trim(utterance))[None]
    enc = CausalEncoder(model.encoder, 300, 600)
    with torch.inference_mode():
        ref = model.encoder(mel)
        ours = enc(mel, mask=None)
        all_true = enc(mel, mask=torch.ones(1500, 1500, dtype=torch.bool))
    assert ours.shape == ref.shape == (1, 1500, model.dims.n_audio_state)
    assert_stream_close(ours, ref)  # im2col convolutions vs Whisper's Conv1d: another summation order
    assert_stream_close(all_true, ref)


def test_lora_layers_are_used(model, utterance2):
    from peft import LoraConfig, inject_adapter_in_model

    encoder = copy.deepcopy(model.encoder)
    enc = CausalEncoder(encoder, 100, 600)  # wrapped before the injection: nothing is copied
    mel = _full_mel(utterance2[:2 * SR])
    with torch.inference_mode():
        before = enc(mel)[0]
    torch.manual_seed(0)
    config = LoraConfig(r=4, lora_alpha=4, target_modules=["query", "key", "value", "out"], init_lora_weights=False)
    inject_adapter_in_model(config, encoder)
    assert any("lora" in name for name, _ in encoder.named_parameters())
    with torch.inference_mode():
        after = enc(mel)[0]
        streamed = _stream_audio(enc, utterance2[:2 * SR], 1600)[0]
    assert (after - before).abs().max() > 1e-3
    assert_stream_close(streamed, after)
    # and training through the masked forward reaches the LoRA parameters
    loss = enc(mel).square().mean()
    loss.backward()
    assert all(p.grad is not None for n, p in encoder.named_parameters() if "lora_" in n)


def test_context_limit(model):
    enc = CausalEncoder(model.encoder, 300, 600)
    with pytest.raises(ContextOverflowError):
        enc(torch.zeros(1, 80, 3002))
    with pytest.raises(ValueError):
        enc(torch.zeros(1, 80, 101))  # odd length
    state = enc.new_state(max_frames=50)  # 1 s
    enc.stream(state, torch.zeros(80, 90))
    with pytest.raises(ContextOverflowError, match="long-form"):
        enc.stream(state, torch.zeros(80, 11))
    assert state.mel_seen == 90  # the refused frames did not enter the state
    enc.flush(state)
    assert state.frames_out == 45
    with pytest.raises(ValueError):
        enc.new_state(max_frames=1501)


# ---------------------------------------------------------------------------------------------------------- MACs
def test_offline_macs_match_flop_counter(model):
    mel = torch.zeros(1, 80, 3000)
    with torch.inference_mode(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model.encoder(mel)  # Whisper's own 30 s forward: conv modules, SDPA decomposed into bmm
    assert counter.get_total_flops() == 2 * macs.encoder_macs_offline(model.dims)


@pytest.mark.parametrize("exact", [False, True])
def test_masked_full_macs_match_flop_counter(model, exact):
    enc = CausalEncoder(model.encoder, 100, 600, exact=exact)
    for n in (64, 350):
        with torch.inference_mode(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            enc(torch.zeros(1, 80, 2 * n))
        expected = macs.encoder_macs_masked_full(model.dims, n, row_multiple=ROW_MULTIPLE,
                                                 key_multiple=enc.key_multiple)
        assert counter.get_total_flops() == 2 * expected
    assert macs.encoder_macs_masked_full(model.dims, 1500) == macs.encoder_macs_offline(model.dims)


@pytest.mark.parametrize("exact", [False, True])
def test_stream_macs_match_flop_counter(model, exact):
    enc = CausalEncoder(model.encoder, 100, 600, exact=exact)
    n = 100
    state = enc.new_state()
    with torch.inference_mode():
        enc._conv_front(state, torch.randn(1, 80, 2 * n + 1))  # all frames through the conv front first
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            out = enc._drain(state, final=True)  # then only the transformer blocks are counted
    assert out.shape[0] == n
    d, n_layer = model.dims.n_audio_state, model.dims.n_audio_layer
    assert macs.executed_padding(exact) == (ROW_MULTIPLE, enc.key_multiple)  # what the reports count
    executed = macs.encoder_macs_stream(model.dims, n, 100, 600, row_multiple=ROW_MULTIPLE,
                                        key_multiple=enc.key_multiple)
    assert counter.get_total_flops() == 2 * (executed - macs.conv_macs(model.dims, n))
    # useful work: by hand for τ0=30, τ=5, n=100 (blocks end at 30, 35, ..., 100)
    by_hand = sum(12 * s * d * d + 2 * s * e * d for s, e in [(30, 30)] + [(5, e) for e in range(35, 101, 5)])
    assert macs.encoder_macs_stream(model.dims, n, 100, 600) == macs.conv_macs(model.dims, n) + n_layer * by_hand
    # a single block is the offline pass; masked streaming is cheaper than a dense masked pass
    assert macs.encoder_macs_stream(model.dims, n, 100, 20 * n) == macs.encoder_macs_offline(model.dims, n)
    assert macs.encoder_macs_stream(model.dims, 1500, 100, 600) < macs.encoder_macs_masked_full(model.dims, 1500)
    assert macs.encoder_macs_masked_full(model.dims, n, 100, 600, skip_masked=True) == \
        macs.encoder_macs_stream(model.dims, n, 100, 600)
