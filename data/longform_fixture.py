"""Long-form test recordings: utterances joined with known pauses into one recording + one transcript.

Used by tests and benchmarks. Sources of utterances are corpus
folders in the project's format (``transcripts.tsv`` + ``wav/<id>.wav``): the real speech at
``$WHISPERLINE_REALSPEECH/{ljspeech,cmu_arctic}`` or an espeak-ng corpus from
``data.synth.write_synthetic_corpus``. Nothing here copies source data anywhere but ``out_dir``.

Pauses are filled with seeded Gaussian noise (default -60 dBFS RMS), not digital zeros: real
recordings never contain exact silence, and zeros have -inf log energy, which no VAD or
aligner sees in practice. ``part_intervals_ms`` tells where each part (and so each inserted
pause) lies, for checking where a segmenter cut.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import soundfile as sf

from data.types import SAMPLE_RATE


def _pauses(n_parts: int, pause_ms: int | Sequence[int]) -> list[int]:
    if isinstance(pause_ms, (int, np.integer)):
        pauses = [int(pause_ms)] * max(0, n_parts - 1)
    else:
        pauses = [int(p) for p in pause_ms]
    if len(pauses) != max(0, n_parts - 1) or any(p < 0 for p in pauses):
        raise ValueError(f"need {n_parts - 1} pause lengths >= 0 between {n_parts} parts, got {pauses}")
    return pauses


def make_longform_recording(parts: Sequence[tuple[np.ndarray, str]], pause_ms: int | Sequence[int], seed: int = 0,
                            *, noise_dbfs: float = -60.0) -> tuple[np.ndarray, str]:
    """Concatenate (float32 mono 16 kHz audio, text) parts with noise-filled pauses between them.

    ``pause_ms`` is one length for every gap or one per gap (len(parts) - 1). Returns the
    recording and the transcript (the parts' texts joined by spaces). Same inputs and seed →
    identical samples.
    """
    if not parts:
        raise ValueError("no parts")
    pauses = _pauses(len(parts), pause_ms)
    rng = np.random.default_rng(seed)
    sigma = 10.0 ** (noise_dbfs / 20.0)
    pieces: list[np.ndarray] = []
    for i, (audio, _) in enumerate(parts):
        audio = np.asarray(audio, dtype=np.float32)
        if audio.ndim != 1 or not len(audio):
            raise ValueError(f"part {i} is not non-empty mono audio: shape {audio.shape}")
        if i:
            pieces.append((rng.standard_normal(pauses[i - 1] * SAMPLE_RATE // 1000) * sigma).astype(np.float32))
        pieces.append(audio)
    text = " ".join(" ".join(t.split()) for _, t in parts)
    return np.clip(np.concatenate(pieces), -1.0, 1.0), text


def part_intervals_ms(part_lengths: Sequence[int], pause_ms: int | Sequence[int]) -> list[tuple[int, int]]:
    """[start, end) in ms of each part inside the recording (part lengths in samples).

    Inserted pause i lies between interval i's end and interval i + 1's start.
    """
    pauses = _pauses(len(part_lengths), pause_ms)
    out, at = [], 0  # in samples, converted at the end so rounding never accumulates
    for i, n in enumerate(part_lengths):
        if i:
            at += pauses[i - 1] * SAMPLE_RATE // 1000
        out.append((at * 1000 // SAMPLE_RATE, (at + n) * 1000 // SAMPLE_RATE))
        at += n
    return out


def read_corpus_parts(folder: str | Path, ids: Iterable[str] | None = None) -> list[tuple[str, np.ndarray, str]]:
    """(utt_id, audio, text) for utterances of a corpus folder, in transcripts.tsv order (or ``ids`` order)."""
    folder = Path(folder)
    texts = dict(line.split("\t", 1) for line in (folder / "transcripts.tsv").read_text(encoding="utf-8").splitlines()
                 if "\t" in line)
    out = []
    for utt in (list(ids) if ids is not None else list(texts)):
        audio, rate = sf.read(folder / "wav" / f"{utt}.wav", dtype="float32")
        if rate != SAMPLE_RATE or audio.ndim != 1:
            raise ValueError(f"{utt}: expected 16 kHz mono, got {rate} Hz shape {audio.shape}")
        out.append((utt, audio, texts[utt].strip()))
    return out


def write_longform_corpus(out_dir: str | Path,
                          recordings: Mapping[str, tuple[np.ndarray, str]] | Iterable[tuple[str, np.ndarray, str]]
                          ) -> Path:
    """Write ``out_dir/transcripts.tsv`` (utt_id<TAB>text) and ``out_dir/wav/<utt_id>.wav`` (16 kHz PCM16)."""
    out = Path(out_dir)
    items = ([(u, a, t) for u, (a, t) in recordings.items()] if isinstance(recordings, Mapping)
             else list(recordings))
    (out / "wav").mkdir(parents=True, exist_ok=True)
    lines = []
    for utt, audio, text in items:
        if not utt or any(c in utt for c in "\t\n/"):
            raise ValueError(f"bad utterance id {utt!r}")
        sf.write(out / "wav" / f"{utt}.wav", np.asarray(audio, dtype=np.float32), SAMPLE_RATE, subtype="PCM_16")
        lines.append(f"{utt}\t{' '.join(text.split())}")
    (out / "transcripts.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
