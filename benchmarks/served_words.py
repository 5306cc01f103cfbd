"""Issue 65's "nothing served changes": the served spec's final transcripts, fixed feeding, before and after a change.

    python benchmarks/served_words.py --real DATASET_VERSION_DIR --adapter ADAPTER_DIR --out F.json
    python benchmarks/served_words.py --real … --adapter … --compare benchmarks/results/served_words_before.json

The served two-pass spec (``benchmarks/results/selection/served_two_pass.json``, precision ``auto`` as the pipeline
registers it) over a smoke adapter, built by ``evaluation.systems.build`` (what the evaluate stage scores and the
server serves), one torch thread, every real dev utterance and every continuous dev stream (each dev speaker's
utterances joined, 20-120 s), fed in fixed chunks so the words do not depend on the machine's load. ``--compare``
exits 1 unless every final transcript is identical to the file's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).resolve().parent / "results"


def transcripts(real: str, adapter: str) -> dict:
    import torch

    from evaluation.longform import speaker_streams, speakers
    from evaluation.sets import load_split
    from evaluation.systems import SystemSpec, _Models, build
    from streaming.evaluate import stream_all
    from streaming.precision import machine_info, resolve_precision

    torch.set_num_threads(1)
    values = json.loads((RESULTS / "selection" / "served_two_pass.json").read_text())
    spec = replace(SystemSpec(**values), name="served two-pass", adapter_dir=adapter, precision="auto")
    dev = load_split([real], ["dev"])
    sets = {"real dev": dev, "dev streams": speaker_streams(dev, speakers([real], "dev"), max_s=120.0, min_s=20.0)}
    recognizer, _ = build(spec, _Models())
    out = {"commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=RESULTS).stdout.strip(),
           "precision": resolve_precision("auto").effective, "machine": machine_info(), "sets": {}}
    for name, utts in sets.items():
        records = stream_all(recognizer, utts, spec.chunk_ms, live=False)
        out["sets"][name] = {u.utt_id: r.text for u, r in zip(utts, records)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", required=True)
    parser.add_argument("--adapter", required=True)
    parser.add_argument("--out")
    parser.add_argument("--compare")
    args = parser.parse_args()
    now = transcripts(args.real, args.adapter)
    if args.out:
        Path(args.out).write_text(json.dumps(now, indent=1) + "\n")
    if args.compare:
        before = json.loads(Path(args.compare).read_text())
        changed = {name: [u for u, text in texts.items() if now["sets"].get(name, {}).get(u) != text]
                   for name, texts in before["sets"].items()}
        n = {name: len(texts) for name, texts in before["sets"].items()}
        print(json.dumps({"before": before["commit"], "after": now["commit"], "utterances": n,
                          "changed": {k: v for k, v in changed.items() if v}}, indent=1))
        sys.exit(1 if any(changed.values()) else 0)


if __name__ == "__main__":
    main()
