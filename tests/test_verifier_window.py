"""The two-pass verifier's bounded window on real speech and real tiny.en weights: word ends from the verifier's own
cross-attention match the forced aligner's, a cut falls in the pause, and a windowed verifier never encodes much
more than its window however long the segment runs, with the words of the unwindowed one."""

from __future__ import annotations

import difflib
from pathlib import Path

import numpy as np
import pytest

from evaluation.sets import load_realspeech
from streaming.events import norm_word
from streaming.second_pass import TwoPassStreaming
from streaming.verifier import Verifier
from streaming.word_times import quiet_cut


@pytest.fixture(scope="module")
def tiny():
    from training.weights import load_model

    return load_model("tiny.en")


@pytest.fixture(scope="module")
def speech(realspeech: Path):
    return load_realspeech(realspeech, ("ljspeech", "cmu_arctic"), limit={"ljspeech": 6, "cmu_arctic": 2})


def test_word_ends_from_the_verifier_match_the_aligner(tiny, speech):
    """The verifier's words on a real utterance, their ends from its attention, against pocketsphinx's forced
    alignment of the reference (words matched by their letters)."""
    verifier = Verifier(tiny, None, "zeros_5s")
    errors = []
    for u in speech[:4]:
        words = verifier(u.audio, [])
        ends = verifier.word_ends(words.tokens)
        assert len(ends) == len(words.words) and ends == sorted(ends)
        assert ends[-1] <= len(u.audio) / 16_000 + 0.05  # never in the padding
        ours = [norm_word(w) for w in words.words]
        theirs = [norm_word(w) for w, _, _ in u.words]
        for block in difflib.SequenceMatcher(a=ours, b=theirs, autojunk=False).get_matching_blocks():
            errors += [abs(ends[block.a + k] - u.words[block.b + k][2] / 1000) for k in range(block.size)]
    assert len(errors) >= 20
    assert float(np.median(errors)) < 0.2, np.percentile(errors, [50, 90])


def test_a_cut_falls_in_the_pause_near_the_boundary():
    rng = np.random.default_rng(0)
    audio = rng.normal(0, 0.1, 32_000).astype(np.float32)
    audio[15_000:16_600] = 0.0  # a 100 ms pause at 0.94–1.04 s
    cut = quiet_cut(audio, 1.05)
    assert 15_000 <= cut <= 16_600
    assert quiet_cut(audio[:100], 0.0) == 0  # too short to search: the boundary itself


class _Heard:
    """The verifier, noting how much audio every pass encodes."""

    def __init__(self, verifier: Verifier) -> None:
        self.verifier, self.heard = verifier, []

    def __call__(self, audio, *args, **kwargs):
        self.heard.append(len(audio))
        return self.verifier(audio, *args, **kwargs)

    def word_ends(self, words):
        return self.verifier.word_ends(words)


@pytest.mark.slow
def test_a_windowed_verifier_stays_bounded_with_the_same_words(tiny, speech):
    from evaluation.longform import join
    from streaming.engine import CausalStreamingEngine
    from streaming.events import run_stream
    from streaming.segmented import Segmented
    from training.metrics import wer

    # utterances joined to just over 20 s: one segment (Segmented cuts by 27 s), which the unwindowed verifier
    # re-encodes whole at every pass; a longer stream costs T² more here and shows nothing more about the window
    n = next(k for k in range(1, len(speech) + 1) if sum(len(u.audio) for u in speech[:k]) > 21 * 16_000)
    stream = join(speech[:n], "stream")
    assert 21 * 16_000 < len(stream.audio) < 27 * 16_000, len(stream.audio) / 16_000
    results = {}
    for window_ms in (None, 6000):
        verifier = _Heard(Verifier(tiny, None, "zeros_5s", final_condition="pad30"))
        system = TwoPassStreaming(CausalStreamingEngine(tiny, 300, 600), verifier, every_ms=300,
                                  self_agreement=True, window_ms=window_ms)
        text = run_stream(Segmented(system), stream.audio, 300).text
        results[window_ms] = (wer([stream.reference], [text]), max(verifier.heard) / 16_000)
    (unbounded_wer, unbounded_s), (bounded_wer, bounded_s) = results[None], results[6000]
    assert unbounded_s > 20  # without a window a pass encodes the whole segment
    assert bounded_s < 12, results  # 6 s, plus the open words' span until the next trim
    assert bounded_wer <= unbounded_wer + 0.03, results
    with pytest.raises(ValueError, match="window_ms"):
        TwoPassStreaming(CausalStreamingEngine(tiny, 300, 600), Verifier(tiny, None, "zeros_5s"), window_ms=500)


