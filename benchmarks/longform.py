"""Continuous long-form audio, streamed whole: every system on minutes of real speech with no per-utterance end.

    python benchmarks/longform.py --state outputs/bench26/state.json            # → benchmarks/results/longform.*
    python benchmarks/longform.py --state … --hour-check                        # + one 60-min stream, no exception
    python benchmarks/longform.py --state … --two-pass-from-dev --window-from-dev --verifier zeros_5s  # dev-chosen

Streams (``evaluation/longform.py``): the long-form dataset version's recordings joined back from their
segments (``longform``: continuous readings of about a minute), and one speaker's test-split utterances joined in
order with the pauses their clips carry (``joined``), until ``--min-total-s`` of audio. Every stream is one
evaluation unit: the intervals resample streams. Systems: faster-whisper's own long-form transcription (the
offline reference), our causal engine (and two-pass where a hush word and adapter are given), the whisperlivekit
peers at their dev-chosen 1 s configurations (``choices.json``), all live-fed on the real-time queue; ours go
through ``Segmented`` (the live server's segmentation), the peers trim their own buffers as their servers do.
Per system: WER, median final-word latency, step p90 in each stream's first and last minute, RTF.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"


def streams(state: dict, min_total_s: float, max_stream_s: float) -> tuple[list, dict]:
    """The long-form streams and what they are (counts per source)."""
    from evaluation.longform import speaker_streams, speakers, whole_recordings
    from evaluation.sets import load_split

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


def dev_streams(state: dict) -> tuple[list, dict]:
    """Continuous dev speech for choices about long streams: each dev speaker's utterances joined in order into
    streams of 20-120 s, and what they are (the evaluation's ``test_set`` record)."""
    from evaluation.longform import speaker_streams, speakers
    from evaluation.sets import load_split

    real = state["datasets"]["real"]
    units = speaker_streams(load_split([real], ["dev"]), speakers([real], "dev"), max_s=120.0, min_s=20.0)
    return units, {"n_utterances": len(units), "seconds": round(sum(len(u.audio) for u in units) / 16_000, 1),
                   "splits": ["dev"], "audio_sha256": "", "n_words": sum(len(u.words) for u in units),
                   "speakers": len(units), "corpora": ["dev utterances of one speaker, joined"]}


WINDOWS_MS = (None, 8000, 12000)  # the verifier windows tried on dev (None: the whole segment at every pass)


def select_window(args, state: dict, max_latency_ms: float = 1000.0) -> dict:
    """The two-pass verifier's window, chosen on continuous *dev* speech (each dev speaker's utterances joined in
    order into streams of ≥ 20 s; never long-form test): rule fixed before running, the lowest RTF among windows
    whose dev WER is not separably worse than the unwindowed verifier's (paired 95 % interval of the difference
    includes 0 or lies below it) with median final-word latency ≤ ``max_latency_ms``."""
    from evaluation.report import evaluate_systems, write_report

    evidence = RESULTS / "selection" / "dev_window.json"
    if evidence.exists() and not args.reselect:
        result = json.loads(evidence.read_text())
    else:
        units, test_set = dev_streams(state)
        variants = [two_pass_spec(args, bool(args.self_agreement), w) for w in WINDOWS_MS]
        result = evaluate_systems(variants, units, test_set=test_set, reference=variants[0].name)
        result["command"] = " ".join(["python", *sys.argv])
        write_report(result, RESULTS / "selection", "dev_window")
    rows = [r for r in result["systems"] if r["kind"] == "two-pass"]
    ok = [r for r in rows if r["word_latency_ms_median"] <= max_latency_ms
          and ("vs_reference" not in r or r["vs_reference"]["wer"]["ci95"][0] <= 0)]
    chosen = min(ok or rows, key=lambda r: r["rtf"])
    return {"name": chosen["name"], "window_ms": chosen["spec"].get("window_ms"),
            "rule": "lowest dev RTF among windows whose WER is not separably worse than no window, median final-word "
                    f"latency ≤ {max_latency_ms:g} ms",
            "dev": {r["name"]: {k: r[k] for k in ("wer", "word_latency_ms_median", "rtf", "step_ms_p90")}
                    | {"wer_vs_no_window_ci95": (r.get("vs_reference") or {}).get("wer", {}).get("ci95")}
                    for r in rows}, "evidence": "benchmarks/results/selection/dev_window.json"}


def two_pass_spec(args, self_agreement: bool, window_ms: int | None = None):
    """The two-pass row: the hush word where one is given, else a naive padding mid-stream and Whisper's own 30 s
    padding for each segment's last pass (fixed before any long-form number was seen)."""
    from evaluation.systems import SystemSpec

    verifier = args.verifier or "hush"
    final = args.final_verifier or (None if verifier == "hush" else "pad30")
    agree = ", self-agreement" if self_agreement else ""
    window = f", window {window_ms / 1000:g} s" if window_ms else ""
    return SystemSpec(f"two-pass 300 ms ({verifier}" + (f", final {final}" if final else "") + f"{agree}{window})",
                      "two-pass", 300, adapter_dir=args.adapter, hush_dir=args.hush_dir, verifier=verifier,
                      every_ms=300, final_verifier=final, self_agreement=self_agreement or None, window_ms=window_ms)


def select_two_pass(args, state: dict, max_latency_ms: float = 1000.0) -> dict:
    """Which two-pass variant the long-form run scores, chosen on the real `dev` split (never on long-form or test):
    finals on causal agreement only, or also on two consecutive verifier passes. Rule, fixed before running: the
    lowest dev WER among variants whose median final-word latency is ≤ ``max_latency_ms``, else the lowest latency."""
    from flows.evaluate import run_evaluate
    from evaluation.report import write_report
    from evaluation.systems import SystemSpec

    evidence = RESULTS / "selection" / "dev_two_pass.json"
    if evidence.exists() and not args.reselect:  # the committed dev evidence, read back (the rule applied again)
        result = json.loads(evidence.read_text())
    else:
        variants = [two_pass_spec(args, agree) for agree in (False, True)]
        specs = [SystemSpec("faster-whisper offline", "faster-whisper"), *variants]
        result = run_evaluate(specs, [state["datasets"]["real"]], [], ["train"], split="dev",
                              out_dir=str(Path(args.state).parent / "select-two-pass"))
        write_report(result, RESULTS / "selection", "dev_two_pass")
    rows = [r for r in result["systems"] if r["kind"] == "two-pass"]
    fast = [r for r in rows if r["word_latency_ms_median"] <= max_latency_ms]
    chosen = min(fast, key=lambda r: r["wer"]) if fast else min(rows, key=lambda r: r["word_latency_ms_median"])
    return {"name": chosen["name"], "self_agreement": bool(chosen["spec"].get("self_agreement")),
            "rule": f"lowest dev WER with median final-word latency ≤ {max_latency_ms:g} ms, else the lowest latency",
            "dev": {r["name"]: {k: r[k] for k in ("wer", "word_latency_ms_median", "word_latency_ms_p90", "rtf")}
                    for r in rows}, "evidence": "benchmarks/results/selection/dev_two_pass.json"}


def specs(args, choices: dict) -> list:
    from evaluation.systems import SystemSpec

    out = [SystemSpec("faster-whisper offline (long-form)", "faster-whisper")]
    if args.no_causal:
        pass
    elif args.adapter:
        out.append(SystemSpec("causal tuned 300 ms", "causal", 300, adapter_dir=args.adapter))
    else:
        out.append(SystemSpec("causal 300 ms (original weights)", "causal", 300))
    if args.hush_dir or args.verifier:
        out.append(two_pass_spec(args, bool(args.self_agreement), args.window_ms))
    for uri in args.model or []:  # a registered recognizer, as registered (what serve-model serves)
        from recognizer.registry import load_spec

        out.append(load_spec(args.tracking_uri, uri)[0])
    for key in ("whisperlivekit-la@1000", "whisperlivekit-simul@1000"):
        peer = choices.get("peers", {}).get(key)
        if peer and not args.no_peers:
            out.append(SystemSpec(peer["name"], peer["kind"], peer["chunk_ms"], vac=peer["vac"]))
    return out


def repeated_speech(minutes: float, realspeech: Path | None = None):
    """One continuous stream of ``minutes`` of real speech: the LJSpeech + CMU ARCTIC utterances joined, repeated;
    and the length of one repetition in samples."""
    import numpy as np

    from evaluation.longform import join
    from evaluation.sets import load_realspeech

    utts = load_realspeech(realspeech or REPO.parent / "shared" / "data" / "realspeech", ("ljspeech", "cmu_arctic"))
    period = sum(len(u.audio) for u in utts)
    return join(utts * int(np.ceil(minutes * 60 * 16_000 / period)), f"repeated-{minutes}min"), period


def timed_steps(recognizer, audio, chunk_ms: int) -> list[tuple[int, float]]:
    """Feed ``audio`` in the recognizer's pieces with fixed feeding; (samples fed after each step, its compute ms).

    A lean loop, not run_stream: a StreamRecord keeps every step's whole hypothesis (what RWER/ARWER score), which
    for an hour of speech is steps × words of memory; here only each step's compute is kept."""
    from streaming.events import chunks

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
    import numpy as np

    from evaluation.systems import build
    from training.metrics import wer

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
    parser.add_argument("--hush-dir", help="a hush word: adds the two-pass row")
    parser.add_argument("--min-total-s", type=float, default=600.0)
    parser.add_argument("--max-stream-s", type=float, default=360.0)
    parser.add_argument("--verifier", help="two-pass without a hush word: the mid-stream padding (zeros_5s, pad30)")
    parser.add_argument("--final-verifier", help="two-pass: the padding of each segment's last pass")
    parser.add_argument("--self-agreement", action="store_true", help="two-pass: also finalise on two verifier passes")
    parser.add_argument("--no-causal", action="store_true", help="no causal-only row (a two-pass variant alone)")
    parser.add_argument("--two-pass-from-dev", action="store_true",
                        help="the two-pass variant chosen on the real dev split (select_two_pass; its committed "
                             "evidence when there is some)")
    parser.add_argument("--reselect", action="store_true", help="with --two-pass-from-dev: score dev again")
    parser.add_argument("--window-from-dev", action="store_true",
                        help="the two-pass verifier window chosen on continuous dev speech (select_window)")
    parser.add_argument("--selection-only", action="store_true", help="stop after the dev selections")
    parser.add_argument("--window-ms", type=int, default=None, help="two-pass: the verifier's window (ms)")
    parser.add_argument("--model", action="append", help="a registered recognizer, models:/NAME@ALIAS (repeat)")
    parser.add_argument("--tracking-uri", default=None, help="the registry of --model")
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--hour-check", type=int, default=0, metavar="MINUTES")
    parser.add_argument("--hour-check-systems", default="causal", choices=("causal", "two-pass", "all"))
    parser.add_argument("--hour-check-only", action="store_true", help="only the hour checks, added to --out's "
                        "longform.json (its systems' specs)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()

    from evaluation.report import evaluate_systems, write_report

    if args.hour_check_only:  # the 60-min checks alone, into longform.json beside the evaluation already there
        from evaluation.systems import SystemSpec

        path = Path(args.out) / "longform.json"
        result = json.loads(path.read_text())
        ours = [SystemSpec(**r["spec"]) for r in result["systems"] if r["kind"] in ("causal", "two-pass")]
        result["hour_check"] = [hour_check(args.hour_check, sp) for sp in ours
                                if args.hour_check_systems == "all" or sp.kind == args.hour_check_systems]
        path.write_text(json.dumps(result, indent=1, default=str) + "\n")
        print(json.dumps(result["hour_check"], indent=1))
        return
    state = json.loads(Path(args.state).read_text())
    choices = json.loads((RESULTS / "selection" / "choices.json").read_text())
    chosen = None
    if args.two_pass_from_dev:
        chosen = select_two_pass(args, state)
        args.self_agreement = chosen["self_agreement"]
        print("two-pass chosen on dev:", json.dumps(chosen), flush=True)
    if args.window_from_dev:
        window = select_window(args, state)
        args.window_ms = window["window_ms"]
        chosen = {**(chosen or {}), "window": window}
        print("verifier window chosen on dev:", json.dumps(window), flush=True)
        if args.selection_only:
            return
    units, source = streams(state, args.min_total_s, args.max_stream_s)
    seconds = round(sum(len(s.audio) for s in units) / 16_000, 1)
    print(f"{len(units)} streams, {seconds} s", flush=True)
    test_set = {"n_utterances": len(units), "seconds": seconds, "speakers": len(units), "splits": ["test"],
                "n_words": sum(len(s.words) for s in units), "corpora": sorted(set(source.values())),
                "audio_sha256": "", "streams": {s.utt_id: {"source": source[s.utt_id], "seconds":
                                                            round(len(s.audio) / 16_000, 1)} for s in units}}
    systems = specs(args, choices)
    result = evaluate_systems(systems, units, test_set=test_set)
    if chosen:
        result["two_pass_selection"] = chosen
    result["recordings"] = len(units)
    result["seconds"] = seconds
    if args.hour_check:
        ours = [sp for sp in systems if sp.kind in ("causal", "two-pass")]
        result["hour_check"] = [hour_check(args.hour_check, sp) for sp in ours
                                if args.hour_check_systems == "all" or sp.kind == args.hour_check_systems]
    result["command"] = " ".join(["python", *sys.argv])
    for path in write_report(result, args.out, "longform"):
        print(path)


if __name__ == "__main__":
    main()
