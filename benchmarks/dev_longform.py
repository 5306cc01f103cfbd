"""The served two-pass recognizer on continuous *dev* speech: each dev speaker's utterances joined into streams of
20-120 s (``benchmarks/longform.py dev_streams``), streamed whole with fixed feeding (transcripts independent of
the machine's speed), beside offline faster-whisper's long-form transcript.

Evidence for changes to how long streams are decoded (never scored on test). A change is compared with the code
before it by scoring both trees on the same streams and merging the rows (paired intervals over streams):

    python benchmarks/dev_longform.py --label "before (<commit>)" --out /tmp/before.json   # in a checkout of the old code
    python benchmarks/dev_longform.py --label "after" --merge /tmp/before.json --name dev_repeats
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "benchmarks" / "results" / "selection"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default=str(REPO / "outputs/bench-evaluation/state.json"))
    parser.add_argument("--spec", default=str(RESULTS / "served_two_pass.json"), help="the two-pass spec (json)")
    parser.add_argument("--label", required=True, help="appended to the two-pass row's name")
    parser.add_argument("--offline", action="store_true", help="add offline faster-whisper's long-form row")
    parser.add_argument("--out", help="write the raw result here (json)")
    parser.add_argument("--merge", help="an earlier raw result to merge with (its rows keep their names)")
    parser.add_argument("--name", help="write the merged report to benchmarks/results/selection/<name>.*")
    parser.add_argument("--limit", type=int, help="only the first N streams (a quick check of the script)")
    args = parser.parse_args()

    from benchmarks.longform import dev_streams
    from evaluation.report import evaluate_systems, write_report
    from evaluation.systems import SystemSpec

    units, test_set = dev_streams(json.loads(Path(args.state).read_text()))
    if args.limit:
        units = units[: args.limit]
        test_set = {**test_set, "n_utterances": len(units), "n_words": sum(len(u.words) for u in units),
                    "seconds": round(sum(len(u.audio) for u in units) / 16_000, 1)}
    spec = json.loads(Path(args.spec).read_text())
    specs = [SystemSpec(**{**spec, "name": f"{spec['name']} [{args.label}]"})]
    if args.offline:
        specs.insert(0, SystemSpec("faster-whisper offline (long-form)", "faster-whisper"))
    result = evaluate_systems(specs, units, test_set=test_set, live=False)
    result["command"] = " ".join(["python", *sys.argv])
    if args.out:
        Path(args.out).write_text(json.dumps(result, default=str) + "\n")
    if args.merge:
        from evaluation.merge import merge_release

        before = json.loads(Path(args.merge).read_text())
        reference = next(r["name"] for r in before["systems"] if r["kind"] == "two-pass")
        result = merge_release(before, result, reference=reference)
    if args.name:
        for path in write_report(result, RESULTS, args.name):
            print(path)
    for row in result["systems"]:
        print(f"{row['name']}: WER {row['wer']:.4f}", [(u["utt_id"], u["errors"]) for u in row["per_utterance"]])


if __name__ == "__main__":
    main()
