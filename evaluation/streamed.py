"""Every streaming metric from `StreamRecord`s, the same way for every system, on one latency clock.

The clock (`events.py`): a real-time queue — chunk k arrives at its audio time, its step starts at
max(arrival, previous finish) and finishes after its measured compute; a word is emitted when the step that first
commits it finishes.

- WER: final text vs reference (Whisper's EnglishTextNormalizer + jiwer).
- RWER / ARWER: the text shown after each step (`StreamRecord.snapshots`) against the reference prefix /
  the reference words that had ended by then (aligned word ends, e.g. pocketsphinx).
- LAAL (the primary lag metric: over-generation cannot lower it), AL, DAL, AP (SimulEval 1.1 definitions): delay
  of each output word = audio consumed when it was committed (computation-unaware); the `*_CA` variants use the
  queue clock's emission time instead. AL can go negative when a system over-generates; compare lags only between
  systems that pass the WER gate (`evaluation.metrics.within_wer_cap`).
- Word latency: queue emission − aligned end of the matching reference word (median / p90 / mean over matched
  words); first-word latency: the same for the first matched reference word of each utterance; the
  computation-unaware lower bound uses the audio consumed instead of the queue emission.
- Partial rewrite rate: of the partial words put on screen (a tentative word shown at a position where the previous
  step showed another word or none), the share the final transcript does not keep (not in a block of words the
  display and the final text share, compared case- and punctuation-blind): what a reader saw change.
- Display latency: for each word of the final transcript, the queue-clock time from which the screen showed it at
  its place, unchanged to the end (the first display a reader could keep: a partial that later turned out right
  counts from when it appeared, a word shown only once final counts from then), minus the reference word's end.
  Beside word latency (finals) it says what the partials buy.
- Repetition (``evaluation.repetition``): final words in the second copy of an n-gram (n ≥ 3) said twice in a
  row that the reference does not say twice, and token loops (one word or sub-word unit 8+ times in a row); a
  WER over few words can hide a recognizer that writes whole utterances again.
- Compute: per-step wall time (median / p90 over the feed steps), RTF = total compute / audio, and the end lag:
  how far behind real time each stream finishes (finish of its last step − audio end).
"""

from __future__ import annotations

import difflib
import math
import time
from collections.abc import Callable, Sequence

from evaluation.metrics import (
    arwer_counts,
    corpus_latency,
    latency_scores,
    latency_summary,
    rwer_counts,
    utterance_counts,
    wer_counts,
    word_emission_latencies,
)
from evaluation.metrics.emission import WordLatency
from evaluation.metrics.text import ErrorCounts
from evaluation import repetition
from evaluation.sets import Utterance
from streaming.events import SAMPLE_RATE, StreamingRecognizer, StreamRecord, norm_word, run_stream


LATENCY_KEYS = {"LAAL": "laal_ms", "AL": "al_ms", "DAL": "dal_ms", "AP": "ap",
                "LAAL_CA": "laal_ca_ms", "AL_CA": "al_ca_ms", "DAL_CA": "dal_ca_ms"}


def _r(value: float, digits: int) -> float:
    return round(value, digits) if math.isfinite(value) else float("nan")


def partial_rewrites(record: StreamRecord) -> tuple[int, int]:
    """(partial words shown, of them not kept by the final transcript) of one stream (module docstring)."""
    if not record.steps:
        return 0, 0
    final = [norm_word(w) for w in record.steps[-1].hypothesis.words]
    shown = rewritten = 0
    before: tuple[str, ...] = ()
    for step in record.steps:
        hyp = step.hypothesis
        words = [norm_word(w) for w in hyp.words]
        kept = {i for block in difflib.SequenceMatcher(a=words, b=final, autojunk=False).get_matching_blocks()
                for i in range(block.a, block.a + block.size)}
        for i in range(len(hyp.committed), len(hyp.words)):
            if i >= len(before) or before[i] != hyp.words[i]:  # newly on screen at this position
                shown += 1
                rewritten += i not in kept
        before = hyp.words
    return shown, rewritten


def display_times(record: StreamRecord) -> list[float | None]:
    """For each word of the final transcript, the finish (queue clock) of the step from which the screen showed
    it at its place without a change to the end (module docstring). Committed words never change, so each step
    looks only at the words past the previous step's committed ones."""
    if not record.steps:
        return []
    final = [norm_word(w) for w in record.steps[-1].hypothesis.words]
    since: list[float | None] = [None] * len(final)
    done = shown = 0  # positions [0, done) committed (their time is kept); positions [0, shown) shown last step
    for step, q in zip(record.steps, record.queue, strict=True):
        words = step.hypothesis.words
        for i in range(done, min(max(len(words), shown), len(final))):
            if i < len(words) and norm_word(words[i]) == final[i]:
                if since[i] is None:
                    since[i] = q.finish_ms
            else:
                since[i] = None
        done, shown = min(len(step.hypothesis.committed), len(final)), len(words)
    return since


