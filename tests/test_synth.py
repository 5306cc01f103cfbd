"""data.synth: the espeak-ng corpus generator, run against the real libespeak-ng."""

from __future__ import annotations

import json
import time
import wave
from pathlib import Path

import numpy as np
import pytest

from data.corpus import read_corpus
from data.synth import (
    ALIGNMENT_FILE,
    BUILTIN_TEXTS,
    VOICES,
    plan_utterances,
    read_word_alignments,
    text_words,
    write_synthetic_corpus,
)
from data.text import transcript_words

# "in the", "of the", "on the", "for a while" are spoken by espeak as one word (one WORD event).
TEXTS = [
    "He sat in the garden, reading a book of the old days.",
    "Put the cups on the table, please.",
    "We waited for a while at the end of the street.",
    "Twenty one ducks swam across the pond.",
    "Don't forget the keys!",
    "She said: \"no\" & left - quickly.",
]


def _read_wav(path: Path) -> tuple[np.ndarray, int, int]:
    with wave.open(str(path), "rb") as fh:
        assert fh.getsampwidth() == 2
        audio = np.frombuffer(fh.readframes(fh.getnframes()), dtype="<i2").astype(np.float32) / 32768.0
        return audio, fh.getframerate(), fh.getnchannels()


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x.astype(np.float64) ** 2))) if len(x) else 0.0


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return write_synthetic_corpus(tmp_path_factory.mktemp("synth") / "corpus", 6, texts=TEXTS, seed=3, progress=False)


def test_files_audio_and_alignments(corpus: Path) -> None:
    transcripts = dict(line.split("\t", 1) for line in (corpus / "transcripts.tsv").read_text().splitlines())
    speakers = dict(line.split("\t", 1) for line in (corpus / "speakers.tsv").read_text().splitlines())
    assert list(transcripts.values()) == TEXTS
    assert sorted(transcripts) == list(transcripts) and all(k.endswith("-s3-0000%d" % i) for i, k in enumerate(transcripts))
    assert set(speakers) == set(transcripts) and set(speakers.values()) <= set(VOICES)
    assert sorted(p.stem for p in (corpus / "wav").glob("*.wav")) == sorted(transcripts)
    meta = json.loads((corpus / "synth.json").read_text())
    assert meta["params"]["n"] == 6 and meta["params"]["seed"] == 3 and meta["espeak"]["version"]

    assert (corpus / ALIGNMENT_FILE).read_text().splitlines()[0] == "utt_id\tword\tstart_s\tend_s"
    alignments = read_word_alignments(corpus / ALIGNMENT_FILE)
    assert set(alignments) == set(transcripts)
    for utt_id, text in transcripts.items():
        audio, rate, channels = _read_wav(corpus / "wav" / f"{utt_id}.wav")
        assert rate == 16_000 and channels == 1
        duration_ms = len(audio) * 1000 / rate
        spans = alignments[utt_id]
        assert [w for w, _, _ in spans] == [w.norm for w in transcript_words(text)]
        prev_end = 0
        for word, start, end in spans:
            assert end > start, (utt_id, word)
            assert start >= prev_end, (utt_id, word)
            assert end <= duration_ms
            prev_end = end


def test_merged_words_get_their_own_spans(corpus: Path) -> None:
    alignments = read_word_alignments(corpus / ALIGNMENT_FILE)
    ids = sorted(alignments)
    spans = alignments[ids[0]]  # He sat in the garden, reading a book of the old days.
    words = [w for w, _, _ in spans]
    for pair in (("in", "the"), ("of", "the")):
        i = next(k for k in range(len(words) - 1) if (words[k], words[k + 1]) == pair)
        (_, a0, a1), (_, b0, b1) = spans[i], spans[i + 1]
        assert a0 < a1 <= b0 < b1
        assert 20 <= a1 - a0 <= 400 and 20 <= b1 - b0 <= 400  # a short word each, not a sliver
    spans = alignments[ids[2]]  # ... for a while ...
    assert [w for w, _, _ in spans[2:5]] == ["for", "a", "while"]
    assert all(e - s >= 20 for _, s, e in spans[2:5])


def test_timings_match_the_audio(corpus: Path) -> None:
    alignments = read_word_alignments(corpus / ALIGNMENT_FILE)
    for utt_id, spans in alignments.items():
        audio, rate, _ = _read_wav(corpus / "wav" / f"{utt_id}.wav")
        ms = rate // 1000
        first_start, first_end = spans[0][1], spans[0][2]
        last_end = spans[-1][2]
        assert first_start >= 50  # the seeded leading pad is at least 50 ms
        lead = audio[: (first_start - 5) * ms]
        first = audio[first_start * ms : first_end * ms]
        tail = audio[(last_end + 10) * ms :]
        speech = audio[first_start * ms : last_end * ms]
        assert len(tail) >= 10 * ms  # espeak's sentence pause (+ pad) after the last word
        assert _rms(first) > 10 * _rms(lead), utt_id  # lead: the noise floor, -70…-60 dBFS
        assert _rms(tail) < 0.05 * _rms(speech), utt_id
        # every word holds sound: none of the spans is silence
        for word, start, end in spans:
            assert _rms(audio[start * ms : end * ms]) > 0.1 * _rms(speech), (utt_id, word)


