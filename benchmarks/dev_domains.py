"""The served two-pass against the offline references on the real dev split, per domain (corpus).

    python benchmarks/dev_domains.py        # → benchmarks/results/selection/dev_domains.{json,md}

Why: the dev split held 19 words of spontaneous speech and test 479 (42 % of its words: one speaker's, dealt whole
to test), so no dev choice could see the domain that test weighs most. The evaluation corpus now shares that speaker
between dev and test utterance by utterance (``configs.dataset.dominant_speaker_share``; only test utterances moved,
to dev). This run states where the served recognizer stands on the new dev split, domain by domain, before anything
is chosen on it. Rows: offline faster-whisper (the reference), our offline Whisper, the served two-pass
(``selection/served_two_pass.json``: the original weights in both passes, so no trained adapter is needed), live
feeding.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

SELECTION = Path(__file__).resolve().parent / "results" / "selection"
REFERENCE = "faster-whisper offline"


def specs() -> list:
    from benchmarks.common import served_spec
    from evaluation.systems import SystemSpec

    return [SystemSpec(REFERENCE, "faster-whisper"), SystemSpec("offline Whisper (ours, 30 s pad)", "offline"),
            served_spec("two-pass 300 ms (served)")]


def main() -> None:
    from evaluation.domains import by_domain, corpus_of, markdown
    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--out", default=str(SELECTION))
    parser.add_argument("--name", default="dev_domains")
    args = parser.parse_args()
    dataset = json.loads(Path(args.state).read_text())["datasets"]["real"]
    units = load_split([dataset], ["dev"])
    result = evaluate_systems(specs(), units, test_set=describe([dataset], ["dev"], units), reference=REFERENCE)
    result["command"] = " ".join(["python", *sys.argv])
    result["dataset"] = {"version_dir": Path(dataset).name,
                         "card": json.loads((Path(dataset) / "dataset.json").read_text())["counts"]}
    result["domains"] = by_domain(result["systems"], corpus_of([dataset]), reference=REFERENCE)
    paths = write_report(result, args.out, args.name)
    md = Path(args.out) / f"{args.name}.md"
    md.write_text(md.read_text() + "\n## Per domain (corpus)\n\n" + markdown(result["domains"], REFERENCE))
    print(markdown(result["domains"], REFERENCE))
    print(*paths, sep="\n")


if __name__ == "__main__":
    main()