def _display_latencies(record: StreamRecord, utt: Utterance) -> list[WordLatency]:
    """The matched reference words of one utterance and the latency of their first kept display."""
    if not record.steps:
        return []
    shown = [(w, t) for w, t in zip(record.steps[-1].hypothesis.words, display_times(record), strict=True)
             if t is not None]
    return word_emission_latencies(shown, [(w, e) for w, _, e in utt.words])


def _word_latencies(record: StreamRecord, utt: Utterance, *, clock: bool = True) -> list[WordLatency]:
    """The matched reference words of one utterance and their latency: on the queue clock (emission = finish of the
    committing step) or, ``clock=False``, the computation-unaware bound (emission = audio consumed)."""
    finals = record.final_words()
    emitted = [(e.word, e.emitted_ms if clock else e.emission_ms) for e in finals]
    return word_emission_latencies(emitted, [(w, e) for w, _, e in utt.words])


def evaluate_records(records: Sequence[StreamRecord], utterances: Sequence[Utterance]) -> dict:
    if len(records) != len(utterances):
        raise ValueError(f"{len(records)} records for {len(utterances)} utterances")
    refs = [u.reference for u in utterances]
    hyps = [r.text for r in records]
    rw = sum((rwer_counts(r.snapshots(), u.reference) for r, u in zip(records, utterances)), ErrorCounts())
    aw = sum((arwer_counts(r.snapshots(), [(w, e) for w, _, e in u.words]) for r, u in zip(records, utterances)),
             ErrorCounts())
    latencies = []
    word_lat: list[float] = []  # queue clock
    bound_lat: list[float] = []  # computation-unaware (audio consumed)
    display_lat: list[float] = []  # first kept display, queue clock
    first_lat: list[float] = []  # first matched reference word of each utterance, queue clock
    for record, utt in zip(records, utterances, strict=True):
        finals = record.final_words()
        if finals:
            latencies.append(latency_scores([e.emission_ms for e in finals], record.audio_ms,
                                            len(utt.reference.split()), elapsed=[e.emitted_ms for e in finals]))
        on_clock = _word_latencies(record, utt)
        word_lat += [w.latency_ms for w in on_clock]
        if on_clock:
            first_lat.append(on_clock[0].latency_ms)  # sorted by reference index
        bound_lat += [w.latency_ms for w in _word_latencies(record, utt, clock=False)]
        display_lat += [w.latency_ms for w in _display_latencies(record, utt)]
    feed_ms = [s.compute_ms for r in records for s in r.steps if not s.final]
    # the steps of each stream's first and last minute of audio: on a long stream, whether a step's cost grows
    # with the stream (for clips under a minute both are every step)
    first_min = [s.compute_ms for r in records for s in r.steps if not s.final and s.audio_ms <= 60_000]
    last_min = [s.compute_ms for r in records for s in r.steps if not s.final and s.audio_ms > r.audio_ms - 60_000]
    # feed steps that started after their audio had arrived: the system was behind real time (live feeding then
    # gave it every piece that had arrived, as one step)
    late = [q.wait_ms > 0 for r in records for s, q in zip(r.steps, r.queue, strict=True) if not s.final]
    shown, rewritten = (sum(x) for x in zip(*(partial_rewrites(r) for r in records))) if records else (0, 0)
    audio_s = sum(r.audio_ms for r in records) / 1000
    compute_s = sum(sum(r.compute_ms) for r in records) / 1000
    end_lag = [r.lag_ms for r in records if r.steps]
    repeated = repetition.summary([{**repetition.utterance_repetition(r.text, u.reference), "hyp": r.text}
                                   for r, u in zip(records, utterances, strict=True)])
    lat = corpus_latency(latencies)
    step = latency_summary(feed_ms)
    words = latency_summary(word_lat)
    bound = latency_summary(bound_lat)
    display = latency_summary(display_lat)
    return {
        "utterances": len(records),
        "audio_s": round(audio_s, 2),
        "wer": wer_counts(refs, hyps).rate,
        "rwer": rw.rate,
        "arwer": aw.rate,
        **{name: round(lat[key], 2) for key, name in LATENCY_KEYS.items() if key in lat},
        "word_latency_ms_median": _r(words["median"], 1),
        "word_latency_ms_p90": _r(words["p90"], 1),
        "word_latency_ms_mean": _r(words["mean"], 1),
        "first_word_latency_ms_median": _r(latency_summary(first_lat)["median"], 1),
        "partial_rewrite_rate": round(rewritten / shown, 4) if shown else float("nan"),
        "partial_words_shown": shown,
        "display_latency_ms_median": _r(display["median"], 1),
        "display_latency_ms_p90": _r(display["p90"], 1),
        "word_latency_lower_bound_ms_median": _r(bound["median"], 1),
        "word_latency_lower_bound_ms_p90": _r(bound["p90"], 1),
        "words_matched": len(word_lat),
        "step_ms_median": _r(step["median"], 2),
        "step_ms_p90": _r(step["p90"], 2),
        # aliases of step_ms_*: benchmarks/streaming.py reads these names
        "chunk_compute_ms_median": _r(step["median"], 2),
        "chunk_compute_ms_p90": _r(step["p90"], 2),
        "final_step_ms_median": _r(latency_summary([r.steps[-1].compute_ms for r in records if r.steps])["median"], 2),
        "rtf": round(compute_s / audio_s, 4) if audio_s > 0 else float("nan"),
        "end_lag_ms_median": _r(latency_summary(end_lag)["median"], 1),
        "end_lag_ms_max": _r(max(end_lag), 1) if end_lag else float("nan"),
        "late_step_share": round(sum(late) / len(late), 4) if late else 0.0,
        "step_ms_p90_first_minute": _r(latency_summary(first_min)["p90"], 2),
        "step_ms_p90_last_minute": _r(latency_summary(last_min)["p90"], 2),
        **repeated,
    }


