"""Montreal Forced Aligner adapter: runs the real ``mfa align`` CLI and reads its TextGrids.

MFA needs Kaldi, which only conda-forge ships; the PyPI package alone installs the front end.
So the program is detected at run time (``mfa`` on PATH, or ``aligner_options: {mfa_bin: …}``)
and a clear `AlignerUnavailable` says how to install it when it is absent.

A batch is written as an MFA corpus (``<speaker>/<utt>.wav`` + ``<utt>.lab`` with the normalized
words), aligned in one ``mfa align`` call (MFA's start-up costs seconds, so batching matters), and
every ``<utt>.TextGrid`` of the output is read with praatio. An utterance MFA could not align
(no TextGrid, or words that do not match) becomes an AlignmentError, never a batch failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np
import soundfile as sf
from praatio import textgrid

from data.aligners.base import AlignItem, Aligner, check_spans
from data.types import SAMPLE_RATE, AlignerUnavailable, AlignmentError, WordSpan

INSTALL_HINT = ("Montreal Forced Aligner is not installed: `conda install -c conda-forge montreal-forced-aligner` "
                "then `mfa model download acoustic english_us_arpa` and `mfa model download dictionary "
                "english_us_arpa` (or set aligner_options mfa_bin / acoustic_model / dictionary)")
_SILENCE_LABELS = frozenset({"", "sil", "sp", "spn", "<eps>"})


class MfaAligner(Aligner):
    name = "mfa"

    def __init__(self, mfa_bin: str | None = None, acoustic_model: str = "english_us_arpa",
                 dictionary: str = "english_us_arpa", beam: int = 100, retry_beam: int = 400,
                 timeout_s: float = 3600.0, num_jobs: int = 1) -> None:
        self.mfa_bin = mfa_bin or os.environ.get("WHISPERLINE_MFA_BIN") or shutil.which("mfa")
        if not self.mfa_bin or not Path(self.mfa_bin).exists():
            raise AlignerUnavailable(INSTALL_HINT)
        self.acoustic_model = acoustic_model
        self.dictionary = dictionary
        self.beam = int(beam)
        self.retry_beam = int(retry_beam)
        self.timeout_s = float(timeout_s)
        self.num_jobs = int(num_jobs)

    @cached_property
    def version(self) -> str:
        try:
            out = subprocess.run([self.mfa_bin, "version"], capture_output=True, text=True, timeout=120, check=True)
        except (OSError, subprocess.SubprocessError) as err:
            raise AlignerUnavailable(f"`{self.mfa_bin} version` failed ({err}); {INSTALL_HINT}") from None
        return f"mfa-{out.stdout.strip()}|{self.acoustic_model}|{self.dictionary}|beam{self.beam}-{self.retry_beam}"

    def align_spoken(self, audio: np.ndarray, words: Sequence[str],
                     groups: Sequence[int] | None = None) -> list[WordSpan]:
        result = self.align_spoken_many([AlignItem("utt", audio, tuple(words), groups and tuple(groups))])[0]
        if isinstance(result, AlignmentError):
            raise result
        return result

    def align_spoken_many(self, items: Sequence[AlignItem]) -> list[list[WordSpan] | AlignmentError]:
        if not items:
            return []
        with tempfile.TemporaryDirectory(prefix="wl-mfa-") as tmp:
            corpus, output = Path(tmp) / "corpus", Path(tmp) / "aligned"
            names = [f"u{i:06d}" for i in range(len(items))]  # MFA dislikes some characters in file names
            speaker_dir = corpus / "speaker"
            speaker_dir.mkdir(parents=True)
            for name, item in zip(names, items, strict=True):
                sf.write(speaker_dir / f"{name}.wav", item.audio, SAMPLE_RATE, subtype="PCM_16")
                (speaker_dir / f"{name}.lab").write_text(" ".join(item.words) + "\n", encoding="utf-8")
            cmd = [self.mfa_bin, "align", str(corpus), self.dictionary, self.acoustic_model, str(output),
                   "--clean", "--single_speaker", "--output_format", "long_textgrid", "--beam", str(self.beam),
                   "--retry_beam", str(self.retry_beam), "-j", str(self.num_jobs),
                   "--temporary_directory", str(Path(tmp) / "mfa_tmp")]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout_s, check=False)
            if proc.returncode != 0:
                # The whole program failed (not one utterance): raise so Prefect retries the batch.
                raise RuntimeError(f"mfa align exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
            out: list[list[WordSpan] | AlignmentError] = []
            for name, item in zip(names, items, strict=True):
                grid = next(iter(sorted(output.rglob(f"{name}.TextGrid"))), None)
                if grid is None:
                    out.append(AlignmentError("align_failed", "mfa wrote no TextGrid (beam too narrow or OOV words)"))
                    continue
                try:
                    spans = read_textgrid_words(grid, item.words)
                    out.append(check_spans(spans, item.words, len(item.audio)))
                except AlignmentError as err:
                    out.append(err)
            return out


def read_textgrid_words(path: str | Path, words: Sequence[str]) -> list[WordSpan]:
    """Word spans (ms) from an MFA TextGrid's word tier, checked against the expected words."""
    grid = textgrid.openTextgrid(str(path), includeEmptyIntervals=False)
    tier_name = next((n for n in grid.tierNames if n.lower().endswith("words")), None)
    if tier_name is None:
        raise AlignmentError("align_failed", f"no words tier in {Path(path).name} (tiers: {grid.tierNames})")
    intervals = [(e.start, e.end, e.label.strip()) for e in grid.getTier(tier_name).entries]
    intervals = [iv for iv in intervals if iv[2].lower() not in _SILENCE_LABELS]
    labels = [iv[2].lower() for iv in intervals]
    if labels != [w.lower() for w in words]:
        raise AlignmentError("word_count_mismatch", f"TextGrid words {labels[:12]} != transcript {list(words)[:12]}")
    return [WordSpan(label, int(round(start * 1000)), int(round(end * 1000))) for start, end, label in intervals]