def test_the_serving_settings_reach_both_passes(speech):
    """A two-pass spec's precision and decoder cache (what benchmarks/serving_choice.py chose for serving on dev)
    are built into the causal pass and the verifier alike, and the pair still writes the utterance's words."""
    from evaluation.systems import SystemSpec, build
    from streaming.events import run_stream
    from streaming.quantize import BF16Linear

    spec = SystemSpec("served", "two-pass", 300, verifier="zeros_5s", final_verifier="pad30", every_ms=600,
                      self_agreement=True, window_ms=8000, precision="bf16-all", cache_policy="reuse")
    recognizer = build(spec)[0].inner
    assert (recognizer.every_ms, recognizer.window_ms) == (600, 8000)
    assert recognizer.engine.decoder.cache_policy == "reuse"
    for model in (recognizer.engine.model, recognizer.verifier.model):
        assert any(isinstance(m, BF16Linear) for m in model.modules())
    u = speech[0]
    ours = [norm_word(w) for w in run_stream(build(spec)[0], u.audio, 300).text.split()]
    theirs = [norm_word(w) for w, _, _ in u.words]
    matched = sum(b.size for b in difflib.SequenceMatcher(a=ours, b=theirs, autojunk=False).get_matching_blocks())
    assert matched >= 0.8 * len(theirs), (ours, theirs)


def test_end_of_text_at_the_first_open_word_needs_its_probability(tiny, speech):
    """``first_eot_min_prob``: with every word of a real utterance forced as final, Whisper ends the text at once;
    a mid-stream pass that needs end-of-text to be certain (1.0) goes on with the likeliest other token instead, and
    the last pass keeps Whisper's own end. Where the text goes on anyway (half the words forced), nothing changes."""
    plain, eager = Verifier(tiny, None, "zeros_5s"), Verifier(tiny, None, "zeros_5s", first_eot_min_prob=1.0)
    u = speech[0]
    heard = plain(u.audio, [])
    every = [t for g in heard.tokens for t in g]
    assert plain(u.audio, every).words == []  # the premise: nothing past the whole transcript
    # what Whisper says past its end here restates the forced sentence, which the restatement guard cuts
    # (test_second_pass.py); this test asks about the end-of-text rule alone
    eager._restated = lambda final_tokens, new: None
    went_on = eager(u.audio, every)
    assert went_on.tokens and went_on.probs[0] < 1.0  # a token Whisper ranked below its end of text
    assert eager(u.audio, every, last=True).words == plain(u.audio, every, last=True).words
    half = [t for g in heard.tokens[: len(heard.tokens) // 2] for t in g]
    assert eager(u.audio, half).words == plain(u.audio, half).words
    with pytest.raises(ValueError, match="first_eot_min_prob"):
        Verifier(tiny, None, "zeros_5s", first_eot_min_prob=1.5)


def test_no_speech_before_the_first_final_word_is_heard_as_nothing(tiny, speech):
    """``no_speech_threshold``: a mid-stream pass with nothing final yet hears nothing where Whisper's <|nospeech|>
    is likely (1 s of faint noise, which plain Whisper answers with a word), and the same words as plain Whisper on
    real speech, whole or its first 0.6 s; the last pass, and a pass after final words, are not asked."""
    plain, guarded = Verifier(tiny, None, "zeros_5s"), Verifier(tiny, None, "zeros_5s", no_speech_threshold=0.6)
    noise = np.random.default_rng(0).normal(0, 0.01, 16_000).astype(np.float32)
    assert plain(noise, []).words and guarded(noise, []).words == []
    assert guarded(noise, [], last=True).words == plain(noise, [], last=True).words
    for u in speech[:4]:
        for audio in (u.audio, u.audio[:9_600]):
            assert guarded(audio, []).words == plain(audio, []).words
    first = plain(speech[0].audio, []).tokens[0]
    assert guarded(noise, first).words == plain(noise, first).words
    with pytest.raises(ValueError, match="no_speech_threshold"):
        Verifier(tiny, None, "zeros_5s", no_speech_threshold=1.0)


def test_a_word_doubled_where_it_ends_is_cut_and_a_word_said_twice_is_not(tiny, speech):
    """``cut_doubled``: on the first 0.4 s of a real utterance a mid-stream pass says "Awesome. Awesome.", both
    ending on one frame: the option keeps one. The same 0.6 s said twice with a pause is a word said twice
    ("and and", "printing, printing,"), kept; Whisper's third copy piled on the second is cut. Whole utterances
    keep their words, and the last pass is not asked."""
    plain, cut = Verifier(tiny, None, "zeros_5s"), Verifier(tiny, None, "zeros_5s", cut_doubled=True)
    by_id = {u.utt_id: u.audio for u in speech}
    start = by_id["cmu_us_aew_a0001"][:6_400]
    doubled = plain(start, []).words
    assert len(doubled) == 2 and norm_word(doubled[0]) == norm_word(doubled[1])
    assert cut(start, []).words == doubled[:1] and cut(start, [], last=True).words == plain(start, [], last=True).words

    def twice(audio: np.ndarray) -> np.ndarray:
        return np.concatenate([audio[:9_600], np.zeros(4_000, dtype=np.float32), audio[:9_600]])

    assert [norm_word(w) for w in cut(twice(by_id["LJ001-0006"]), []).words] == ["and", "and"]
    three = plain(twice(by_id["LJ001-0001"]), []).words
    assert [norm_word(w) for w in three] == ["printing"] * 3 and cut(twice(by_id["LJ001-0001"]), []).words == three[:2]
    for u in speech[:4]:
        assert cut(u.audio, []).words == plain(u.audio, []).words
