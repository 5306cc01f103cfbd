"""What each training source adds, measured on dev: the distilled 300 ms recipe without the Kokoro speech.

    python benchmarks/data_sources.py --state outputs/bench27/state.json   # → results/selection/dev_sources.*

The recipe of ``benchmarks/distill.py``'s chosen row (distilled, 300 ms, same seed and steps) trained on the
espeak-ng corpus alone, against the same recipe on espeak-ng + Kokoro-82M neural speech (22 training voices; the
adapter ``selection/dev_distill_choice.json`` names). Scored alone (greedy) on the real `dev` split and the
synthetic dev set, paired with the espeak-ng + Kokoro row; the evidence says what the neural voices add.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench27/state.json")
    args = parser.parse_args()

    from benchmarks.distill import chosen_recipe
    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec
    from training.causal.run import run_finetune

    data, chosen, cfg = chosen_recipe(args.state, train=("synth",))
    espeak_only = run_finetune(cfg.for_chunk(300))["adapter_dir"]
    both = "distilled 300 ms, espeak-ng + Kokoro"
    specs = [SystemSpec(both, "causal", 300, adapter_dir=chosen["adapters"][chosen["chosen"]]),
             SystemSpec("distilled 300 ms, espeak-ng alone", "causal", 300, adapter_dir=espeak_only)]
    results = {}
    for key, dataset in (("real", data["real"]), ("synthetic", data["kokoro_dev"])):
        units = load_split([dataset], ["dev"])
        results[key] = evaluate_systems(specs, units, test_set=describe([dataset], ["dev"], units), reference=both)
        results[key]["command"] = " ".join(["python", *sys.argv])
        write_report(results[key], SELECTION, "dev_sources" if key == "real" else "dev_sources_synthetic")
    summary = {key: {r["name"]: {"wer": r["wer"], "wer_vs_both_ci95": (r.get("vs_reference") or {}).get("wer", {})
                                 .get("ci95")} for r in res["systems"]} for key, res in results.items()}
    (SELECTION / "dev_sources_choice.json").write_text(json.dumps(
        {"summary": summary, "adapters": {both: specs[0].adapter_dir, specs[1].name: espeak_only},
         "command": " ".join(["python", *sys.argv])}, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
