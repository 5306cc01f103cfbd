"""Continuous long-form audio, streamed whole: every system on minutes of real speech with no per-utterance end.

    python -m benchmarks.longform --state outputs/bench26/state.json            # → benchmarks/results/longform.*
    python -m benchmarks.longform --state … --hour-check                        # + one 60-min stream, no exception
    python -m benchmarks.longform --state … --adapter DIR          # the served two-pass spec over an adapter

Streams (``evaluation/longform.py``): the long-form dataset version's recordings joined back from their
segments (``longform``: continuous readings of about a minute), and one speaker's test-split utterances joined in
order with the pauses their clips carry (``joined``), until ``--min-total-s`` of audio. Every stream is one
evaluation unit: the intervals resample streams. Systems: faster-whisper's own long-form transcription (the
offline reference), our causal engine, the served two-pass spec (``configs/recognizer.yaml``), the whisperlivekit
peers at their dev-chosen 1 s configurations (``choices.json``), all live-fed on the real-time queue; ours go
through ``Segmented`` (the live server's segmentation), the peers trim their own buffers as their servers do.
Per system: WER, median final-word latency, step p90 in each stream's first and last minute, RTF.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from evaluation.longform import join, speaker_streams, speakers, whole_recordings
from evaluation.merge import merge_release
from evaluation.metrics import wer
from evaluation.report import write_report
from evaluation.sets import load_realspeech, load_split
from recognizer.build import build
from recognizer.evaluate import evaluate_systems
from recognizer.registry import load_spec
from recognizer.spec import Peer, RecognizerSpec, Weights, from_dict, load
from streaming.events import chunks

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"


def streams(state: dict, min_total_s: float, max_stream_s: float) -> tuple[list, dict]:
    """The long-form streams and what they are (counts per source)."""
    recordings = whole_recordings(load_split([state["datasets"]["longform"]], ["test"]))
    total = sum(len(s.audio) for s in recordings) / 16_000
    real = state["datasets"]["real"]
    joined = speaker_streams(load_split([real], ["test"]), speakers([real], "test"), max_s=max_stream_s,
                             min_s=min(90.0, max_stream_s))
    joined.sort(key=lambda s: -len(s.audio))
    chosen = []
    for s in joined:
        if total >= min_total_s:
            break
        chosen.append(s)
        total += len(s.audio) / 16_000
    source = {s.utt_id: "longform recording" for s in recordings} | {s.utt_id: "joined test utterances of one "
                                                                              "speaker" for s in chosen}
    return recordings + chosen, source


def dev_streams(dev_dirs: list[str], longform_dir: str | None = None) -> tuple[list, dict]:
    """Continuous dev speech for choices about long streams: each dev speaker's utterances (of every dataset in
    ``dev_dirs``) joined in order into streams of 20-120 s, and the long-form dataset's dev recordings whole; and
    what they are (the evaluation's ``test_set`` record)."""
    units = speaker_streams(load_split(dev_dirs, ["dev"]), speakers(dev_dirs, "dev"), max_s=120.0, min_s=20.0)
    corpora = ["dev utterances of one speaker, joined"]
    if longform_dir:
        units += whole_recordings(load_split([longform_dir], ["dev"]))
        corpora.append("longform dev recording")
    return units, {"n_utterances": len(units), "seconds": round(sum(len(u.audio) for u in units) / 16_000, 1),
                   "splits": ["dev"], "audio_sha256": streams_sha256(units),
                   "n_words": sum(len(u.words) for u in units), "speakers": len(units), "corpora": corpora}


def streams_sha256(units) -> str:
    """A content hash of the streams (their names and audio): which long-form set a report holds, so that rows
    scored at different times are merged only on the same audio."""
    return hashlib.sha256("".join(sorted(u.utt_id + hashlib.sha256(np.ascontiguousarray(u.audio).tobytes())
                                         .hexdigest() for u in units)).encode()).hexdigest()


def specs(args, choices: dict) -> list:
    out = [RecognizerSpec("faster-whisper offline (long-form)", "faster-whisper", None)]
    if not args.no_causal:
        out.append(RecognizerSpec("causal tuned 300 ms" if args.adapter else "causal 300 ms (original weights)",
                                  "causal", 300, Weights(adapter_dir=args.adapter)))
    out.append(load(name="two-pass 300 ms (served spec)", weights={"adapter_dir": args.adapter}))
    for uri in args.model or []:  # a registered recognizer, as registered (what serve-model serves)

        out.append(load_spec(args.tracking_uri, uri)[0])
    for key in ("whisperlivekit-la@1000", "whisperlivekit-simul@1000"):
        peer = choices.get("peers", {}).get(key)
        if peer and not args.no_peers:
            out.append(RecognizerSpec(peer["name"], peer["kind"], peer["chunk_ms"], peer=Peer(peer["vac"])))
    return out


def repeated_speech(minutes: float, realspeech: Path | None = None):
    """One continuous stream of ``minutes`` of real speech: the LJSpeech + CMU ARCTIC utterances joined, repeated;
    and the length of one repetition in samples."""
    utts = load_realspeech(realspeech or REPO.parent / "shared" / "data" / "realspeech", ("ljspeech", "cmu_arctic"))
    period = sum(len(u.audio) for u in utts)
    return join(utts * int(np.ceil(minutes * 60 * 16_000 / period)), f"repeated-{minutes}min"), period


def timed_steps(recognizer, audio, chunk_ms: int) -> list[tuple[int, float]]:
    """Feed ``audio`` in the recognizer's pieces with fixed feeding; (samples fed after each step, its compute ms).

    A lean loop, not run_stream: a StreamRecord keeps every step's whole hypothesis (what RWER/ARWER score), which
    for an hour of speech is steps × words of memory; here only each step's compute is kept."""
    steps, fed = [], 0
    recognizer.reset()
    for piece in chunks(audio, chunk_ms, getattr(recognizer, "lookahead_ms", 0.0)):
        t0 = time.perf_counter()
        recognizer.feed(piece)
        fed += len(piece)
        steps.append((fed, (time.perf_counter() - t0) * 1000))
    return steps


def hour_check(minutes: int, spec) -> dict:
    """One stream of ``minutes`` of real speech (the test utterances repeated) through one of our systems as the
    evaluate stage builds it: no exception, the segments it took, the step p90 of its first and last minute."""
    stream, period = repeated_speech(minutes)
    recognizer, _ = build(spec)
    minute = 60 * 16_000
    started = time.perf_counter()
    steps = timed_steps(recognizer, stream.audio, spec.chunk_ms)
    words = recognizer.finish().words
    wall = time.perf_counter() - started
    at, ms = np.array(steps).T
    p90 = (lambda sel: round(float(np.percentile(ms[sel], 90)), 2) if sel.any() else None)
    # the first and last minute hold different speech, and the first carries the warm-up (kernels generated for new
    # shapes); the same speech early and late is the second minute of the first repetition against the same
    # minute of the last whole one
    last_rep = int(len(stream.audio) // period) - 1
    same = {f"step_ms_p90_same_speech_{name}": p90((at > rep * period + minute) & (at <= rep * period + 2 * minute))
            for name, rep in (("early", 0), ("late", last_rep))}
    return {"system": spec.name, "minutes": round(len(stream.audio) / 16_000 / 60, 1), "segments": recognizer.segments,
            "wall_s": round(wall, 1), "wer": round(wer([stream.reference], [" ".join(words)]), 4),
            "rtf": round(wall / (len(stream.audio) / 16_000), 4), "feeding": "fixed",
            "step_ms_p90_first_minute": p90(at <= minute), "step_ms_p90_last_minute": p90(at > len(stream.audio) - minute),
            **same, "same_speech_minutes_apart": round(last_rep * period / minute, 1), "exception": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--adapter", help="the causal adapter (default: the original weights)")
    parser.add_argument("--min-total-s", type=float, default=600.0)
    parser.add_argument("--max-stream-s", type=float, default=360.0)
    parser.add_argument("--no-causal", action="store_true", help="no causal-only row")
    parser.add_argument("--model", action="append", help="a registered recognizer, models:/NAME@ALIAS (repeat)")
    parser.add_argument("--tracking-uri", default=None, help="the registry of --model")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--hour-check", type=int, default=0, metavar="MINUTES")
    parser.add_argument("--hour-check-systems", default="causal", choices=("causal", "two-pass", "all"))
    parser.add_argument("--hour-check-only", action="store_true", help="only the hour checks, added to --out's "
                        "longform.json (its systems' specs)")
    parser.add_argument("--rows", nargs="+", default=(), help="score only these rows (by name) and merge them into "
                        "--out's longform.json, which must hold the same streams (a row added or rescored)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()


    if args.hour_check_only:  # the 60-min checks alone, into longform.json beside the evaluation already there
        path = Path(args.out) / "longform.json"
        result = json.loads(path.read_text())
        ours = [from_dict(r["spec"]) for r in result["systems"] if r["kind"] in ("causal", "two-pass")]
        fresh = [hour_check(args.hour_check, sp) for sp in ours
                 if args.hour_check_systems == "all" or sp.kind == args.hour_check_systems]
        # the checks of systems not run again stay, as they were (a stale one says so)
        result["hour_check"] = [c for c in result.get("hour_check", []) if c["system"] not in
                                {f["system"] for f in fresh}] + fresh
        path.write_text(json.dumps(result, default=str) + "\n")
        print(json.dumps(result["hour_check"], indent=1))
        return
    state = json.loads(Path(args.state).read_text())
    choices_file = RESULTS / "selection" / "choices.json"  # the peers' dev-chosen settings (evaluation select)
    choices = json.loads(choices_file.read_text()) if choices_file.exists() else {}
    units, source = streams(state, args.min_total_s, args.max_stream_s)
    seconds = round(sum(len(s.audio) for s in units) / 16_000, 1)
    print(f"{len(units)} streams, {seconds} s", flush=True)
    test_set = {"n_utterances": len(units), "seconds": seconds, "speakers": len(units), "splits": ["test"],
                "n_words": sum(len(s.words) for s in units), "corpora": sorted(set(source.values())),
                "audio_sha256": streams_sha256(units), "streams": {s.utt_id: {"source": source[s.utt_id], "seconds":
                                                            round(len(s.audio) / 16_000, 1)} for s in units}}
    systems = specs(args, choices)
    if args.rows:
        unknown = set(args.rows) - {s.name for s in systems}
        if unknown:
            raise SystemExit(f"--rows: no such row {sorted(unknown)}; the rows: {[s.name for s in systems]}")
        systems = [s for s in systems if s.name in args.rows]
    result = evaluate_systems(systems, units, test_set=test_set)
    result["recordings"] = len(units)
    result["seconds"] = seconds
    if args.hour_check:
        ours = [sp for sp in systems if sp.kind in ("causal", "two-pass")]
        result["hour_check"] = [hour_check(args.hour_check, sp) for sp in ours
                                if args.hour_check_systems == "all" or sp.kind == args.hour_check_systems]
    result["command"] = " ".join(["python", *sys.argv])
    previous = None
    if args.rows:  # the other rows stay as scored; the ones shared across rows (cap, front, differences) are redone
        previous = json.loads((Path(args.out) / "longform.json").read_text())
        if previous["test_set"].get("audio_sha256") != test_set["audio_sha256"]:
            raise SystemExit(f"--rows: {args.out}/longform.json holds other streams; score every row instead")
        result["command"] = previous.get("command", "") + " && " + result["command"]
        for check in previous.get("hour_check", []):  # an hour check of a system scored again was of its old spec
            if check["system"] in args.rows:
                check["stale"] = f"its system was scored again on {result['created']}: rerun --hour-check-only"
    # (a whole run is a first part: each row says when it was scored, as the parts merged into it later will)
    result = merge_release(previous, result, reference=(previous or result).get("reference_system"))
    for path in write_report(result, args.out, "longform"):
        print(path)


if __name__ == "__main__":
    main()
