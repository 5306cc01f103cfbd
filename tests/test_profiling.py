"""The step profile: component times of real tiny.en streaming steps on real speech, without changing the output."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluation.sets import load_realspeech
from evaluation.streamed import stream_all
from streaming.profiling import COMPONENTS, StepProfile


@pytest.fixture(scope="module")
def utterance(realspeech: Path):
    return load_realspeech(realspeech, ("cmu_arctic",), limit={"cmu_arctic": 1})


@pytest.mark.parametrize("beam_size", [None, 4])
def test_profile_accounts_for_every_step_and_changes_nothing(utterance, beam_size):
    from streaming.engine import CausalStreamingEngine
    from data.weights import load_model

    model = load_model("tiny.en")
    plain = stream_all(CausalStreamingEngine(model, 300, 600, pad_silence=True, beam_size=beam_size), utterance, 300)
    engine = CausalStreamingEngine(model, 300, 600, pad_silence=True, beam_size=beam_size)
    profile = StepProfile().attach(engine)
    profiled = stream_all(engine, utterance, 300)
    assert [r.text for r in profiled] == [r.text for r in plain]
    # one profile row per fed chunk (finish() feeds the flush silence through the same path)
    assert len(profile.steps) >= len(utterance[0].audio) // 4800
    for step in profile.steps:
        parts = sum(step[name] for name in COMPONENTS if name != "vocab")
        assert parts == pytest.approx(step["total"], rel=1e-6, abs=1e-6)
        assert step["vocab"] <= step["recheck"] + step["new_tokens"] + 1e-6
    summary = profile.summary()
    assert summary["encoder"]["mean_ms"] > 0 and summary["recheck"]["mean_ms"] > 0
    assert summary["vocab"]["mean_ms"] > 0
    if beam_size:
        assert summary["new_tokens"]["mean_ms"] == 0  # beam passes are all counted as recheck
    else:
        assert summary["new_tokens"]["mean_ms"] > 0
