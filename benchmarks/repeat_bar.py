"""Issue 64's repetition bar: on continuous speech the served recognizer repeats no more than offline faster-whisper.

    python benchmarks/repeat_bar.py --real DATASET_VERSION_DIR --longform DATASET_VERSION_DIR --adapter ADAPTER_DIR
    # → benchmarks/results/repeat_bar.{json,md}

Systems: the served two-pass spec (``benchmarks/repeat_guard.py::served_spec``: the curated spec over the smoke adapter
of a fresh `make run`, precision ``auto``) built by ``evaluation.systems.build`` (what the evaluate stage scores and
the server serves), and offline faster-whisper on the same tiny.en weights (its own long-form transcription past
30 s). Sets:
  - ``dev streams``: each real dev speaker's utterances joined into one stream of 20-120 s (as ``repeat_guard.py``);
  - ``dev streams, 1200 ms per step``: the same streams fed as a server that has fallen behind feeds a catch-up step;
  - ``long-form``: the nine continuous recordings of ``../shared/data/longform`` whole (1-5.5 min each). They are
    held out (the build puts them in ``test``): reported, never used to choose anything.
Fixed pieces (the chunk, or 1200 ms), so the words do not depend on this machine's load.

Bar, written before the run: on every set the served recognizer's repeated words (``evaluation.repetition``: words in
the second copy of an immediately repeated 3+-gram the reference does not repeat) are no more than faster-whisper's,
and it finalizes no token loop. WER is reported beside it with the paired 95 % interval of served − faster-whisper.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.repeat_guard import BEHIND_MS, dev_sets, score, served_spec  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
KEYS = ("wer", "repeated_words", "utterances_with_repeats", "token_loops", "word_latency_ms_median",
        "word_latency_ms_p90", "rtf")


def sets(real: str, longform: str) -> dict:
    from evaluation.longform import whole_recordings
    from evaluation.sets import load_split

    dev = dev_sets(real)
    return {"dev streams": dev["dev streams"], f"dev streams, {BEHIND_MS} ms per step": dev[
        f"dev streams, {BEHIND_MS} ms per step"], "long-form": (whole_recordings(load_split([longform], ["test"])), None)}


def run(args) -> dict:
    from evaluation import intervals
    from evaluation.systems import SystemSpec
    from streaming.precision import machine_info

    ours, fw = served_spec(args.adapter), SystemSpec("faster-whisper offline", "faster-whisper", model="tiny.en")
    out: dict = {"bar": __doc__.split("Bar, written before the run: ")[1].strip(), "adapter": args.adapter,
                 "machine": machine_info(), "sets": {}}
    for name, (utts, piece_ms) in sets(args.real, args.longform).items():
        rows = score([ours], utts, piece_ms)
        rows.update(score([fw], utts, None))  # offline: the feeding does not change its words
        a, b = rows[ours.name], rows[fw.name]
        c = intervals.compare(a["per_utterance"], b["per_utterance"], "wer")
        out["sets"][name] = {
            "n": len(utts), "seconds": round(sum(len(u.audio) for u in utts) / 16_000, 1), "piece_ms": piece_ms,
            "systems": {r["name"]: {k: r.get(k) for k in KEYS} for r in (a, b)},
            "wer_served_minus_fw": round(c["diff"], 4), "ci95": [round(x, 4) for x in c["ci95"]],
            "hyps": {r["name"]: {e["utt_id"]: e["hyp"] for e in r["per_utterance"]} for r in (a, b)},
            "passes": a["repeated_words"] <= b["repeated_words"] and a["token_loops"] == 0}
        print(name, {k: (v["wer"], v["repeated_words"], v["token_loops"]) for k, v in
                     out["sets"][name]["systems"].items()}, flush=True)
    out["passes"] = all(s["passes"] for s in out["sets"].values())
    return out


def markdown(r: dict) -> str:
    lines = ["# Repeats on continuous speech: the served recognizer against offline faster-whisper "
             "(benchmarks/repeat_bar.py)", "", f"Bar: {r['bar']}", "",
             "| set | system | WER | served − fw [95 % CI] | repeated words (utts) | loops | bar |",
             "|---|---|---|---|---|---|---|"]
    for name, s in r["sets"].items():
        for i, (system, row) in enumerate(s["systems"].items()):
            delta = (f"{100 * s['wer_served_minus_fw']:+.2f} [{100 * s['ci95'][0]:+.2f}, {100 * s['ci95'][1]:+.2f}]"
                     if i == 0 else "—")
            lines.append(f"| {name} ({s['n']}, {s['seconds']} s) | {system} | {100 * row['wer']:.2f} % | {delta} | "
                         f"{row['repeated_words']} ({row['utterances_with_repeats']}) | {row['token_loops']} | "
                         f"{('passes' if s['passes'] else 'FAILS') if i == 0 else ''} |")
    lines += ["", f"All sets: {'passes' if r['passes'] else 'FAILS'}.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", required=True, help="the real evaluation dataset version (its dev split)")
    parser.add_argument("--longform", required=True, help="the long-form dataset version (its whole recordings)")
    parser.add_argument("--adapter", required=True, help="the smoke adapter of a fresh `make run`")
    args = parser.parse_args()
    result = run(args)
    (RESULTS / "repeat_bar.json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    (RESULTS / "repeat_bar.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
