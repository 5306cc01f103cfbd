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
    from data.weights import load_model

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
    from evaluation.metrics import wer

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
    """A two-pass spec's precision and decoder cache (docs/decisions/two-pass-serving-compute.md) are built into the
    causal pass and the verifier alike, and the pair still writes the utterance's words."""
    from recognizer.build import build
    from recognizer.spec import load
    from streaming.events import run_stream
    from streaming.quantize import BF16Linear

    spec = load(weights={"precision": "bf16-all"}, second_pass={"final_padding": "pad30", "every_ms": 600})
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
