"""The offline baseline (OfflineWhisper) on real tiny.en weights and real speech; the streaming policies compared
against are the real PyPI peers (tests/test_peers*.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from evaluation.metrics import wer
from streaming.baselines import OfflineWhisper
from streaming.events import run_stream

# Short cmu_arctic utterances (3.5-4.0 s each)
UTTERANCES = ("cmu_us_aew_a0002", "cmu_us_aew_a0003", "cmu_us_axb_a0006")


@pytest.fixture(scope="module")
def model():
    from data.weights import ModelUnavailableError, load_model

    # One intra-op thread: on the shared 2-core machine two OpenMP threads competing with other processes
    # make small decoder steps many times slower; the results do not depend on it.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        loaded = load_model("tiny.en", allow_download=False)
    except ModelUnavailableError as e:  # pragma: no cover - depends on the installed weight packages
        torch.set_num_threads(threads)
        pytest.skip(str(e))
    yield loaded
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def utterances(realspeech: Path) -> list[tuple[str, np.ndarray, str]]:
    refs = dict(
        line.split("\t", 1) for line in (realspeech / "cmu_arctic" / "transcripts.tsv").read_text().splitlines()
    )
    out = []
    for utt in UTTERANCES:
        audio, sr = sf.read(realspeech / "cmu_arctic" / "wav" / f"{utt}.wav", dtype="float32")
        assert sr == 16_000 and audio.ndim == 1
        out.append((utt, audio, refs[utt]))
    return out


# ---------------------------------------------------------------------------------------------- offline


def test_offline_matches_whisper_decode_and_is_accurate(model, utterances):
    import whisper

    recognizer = OfflineWhisper(model)
    hyps = []
    for _, audio, _ in utterances:
        record = run_stream(recognizer, audio, 1000)
        assert all(not s.hypothesis.words for s in record.steps[:-1])  # nothing shown before the end
        mel = whisper.pad_or_trim(whisper.log_mel_spectrogram(audio, padding=whisper.audio.N_SAMPLES), 3000)
        direct = whisper.decode(model, mel, whisper.DecodingOptions(language="en", without_timestamps=True,
                                                                    fp16=False, temperature=0.0))
        assert record.text == " ".join(direct.text.split())
        hyps.append(record.text)
    assert wer([r for _, _, r in utterances], hyps) <= 0.15


def test_offline_padding_hook(model, utterances):
    _, audio, _ = utterances[0]
    seen = []

    def mel(samples: np.ndarray) -> torch.Tensor:
        import whisper

        seen.append(len(samples))
        return whisper.pad_or_trim(whisper.log_mel_spectrogram(samples, padding=whisper.audio.N_SAMPLES), 3000)

    assert OfflineWhisper(model, padding=mel).transcribe(audio) == OfflineWhisper(model).transcribe(audio)
    assert seen == [len(audio)]
    with pytest.raises(ValueError, match="unknown padding"):
        OfflineWhisper(model, padding="hush")
