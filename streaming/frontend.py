"""Causal, incremental log-mel front end (Whisper's features without looking into the future).

Whisper's ``log_mel_spectrogram`` is not causal in two ways:

1. ``torch.stft(center=True)`` reflect-pads 200 samples on both sides, so frame 0 needs samples 1..200 mirrored
   (the future) and the last frames need mirrored samples from before them;
2. the dynamic-range clamp uses the *global* maximum of the whole log-spectrogram:
   ``max(x, x.max() − 8)``, then ``(x + 4) / 4``.

:func:`causal_log_mel` keeps everything else (n_fft 400, hop 160, periodic Hann window, power spectrum, the same
``whisper.audio.mel_filters`` bank, ``log10`` with a 1e-10 floor, ``(x + 4) / 4``) and changes exactly these two:

* **zero** left padding of 200 samples (instead of reflect): frame t covers original samples
  ``[160·t − 200, 160·t + 200)``, i.e. it is centred at ``t·10 ms`` and needs audio up to ``t·10 ms + 12.5 ms``;
* a **running** (cumulative over frames) maximum instead of the global one: frame t is clamped at
  ``max(frames 0..t) − 8``.

Frames are emitted only once their whole window is available. **Look-ahead of the front end: 12.5 ms** (200 samples)
past the centre of the newest frame. Downstream, Whisper's conv stack makes encoder frame k (the 20 ms
``[20k, 20k+20)`` ms) depend on mel frames up to 2k+2, so an encoder block that ends at ``E`` ms can be computed
once the audio reaches ``E + 12.5 ms`` (see ``encoder.py``).

At the end of a stream the tail is zero-padded so that every frame whose centre lies inside the audio is emitted
(``pad_end=True``): ``ceil(n_samples / 160)`` frames in total, which is Whisper's frame count for audio whose length
is a multiple of 160 samples (3000 frames for 30 s).

:class:`StreamingLogMel` computes the same frames incrementally; its output, concatenated over any feed sizes
(1 sample, 37 samples, 300 ms, …), equals :func:`causal_log_mel` on the whole audio frame for frame to float32
rounding (the filter-bank matmul always sees a multiple of 4 rows, as in ``encoder.py``).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from whisper.audio import HOP_LENGTH, N_FFT, mel_filters

LEFT_PAD = N_FFT // 2  # 200 zero samples before the audio: frame t is centred at sample 160·t
LOOKAHEAD_SAMPLES = N_FFT - LEFT_PAD  # 200 samples past a frame's centre
LOOKAHEAD_MS = LOOKAHEAD_SAMPLES / 16  # 12.5 ms at 16 kHz
FRAME_MS = HOP_LENGTH / 16  # 10 ms per mel frame
ROW_MULTIPLE = 4


def _as_tensor(audio: np.ndarray | torch.Tensor) -> torch.Tensor:
    x = audio if torch.is_tensor(audio) else torch.from_numpy(np.asarray(audio))
    if x.dim() != 1:
        raise ValueError(f"expected mono audio of shape [n_samples], got {tuple(x.shape)}")
    return x.float()


class _LogSpec:
    """Padded signal → log10 mel power per frame (before the dynamic-range clamp); caches window and filters."""

    def __init__(self, n_mels: int) -> None:
        self.n_mels = n_mels
        self._device: torch.device | None = None

    def _prepare(self, device: torch.device) -> None:
        if self._device != device:
            self.window = torch.hann_window(N_FFT, device=device)
            self.filters_t = mel_filters(device, self.n_mels).T.contiguous()  # [201, n_mels]
            self._device = device

    def __call__(self, signal: torch.Tensor, n_frames: int) -> torch.Tensor:
        """Frames 0..n_frames-1 of ``signal`` (frame f = signal[160·f : 160·f + 400]) → [n_mels, n_frames]."""
        self._prepare(signal.device)
        if n_frames <= 0:
            return signal.new_zeros((self.n_mels, 0))
        frames = signal[: (n_frames - 1) * HOP_LENGTH + N_FFT].unfold(0, N_FFT, HOP_LENGTH)  # [n_frames, 400]
        magnitudes = torch.fft.rfft(frames * self.window, dim=-1).abs() ** 2  # [n_frames, 201]
        # rows padded to a multiple of 4: MKL sums a row in another order below 4 rows per thread, and streaming
        # must match the full sequence
        rows = -(-n_frames // ROW_MULTIPLE) * ROW_MULTIPLE
        if rows != n_frames:
            magnitudes = torch.cat([magnitudes, magnitudes.new_zeros((rows - n_frames, magnitudes.shape[1]))])
        log_mel = torch.clamp(magnitudes @ self.filters_t, min=1e-10).log10()  # [rows, n_mels], contiguous
        return log_mel[:n_frames].T.contiguous()  # [n_mels, n_frames]


def _normalise(log_spec: torch.Tensor, running_max: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Running-max clamp and scaling; returns the features and the running max after the last frame."""
    if log_spec.shape[1] == 0:
        return log_spec, running_max
    frame_max = log_spec.amax(dim=0)
    if running_max is not None:
        frame_max[0] = torch.maximum(frame_max[0], running_max)
    cum = torch.cummax(frame_max, dim=0).values
    out = (torch.maximum(log_spec, cum[None, :] - 8.0) + 4.0) / 4.0
    return out, cum[-1]


