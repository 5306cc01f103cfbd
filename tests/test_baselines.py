"""Streaming baselines (offline Whisper, LocalAgreement-2, AlignAtt) on real tiny.en weights and real speech."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from training.metrics import wer
from training.streaming.baselines import AgreementBuffer, AlignAtt, LocalAgreement2, OfflineWhisper, TimedWord
from training.streaming.events import Hypothesis, StreamRecord, run_stream

# Short cmu_arctic utterances (3.5-4.0 s each); the streaming systems run on the first two only, which keeps
# the module around a minute on an idle 2-core machine.
UTTERANCES = ("cmu_us_aew_a0002", "cmu_us_aew_a0003", "cmu_us_axb_a0006")
N_STREAMED = 2


@pytest.fixture(scope="module")
def model():
    from training.weights import ModelUnavailableError, load_model

    # One intra-op thread: on the shared 2-core machine two OpenMP threads competing with other processes
    # make small decoder steps many times slower; the results do not depend on it.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        loaded = load_model("tiny.en", allow_download=False)
    except ModelUnavailableError as e:  # pragma: no cover - depends on the installed weight packages
        torch.set_num_threads(threads)
        pytest.skip(str(e))
    loaded.digest_before = _weights_digest(loaded)  # checked by test_baselines_leave_the_model_alone
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


class Recording:
    """Wraps a recognizer and keeps what it really returned (run_stream rewrites the final hypothesis)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.returned: list[Hypothesis] = []

    def reset(self) -> None:
        self.returned = []
        self.inner.reset()

    def feed(self, samples: np.ndarray) -> Hypothesis:
        self.returned.append(self.inner.feed(samples))
        return self.returned[-1]

    def finish(self) -> Hypothesis:
        self.returned.append(self.inner.finish())
        return self.returned[-1]


def _stream_all(recognizer, utterances, chunk_ms: float = 1000) -> list[tuple[StreamRecord, list[Hypothesis]]]:
    out = []
    for _, audio, _ in utterances:
        rec = Recording(recognizer)
        record = run_stream(rec, audio, chunk_ms)
        out.append((record, rec.returned))
    return out


@pytest.fixture(scope="module")
def streamed(utterances):
    return utterances[:N_STREAMED]


@pytest.fixture(scope="module")
def la_runs(model, streamed):
    return _stream_all(LocalAgreement2(model), streamed)


@pytest.fixture(scope="module")
def aa_runs(model, streamed):
    return _stream_all(AlignAtt(model), streamed)


def _weights_digest(model) -> float:
    with torch.no_grad():
        return float(sum(p.double().sum() for p in model.parameters()))


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


# ---------------------------------------------------------------------------------------------- streaming


def _check_stream(runs, utterances, max_wer: float) -> None:
    hyps = []
    for (record, returned), (utt, audio, _) in zip(runs, utterances, strict=True):
        # committed words never change: every step's committed words extend the previous step's
        for before, after in zip(returned, returned[1:]):
            assert after.committed[: len(before.committed)] == before.committed, utt
        # the recognizer's own finish() commits everything
        assert returned[-1].tentative == ()
        assert returned[-1].committed == record.steps[-1].hypothesis.words
        # the first committed word comes before the end of the audio
        if len(audio) > 3 * 16_000:
            first = next(s for s in record.steps if s.hypothesis.committed)
            assert not first.final and first.audio_ms < record.audio_ms, utt
        hyps.append(record.text)
    assert wer([r for _, _, r in utterances], hyps) <= max_wer, hyps


def test_local_agreement_streams(la_runs, streamed):
    _check_stream(la_runs, streamed, 0.25)


def test_alignatt_streams(aa_runs, streamed):
    _check_stream(aa_runs, streamed, 0.25)


def test_alignatt_shows_only_whole_words_as_committed(aa_runs):
    for record, returned in aa_runs:
        for hyp in returned[:-1]:
            assert len(hyp.tentative) <= 1  # at most the trailing, possibly unfinished word


def test_alignatt_policy_really_gates(model, utterances):
    _, audio, ref = utterances[0]
    recognizer = Recording(AlignAtt(model, frame_threshold=10**6))
    record = run_stream(recognizer, audio, 1000)
    assert all(h.words == () for h in recognizer.returned[:-1])  # nothing before finish
    assert recognizer.inner.last_stop == "eot"
    assert wer([ref], [record.text]) <= 0.25


def test_alignatt_trims_a_long_buffer(model, utterances):
    """audio_max_s below the utterance length: old audio leaves, its tokens become the context prompt."""
    _, audio, ref = utterances[2]
    recognizer = Recording(AlignAtt(model, audio_max_s=2.0))
    record = run_stream(recognizer, audio, 1000)
    assert recognizer.inner.trimmed_s > 0
    for before, after in zip(recognizer.returned, recognizer.returned[1:]):
        assert after.committed[: len(before.committed)] == before.committed
    assert wer([ref], [record.text]) <= 0.5


def test_baselines_leave_the_model_alone(model, la_runs, aa_runs):
    assert _weights_digest(model) == model.digest_before
    for block in model.decoder.blocks:
        for module in (block.cross_attn, block.cross_attn.key, block.cross_attn.value, block.attn.key):
            assert not module._forward_hooks
    with pytest.raises(NotImplementedError):
        AlignAtt(model, beam_size=5)


# ---------------------------------------------------------------------------------------------- LA-2 buffer


def _words(*items: tuple[float, float, str]) -> list[TimedWord]:
    return [TimedWord(a, b, t) for a, b, t in items]


def test_agreement_buffer_commits_the_common_prefix_of_two_hypotheses():
    buf = AgreementBuffer()
    buf.insert(_words((0.0, 0.4, " the"), (0.4, 0.8, " cat"), (0.8, 1.0, " sad")))
    assert buf.flush() == []  # one hypothesis: nothing agreed yet
    assert [w.word for w in buf.complete()] == ["the", "cat", "sad"]
    buf.insert(_words((0.0, 0.4, " the"), (0.4, 0.8, " cat"), (0.8, 1.1, " sat"), (1.1, 1.3, " on")))
    assert [w.word for w in buf.flush()] == ["the", "cat"]
    assert buf.last_committed_time == 0.8
    assert [w.word for w in buf.complete()] == ["sat", "on"]
    # words starting before the last committed end (-0.1 s) are ignored; a repeated committed tail is dropped
    buf.insert(_words((0.1, 0.4, " the"), (0.75, 0.8, " cat"), (0.8, 1.1, " sat"), (1.1, 1.3, " on")))
    assert [w.word for w in buf.flush()] == ["sat", "on"]
    buf.pop_committed(0.8)
    assert [w.word for w in buf.committed_in_buffer] == ["sat", "on"]
