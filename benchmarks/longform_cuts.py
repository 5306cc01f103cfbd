"""Experiment (issue 66): a long stream's segment ends where the speech pauses, not at a chunk's edge.

    python -m benchmarks.longform_cuts --state outputs/bench-evaluation/state.json --adapter DIR

``streaming.segmented.Segmented`` ends a segment, once it holds 24 s, after the first 300 ms chunk whose RMS is
below -45 dBFS (``level``), and at 27 s in any case. On the long-form dev set those forced 27 s cuts break words
(``docs/decisions/longform-vad.md``: 6 of 9 fall inside a word): read speech often holds no quiet 300 ms chunk for
many seconds. The ``pause`` arm looks at 10 ms frames instead: once the segment holds 24 s it ends in the middle
of the first ``RUN_MS`` of frames ``DROP_DB`` below the segment's median frame level, and the chunk that holds that
point is split there (its first part ends the segment, the rest starts the next). The 27 s forced cut stays.
``RUN_MS`` and ``DROP_DB`` were chosen on where the cuts fall alone (no recognizer), on the same dev set.

Rule (written before the run): on the long-form dev set (the dataset's dev recordings, streamed whole, live-fed,
the served two-pass spec at 300 ms over ``--adapter``), ``pause`` is adopted when it cuts inside fewer words
(a cut at least ``INSIDE_MS`` inside a reference word's aligned span), its WER minus ``level``'s has a 95 %
paired bootstrap interval whose lower end is at most 0 (not separably worse) and so has its median final-word
latency. Intervals resample the dataset's segments of each recording (about 23 s each): the hypothesis words of
a stream are assigned to the segment of the reference word they align to (an insertion to the one before it).

This arm lives here until dev adopts it (``docs/decisions/longform-cuts.md``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import jiwer
import numpy as np

from evaluation.intervals import compare, point
from evaluation.longform import whole_recordings
from evaluation.metrics.text import normalized_words
from evaluation.sets import Utterance, load_split
from evaluation.streamed import per_utterance, stream_all
from recognizer.build import Models, causal_engine, two_pass
from recognizer.spec import load
from streaming.events import SAMPLE_RATE, Hypothesis
from streaming.segmented import Segmented

FRAME = 160  # 10 ms
RUN_MS = 60
DROP_DB = 25.0
INSIDE_MS = 20


class _CutLog(Segmented):
    """``Segmented`` that records where (sample of the stream) each segment ended before the stream's end."""

    def __init__(self, inner, **kw) -> None:
        super().__init__(inner, **kw)
        self.cuts: list[int] = []
        self._before = 0

    def reset(self) -> None:
        super().reset()
        self.cuts = []
        self._before = 0

    def _end_segment(self):
        self._before += self._fed
        self.cuts.append(self._before)
        return super()._end_segment()

    def finish(self):
        hyp = super().finish()
        if self.cuts and self.cuts[-1] == self._before:  # the stream's end is no cut
            self.cuts.pop()
        return hyp


class Level(_CutLog):
    """Today's segmentation (the level test), with its cuts recorded."""


def frame_db(samples: np.ndarray) -> np.ndarray:
    """RMS level (dBFS) of each whole 10 ms frame."""
    n = len(samples) // FRAME
    frames = np.asarray(samples[: n * FRAME], np.float64).reshape(n, FRAME)
    return 20 * np.log10(np.maximum(np.sqrt(np.mean(frames**2, axis=1)), 1e-9))


