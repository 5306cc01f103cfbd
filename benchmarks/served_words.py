"""Issue 65's "nothing served changes": the served spec's final transcripts, fixed feeding, before and after a change.

    python -m benchmarks.served_words --real DATASET_VERSION_DIR --adapter ADAPTER_DIR --out BEFORE.json   # at the old commit
    python -m benchmarks.served_words --real DATASET_VERSION_DIR --adapter ADAPTER_DIR --out AFTER.json    # at the new one
    python -m benchmarks.served_words --diff BEFORE.json AFTER.json   # → benchmarks/results/served_words.json

The served two-pass spec (``configs/recognizer.yaml``, as the pipeline registers it) over a smoke adapter, built
by ``recognizer.build.build`` (what the evaluate stage scores and the server serves), one torch thread, every real dev utterance and every continuous dev stream (each dev speaker's
utterances joined, 20-120 s), fed in fixed chunks so the words do not depend on the machine's load. ``--diff``
writes which transcripts differ and exits 1 unless every one is identical.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import torch

from evaluation.longform import speaker_streams, speakers
from evaluation.sets import load_split
from evaluation.streamed import stream_all
from recognizer.build import Models, build
from recognizer.spec import load
from streaming.precision import machine_info, resolve_precision

RESULTS = Path(__file__).resolve().parent / "results"


def transcripts(real: str, adapter: str) -> dict:
    torch.set_num_threads(1)
    spec = load(name="served two-pass", weights={"adapter_dir": adapter})
    dev = load_split([real], ["dev"])
    sets = {"real dev": dev, "dev streams": speaker_streams(dev, speakers([real], "dev"), max_s=120.0, min_s=20.0)}
    recognizer, _ = build(spec, Models())
    out = {"commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=RESULTS).stdout.strip(),
           "precision": resolve_precision("auto").effective, "machine": machine_info(), "sets": {}}
    for name, utts in sets.items():
        records = stream_all(recognizer, utts, spec.chunk_ms, live=False)
        out["sets"][name] = {u.utt_id: r.text for u, r in zip(utts, records)}
    return out


def diff(before: dict, after: dict) -> dict:
    changed = {name: sorted(u for u, text in texts.items() if after["sets"].get(name, {}).get(u) != text)
               for name, texts in before["sets"].items()}
    return {"before": before["commit"], "after": after["commit"], "precision": [before["precision"], after["precision"]],
            "cpu": before["machine"].get("cpu_model"), "utterances": {k: len(v) for k, v in before["sets"].items()},
            "words": {k: sum(len(t.split()) for t in v.values()) for k, v in before["sets"].items()},
            "changed": changed, "identical": not any(changed.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real")
    parser.add_argument("--adapter")
    parser.add_argument("--out")
    parser.add_argument("--diff", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.diff:
        result = diff(*(json.loads(Path(f).read_text()) for f in args.diff))
        (RESULTS / "served_words.json").write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result, indent=1))
        sys.exit(0 if result["identical"] else 1)
    if not (args.real and args.adapter and args.out):
        parser.error("--real, --adapter and --out (or --diff BEFORE AFTER)")
    Path(args.out).write_text(json.dumps(transcripts(args.real, args.adapter), indent=1) + "\n")


if __name__ == "__main__":
    main()
