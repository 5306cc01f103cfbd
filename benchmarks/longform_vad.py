"""Experiment (issue 66): where a segment of a long stream ends, today's level test or a voice-activity detector.

    python -m benchmarks.longform_vad --state outputs/bench-evaluation/state.json --adapter DIR

``streaming.segmented.Segmented`` ends a segment, once it holds 24 s, after the first chunk whose RMS is below
-45 dBFS (``level``), and at 27 s in any case. A level test cannot tell a quiet consonant or a breath from a pause,
so its cuts can fall inside words. The ``silero`` arm asks faster-whisper's Silero VAD instead (the model it ships,
run as a stream: 512-sample windows, state carried from step to step): the segment ends after the first step
whose last ``SILENCE_MS`` of windows all have a speech probability below ``NEG_THRESHOLD`` (faster-whisper's own
end-of-speech threshold, 0.5 - 0.15). The 24 s / 27 s bounds are the same in both arms.

Rule (written before the run): on the long-form dev set (the dataset's dev recordings, streamed whole, live-fed,
the served two-pass spec at 300 ms over ``--adapter``), ``silero`` is adopted when it cuts inside fewer words
(a cut at least ``INSIDE_MS`` inside a reference word's aligned span), its WER minus ``level``'s has a 95 %
paired bootstrap interval whose lower end is at most 0 (not separably worse) and so has its median final-word
latency. Intervals resample the dataset's segments of each recording (about 23 s each): the hypothesis words of
a stream are assigned to the segment of the reference word they align to (an insertion to the one before it).

Where a segment ends depends on the audio alone (the recognizer keeps up with real time, so the live feed brings
one chunk a step), so the first criterion is measured without a recognizer (``--cuts-only``, and the default's
first step), for ``segment_ms`` 12-24 s beside the served 24 s; a WER run follows only for an arm that passes it.

This arm lives here until dev adopts it (``docs/decisions/longform-vad.md``).
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

WINDOW = 512  # Silero's window at 16 kHz
CONTEXT = 64  # samples of the previous window each window sees
NEG_THRESHOLD = 0.35
SILENCE_MS = 160
INSIDE_MS = 20


class _CutLog(Segmented):
    """``Segmented`` that records where (sample of the stream) each segment ended before the stream's end."""

    def __init__(self, inner, **kw) -> None:
        super().__init__(inner, **kw)
        self.cuts: list[int] = []
        self._before = 0

    def reset(self) -> None:
        super().reset()
        self.cuts: list[int] = []
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


class Silero(_CutLog):
    """Segment ends where faster-whisper's Silero VAD has heard ``SILENCE_MS`` without speech."""

    def __init__(self, inner, **kw) -> None:
        from faster_whisper.vad import get_vad_model  # onnxruntime: only this arm needs it

        super().__init__(inner, **kw)
        self._session = get_vad_model().session
        self._quiet_windows = max(1, SILENCE_MS * SAMPLE_RATE // 1000 // WINDOW)
        self._reset_vad()

    def reset(self) -> None:
        super().reset()
        self._reset_vad()

    def _reset_vad(self) -> None:
        self._h = np.zeros((1, 1, 128), np.float32)
        self._c = np.zeros((1, 1, 128), np.float32)
        self._pending = np.zeros(0, np.float32)
        self._context = np.zeros(CONTEXT, np.float32)
        self._probs: list[float] = []

    def _listen(self, samples: np.ndarray) -> None:
        audio = np.concatenate([self._pending, np.asarray(samples, np.float32)])
        n = len(audio) // WINDOW
        self._pending = audio[n * WINDOW:]
        if not n:
            return
        windows = audio[: n * WINDOW].reshape(n, WINDOW)
        context = np.concatenate([self._context[None], windows[:-1, -CONTEXT:]])
        self._context = windows[-1, -CONTEXT:].copy()
        probs, self._h, self._c = self._session.run(
            None, {"input": np.concatenate([context, windows], 1), "h": self._h, "c": self._c})
        self._probs += [float(p) for p in np.ravel(probs)]
        self._probs = self._probs[-self._quiet_windows:]

    def feed(self, samples: np.ndarray):
        room = self.max_segment_samples - self._fed
        if len(samples) > room > 0:  # Segmented splits it and feeds each part here again
            return super().feed(samples)
        self._listen(samples)
        hyp = self.inner.feed(samples)
        self._fed += len(samples)
        if self._fed >= self.max_segment_samples:
            return self._end_segment()
        if (self._fed >= self.segment_samples and len(self._probs) == self._quiet_windows
                and max(self._probs) < NEG_THRESHOLD):
            return self._end_segment()
        return Hypothesis(tuple(self._done) + hyp.committed, hyp.tentative)


ARMS = {"level": Level, "silero": Silero}


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
    parser.add_argument("--out", default="benchmarks/results/selection/longform-vad.json")
    args = parser.parse_args()
    state = json.loads(Path(args.state).read_text())
    segments = load_split([state["datasets"]["longform"]], ["dev"])
    streams = whole_recordings(segments)
    parts = {s.utt_id: sorted((u for u in segments if u.recording == s.utt_id), key=lambda u: u.utt_id)
             for s in streams}
    print(f"{len(streams)} dev recordings, {sum(len(s.audio) for s in streams) / SAMPLE_RATE / 60:.1f} min, "
          f"{sum(map(len, parts.values()))} segments", flush=True)
    placement = {ms: cut_placement(streams, ms) for ms in (12_000, 16_000, 20_000, 24_000)}
    for ms, arms in placement.items():
        print(ms, json.dumps(arms))
    result = {"decision": "longform-vad", "command": " ".join(["python", *sys.argv]),
              "dev": {"recordings": [s.utt_id for s in streams], "segments": sum(map(len, parts.values())),
                      "seconds": round(sum(len(s.audio) for s in streams) / SAMPLE_RATE, 1),
                      "words": sum(len(s.words) for s in streams)},
              "cut_placement_by_segment_ms": placement}
    served = placement[24_000]
    if args.cuts_only or served["silero"]["inside_words"] >= served["level"]["inside_words"]:
        result["verdict"] = "level kept" if not args.cuts_only else "cuts only"
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
        print(result["verdict"])
        return
    arms = {name: run_arm(name, args, streams, parts) for name in ARMS}
    ref, new = arms["level"], arms["silero"]
    wer_diff = compare(new["per_segment"], ref["per_segment"], "wer")
    lat_diff = compare(new["per_stream"], ref["per_stream"], "word_latency_ms_median", groups="recording")
    adopted = (new["cuts_inside_words"] < ref["cuts_inside_words"] and wer_diff["ci95"][0] <= 0
               and lat_diff["ci95"][0] <= 0)
    result |= {"adapter": args.adapter, "arms": arms,
               "silero_minus_level": {"wer": wer_diff, "word_latency_ms_median": lat_diff},
               "verdict": "silero adopted" if adopted else "level kept"}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for a in arms.values():
        print(f"{a['arm']:<7} WER {a['wer']:.2%} (by segment {a['segment_wer']:.2%})  cuts {a['cuts']} "
              f"inside words {a['cuts_inside_words']}  latency median {a['word_latency_ms_median']:.0f} "
              f"p90 {a['word_latency_ms_p90']:.0f} ms")
    print(json.dumps(result["silero_minus_level"]), result["verdict"])


if __name__ == "__main__":
    main()