def test_deterministic_and_idempotent(corpus: Path, tmp_path: Path) -> None:
    again = write_synthetic_corpus(tmp_path / "again", 6, texts=TEXTS, seed=3, progress=False, workers=1)
    names = sorted(str(p.relative_to(corpus)) for p in corpus.rglob("*") if p.is_file())
    assert names == sorted(str(p.relative_to(again)) for p in again.rglob("*") if p.is_file())
    for name in names:
        if name != "synth.json":
            assert (corpus / name).read_bytes() == (again / name).read_bytes(), name

    stamp = {p: p.stat().st_mtime_ns for p in again.rglob("*") if p.is_file()}
    start = time.perf_counter()
    assert write_synthetic_corpus(again, 6, texts=TEXTS, seed=3, progress=False) == again
    assert time.perf_counter() - start < 1.0
    assert stamp == {p: p.stat().st_mtime_ns for p in again.rglob("*") if p.is_file()}


def test_changed_parameters_rewrite_and_foreign_folders_are_refused(tmp_path: Path) -> None:
    out = write_synthetic_corpus(tmp_path / "c", 2, texts=TEXTS[:2], seed=0, progress=False)
    out = write_synthetic_corpus(tmp_path / "c", 3, texts=TEXTS[:2], seed=0, progress=False)
    assert len(list((out / "wav").glob("*.wav"))) == 3
    spoken = [line.split("\t")[1] for line in (out / "transcripts.tsv").read_text().splitlines()]
    assert spoken == [TEXTS[0], TEXTS[1], TEXTS[0]]
    assert [line.split("\t")[1] for line in (out / "speakers.tsv").read_text().splitlines()][0] != \
        [line.split("\t")[1] for line in (out / "speakers.tsv").read_text().splitlines()][2]  # a repeat: new voice
    assert not list(tmp_path.glob(".c.partial-*"))

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError):
        write_synthetic_corpus(foreign, 1, progress=False)
    assert (foreign / "notes.txt").read_text() == "mine"


def test_interrupted_run_is_not_complete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import data.synth as synth

    calls = {"n": 0}
    real_render = synth._render

    def failing_render(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real_render(*args, **kwargs)

    monkeypatch.setattr(synth, "_render", failing_render)
    with pytest.raises(KeyboardInterrupt):
        write_synthetic_corpus(tmp_path / "c", 3, texts=TEXTS, progress=False)
    assert not (tmp_path / "c").exists() and not list(tmp_path.iterdir())
    monkeypatch.undo()
    out = write_synthetic_corpus(tmp_path / "c", 3, texts=TEXTS, progress=False)
    assert (out / "synth.json").exists()


def test_read_corpus_accepts_it(corpus: Path) -> None:
    scan = read_corpus(corpus)
    assert scan.rejects == ()
    assert len(scan.items) == 6
    assert {item.speaker for item in scan.items} <= set(VOICES)


def test_builtin_texts_and_plans() -> None:
    assert len(BUILTIN_TEXTS) >= 100 and len(set(BUILTIN_TEXTS)) == len(BUILTIN_TEXTS)
    assert all(5 <= len(text_words(t)) <= 20 for t in BUILTIN_TEXTS)
    plans = plan_utterances(2 * len(BUILTIN_TEXTS) + 5, seed=1)
    assert plans[: 10] == plan_utterances(10, seed=1)  # a smaller corpus is a prefix
    by_text: dict[str, set[str]] = {}
    for p in plans:
        by_text.setdefault(p.text, set()).add(p.voice)
    assert all(len(v) >= 2 for v in by_text.values())  # repeated texts get a different voice
    assert len({p.voice for p in plans}) == len(VOICES)
    assert all(140 <= p.rate <= 190 for p in plans)
    assert plan_utterances(5, seed=0) != plan_utterances(5, seed=1)
    assert plans[0].utt_id == "espeak-s1-00000"
    given = plan_utterances(2, texts=["One two three four five."], seed=1)
    assert given[0].utt_id != plans[0].utt_id and given[0].utt_id.endswith("-s1-00000")


def test_read_word_alignments_reads_pocketsphinx_files(tmp_path: Path) -> None:
    path = tmp_path / "word_alignments_pocketsphinx.tsv"
    path.write_text("utt_id\tword\tstart_s\tend_s\nLJ001\tprinting\t0.00\t0.66\nLJ001\tin\t0.87\t0.99\n")
    assert read_word_alignments(path) == {"LJ001": [("printing", 0, 660), ("in", 870, 990)]}
    real = Path(__file__).resolve().parent.parent.parent / "shared/data/realspeech/ljspeech/word_alignments_pocketsphinx.tsv"
    if real.exists():
        spans = read_word_alignments(real)
        assert spans and all(e >= s for words in spans.values() for _, s, e in words)


def test_bad_input_raises_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_synthetic_corpus(tmp_path / "x", 2, texts=["..."], progress=False)
    with pytest.raises(ValueError):
        write_synthetic_corpus(tmp_path / "y", 0, progress=False)


def test_espeak_failures_raise(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import data.synth as synth

    monkeypatch.setattr(synth, "VOICES", ("en-us+no-such-variant",))
    with pytest.raises(synth.SynthesisError, match="no-such-variant"):
        write_synthetic_corpus(tmp_path / "c", 1, texts=TEXTS[:1], progress=False)
    assert not list(tmp_path.iterdir())
