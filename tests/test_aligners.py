"""Aligners on real speech: pocketsphinx (default), the MFA adapter's CLI/TextGrid contract, G2P."""

from __future__ import annotations

import os
import stat
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from data.aligners import AlignItem, get_aligner
from data.aligners.mfa import MfaAligner, read_textgrid_words
from data.g2p import G2PError, ipa_to_arpabet, pronounce
from data.synth import read_word_alignments
from data.text import transcript_words
from data.types import AlignerUnavailable, AlignmentError, WordSpan


def _utterances(realspeech: Path, corpus: str, n: int | None = None) -> list[tuple[str, np.ndarray, list[str]]]:
    lines = (realspeech / corpus / "transcripts.tsv").read_text().splitlines()[:n]
    out = []
    for line in lines:
        utt, text = line.split("\t")
        audio, _ = sf.read(realspeech / corpus / "wav" / f"{utt}.wav", dtype="float32")
        out.append((utt, audio, [w.norm for w in transcript_words(text)]))
    return out


@pytest.fixture(scope="module")
def pocketsphinx():
    return get_aligner("pocketsphinx")


def test_pocketsphinx_agrees_with_the_reference_alignment(realspeech: Path, pocketsphinx):
    """The shipped reference is an independent pocketsphinx run with hand-made OOV pronunciations."""
    diffs = []
    for corpus in ("cmu_arctic", "ljspeech"):
        reference = read_word_alignments(realspeech / corpus / "word_alignments_pocketsphinx.tsv")
        for utt, audio, words in _utterances(realspeech, corpus, 12):
            spans = pocketsphinx.align(audio, words)
            assert [s.word for s in spans] == words
            ref = reference[utt]
            if len(ref) != len(spans):  # the reference splits hyphenated words ("forty two")
                continue
            diffs += [(abs(s.start_ms - r[1]), abs(s.end_ms - r[2])) for s, r in zip(spans, ref)]
    d = np.array(diffs)
    assert len(d) > 150
    assert (d <= 20).mean() > 0.95 and d.mean() < 10, (d.mean(axis=0), (d <= 20).mean(axis=0))


def test_pocketsphinx_pauses_are_not_swallowed_by_words(realspeech: Path, pocketsphinx):
    """LJ001-0001 has a ~0.2 s pause after 'Printing,': the word must end before it."""
    utt, audio, words = _utterances(realspeech, "ljspeech", 1)[0]
    spans = pocketsphinx.align(audio, words)
    assert spans[1].start_ms - spans[0].end_ms >= 150


def test_pocketsphinx_result_does_not_depend_on_earlier_utterances(realspeech: Path):
    """Regression: decoder feature state leaked between utterances, so clean rebuilds differed."""
    items = _utterances(realspeech, "cmu_arctic") + _utterances(realspeech, "ljspeech", 4)

    def run(order):
        aligner = get_aligner("pocketsphinx")
        return {utt: [(s.start_ms, s.end_ms) for s in aligner.align(a, w)] for utt, a, w in order}

    assert run(items) == run(list(reversed(items)))


def test_oov_words_get_pronunciations(realspeech: Path, pocketsphinx):
    utt, audio, words = next(u for u in _utterances(realspeech, "ljspeech") if u[0] == "LJ001-0031")
    spans = pocketsphinx.align(audio, words)
    assert len(spans) == len(words)
    for word in ("sweynheim", "pannartz", "subiaco", "sixty-five"):
        assert word in pocketsphinx.added
    assert pocketsphinx.added["sixty-five"] == "parts" and pocketsphinx.added["subiaco"] == "espeak"


def test_g2p_ipa_mapping():
    assert ipa_to_arpabet("tʃ_ˈɜː_tʃ") == ["CH", "ER", "CH"]
    assert ipa_to_arpabet("dʒ_ˈʌ_dʒ") == ["JH", "AH", "JH"]
    assert ipa_to_arpabet("w_ˈʊ_d_k_ʌ_ɾ_ɚ_z") == ["W", "UH", "D", "K", "AH", "T", "ER", "Z"]
    with pytest.raises(G2PError):
        ipa_to_arpabet("☃")
    phones, how = pronounce("forty-two", {"forty": "F AO R T IY", "two": "T UW"}.get)
    assert (phones, how) == (["F", "AO", "R", "T", "IY", "T", "UW"], "parts")


def test_a_search_that_finds_no_path_is_tried_again_with_wider_beams(realspeech: Path, pocketsphinx):
    """Beams so narrow that the first search loses every path (as the default ones lost mfa_cold_corpus, where one
    word was said far from its dictionary phones): the second try's wide beams find the default aligner's path."""
    from data.aligners.pocketsphinx import PocketsphinxAligner

    narrow = PocketsphinxAligner(beam=0.1, wbeam=0.1)
    for utt, audio, words in _utterances(realspeech, "ljspeech", 2):
        with pytest.raises(AlignmentError):  # the first search alone (the strict grammar: no second try inside)
            narrow._strict(narrow._first, narrow._pcm(audio), words)
        assert narrow.align(audio, words) == pocketsphinx.align(audio, words), utt
    assert narrow.passes["wide_beams"] == 2 and pocketsphinx.passes["wide_beams"] == 0
    assert narrow.version != pocketsphinx.version  # the beams are part of what made an alignment


def test_noise_cannot_be_aligned(pocketsphinx):
    noise = (np.random.default_rng(0).standard_normal(48_000) * 0.3).astype(np.float32)
    with pytest.raises(AlignmentError) as err:
        pocketsphinx.align(noise, "the quick brown fox jumps over the lazy dog again".split())
    assert err.value.reason == "align_failed"


