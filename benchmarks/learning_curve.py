"""How long to train, decided on dev: the chosen recipe's learning curve over training steps, logged in MLflow.

    python benchmarks/learning_curve.py --state outputs/bench27/state.json --steps 480 --every 80 --short 80
        # → results/selection/dev_steps.{json,md}, dev_steps_synthetic.*, dev_steps_choice.json

The curve: the recipe of ``selection/dev_distill_choice.json`` (distilled, same seed and data; the `train` splits
only) trained for ``--steps`` steps as the per-chunk 300 ms adapter, validating in streaming mode on the whole real
`dev` split every ``--every`` steps: its ``val_wer`` history in MLflow. (The cosine schedule spans the whole run, so
a point of the curve is not a shorter run: the curve says where more steps stop helping.) The candidates: that long
run, and whole runs of each ``--short`` length (per-chunk and random-chunk), beside the chosen recipe's adapters —
each scored alone at 300 ms (greedy: the partials) on the real dev split and the synthetic dev set, paired with the
chosen per-chunk adapter.

Rule (``benchmarks.distill.choose``'s): another step count becomes the recipe's default only where its per-chunk
adapter's real-dev WER is separably lower than the chosen recipe's and its synthetic-dev WER is not separably higher;
the random-chunk adapter follows the recipe's step count.
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


def curve(tracking_uri: str, run_id: str, keys: tuple[str, ...] = ("val_wer", "val_word_latency_ms_median")) -> dict:
    """{metric: [[step, value], …]} ascending by step, over every MLflow run of the same run key (a finished run
    asked for again opens a new run that only restores its last checkpoint: the history is in the first one)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    run = client.get_run(run_id)
    key = run.data.tags.get("whisperline.run_key")
    runs = client.search_runs([run.info.experiment_id], f"tags.`whisperline.run_key` = '{key}'") if key else [run]
    history = {k: {} for k in keys}
    for r in runs:
        for k in keys:
            history[k].update({m.step: m.value for m in client.get_metric_history(r.info.run_id, k)})
    return {k: sorted([step, value] for step, value in v.items()) for k, v in history.items()} | {
        "run_ids": sorted(r.info.run_id for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench27/state.json")
    parser.add_argument("--steps", type=int, default=480, help="the long run's steps (the curve)")
    parser.add_argument("--every", type=int, default=80, help="the long run validates on real dev every N steps")
    parser.add_argument("--short", default="80", help="whole shorter runs to compare (comma-separated step counts)")
    args = parser.parse_args()

    from benchmarks.distill import choose, chosen_recipe
    from evaluation.intervals import compare
    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec
    from training.causal.run import run_finetune

    data, chosen, cfg = chosen_recipe(args.state)
    long = run_finetune(cfg.model_copy(update={"max_steps": args.steps, "val_every": args.every,
                                               "validation_limit": None}).for_chunk(300))
    shorts = [int(n) for n in args.short.split(",") if n.strip()]
    per_chunk = {chosen["steps"]: chosen["adapters"][chosen["chosen"]], args.steps: long["adapter_dir"]}
    rcs = {chosen["steps"]: json.loads((SELECTION / "dev_rcs_choice.json").read_text())["rcs_adapter"]}
    for n in shorts:
        short = cfg.model_copy(update={"max_steps": n})
        per_chunk[n] = run_finetune(short.for_chunk(300))["adapter_dir"]
        rcs[n] = run_finetune(short.for_random_chunks([40, 100, 200, 300]))["adapter_dir"]
    name = {n: f"per-chunk 300 ms adapter, {n} steps" + (" (chosen recipe)" if n == chosen["steps"] else "")
            for n in per_chunk}
    reference = name[chosen["steps"]]
    specs = [SystemSpec(name[n], "causal", 300, adapter_dir=a) for n, a in sorted(per_chunk.items())]
    specs += [SystemSpec(f"random-chunk adapter, {n} steps", "causal", 300, adapter_dir=a) for n, a in sorted(rcs.items())]
    results = {}
    for key, dataset in (("real", data["real"]), ("synthetic", data["kokoro_dev"])):
        units = load_split([dataset], ["dev"])
        results[key] = evaluate_systems(specs, units, test_set=describe([dataset], ["dev"], units), reference=reference)
        results[key]["command"] = " ".join(["python", *sys.argv])
    write_report(results["real"], SELECTION, "dev_steps")
    write_report(results["synthetic"], SELECTION, "dev_steps_synthetic")
    decisive = {k: {"systems": [r for r in v["systems"] if r["name"] in name.values()]} for k, v in results.items()}
    decision = choose(decisive, reference)
    decision["rule"] = ("another step count only where its per-chunk adapter's real-dev WER is separably lower than "
                        "the chosen recipe's and its synthetic-dev WER is not separably higher")
    steps_of = {v: k for k, v in name.items()}
    real = {r["name"]: r for r in results["real"]["systems"]}
    rcs_gap = {}
    for n in rcs:  # the random-chunk adapter against the per-chunk one of the same steps (issue 28: within 10 %)
        a, b = real[f"random-chunk adapter, {n} steps"], real[name[n]]
        rcs_gap[f"{n} steps"] = compare(a["per_utterance"], b["per_utterance"], "wer") | {
            "relative": round(a["wer"] / b["wer"] - 1, 4)}
    summary = decision | {
        "chosen_steps": steps_of[decision["chosen"]],
        "adapters": {"per_chunk": {str(n): a for n, a in per_chunk.items()}, "rcs": {str(n): a for n, a in rcs.items()}},
        "rcs_vs_per_chunk_real_dev": rcs_gap,
        "curve": {"run_id": long["run_id"], "steps": args.steps, "val_every": args.every,
                  **curve(cfg.tracking_uri, long["run_id"])},
        "reference_steps": chosen["steps"], "command": " ".join(["python", *sys.argv])}
    (SELECTION / "dev_steps_choice.json").write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
