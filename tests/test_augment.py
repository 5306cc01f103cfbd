"""Training-time augmentation on real speech: the audio moves and the word/token times move with it."""

from __future__ import annotations

import numpy as np
import pytest

from configs.finetune import AugmentSettings
from training.causal.augment import augment
from data.utterances import TrainUtterance
from training.causal.data import MAX_SAMPLES
from evaluation.sets import load_realspeech


@pytest.fixture(scope="module")
def utt(realspeech) -> TrainUtterance:
    u = load_realspeech(realspeech, ("cmu_arctic",), limit={"cmu_arctic": 1})[0]
    return TrainUtterance(u.utt_id, "test", u.audio, u.reference, tuple(range(len(u.words))),
                          tuple(e for _, _, e in u.words), tuple(u.words))


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x.astype(np.float64) ** 2)) + 1e-12)


def test_off_by_default_and_with_p_zero(utt):
    assert AugmentSettings().p == 0
    assert augment(utt, AugmentSettings(), 1000, np.random.default_rng(0)) is utt


def test_lead_silence_shifts_the_audio_and_every_time_exactly(utt):
    s = AugmentSettings(p=1, speed=(1, 1), lead_silence_ms=(500, 500), gain_db=(0, 0), snr_db=(80, 80), reverb_p=0)
    out = augment(utt, s, 1000, np.random.default_rng(0))
    lead = 8000
    np.testing.assert_allclose(out.audio[lead : lead + len(utt.audio)], np.clip(utt.audio, -1, 1), atol=1e-3)
    assert rms(out.audio[:lead]) < 1e-3 < rms(utt.audio)
    assert out.token_end_ms == tuple(t + 500 for t in utt.token_end_ms)
    assert [w[1:] for w in out.words] == [(a + 500, b + 500) for _, a, b in utt.words]
    # the trailing silence the sample points reach is audio (it gets the noise), not padding added later
    assert len(out.audio) >= (out.speech_end_ms + 1000) * 16


def test_speed_scales_times_and_words_keep_their_energy(utt):
    s = AugmentSettings(p=1, speed=(1.1, 1.1), lead_silence_ms=(0, 0), gain_db=(0, 0), snr_db=(30, 30), reverb_p=0)
    out = augment(utt, s, 1000, np.random.default_rng(1))
    assert out.speech_end_ms == pytest.approx(utt.speech_end_ms / 1.1, abs=1)
    # every moved word still sits on speech: louder than the silence after the speech end
    tail = rms(out.audio[(out.speech_end_ms + 200) * 16 : (out.speech_end_ms + 900) * 16])
    loud = [rms(out.audio[a * 16 : b * 16]) for _, a, b in out.words if b - a >= 150]
    assert loud and np.median(loud) > 5 * tail


def test_deterministic_per_generator_seed_and_varied_across_seeds(utt):
    s = AugmentSettings(p=1)
    a, b = (augment(utt, s, 1000, np.random.default_rng([3, 7])) for _ in range(2))
    assert np.array_equal(a.audio, b.audio) and a.token_end_ms == b.token_end_ms
    c = augment(utt, s, 1000, np.random.default_rng([3, 8]))
    assert not np.array_equal(a.audio[: len(c.audio)], c.audio[: len(a.audio)]) or len(a.audio) != len(c.audio)
    state = np.random.get_state()[1].copy()
    augment(utt, s, 1000, np.random.default_rng(9))
    assert np.array_equal(np.random.get_state()[1], state)  # the global generator is left as it was


def test_a_clip_near_30_s_stays_inside_the_context(utt):
    long = TrainUtterance("long", "test", np.tile(utt.audio, 20)[: MAX_SAMPLES - 8000], "x", (1,), (29_400,),
                          (("x", 0, 29_400),))
    out = augment(long, AugmentSettings(p=1, speed=(0.9, 0.9)), 1000, np.random.default_rng(0))
    assert out is long
    s = AugmentSettings(p=1, speed=(1.0, 1.0), lead_silence_ms=(2000, 2000))
    mid = TrainUtterance("mid", "test", np.tile(utt.audio, 20)[: 27 * 16000], "x", (1,), (27_000,),
                         (("x", 0, 27_000),))
    out = augment(mid, s, 1000, np.random.default_rng(0))
    assert len(out.audio) <= MAX_SAMPLES and out.speech_end_ms + 1000 <= 30_000


def test_bad_ranges_are_refused():
    with pytest.raises(ValueError, match="speed"):
        AugmentSettings(speed=(1.1, 0.9))
    with pytest.raises(ValueError):
        AugmentSettings(p=1.5)

