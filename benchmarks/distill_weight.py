"""How strongly to distil, decided on dev: the chosen 300 ms recipe (w 0.5) against a stronger teacher weight.

    python benchmarks/distill_weight.py --state outputs/bench-evaluation/state.json
    # → benchmarks/results/selection/dev_distill_weight*

Why: the learning curve (``selection/dev_steps*``) showed the distilled adapter drifting away from real speech as it
trains longer on synthetic speech (real dev 32.0 % at 160 steps, 56.7 % at 480) while the synthetic dev WER kept
falling. The teacher is the one term that knows real speech; a larger weight holds the student closer to it.

Train (the `train` splits only, as ``benchmarks/distill.py``): the chosen recipe (``selection/dev_distill_choice.json``:
steps, seed) once per weight and per seed. A recipe's number is one training draw and those vary a lot here (the
learning curve's neighbours differ by 10–25 points), so each weight is trained with two seeds and compared with the
reference trained with the same seed. Runs are keyed by config, data and code: a finished one is reused.

Select (each adapter alone, causal greedy at 300 ms, as the evaluation's ``causal tuned 300 ms`` row) on the real
`dev` split and on the synthetic dev set. Rule: a weight replaces the default only where, at **every** seed, its
real-dev WER is separably lower than the reference's with that seed (the 95 % interval of the paired difference lies
below 0) and its synthetic-dev WER is not separably higher.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

RESULTS = Path(__file__).resolve().parent / "results"
WEIGHTS = (0.9,)  # each weight costs two training runs (seeds) on this 2-core machine


def row_name(weight: float, seed: int) -> str:
    return f"300 ms, distilled w {weight}, seed {seed}"


def train(state_arg: str, weights: tuple[float, ...], seeds: tuple[int, ...]) -> tuple[dict, dict[str, str]]:
    """(dataset versions, {row name: adapter dir}) for the reference weight and each candidate at every seed."""
    from benchmarks.distill import chosen_recipe
    from configs.finetune import DistillSettings
    from training.causal.run import run_finetune

    data, _, cfg = chosen_recipe(state_arg)
    base = cfg.for_chunk(300)
    adapters = {}
    for seed in seeds:
        for weight in (base.distill.weight, *weights):
            run = base.model_copy(update={"seed": seed,
                                          "distill": DistillSettings(weight=weight,
                                                                     temperature=base.distill.temperature)})
            summary = run_finetune(run)
            adapters[row_name(weight, seed)] = summary["adapter_dir"]
            print("trained", row_name(weight, seed), summary["adapter_dir"], summary["metrics"], flush=True)
    return data, adapters


def choose(results: dict[str, dict], reference_weight: float, weights: tuple[float, ...],
           seeds: tuple[int, ...]) -> dict:
    """The rule of the module docstring: every seed's paired difference against the same seed's reference."""
    verdicts = {}
    for weight in weights:
        per_seed = {}
        for seed in seeds:
            real, syn = (results[k][seed] for k in ("real", "synthetic"))
            name = row_name(weight, seed)
            r = next(x for x in real["systems"] if x["name"] == name)
            s = next(x for x in syn["systems"] if x["name"] == name)
            ref_r = next(x for x in real["systems"] if x["name"] == row_name(reference_weight, seed))
            ref_s = next(x for x in syn["systems"] if x["name"] == row_name(reference_weight, seed))
            real_ci, syn_ci = r["vs_reference"]["wer"]["ci95"], s["vs_reference"]["wer"]["ci95"]
            per_seed[seed] = {"real_dev_wer": r["wer"], "reference_real_dev_wer": ref_r["wer"],
                              "real_dev_wer_vs_reference_ci95": real_ci, "synthetic_dev_wer": s["wer"],
                              "reference_synthetic_dev_wer": ref_s["wer"],
                              "synthetic_dev_wer_vs_reference_ci95": syn_ci,
                              "better": real_ci[1] < 0 and syn_ci[0] <= 0}
        verdicts[str(weight)] = {"seeds": per_seed, "chosen": all(v["better"] for v in per_seed.values())}
    chosen = [w for w, v in verdicts.items() if v["chosen"]]
    return {"chosen_weight": float(min(chosen, key=lambda w: sum(verdicts[w]["seeds"][s]["real_dev_wer"]
                                                                  for s in seeds)))
            if chosen else reference_weight,
            "reference_weight": reference_weight, "candidates": verdicts,
            "rule": "a weight only where, at every seed, its real-dev WER is separably lower than the reference "
                    "weight's with the same seed and its synthetic-dev WER is not separably higher"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--weight", type=float, action="append", help="candidate weights (repeat; default 0.9)")
    parser.add_argument("--seed", type=int, action="append", help="training seeds (repeat; default 1 and 2)")
    args = parser.parse_args()
    weights, seeds = tuple(args.weight or WEIGHTS), tuple(args.seed or (1, 2))

    from benchmarks.distill import chosen_recipe
    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec

    reference_weight = chosen_recipe(args.state)[2].distill.weight
    data, adapters = train(args.state, weights, seeds)
    results: dict[str, dict] = {"real": {}, "synthetic": {}}
    for key, dataset in (("real", data["real"]), ("synthetic", data["kokoro_dev"])):
        units = load_split([dataset], ["dev"])
        for seed in seeds:
            names = [row_name(w, seed) for w in (reference_weight, *weights)]
            specs = [SystemSpec(n, "causal", 300, adapter_dir=adapters[n]) for n in names]
            results[key][seed] = evaluate_systems(specs, units, test_set=describe([dataset], ["dev"], units),
                                                  reference=names[0])
    folder = RESULTS / "selection"
    for key, suffix in (("real", ""), ("synthetic", "_synthetic")):
        for seed in seeds:
            write_report(results[key][seed], folder, f"dev_distill_weight{suffix}_seed{seed}")
    choice = choose(results, reference_weight, weights, seeds)
    (folder / "dev_distill_weight_choice.json").write_text(json.dumps(choice | {
        "adapters": adapters, "command": " ".join(["python", *sys.argv])}, indent=1) + "\n")
    print(json.dumps(choice, indent=1))


if __name__ == "__main__":
    main()