class Pause(_CutLog):
    """A segment ends in the middle of the first pause past ``segment_ms`` (see the module docstring)."""

    def reset(self) -> None:
        super().reset()
        self._levels: list[np.ndarray] = []
        self._run = 0  # quiet frames in a row at the end of what was fed

    def _end_segment(self):
        self._levels, self._run = [], 0
        return super()._end_segment()

    def _pause_end(self, db: np.ndarray) -> int | None:
        """Sample of the piece at which the segment ends (the middle of its pause), or None."""
        if not self._levels:
            return None
        threshold = float(np.median(np.concatenate(self._levels))) - DROP_DB
        need = RUN_MS // 10
        run = self._run
        for j, level in enumerate(db):
            run = run + 1 if level < threshold else 0
            end = (j + 1) * FRAME
            if run >= need and self._fed + end >= self.segment_samples:
                return max(0, end - (need // 2) * FRAME)
        return None

    def feed(self, samples: np.ndarray) -> Hypothesis:
        room = self.max_segment_samples - self._fed
        if len(samples) > room > 0:  # Segmented splits it at the forced cut and feeds each part here again
            return super().feed(samples)
        db = frame_db(samples)
        split = self._pause_end(db) if self._fed + len(samples) >= self.segment_samples else None
        if split is not None:
            if split:
                self.inner.feed(samples[:split])
                self._fed += split
            self._end_segment()
            return self.feed(samples[split:]) if split < len(samples) else Hypothesis(tuple(self._done))
        threshold = float(np.median(np.concatenate(self._levels))) - DROP_DB if self._levels else -np.inf
        hyp = self.inner.feed(samples)
        self._fed += len(samples)
        self._levels.append(db)
        quiet = db < threshold
        trailing = len(quiet) - int(np.flatnonzero(~quiet)[-1]) - 1 if (~quiet).any() else self._run + len(quiet)
        self._run = trailing
        if self._fed >= self.max_segment_samples:
            return self._end_segment()
        return Hypothesis(tuple(self._done) + hyp.committed, hyp.tentative)


ARMS = {"level": Level, "pause": Pause}


def inside_words(cuts: list[int], words) -> int:
    """Cuts at least ``INSIDE_MS`` inside a reference word's aligned span."""
    spans = [(start, end) for _, start, end in words]
    return sum(any(s + INSIDE_MS < c * 1000 / SAMPLE_RATE < e - INSIDE_MS for s, e in spans) for c in cuts)


def by_segment(stream: Utterance, parts: list[Utterance], hyp: str) -> list[dict]:
    """The stream's errors per dataset segment: ``{utt_id, recording, ref_words, errors, word_latency_ms}`` rows
    that ``evaluation.intervals`` resamples (latencies stay with the stream's first segment: not compared here)."""
    refs = [normalized_words(p.reference) for p in parts]
    owner = [i for i, r in enumerate(refs) for _ in r]
    errors = [0] * len(parts)
    out = jiwer.process_words(" ".join(w for r in refs for w in r), " ".join(normalized_words(hyp)) or "<empty>")
    for chunk in out.alignments[0]:
        if chunk.type in ("substitute", "delete"):
            for i in range(chunk.ref_start_idx, chunk.ref_end_idx):
                errors[owner[i]] += 1
        elif chunk.type == "insert":
            errors[owner[max(0, min(chunk.ref_start_idx, len(owner)) - 1)]] += chunk.hyp_end_idx - chunk.hyp_start_idx
    return [{"utt_id": p.utt_id, "recording": stream.utt_id, "ref_words": len(r), "errors": e, "word_latency_ms": [],
             "compute_ms": 0.0, "audio_ms": 0.0}
            for p, r, e in zip(parts, refs, errors, strict=True)]


class _Deaf:
    """An inner recognizer that hears nothing: where the segments end does not depend on it."""

    chunk_ms = 300

    def feed(self, samples: np.ndarray) -> Hypothesis:
        return Hypothesis(())

    def finish(self) -> Hypothesis:
        return Hypothesis(())

    def reset(self) -> None:
        pass


def cut_placement(streams: list[Utterance], segment_ms: int, max_segment_ms: int = 27_000) -> dict:
    """Per arm: the cuts, how many fall inside a word, how many are the ``max_segment_ms`` cut (no pause found)
    and how many of those fall inside a word."""
    out = {}
    for name, cls in ARMS.items():
        cuts = inside = forced = forced_inside = 0
        for stream in streams:
            seg = cls(_Deaf(), segment_ms=segment_ms, max_segment_ms=max_segment_ms)
            seg.reset()
            for i in range(0, len(stream.audio), 4_800):
                seg.feed(stream.audio[i:i + 4_800])
            seg.finish()
            cuts += len(seg.cuts)
            inside += inside_words(seg.cuts, stream.words)
            at_max = [b for a, b in zip([0, *seg.cuts], seg.cuts) if b - a == seg.max_segment_samples]
            forced += len(at_max)
            forced_inside += inside_words(at_max, stream.words)
        out[name] = {"cuts": cuts, "inside_words": inside, "at_max_segment": forced,
                     "at_max_segment_inside_words": forced_inside}
    return out


def run_arm(name: str, args, streams: list[Utterance], parts: dict[str, list[Utterance]]) -> dict:
    spec = load(weights={"adapter_dir": args.adapter})
    models = Models()
    recognizer = ARMS[name](two_pass(spec, causal_engine(spec, models), models),
                            segment_ms=spec.segmentation.segment_ms, max_segment_ms=spec.segmentation.max_segment_ms)
    records, cuts = [], []
    for stream in streams:  # one at a time: run_stream resets the recognizer, and with it the cut log
        records += stream_all(recognizer, [stream], spec.chunk_ms, live=True, say=print, name=f"{name} {stream.utt_id}")
        cuts.append(list(recognizer.cuts))
    rows = per_utterance(records, streams)
    segments = [r for s, rec in zip(streams, records, strict=True) for r in by_segment(s, parts[s.utt_id], rec.text)]
    latencies = [x for r in rows for x in r["word_latency_ms"]]
    return {"arm": name, "wer": point(rows, "wer"), "segment_wer": point(segments, "wer"),
            "cuts": sum(map(len, cuts)), "cuts_inside_words": sum(inside_words(c, s.words)
                                                                 for c, s in zip(cuts, streams, strict=True)),
            "cut_seconds": {s.utt_id: [round(c / SAMPLE_RATE, 2) for c in cs] for s, cs in zip(streams, cuts,
                                                                                             strict=True)},
            "word_latency_ms_median": statistics.median(latencies),
            "word_latency_ms_p90": float(np.percentile(latencies, 90)), "per_stream": rows, "per_segment": segments}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--adapter", help="the causal adapter of the served two-pass spec")
    parser.add_argument("--cuts-only", action="store_true", help="where the cuts fall, no recognizer")
    parser.add_argument("--out", default="benchmarks/results/selection/longform-cuts.json")
    args = parser.parse_args()
    state = json.loads(Path(args.state).read_text())
    segments = load_split([state["datasets"]["longform"]], ["dev"])
    streams = whole_recordings(segments)
    parts = {s.utt_id: sorted((u for u in segments if u.recording == s.utt_id), key=lambda u: u.utt_id)
             for s in streams}
    print(f"{len(streams)} dev recordings, {sum(len(s.audio) for s in streams) / SAMPLE_RATE / 60:.1f} min, "
          f"{sum(map(len, parts.values()))} segments", flush=True)
    placement = {ms: cut_placement(streams, ms) for ms in (24_000,)}
    for ms, arms in placement.items():
        print(ms, json.dumps(arms))
    result = {"decision": "longform-cuts", "command": " ".join(["python", *sys.argv]),
              "dev": {"recordings": [s.utt_id for s in streams], "segments": sum(map(len, parts.values())),
                      "seconds": round(sum(len(s.audio) for s in streams) / SAMPLE_RATE, 1),
                      "words": sum(len(s.words) for s in streams)},
              "cut_placement_by_segment_ms": placement}
    served = placement[24_000]
    if args.cuts_only or served["pause"]["inside_words"] >= served["level"]["inside_words"]:
        result["verdict"] = "level kept" if not args.cuts_only else "cuts only"
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(result["verdict"])
        return
    arms = {name: run_arm(name, args, streams, parts) for name in ARMS}
    ref, new = arms["level"], arms["pause"]
    wer_diff = compare(new["per_segment"], ref["per_segment"], "wer")
    lat_diff = compare(new["per_stream"], ref["per_stream"], "word_latency_ms_median", groups="recording")
    adopted = (new["cuts_inside_words"] < ref["cuts_inside_words"] and wer_diff["ci95"][0] <= 0
               and lat_diff["ci95"][0] <= 0)
    result |= {"adapter": args.adapter, "arms": arms,
               "pause_minus_level": {"wer": wer_diff, "word_latency_ms_median": lat_diff},
               "verdict": "pause adopted" if adopted else "level kept"}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for a in arms.values():
        print(f"{a['arm']:<7} WER {a['wer']:.2%} (by segment {a['segment_wer']:.2%})  cuts {a['cuts']} "
              f"inside words {a['cuts_inside_words']}  latency median {a['word_latency_ms_median']:.0f} "
              f"p90 {a['word_latency_ms_p90']:.0f} ms")
    print(json.dumps(result["pause_minus_level"]), result["verdict"])


if __name__ == "__main__":
    main()
