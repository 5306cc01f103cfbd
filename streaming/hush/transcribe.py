"""Offline transcription of one utterance under an input condition: Whisper's 30 s padding (of the audio, or of its
features as faster-whisper pads them), no padding, naive zero / white-noise padding of 1, 2 or 5 s, or the hush
word — greedy, no timestamps, the same decoder for all."""

from __future__ import annotations

import numpy as np
import torch
import whisper

from streaming.hush.frontend import SAMPLE_RATE, hushed_mel, variable_length_view

NAIVE = {f"{kind}_{s}s": (kind, s) for kind in ("zeros", "noise") for s in (1, 2, 5)}
CONDITIONS = ("pad30", "pad30_features", "nopad", *NAIVE, "hush")
NOISE_RMS = 0.01  # −40 dBFS white noise, seeded per utterance length


def _options():
    return whisper.DecodingOptions(task="transcribe", language="en", temperature=0.0, without_timestamps=True,
                                   fp16=False)


def condition_mel(model, audio: np.ndarray, condition: str, hush: np.ndarray | None = None) -> torch.Tensor:
    """The mel [n_mels, T] the encoder sees under ``condition``."""
    speech = torch.from_numpy(np.asarray(audio, dtype=np.float32))
    n_mels = model.dims.n_mels
    if condition == "pad30":
        return whisper.pad_or_trim(whisper.log_mel_spectrogram(speech, n_mels, padding=whisper.audio.N_SAMPLES),
                                   whisper.audio.N_FRAMES)
    if condition == "pad30_features":
        # faster-whisper's (CTranslate2's) input: the log-mel of the audio alone (one hop of padding), its own loudest
        # frame setting the floor, padded *as features* with zeros to 30 s. "pad30" is openai-whisper's: the log-mel
        # of the audio followed by 30 s of digital silence, whose floor (max − 8) lies far below 0
        mel = whisper.log_mel_spectrogram(speech, n_mels, padding=160)[..., : whisper.audio.N_FRAMES]
        return torch.nn.functional.pad(mel, (0, whisper.audio.N_FRAMES - mel.shape[-1]))
    if condition == "nopad":
        return hushed_mel(speech, None, n_mels)
    if condition == "hush":
        if hush is None:
            raise ValueError("condition 'hush' needs a hush word")
        return hushed_mel(speech, torch.from_numpy(hush), n_mels)
    if condition in NAIVE:
        kind, seconds = NAIVE[condition]
        # the padding never takes the audio past Whisper's 30 s context: near the end of a long segment it is
        # shortened (the encoder could not attend to more anyway)
        n = max(0, min(seconds * SAMPLE_RATE, whisper.audio.N_SAMPLES - len(speech)))
        tail = (torch.zeros(n) if kind == "zeros" else
                torch.from_numpy(np.random.default_rng(len(audio)).normal(0, NOISE_RMS, n).astype(np.float32)))
        return hushed_mel(speech, None, n_mels, tail=tail)[..., : whisper.audio.N_FRAMES]  # STFT's +1 frame too
    raise ValueError(f"unknown condition {condition!r}; known: {CONDITIONS}")


def decode(model, mel: torch.Tensor, view=None) -> str:
    """Greedy text of a mel; real-length mels go through the variable-length encoder view."""
    if mel.shape[-1] > whisper.audio.N_FRAMES:
        raise ValueError(f"{mel.shape[-1]} mel frames exceed Whisper's 30 s context")
    target = model if mel.shape[-1] == whisper.audio.N_FRAMES else (view or variable_length_view(model))
    with torch.no_grad():
        return whisper.decode(target, mel, _options()).text.strip()


class HushWordTranscriber:
    """``text = HushWordTranscriber(model, hush)(audio)``: speech ⊕ hush word, no 30 s padding."""

    def __init__(self, model, hush: np.ndarray) -> None:
        self.model, self.hush = model, np.asarray(hush, dtype=np.float32)
        self.view = variable_length_view(model)

    def __call__(self, audio: np.ndarray) -> str:
        return decode(self.model, condition_mel(self.model, audio, "hush", self.hush), self.view)