# ---------------------------------------------------------------- MFA adapter
def test_mfa_absent_gives_a_clear_error(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("WHISPERLINE_MFA_BIN", raising=False)
    with pytest.raises(AlignerUnavailable, match="conda-forge montreal-forced-aligner"):
        get_aligner("mfa")


def test_textgrid_reader(tmp_path: Path):
    from praatio import textgrid

    tier = textgrid.IntervalTier("words", [(0.1, 0.35, "hello"), (0.35, 0.4, ""), (0.4, 0.9, "world"),
                                           (0.9, 1.0, "sil")], 0, 1.0)
    grid = textgrid.Textgrid()
    grid.addTier(tier)
    grid.save(str(tmp_path / "a.TextGrid"), format="long_textgrid", includeBlankSpaces=True)
    assert read_textgrid_words(tmp_path / "a.TextGrid", ["hello", "world"]) == [
        WordSpan("hello", 100, 350), WordSpan("world", 400, 900)]
    with pytest.raises(AlignmentError, match="word_count_mismatch"):
        read_textgrid_words(tmp_path / "a.TextGrid", ["hello", "there"])


# A stand-in for the real `mfa` program (Kaldi is not installable here): it checks the arguments and
# corpus layout our adapter must produce and answers with TextGrids the way `mfa align` writes them.
# Utterances whose .lab holds "unalignable" get no TextGrid, as MFA does when its beam fails.
FAKE_MFA = textwrap.dedent("""\
    #!{python}
    import sys, pathlib, soundfile
    from praatio import textgrid
    if sys.argv[1] == "version":
        print("3.1.0-standin"); sys.exit(0)
    assert sys.argv[1] == "align", sys.argv
    corpus, dictionary, model, out = map(pathlib.Path, sys.argv[2:6])
    assert "--clean" in sys.argv and "--output_format" in sys.argv
    for lab in sorted(corpus.rglob("*.lab")):
        words = lab.read_text().split()
        if "unalignable" in words:
            continue
        dur = soundfile.info(str(lab.with_suffix(".wav"))).duration
        step = dur / (len(words) + 1)
        entries = [(step * (i + 0.5), step * (i + 1.5), w) for i, w in enumerate(words)]
        grid = textgrid.Textgrid()
        grid.addTier(textgrid.IntervalTier("words", entries, 0, dur))
        grid.addTier(textgrid.IntervalTier("phones", [], 0, dur))
        target = out / lab.parent.name / (lab.stem + ".TextGrid")
        target.parent.mkdir(parents=True, exist_ok=True)
        grid.save(str(target), format="long_textgrid", includeBlankSpaces=True)
""")


def test_mfa_adapter_runs_the_cli_and_reads_textgrids(tmp_path: Path, realspeech: Path):
    exe = tmp_path / "mfa"
    exe.write_text(FAKE_MFA.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    aligner = MfaAligner(mfa_bin=str(exe))
    assert aligner.version.startswith("mfa-3.1.0-standin|english_us_arpa")
    (utt, audio, words), (_, audio2, _) = _utterances(realspeech, "cmu_arctic", 2)
    results = aligner.align_many([AlignItem(utt, audio, tuple(words)), AlignItem("x", audio2, ("unalignable",))])
    assert [s.word for s in results[0]] == words
    assert all(a.end_ms <= b.start_ms for a, b in zip(results[0], results[0][1:]))
    assert isinstance(results[1], AlignmentError) and results[1].reason == "align_failed"
    assert os.environ.get("PATH")  # the adapter never edits the environment


def test_whisper_dtw_aligner_agrees_roughly_with_pocketsphinx(realspeech: Path, pocketsphinx):
    """Real tiny.en weights; DTW over the alignment heads lands near the acoustic aligner's boundaries."""
    whisper_aligner = get_aligner("whisper")
    assert whisper_aligner.version.startswith("whisper-dtw-") and "tiny.en-" in whisper_aligner.version
    deltas = []
    for utt, audio, words in _utterances(realspeech, "cmu_arctic", 3):
        spans = whisper_aligner.align(audio, words)
        assert [s.word for s in spans] == words
        assert all(a.start_ms <= b.start_ms for a, b in zip(spans, spans[1:]))
        deltas += [abs(a.end_ms - b.end_ms) for a, b in zip(spans, pocketsphinx.align(audio, words))]
    assert np.median(deltas) < 200, deltas


def test_exact_digital_silence_does_not_derail_pocketsphinx(realspeech: Path, pocketsphinx):
    """Zero padding has -inf log energy; without dither the last word went missing."""
    utt, audio, words = _utterances(realspeech, "cmu_arctic")[4]
    pad = np.zeros(16_000, dtype=np.float32)
    plain = pocketsphinx.align(audio, words)
    padded = pocketsphinx.align(np.concatenate([pad, audio, pad]), words)
    assert [s.word for s in padded] == words
    assert abs((padded[0].start_ms - 1000) - plain[0].start_ms) <= 30


def test_a_transcript_of_other_speech_is_a_transcript_mismatch(realspeech: Path, pocketsphinx):
    """A forced aligner finds a path for most wrong transcripts; the phone-loop check must turn them away, while
    every right transcript of the same clips still aligns (CMU ARCTIC: each clip with the next one's words)."""
    items = _utterances(realspeech, "cmu_arctic")
    for _, audio, words in items:
        assert len(pocketsphinx.align(audio, words)) == len(words)
    reasons = []
    for (utt, audio, _), (_, _, other) in zip(items, items[1:]):
        try:
            pocketsphinx.align(audio, other)
            reasons.append("accepted")
        except AlignmentError as err:
            reasons.append(err.reason)
    assert "transcript_mismatch" in reasons, reasons  # not only the word-count/no-path failures of before
    assert reasons.count("accepted") == 0, reasons
