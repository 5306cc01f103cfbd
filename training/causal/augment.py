"""Training-time augmentation of causal fine-tuning: speed, leading silence, room, gain and noise.

Real speech differs from the training clips in ways synthetic voices and a few real utterances never show: other
speaking rates, seconds of silence around the speech, rooms, levels and noise (docs/decisions/augmentation.md).
Every transform that moves the audio in time moves the word and token end times with it (the sample-point targets
are derived from them), so an augmented utterance is still exactly supervised:

- speed s (resampling by soxr: pitch moves too, as in Kaldi's speed perturbation): times t → t / s;
- leading silence L: times t → t + L; the trailing silence the sample points reach (``margin_ms``) is appended as
  audio too, so that the noise below covers it (zeros padded later would be a give-away "end of speech");
- a synthetic room: exponentially decaying noise as the impulse response (no IR files ship with the project);
- gain and coloured noise at a random SNR (audiomentations).

Deterministic per (seed, step, rank, utterance index): a resumed run draws the same augmentations.
"""

from __future__ import annotations

import dataclasses
import random

import audiomentations as A
import numpy as np
import soxr
from scipy.signal import fftconvolve

from configs.finetune import AugmentSettings
from data.utterances import TrainUtterance
from training.causal.data import MAX_SAMPLES, SAMPLE_RATE


def _room(audio: np.ndarray, rt60_s: float, rng: np.random.Generator) -> np.ndarray:
    n = int(rt60_s * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    ir = rng.standard_normal(n) * np.exp(-6.908 * t / rt60_s)  # −60 dB at rt60 (ln 1000 = 6.908)
    ir[0] = 1.0  # the direct path
    ir /= np.sqrt(np.sum(ir**2))
    wet = fftconvolve(audio, ir)[: len(audio)].astype(np.float32)
    peak = float(np.abs(wet).max())
    return wet * (float(np.abs(audio).max()) / peak) if peak > 0 else wet


def _seeded(chain, audio: np.ndarray, seed: int) -> np.ndarray:
    # audiomentations draws from Python's and NumPy's global generators: seed both, then restore them
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        out = chain(samples=audio, sample_rate=SAMPLE_RATE)
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)
    return np.clip(out, -1.0, 1.0).astype(np.float32)


def _noise_and_gain(audio: np.ndarray, settings: AugmentSettings, seed: int) -> np.ndarray:
    chain = A.Compose([A.Gain(min_gain_db=settings.gain_db[0], max_gain_db=settings.gain_db[1], p=1.0),
                       A.AddColorNoise(min_snr_db=settings.snr_db[0], max_snr_db=settings.snr_db[1], p=1.0)])
    return _seeded(chain, audio, seed)


def augment(utt: TrainUtterance, settings: AugmentSettings, margin_ms: int, rng: np.random.Generator) -> TrainUtterance:
    """``utt`` augmented with probability ``settings.p`` (else returned as is); times follow the audio."""
    if settings.p <= 0 or rng.random() >= settings.p:
        return utt
    speed = float(rng.uniform(*settings.speed))
    audio = soxr.resample(utt.audio.astype(np.float32), SAMPLE_RATE, SAMPLE_RATE / speed).astype(np.float32)
    speech_end = utt.speech_end_ms / speed
    tail_ms = margin_ms + 40  # the sample points' reach past the speech end, plus the look-ahead
    room_ms = MAX_SAMPLES * 1000 // SAMPLE_RATE - (speech_end + tail_ms)
    if room_ms < 0:  # near 30 s: no slow-down, no silence (the clip must stay inside Whisper's context)
        return utt
    lead_ms = float(min(rng.uniform(*settings.lead_silence_ms), room_ms))
    lead = int(lead_ms * SAMPLE_RATE / 1000)
    total = lead + max(len(audio), int((speech_end + tail_ms) * SAMPLE_RATE / 1000))
    out = np.zeros(min(total, MAX_SAMPLES), dtype=np.float32)
    out[lead : lead + len(audio)] = audio[: len(out) - lead]
    if rng.random() < settings.reverb_p:
        out = _room(out, float(rng.uniform(*settings.rt60_s)), rng)
    out = _noise_and_gain(out, settings, int(rng.integers(2**31)))

    def move(ms: float) -> int:
        return int(round(ms / speed + lead_ms))

    return dataclasses.replace(
        utt, audio=out, token_end_ms=tuple(move(t) for t in utt.token_end_ms),
        words=tuple((w, move(s), move(e)) for w, s, e in utt.words))
