"""Audio loading and validation: anything Whisper cannot use is rejected with a reason.

Fixable problems (other sample rates, several channels) are fixed and recorded in `notes`;
unfixable ones raise `AudioReject` (unreadable, empty, silent, NaN/Inf, too short, too long).
Audio paths may be ``s3://…`` URLs (data/fs.py): read through a seekable fsspec file, fetched in ranges, so a long
recording is not downloaded whole to read its header or one segment.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from data import fs
from data.store import file_sha256 as _local_file_sha256
from data.types import SAMPLE_RATE

# Range size of S3 reads while decoding: a header read fetches one block, a segment read about its own length.
_REMOTE_BLOCK = 4 << 20
_BLOCK_S = 60.0  # seconds of a file decoded at a time (_decode_blocks)


def file_sha256(path: str | Path, block: int = 1 << 20) -> str:
    """Hex SHA-256 of an audio file's bytes (local path or URL); the scan stage hashes inputs through here."""
    if fs.is_remote(str(path)):
        return fs.sha256(str(path))
    return _local_file_sha256(path, block)


class AudioReject(Exception):
    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class LoadedAudio:
    samples: np.ndarray  # float32 mono 16 kHz
    orig_sample_rate: int
    orig_channels: int
    notes: tuple[str, ...]

    @property
    def duration_ms(self) -> int:
        return int(round(len(self.samples) * 1000 / SAMPLE_RATE))


def load_audio(path: str | Path, *, start_s: float = 0.0, duration_s: float | None = None,
               min_duration_s: float = 0.0, max_duration_s: float = 30.0) -> LoadedAudio:
    """Read (a segment of) an audio file (a local path or a URL) as 16 kHz mono float32, or raise AudioReject."""
    if fs.is_remote(str(path)):
        try:
            fh = fs.open_read(str(path), block_size=_REMOTE_BLOCK)
        except Exception as err:  # missing object, no access
            raise AudioReject("unreadable_audio", f"{type(err).__name__}: {err}") from None
        with fh:
            return _load(fh, start_s=start_s, duration_s=duration_s, min_duration_s=min_duration_s,
                         max_duration_s=max_duration_s)
    return _load(str(path), start_s=start_s, duration_s=duration_s, min_duration_s=min_duration_s,
                 max_duration_s=max_duration_s)


def load_audio_bytes(blob: bytes, *, max_duration_s: float, min_duration_s: float = 0.0) -> LoadedAudio:
    """An audio file held in memory (an upload) as 16 kHz mono float32, or raise AudioReject. The length is read
    from the header and checked before anything is decoded, and no more than that length is ever decoded: a small
    compressed file that would decode to hours is refused for the price of reading its header."""
    return _load(io.BytesIO(blob), start_s=0.0, duration_s=None, min_duration_s=min_duration_s,
                 max_duration_s=max_duration_s)


def _load(source, *, start_s: float, duration_s: float | None, min_duration_s: float,
          max_duration_s: float) -> LoadedAudio:
    """``source``: a file name or a seekable binary file object (rewound between the header and the read)."""
    try:
        info = sf.info(source)
    except Exception as err:  # libsndfile raises RuntimeError/LibsndfileError/TypeError for junk
        raise AudioReject("unreadable_audio", f"{type(err).__name__}: {err}") from None
    if info.frames <= 0 or info.samplerate <= 0:
        raise AudioReject("empty_audio", f"{info.frames} frames")
    start = int(round(start_s * info.samplerate))
    frames = info.frames - start if duration_s is None else int(round(duration_s * info.samplerate))
    if frames <= 0:
        raise AudioReject("empty_audio", f"segment at {start_s}s has no samples")
    # Check the length from the header before decoding: a 2-hour file must not be read to be rejected.
    if frames / info.samplerate > max_duration_s:
        raise AudioReject("too_long", f"{frames / info.samplerate:.2f} s > {max_duration_s} s")
    try:
        if not isinstance(source, str):
            source.seek(0)
        mono, channels = _decode_blocks(source, start, frames, info.samplerate, info.channels)
    except AudioReject:
        raise
    except Exception as err:
        raise AudioReject("unreadable_audio", f"{type(err).__name__}: {err}") from None
    return _finish(mono, info.samplerate, channels, min_duration_s=min_duration_s, max_duration_s=max_duration_s)