def n_causal_frames(n_samples: int, pad_end: bool = False) -> int:
    """Frames :func:`causal_log_mel` returns for ``n_samples`` samples."""
    if pad_end:
        return math.ceil(n_samples / HOP_LENGTH)
    return max(0, (n_samples + LEFT_PAD - N_FFT) // HOP_LENGTH + 1)


def causal_log_mel(audio: np.ndarray | torch.Tensor, n_mels: int = 80, pad_end: bool = False) -> torch.Tensor:
    """Causal log-mel spectrogram [n_mels, T] of 16 kHz mono audio (see the module docstring).

    ``pad_end=False``: only frames whose 400-sample window lies inside the (left-padded) audio,
    ``T = (n + 200 − 400) // 160 + 1``. ``pad_end=True``: the tail is zero-padded and every frame whose centre lies
    inside the audio is returned, ``T = ceil(n / 160)``. The first frames of both agree (the features are causal).
    """
    x = _as_tensor(audio)
    n = x.shape[0]
    n_frames = n_causal_frames(n, pad_end)
    signal = torch.nn.functional.pad(x, (LEFT_PAD, LOOKAHEAD_SAMPLES if pad_end else 0))
    out, _ = _normalise(_LogSpec(n_mels)(signal, n_frames), None)
    return out


class StreamingLogMel:
    """Incremental :func:`causal_log_mel`: ``feed`` returns the new complete frames, ``finish`` the padded tail."""

    def __init__(self, n_mels: int = 80) -> None:
        self.n_mels = n_mels
        self._spec = _LogSpec(n_mels)
        self.reset()

    def reset(self) -> None:
        self._buf = torch.zeros(LEFT_PAD)  # padded samples from 160·frames_out on
        self._running_max: torch.Tensor | None = None
        self.samples_in = 0
        self.frames_out = 0
        self._finished = False

    def _emit(self, n_frames: int) -> torch.Tensor:
        out, self._running_max = _normalise(self._spec(self._buf, n_frames), self._running_max)
        self._buf = self._buf[n_frames * HOP_LENGTH:]
        self.frames_out += n_frames
        return out

    def feed(self, samples: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Append samples; return the frames completed by them, [n_mels, k] (k may be 0)."""
        if self._finished:
            raise RuntimeError("StreamingLogMel.feed after finish(); call reset() to start a new stream")
        x = _as_tensor(samples)
        if self.samples_in == 0 and x.device != self._buf.device:
            self._buf = self._buf.to(x.device)
        self._buf = torch.cat([self._buf, x.to(self._buf.device)])
        self.samples_in += x.shape[0]
        n_new = n_causal_frames(self.samples_in) - self.frames_out
        return self._emit(n_new)

    def finish(self) -> torch.Tensor:
        """End of stream: zero-pad the tail and return the remaining frames whose centre lies inside the audio."""
        if self._finished:
            raise RuntimeError("StreamingLogMel.finish called twice; call reset() to start a new stream")
        self._finished = True
        n_new = n_causal_frames(self.samples_in, pad_end=True) - self.frames_out
        self._buf = torch.nn.functional.pad(self._buf, (0, LOOKAHEAD_SAMPLES))
        return self._emit(n_new)
