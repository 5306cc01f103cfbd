"""Speech ⊕ hush word → log-mel → variable-length encoder; saving, loading and validating hush words.

Lengths: speech is zero-padded to a multiple of 320 samples (one encoder frame) so that the mel length stays even
and an 8000-sample hush word is exactly 50 mel frames = 25 encoder frames. The mel is Whisper's own
(``whisper.log_mel_spectrogram``, differentiable torch STFT), computed **per example** (its dynamic-range clamp
uses one global max per call, which would couple the examples of a batch), with no 30 s padding.
The encoder runs on the real length: positional embedding sliced, bidirectional attention (``CausalEncoder`` with
``mask=None`` is exactly Whisper's encoder layer by layer, without the 3000-frame assertion).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
from torch import Tensor
from whisper.audio import HOP_LENGTH, N_FFT, mel_filters

from streaming.encoder import CausalEncoder

SAMPLE_RATE = 16_000
FRAME_SAMPLES = 320  # one encoder frame (2 mel hops of 160 samples)


class HushWordError(ValueError):
    """A hush-word file is unusable (wrong length, not finite, over its amplitude bound, unreadable)."""


def pad_speech(speech: Tensor) -> Tensor:
    """Zero-pad [n] speech to a multiple of 320 samples (at most 319 zeros: no audible gap before the hush word)."""
    extra = (-speech.shape[-1]) % FRAME_SAMPLES
    return torch.nn.functional.pad(speech, (0, extra)) if extra else speech


def hushed_mel(speech: Tensor, hush: Tensor | None, n_mels: int, tail: Tensor | None = None) -> Tensor:
    """Log-mel [n_mels, T] of speech ⊕ (hush word | ``tail`` | nothing), T even, differentiable w.r.t. ``hush``."""
    parts = [pad_speech(speech.float())]
    if hush is not None:
        parts.append(hush.float())
    if tail is not None:
        parts.append(tail.float())
    x = pad_speech(torch.cat(parts))
    return _log_mel(x, n_mels)


def _log_mel(x: Tensor, n_mels: int) -> Tensor:
    """``whisper.log_mel_spectrogram(x, n_mels)``, step for step, with a filter bank that autograd may use:
    whisper caches its bank (lru_cache), and a bank first built under ``torch.inference_mode`` (any streaming
    call in the same process) is an inference tensor that cannot be saved for backward."""
    filters = mel_filters(x.device, n_mels)
    if filters.is_inference():
        filters = filters.clone()
    window = torch.hann_window(N_FFT, device=x.device)
    stft = torch.stft(x, N_FFT, HOP_LENGTH, window=window, return_complex=True)
    power = stft[..., :-1].abs() ** 2
    log_spec = torch.clamp(filters @ power, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def encode(model, mel: Tensor) -> Tensor:
    """Whisper's encoder on a real-length mel [B, n_mels, T] → [B, T/2, d]."""
    return CausalEncoder(model.encoder, 20, 20, exact=False)(mel, mask=None)


def variable_length_view(model):
    """A view of ``model`` whose encoder takes any even mel length ≤ 3000, for ``whisper.decode``.

    Shares every weight; ``whisper.decode`` then runs unchanged (its own check for pre-encoded features compares
    against (1500, d), so a real-length mel goes through this encoder)."""
    class _Encoder(torch.nn.Module):
        def __init__(self, encoder) -> None:
            super().__init__()
            self.inner = CausalEncoder(encoder, 20, 20, exact=False)

        def forward(self, mel: Tensor) -> Tensor:
            return self.inner(mel, mask=None)

    view = copy.copy(model)
    view._modules = dict(model._modules)  # noqa: SLF001 — own module table: the original keeps its encoder
    view._modules["encoder"] = _Encoder(model.encoder)
    return view


def save_hush_word(hush: np.ndarray, directory: str | Path, meta: dict) -> Path:
    """hush_word.npy (float32) + hush_word.wav (32-bit float, lossless) + hush_word.json."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    hush = np.asarray(hush, dtype=np.float32)
    np.save(out / "hush_word.npy", hush, allow_pickle=False)
    sf.write(out / "hush_word.wav", hush, SAMPLE_RATE, subtype="FLOAT")
    (out / "hush_word.json").write_text(json.dumps({**meta, "samples": int(hush.shape[0])}, indent=2, sort_keys=True))
    return out


def load_hush_word(path: str | Path, samples: int | None = None, bound: float | None = None) -> np.ndarray:
    """Read a hush word (.npy, .wav, or a directory holding hush_word.npy) and validate it."""
    path = Path(path)
    meta = {}
    if path.is_dir():
        if (path / "hush_word.json").exists():
            meta = json.loads((path / "hush_word.json").read_text())
        path = path / "hush_word.npy"
    try:
        if path.suffix == ".npy":
            hush = np.load(path, allow_pickle=False)
        else:
            hush, rate = sf.read(path, dtype="float32")
            if rate != SAMPLE_RATE:
                raise HushWordError(f"{path}: sample rate {rate}, expected {SAMPLE_RATE}")
    except (OSError, ValueError, RuntimeError) as err:
        if isinstance(err, HushWordError):
            raise
        raise HushWordError(f"{path}: unreadable hush word ({type(err).__name__}: {err})") from None
    hush = np.asarray(hush)
    if hush.ndim != 1 or hush.dtype.kind != "f":
        raise HushWordError(f"{path}: expected a 1-D float waveform, got {hush.dtype} {hush.shape}")
    samples = samples or meta.get("samples")
    if samples is not None and hush.shape[0] != samples:
        raise HushWordError(f"{path}: {hush.shape[0]} samples, expected {samples}")
    if hush.shape[0] % FRAME_SAMPLES:
        raise HushWordError(f"{path}: {hush.shape[0]} samples is not a multiple of {FRAME_SAMPLES} (one encoder frame)")
    if not np.isfinite(hush).all():
        raise HushWordError(f"{path}: {int((~np.isfinite(hush)).sum())} NaN/Inf samples")
    bound = bound or meta.get("amplitude_bound")
    if bound is not None and float(np.abs(hush).max()) > bound + 1e-6:
        raise HushWordError(f"{path}: peak {float(np.abs(hush).max()):.4f} exceeds the amplitude bound {bound}")
    return hush.astype(np.float32)