def _decode_blocks(source, start: int, frames: int, rate: int, channels: int) -> tuple[np.ndarray, int]:
    """``frames`` frames from ``start``, decoded ``_BLOCK_S`` at a time, each block down-mixed (float32) and
    resampled to 16 kHz (soxr's streaming resampler: one filter state across blocks) as it arrives. A worker holds
    the 16 kHz mono result and one block, whatever the recording's length, rate or channels: a 4-hour 44.1 kHz
    stereo file is 0.9 GB of 16 kHz float32, not the 10 GB of its whole float64 decode."""
    resampler = soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32", quality="HQ") if rate != SAMPLE_RATE else None
    block = max(1, int(_BLOCK_S * rate))
    # one output buffer, filled in place: a list of pieces joined at the end would hold the result twice
    mono = np.empty(int(np.ceil(frames * SAMPLE_RATE / rate)) + SAMPLE_RATE, dtype=np.float32)
    n = 0
    with sf.SoundFile(source) as f:
        f.seek(start)
        left = frames
        while left > 0:
            data = f.read(min(left, block), dtype="float32", always_2d=True)
            left = left - len(data) if len(data) else 0  # a file shorter than its header said: what it has
            if not np.isfinite(data).all():
                raise AudioReject("non_finite_audio", f"{int((~np.isfinite(data)).sum())} NaN/Inf samples")
            piece = _downmix(data)
            if resampler is not None:
                piece = resampler.resample_chunk(piece, last=left == 0)
            if n + len(piece) > len(mono):  # (never expected: the resampler's length is frames × 16 kHz / rate)
                mono = np.concatenate([mono[:n], np.empty(len(piece) + SAMPLE_RATE, dtype=np.float32)])
            mono[n: n + len(piece)] = piece
            n += len(piece)
    return mono[:n], channels


def _downmix(data: np.ndarray) -> np.ndarray:
    return data.mean(axis=1, dtype=np.float32) if data.shape[1] > 1 else data[:, 0].astype(np.float32, copy=True)


def prepare_samples(data: np.ndarray, rate: int, *, min_duration_s: float = 0.0,
                    max_duration_s: float = 30.0) -> LoadedAudio:
    """Validate decoded samples (frames × channels) and bring them to 16 kHz mono."""
    if data.ndim == 1:
        data = data[:, None]
    if data.shape[0] == 0:
        raise AudioReject("empty_audio", "no samples")
    if not np.isfinite(data).all():
        bad = int((~np.isfinite(data)).sum())
        raise AudioReject("non_finite_audio", f"{bad} NaN/Inf samples")
    mono = _downmix(data)
    if rate != SAMPLE_RATE:
        mono = soxr.resample(mono, rate, SAMPLE_RATE, quality="HQ").astype(np.float32)
    return _finish(mono, rate, data.shape[1], min_duration_s=min_duration_s, max_duration_s=max_duration_s)


def _finish(mono: np.ndarray, rate: int, channels: int, *, min_duration_s: float,
            max_duration_s: float) -> LoadedAudio:
    """16 kHz mono samples checked (silence, level, length) and described (what was fixed, in ``notes``)."""
    if not mono.size:
        raise AudioReject("empty_audio", "no samples")
    notes: list[str] = []
    if channels > 1:
        notes.append(f"downmixed {channels}->1 channels")
    if rate != SAMPLE_RATE:
        notes.append(f"resampled {rate}->{SAMPLE_RATE} Hz")
    peak = max(float(mono.max()), -float(mono.min()))  # not np.abs(mono): a second copy of a long recording
    if peak == 0.0:
        raise AudioReject("silent_audio", "all samples are zero")
    if peak > 1.0:  # float files may exceed full scale; int16 output would wrap around
        mono /= peak
        notes.append(f"peak-normalized from {peak:.3f}")
    duration = len(mono) / SAMPLE_RATE
    if duration < min_duration_s:
        raise AudioReject("too_short", f"{duration:.3f} s < {min_duration_s} s")
    if duration > max_duration_s:
        raise AudioReject("too_long", f"{duration:.2f} s > {max_duration_s} s")
    return LoadedAudio(mono, rate, channels, tuple(notes))


def encode_audio(samples: np.ndarray, fmt: str) -> bytes:
    """16-bit PCM FLAC or WAV bytes. Deterministic: no timestamps or tags are written."""
    buf = io.BytesIO()
    sf.write(buf, samples, SAMPLE_RATE, format=fmt.upper(), subtype="PCM_16")
    return buf.getvalue()


def decode_audio(blob: bytes) -> np.ndarray:
    samples, rate = sf.read(io.BytesIO(blob), dtype="float32")
    if rate != SAMPLE_RATE:
        raise ValueError(f"stored audio is {rate} Hz, expected {SAMPLE_RATE}")
    return samples