def per_utterance(records: Sequence[StreamRecord], utterances: Sequence[Utterance]) -> list[dict]:
    """One entry per utterance, in order, from the code paths :func:`evaluate_records` pools: what the evaluate
    stage keeps so that every corpus number can be recomputed, and resampled (``evaluation/intervals.py``).

    ``ref_words`` / ``errors``: N and S + D + I of the utterance in the same jiwer alignment as the corpus WER
    (``utterance_counts``; ``wer_counts`` is their sum), so Σ errors / Σ ref_words is the row's WER exactly.
    ``word_latency_ms``: the utterance's queue-clock word latencies, the values pooled for the median / p90
    (not rounded). ``compute_ms``: all steps, the end-of-stream step included, as in RTF = Σ compute / Σ audio.
    ``hyp_words``: normalised hypothesis words (S + I + hits); ``repeated_words`` / ``token_loop``: the
    utterance's repetition (``evaluation.repetition``), what a row's ``repeat_rate`` and ``token_loops`` sum.
    ``domain``: the utterance's (``evaluation.domains``), where it has one."""
    if len(records) != len(utterances):
        raise ValueError(f"{len(records)} records for {len(utterances)} utterances")
    counts = utterance_counts([u.reference for u in utterances], [r.text for r in records])
    return [{"utt_id": utt.utt_id, "recording": utt.recording or utt.utt_id, "ref_words": c.ref_words,
             "errors": c.errors, "hyp": record.text, "hyp_words": c.hyp_words,
             **repetition.utterance_repetition(record.text, utt.reference),
             **dict(zip(("partials_shown", "partials_rewritten"), partial_rewrites(record), strict=True)),
             "word_latency_ms": [w.latency_ms for w in _word_latencies(record, utt)],
             "display_latency_ms": [w.latency_ms for w in _display_latencies(record, utt)],
             "compute_ms": sum(record.compute_ms), "audio_ms": record.audio_ms,
             **({"domain": utt.domain} if utt.domain else {})}
            for record, utt, c in zip(records, utterances, counts, strict=True)]


def stream_all(recognizer: StreamingRecognizer, utterances: Sequence[Utterance], chunk_ms: float, *,
               live: bool = False, say: Callable[[str], None] | None = None, name: str = "",
               every_s: float = 30.0) -> list[StreamRecord]:
    """Every utterance through ``run_stream`` (``live``: a system behind real time gets all arrived audio at once).
    With ``say``: a progress line at least every ``every_s`` seconds (utterances and audio done, speed, ETA)."""
    records, started, said = [], time.monotonic(), time.monotonic()
    total_s = sum(len(u.audio) for u in utterances) / SAMPLE_RATE
    done_s = 0.0
    for i, u in enumerate(utterances, 1):
        records.append(run_stream(recognizer, u.audio, chunk_ms, live=live))
        done_s += len(u.audio) / SAMPLE_RATE
        now = time.monotonic()
        if say is not None and now - said >= every_s and i < len(utterances):
            speed = done_s / max(now - started, 1e-9)
            say(f"{name}: {i}/{len(utterances)} utterances, {done_s:.0f}/{total_s:.0f} s of audio, "
                f"{speed:.2f}x real time, ETA {(total_s - done_s) / speed:.0f} s")
            said = now
    return records
