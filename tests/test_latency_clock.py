"""The latency clock (a real-time queue) and the WER gate, on scripted recognizers with injected compute time.

No model, no audio decoding: a fake recognizer commits each reference word in the chunk that contains its aligned
end, and a fake timer makes every step cost exactly `rtf × chunk audio` ms, so every latency below is exact.
"""

from __future__ import annotations

import numpy as np
import pytest

from training.emma.dashboard import mark_pareto
from training.emma.registry import PromotionRefused, pick_best
from evaluation.metrics import word_emission_latencies, within_wer_cap
from evaluation.sets import Utterance
from evaluation.streamed import evaluate_records
from streaming.events import (
    SAMPLE_RATE,
    Hypothesis,
    Step,
    queue_clock,
    record_from_steps,
    run_stream,
)

NATO = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
        "quebec romeo sierra tango").split()
CHUNK_MS = 500
AUDIO_MS = 10_000
# word i ends 50 ms before the end of chunk i: it is committed by the step whose chunk arrives at 500 (i + 1) ms
WORDS = tuple((w, 500 * i + 100, 500 * i + 450) for i, w in enumerate(NATO))


class FakeClock:
    """A timer for `run_stream` (seconds) that only moves when the recognizer says it computed."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s

    def spend(self, ms: float) -> None:
        self.now_s += ms / 1000


class ScriptedRecognizer:
    """Commits each word once its aligned end has been fed, shows the next word as tentative; every feed costs
    `rtf` × the chunk's audio duration, `finish` costs `finish_ms`. `repeat` > 1 over-generates: every word comes
    out `repeat` times (a hallucinating system)."""

    def __init__(self, clock: FakeClock, rtf: float, finish_ms: float = 0.0, repeat: int = 1,
                 words: tuple[tuple[str, int, int], ...] = WORDS) -> None:
        self.clock, self.rtf, self.finish_ms, self.repeat, self.words = clock, rtf, finish_ms, repeat, words
        self.consumed = 0

    def reset(self) -> None:
        self.consumed = 0

    def _said(self, until_ms: float) -> tuple[str, ...]:
        return tuple(w for w, _, end in self.words if end <= until_ms for _ in range(self.repeat))

    def feed(self, samples: np.ndarray) -> Hypothesis:
        self.consumed += len(samples)
        self.clock.spend(self.rtf * len(samples) * 1000 / SAMPLE_RATE)
        now = self.consumed * 1000 / SAMPLE_RATE
        committed = self._said(now)
        upcoming = [w for w, start, end in self.words if start <= now < end][:1]
        return Hypothesis(committed, tuple(upcoming))

    def finish(self) -> Hypothesis:
        self.clock.spend(self.finish_ms)
        return Hypothesis(self._said(float("inf")))


def _utterance() -> Utterance:
    audio = np.zeros(AUDIO_MS * SAMPLE_RATE // 1000, dtype=np.float32)
    return Utterance("u1", audio, " ".join(NATO), WORDS)


def _stream(rtf: float, finish_ms: float = 0.0, repeat: int = 1):
    clock = FakeClock()
    return run_stream(ScriptedRecognizer(clock, rtf, finish_ms, repeat), _utterance().audio, CHUNK_MS, timer=clock)


def _word_latencies(record, clock: str = "emitted_ms") -> list[float]:
    finals = record.final_words()
    return [x.latency_ms for x in word_emission_latencies([(e.word, getattr(e, clock)) for e in finals],
                                                          [(w, end) for w, _, end in WORDS])]


# ---------------------------------------------------------------------------------------------------- the queue


def test_queue_clock_by_hand():
    # chunk 1 waits for nothing; chunk 2 arrives at 200 but runs 200..450; chunk 3 arrives at 300, waits until 450;
    # the end-of-stream step (arrives at the audio end, 300) waits for chunk 3.
    q = queue_clock([100, 200, 300, 300], [50, 250, 10, 20])
    assert [(t.start_ms, t.finish_ms) for t in q] == [(100, 150), (200, 450), (450, 460), (460, 480)]
    assert [t.wait_ms for t in q] == [0, 0, 150, 160]
    with pytest.raises(ValueError):
        queue_clock([100], [])
    with pytest.raises(ValueError):
        queue_clock([100], [-1])


def test_record_from_steps_emits_on_the_finish_of_the_committing_step():
    steps = [Step(500, 700, Hypothesis((), ("hello",))), Step(1000, 100, Hypothesis(("hello",), ("world",))),
             Step(1200, 50, Hypothesis(("hello", "world")), final=True)]
    record = record_from_steps(steps, 1200, 500)
    assert [(t.start_ms, t.finish_ms) for t in record.queue] == [(500, 1200), (1200, 1300), (1300, 1350)]
    finals = record.final_words()
    assert [(e.word, e.step, e.emission_ms, e.emitted_ms, e.elapsed_ms) for e in finals] == [
        ("hello", 1, 1000, 1300, 1000 + 800),  # legacy cumulative clock: 1000 + 700 + 100
        ("world", 2, 1200, 1350, 1200 + 850),
    ]
    partial = next(e for e in record.events if e.kind == "partial")
    assert (partial.word, partial.emitted_ms) == ("hello", 1200)
    assert record.lag_ms == 150  # last finish 1350 − audio end 1200


# ---------------------------------------------------------------------------------------------------- (a) RTF > 1


def test_latency_grows_along_the_stream_only_when_slower_than_real_time():
    fast, slow = _stream(rtf=0.5), _stream(rtf=2.0)
    lat_fast, lat_slow = _word_latencies(fast), _word_latencies(slow)
    assert len(lat_fast) == len(lat_slow) == len(WORDS)
    # RTF 0.5: the worker is idle before every chunk arrives; each word waits 50 ms of audio + 250 ms compute.
    assert lat_fast == pytest.approx([300.0] * len(WORDS))
    # RTF 2: a backlog builds; word i is emitted at 500 + 1000 (i + 1) ms, so latency = 1050 + 500 i:
    # between two words it grows by (RTF − 1) × the audio time between their ends.
    assert lat_slow == pytest.approx([1050.0 + 500 * i for i in range(len(WORDS))])
    first, last = WORDS[0][2], WORDS[-1][2]
    assert lat_slow[-1] - lat_slow[0] == pytest.approx((2.0 - 1) * (last - first))
    # The legacy cumulative clock would charge the fast system its past compute as well: it grows (that is why
    # the metrics use the queue).
    legacy = _word_latencies(fast, "elapsed_ms")
    assert legacy[-1] - legacy[0] == pytest.approx(0.5 * (last - first))


def test_evaluate_records_reports_the_queue_clock():
    utt = _utterance()
    fast = evaluate_records([_stream(rtf=0.5, finish_ms=20)], [utt])
    slow = evaluate_records([_stream(rtf=2.0, finish_ms=20)], [utt])
    for m in (fast, slow):
        assert m["wer"] == 0 and m["words_matched"] == len(WORDS)
        assert m["word_latency_lower_bound_ms_median"] == 50.0  # audio consumed − word end: compute-free bound
        assert m["laal_ms"] == m["al_ms"]  # hypothesis as long as the reference
        assert m["chunk_compute_ms_median"] == m["step_ms_median"]
    assert fast["word_latency_ms_median"] == fast["word_latency_ms_p90"] == fast["first_word_latency_ms_median"] == 300
    assert fast["step_ms_median"] == 250 and fast["rtf"] == pytest.approx((20 * 250 + 20) / AUDIO_MS, abs=1e-4)
    assert slow["first_word_latency_ms_median"] == 1050 and slow["step_ms_p90"] == 1000
    assert slow["word_latency_ms_p90"] > slow["word_latency_ms_median"] > fast["word_latency_ms_p90"]
    assert slow["laal_ca_ms"] > fast["laal_ca_ms"] > fast["laal_ms"] == slow["laal_ms"]


# ---------------------------------------------------------------------------------------------------- (b) bounds


@pytest.mark.parametrize("rtf", [0.0, 0.3, 1.0, 1.7])
def test_queue_emission_is_bounded_by_the_unaware_and_the_cumulative_clock(rtf):
    record = _stream(rtf=rtf, finish_ms=0.0 if rtf == 0 else 30.0)
    assert record.events
    for e in record.events:
        assert e.emission_ms <= e.emitted_ms <= e.elapsed_ms + 1e-9
        if rtf == 0:
            assert e.emitted_ms == e.emission_ms == e.elapsed_ms
    assert all(a.emitted_ms <= b.emitted_ms for a, b in zip(record.events, record.events[1:]))


# ---------------------------------------------------------------------------------------------------- (c) end lag


def test_end_lag_is_zero_when_fast_and_the_backlog_when_slow():
    fast = _stream(rtf=0.5, finish_ms=20)
    # no backlog: only the last chunk's own compute (250 ms, it arrives at the audio end) and the flush's (20 ms)
    assert fast.lag_ms == pytest.approx(250 + 20)
    assert max(t.wait_ms for t in fast.queue[:-1]) == 0  # no chunk ever waits for the worker
    slow = _stream(rtf=2.0, finish_ms=20)
    total = sum(slow.compute_ms)
    assert total == pytest.approx(2 * AUDIO_MS + 20)
    # never idle after the first chunk arrives (500 ms): the stream ends total compute − audio behind real time
    assert slow.lag_ms == pytest.approx(CHUNK_MS + total - AUDIO_MS)
    m = evaluate_records([fast, slow], [_utterance(), _utterance()])
    assert m["end_lag_ms_max"] == pytest.approx(slow.lag_ms, abs=0.1)
    assert m["end_lag_ms_median"] == pytest.approx((fast.lag_ms + slow.lag_ms) / 2, abs=0.1)


# ---------------------------------------------------------------------------------------------------- (d) the gate


def test_a_hallucinating_stream_has_negative_al_and_fails_the_gate():
    """30 hypothesis words for 10 reference words, emitted early: AL goes negative, LAAL does not, WER > 1."""
    words = WORDS[:10]
    clock = FakeClock()
    rec = ScriptedRecognizer(clock, rtf=0.1, repeat=3, words=words)
    audio = np.zeros(5000 * SAMPLE_RATE // 1000, dtype=np.float32)
    utt = Utterance("h", audio, " ".join(w for w, _, _ in words), words)
    m = evaluate_records([run_stream(rec, audio, CHUNK_MS, timer=clock)], [utt])
    assert m["wer"] == pytest.approx(2.0)  # 20 insertions over 10 reference words
    assert m["al_ms"] < 0 < m["laal_ms"]
    assert not within_wer_cap(m["wer"], offline_wer=0.0721)


SWEEP = [  # from benchmarks/results/emma_sweep.md: the 116 % WER trial was marked "Pareto" there
    {"trial": "hallucinating", "wer": 1.1635, "al_ms": -881.42, "laal_ms": 723.27},
    {"trial": "good", "wer": 0.0801, "al_ms": 853.58, "laal_ms": 853.58},
    {"trial": "slower-better", "wer": 0.0673, "al_ms": 1037.47, "laal_ms": 1037.47},
    {"trial": "dominated", "wer": 0.0897, "al_ms": 1097.82, "laal_ms": 1097.82},
    {"trial": "negative-al-within-cap", "wer": 0.09, "al_ms": -50.0, "laal_ms": 400.0},
]


@pytest.mark.parametrize("offline_wer", [0.0721, None])  # None: the gate falls back to the best trial's WER
def test_hallucinating_trial_is_off_the_pareto_front_and_never_promoted(offline_wer):
    rows = [dict(r) for r in SWEEP]
    mark_pareto(rows, offline_wer=offline_wer)
    by = {r["trial"]: r for r in rows}
    assert not by["hallucinating"]["pareto"] and not by["hallucinating"]["within_wer_cap"]
    assert by["negative-al-within-cap"]["within_wer_cap"] and by["negative-al-within-cap"]["al_negative"]
    assert not by["negative-al-within-cap"]["pareto"]  # flagged, not clamped to a "best" AL of 0
    assert by["good"]["pareto"] and by["slower-better"]["pareto"] and not by["dominated"]["pareto"]
    # promotion: within 900 ms the good trial wins; a budget only the bad trials meet refuses to promote
    assert pick_best(rows, al_budget_ms=900, offline_wer=offline_wer)["trial"] == "good"
    assert pick_best(rows, al_budget_ms=None, offline_wer=offline_wer)["trial"] == "slower-better"
    with pytest.raises(PromotionRefused, match="AL ≤ 500"):
        pick_best(rows, al_budget_ms=500, offline_wer=offline_wer)


def test_wer_cap_is_configurable_and_measured_from_offline():
    rows = [dict(r) for r in SWEEP if r["trial"] in ("good", "dominated")]
    mark_pareto(rows, offline_wer=0.03, wer_cap=0.055)  # gate at 8.5 %: only the 8.01 % trial passes
    assert [r["pareto"] for r in rows] == [True, False]
    with pytest.raises(PromotionRefused, match="WER gate"):
        pick_best(rows, al_budget_ms=None, offline_wer=0.01)  # gate at 6 %: nobody passes


def test_dashboard_draws_the_gate(tmp_path):
    import json

    from training.emma.dashboard import offline_reference_wer, write_dashboard

    references = {"offline Whisper (30 s pad)": (6378.35, 0.0721), "causal LoRA 300 ms": (1422.21, 0.0737)}
    assert offline_reference_wer(references) == 0.0721 and offline_reference_wer({"x": (1.0, 0.5)}) is None
    rows = [dict(r) for r in SWEEP]
    mark_pareto(rows, offline_wer=offline_reference_wer(references))
    write_dashboard(rows, tmp_path, references)
    saved = {r["trial"]: r for r in json.loads((tmp_path / "trials.json").read_text())}
    assert not saved["hallucinating"]["pareto"] and not saved["hallucinating"]["eligible"]
    assert "within_wer_cap" in (tmp_path / "trials.md").read_text()
    assert (tmp_path / "wer_al_pareto.png").stat().st_size > 10_000


# ------------------------------------------------------------------------------------------------- live feeding


class CostPerStep(ScriptedRecognizer):
    """A step costs `step_ms` whatever its audio (a system that re-transcribes its whole buffer, like
    LocalAgreement-2); records the size of every piece it was fed."""

    def __init__(self, clock: FakeClock, step_ms: float) -> None:
        super().__init__(clock, 0.0)
        self.step_ms, self.fed_ms = step_ms, []

    def feed(self, samples: np.ndarray) -> Hypothesis:
        self.fed_ms.append(len(samples) * 1000 / SAMPLE_RATE)
        self.clock.spend(self.step_ms)
        return super().feed(samples)


def test_live_feeding_equals_fixed_pieces_for_a_system_that_keeps_up():
    clock = FakeClock()
    fixed = run_stream(ScriptedRecognizer(clock, 0.5), _utterance().audio, CHUNK_MS, timer=clock)
    clock = FakeClock()
    live = run_stream(ScriptedRecognizer(clock, 0.5), _utterance().audio, CHUNK_MS, timer=clock, live=True)
    assert [(s.audio_ms, s.compute_ms, s.hypothesis) for s in live.steps] == \
        [(s.audio_ms, s.compute_ms, s.hypothesis) for s in fixed.steps]
    assert evaluate_records([live], [_utterance()])["late_step_share"] == 0.0


def test_live_feeding_gives_a_slow_system_everything_that_arrived():
    # each step costs 1,200 ms; pieces of 500 ms arrive at 500, 1000, ...: the first step runs 500..1700, so the
    # second takes the pieces that arrived by 1700 (1000 and 1500 ms) and runs 1700..2900, the third takes 2000,
    # 2500 (arrived by 2900) ... : every piece is fed once, in order, and the stream ends ≤ one step behind
    clock = FakeClock()
    rec = CostPerStep(clock, 1200)
    record = run_stream(rec, _utterance().audio, CHUNK_MS, timer=clock, live=True)
    assert rec.fed_ms[:3] == [500, 1000, 1000]
    assert sum(rec.fed_ms) == AUDIO_MS
    assert [s.audio_ms for s in record.steps[:3]] == [500, 1500, 2500]
    assert all(q.start_ms >= s.arrival_ms for s, q in zip(record.steps, record.queue))
    assert record.lag_ms <= 2 * 1200
    assert record.text == " ".join(NATO)  # every word still comes out
    clock = FakeClock()
    fixed = run_stream(CostPerStep(clock, 1200), _utterance().audio, CHUNK_MS, timer=clock)
    assert fixed.lag_ms > 10 * 1200 - AUDIO_MS  # fixed pieces: the queue grows along the whole stream
    m = evaluate_records([record], [_utterance()])
    assert 0.5 < m["late_step_share"] <= 1.0
    assert m["word_latency_ms_median"] < evaluate_records([fixed], [_utterance()])["word_latency_ms_median"]


# ---------------------------------------------------------------------------------------------------- partials


def _record(*hyps: Hypothesis):
    steps = [Step(300.0 * (i + 1), 1.0, h, final=i == len(hyps) - 1) for i, h in enumerate(hyps)]
    return record_from_steps(steps, audio_ms=300.0 * len(hyps), chunk_ms=300)


def test_partial_rewrite_rate_counts_partials_the_final_text_does_not_keep():
    from evaluation.streamed import partial_rewrites

    # "the cat" shown, then "cat" rewritten to "cap", "sat" added; the final text keeps "the", "cap", "sat"
    record = _record(Hypothesis((), ("the", "cat")), Hypothesis(("the",), ("cap", "sat")),
                     Hypothesis(("the",), ("cap", "sat")), Hypothesis(("The", "cap,", "sat")))
    assert partial_rewrites(record) == (4, 1)  # the, cat, cap, sat shown (the repeat is not shown again); cat lost
    # a partial kept in the final text after a word was inserted before it is not a rewrite: words are aligned
    shifted = _record(Hypothesis((), ("dog", "barked")), Hypothesis(("the", "dog", "barked")))
    assert partial_rewrites(shifted) == (2, 0)
    assert partial_rewrites(_record(Hypothesis(("a",)))) == (0, 0)  # no partials: nothing to rewrite
    m = evaluate_records([record, shifted], [Utterance("u1", np.zeros(1), "the cap sat", ()),
                                             Utterance("u2", np.zeros(1), "the dog barked", ())])
    assert m["partial_words_shown"] == 6 and m["partial_rewrite_rate"] == round(1 / 6, 4)


def test_display_time_is_the_first_display_that_stays():
    from evaluation.streamed import display_times

    # steps finish at 301, 601, 901, 1201 ms (300 ms chunks, 1 ms compute each)
    record = _record(Hypothesis((), ("the", "cat")), Hypothesis(("the",), ("cap", "sat")),
                     Hypothesis(("the",), ("cap", "sat")), Hypothesis(("The", "cap,", "sat")))
    assert display_times(record) == [301.0, 601.0, 601.0]  # "cat" was not "cap": "cap" counts from its own step
    # a word taken off the screen and shown again counts from its return
    gone = _record(Hypothesis((), ("a", "b")), Hypothesis((), ("a",)), Hypothesis(("a", "b")))
    assert display_times(gone) == [301.0, 901.0]
    m = evaluate_records([record], [Utterance("u1", np.zeros(1), "the cap sat", (("the", 0, 200), ("cap", 200, 500),
                                                                                   ("sat", 500, 700)))])
    assert m["display_latency_ms_median"] == 101.0  # 301 - 200, 601 - 500, 601 - 700
    assert m["word_latency_ms_median"] == 701.0  # the finals, all at the last step: 1201 - 200, - 500, - 700
