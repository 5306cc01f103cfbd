"""The evaluate stage's run: every recognizer streams the same held-out utterances, scored the same way.

``evaluate_systems`` builds each :class:`~recognizer.spec.RecognizerSpec` (``recognizer.build``, as served), warms
it up on one utterance that is not scored, streams the test set through ``run_stream`` (one real-time-queue clock
for all) and scores it with ``evaluate_records``; ``evaluation.report`` scores and writes the rows.
"""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Sequence
from typing import Any

from evaluation import intervals
from evaluation.metrics.gate import WER_CAP_POINTS
from evaluation.report import ROW_KEYS, TRANSCRIPT_KEYS, _finite, score_rows
from evaluation.sets import Utterance
from evaluation.streamed import evaluate_records, per_utterance, stream_all
from recognizer.build import Models, build
from recognizer.spec import RecognizerSpec
from streaming.precision import machine_info


def _median_run(runs: Sequence[dict[str, Any]]) -> int:
    """The repeat whose RTF is the median (the lower middle for an even count; the first without timings): its
    transcript metrics and its per-utterance results go into the row, so that they come from one real pass and its
    RTF is the row's (for an odd count)."""
    rtfs = [r.get("rtf") for r in runs]
    if not all(_finite(v) for v in rtfs):
        return 0
    return rtfs.index(statistics.median_low(rtfs))


def _median_row(runs: Sequence[dict[str, Any]], chosen: int = 0) -> dict[str, Any]:
    """Run ``chosen``'s transcript metrics, the median of every clock-dependent one over the runs."""
    row = {k: runs[chosen].get(k) for k in ROW_KEYS}
    for k in ROW_KEYS:
        values = [r.get(k) for r in runs]
        if k not in TRANSCRIPT_KEYS and all(_finite(v) for v in values):
            row[k] = round(statistics.median(values), 4)
    return row


def evaluate_systems(specs: Sequence[RecognizerSpec], utterances: Sequence[Utterance], *, test_set: dict[str, Any],
                     warmup: Utterance | None = None, wer_cap: float = WER_CAP_POINTS, repeats: int = 1,
                     reference: str | None = None, seed: int = 0, n_resamples: int = intervals.N_RESAMPLES,
                     live: bool = True, log=print) -> dict[str, Any]:
    """One row per system (metrics with 95 % intervals, per-utterance results, source, timings), the offline
    reference WER, the WER gate, the front and each system's difference to ``reference``.

    ``reference``: the system every other one is compared with (paired bootstrap on the same utterances); default:
    the first whisperlivekit LocalAgreement row, else the offline row with the lowest WER. With ``repeats`` > 1
    every system streams the set that many times; its row holds the median of the clock-dependent metrics
    (``runs``: each repeat's RTF / step median) and ``transcripts_identical`` says whether the repeats wrote the same
    words. The transcript metrics, ``per_utterance`` and the intervals come from one repeat, the one with the median
    RTF (``per_utterance_repeat``), so that Σ errors / Σ ref_words is the row's WER and the RTF interval is around
    the row's RTF; the row's median latency (a median of repeats) can differ slightly from that repeat's.

    ``live`` (the default): every system is fed as a live server feeds it (``run_stream(live=True)``): a system
    that falls behind real time gets all the audio that arrived meanwhile in its next step (``late_step_share``:
    the share of its steps that started late), so a peer slower than real time at a small chunk size runs as its
    own server would run it, not with an ever-growing queue; a system that keeps up is fed exactly as with fixed
    pieces. ``live=False``: fixed pieces, transcripts independent of the machine's speed."""
    if repeats < 1:
        raise ValueError(f"repeats must be ≥ 1, got {repeats}")
    names = [s.name for s in specs]
    if reference is not None and reference not in names:
        raise ValueError(f"reference system {reference!r} is not among {names}")
    models = Models()
    feeding = "live" if live else "fixed"
    rows: list[dict[str, Any]] = []
    for spec in specs:
        t0 = time.perf_counter()
        recognizer, source = build(spec, models)
        load_s = time.perf_counter() - t0
        chunk = spec.chunk_ms or 1000  # offline systems take pieces too: they only transcribe at finish()
        if warmup is not None:
            stream_all(recognizer, [warmup], chunk, live=live)
        passes = [stream_all(recognizer, utterances, chunk, live=live, say=log,
                             name=spec.name + (f" (repeat {k + 1}/{repeats})" if repeats > 1 else ""))
                  for k in range(repeats)]
        runs = [evaluate_records(records, utterances) for records in passes]
        texts = [[r.text for r in records] for records in passes]
        chosen = _median_run(runs)
        row = {"name": spec.name, "kind": spec.kind, "chunk_ms": spec.chunk_ms, "source": source,
               **_median_row(runs, chosen), "load_s": round(load_s, 2), "spec": spec.as_dict(), "repeats": repeats,
               "feeding": feeding,
               "runs": [{"rtf": r.get("rtf"), "step_ms_median": r.get("step_ms_median"),
                         "word_latency_ms_median": r.get("word_latency_ms_median")} for r in runs],
               "transcripts_identical": all(t == texts[0] for t in texts),
               "per_utterance_repeat": chosen, "per_utterance": per_utterance(passes[chosen], utterances)}
        rows.append(row)
        log(f"{spec.name:<40} WER {row['wer']:.2%}  word latency {row['word_latency_ms_median']} ms  "
            f"step {row['step_ms_median']} ms  RTF {row['rtf']}")
    result = {"test_set": test_set, "feeding": feeding,
              **score_rows(rows, reference=reference, wer_cap=wer_cap, seed=seed, n_resamples=n_resamples),
              # the speed columns hold on this machine only: its CPU, ISA flags, oneDNN cap, native bf16, torch, threads
              "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                          **machine_info()},
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return result
