"""Does the training corpus's size bind? The recipe's learning curve over data size, measured on dev, in MLflow.

    python benchmarks/data_size.py --state outputs/bench-evaluation/state.json
    # → benchmarks/results/selection/dev_data_size*, and one MLflow run "data-size learning curve" whose metrics
    #   (step = training utterances) are the curve

Why: issue 28 asks for a learning curve over data size. The GPU screen (``selection/gpu_screen.md``) found no
setting of weight, temperature, rate or steps that closes the causal adapter's gap to offline, and concluded that
the corpus (370 synthetic utterances), not compute, has to change; more text (``dev_training_text*``) and more
voices (``dev_training_voices*``) did not help at two seeds each. The curve asks the question underneath: does the
amount of this corpus matter at all at this scale?

Train: the recipe (``benchmarks.seed_arms.train_recipe``: distilled w 0.5 / T 2, joined clips, 160 steps, the
recipe's LoRA targets) at seed 1 on nested subsets of every training dataset (``train_fraction`` 1/4, 1/2 and all;
``training.causal.data.subset_keys``: the same utterances for every seed, each subset inside the next). The steps
stay 160, so a smaller subset is seen more often: the curve is data size at a fixed compute budget. Score each
adapter alone (causal greedy + restart cut, 300 ms, live feeding) on the real dev split and the synthetic dev set,
paired with the all-data adapter. The committed seed-1 adapter of ``dev_joined_clips`` (the same recipe trained by
the code before 0c2a13f, whose distillation loss equals the current one to 7e-8 relative) is scored beside them: a
check that the refactor changed nothing measurable.

Reading, written before the run (a curve, not a selection: no default changes): the corpus's size **binds** where
the 1/4 adapter's real-dev WER is separably higher than the all-data adapter's (the 95 % interval of the paired
difference lies above 0); where neither the 1/4 nor the 1/2 adapter is separably worse, four times less of this
speech does as well, and more of the same kind is not what will close the gap to offline. One seed per point: the
recipe's seeds 1-4 lie within 4.4 points of each other (``dev_lora_targets*``), which the reading has to beat.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from benchmarks.joined_clips import PREFIX as JOINED  # noqa: E402
from benchmarks.joined_clips import row_name as joined_row  # noqa: E402
from benchmarks.seed_arms import SELECTION, SETS, RecipeRuns, score_adapters, set_report_path  # noqa: E402

PREFIX = "dev_data_size"
FRACTIONS = (0.25, 0.5, 1.0)
TRAIN_DATA = ("synth", "kokoro_train")  # the recipe's training datasets (benchmarks.distill.chosen_recipe)
BEFORE_REFACTOR = RecipeRuns(JOINED, joined_row, per_seed=False)
CURVE_RUN = "data-size learning curve"


def label(fraction: float) -> str:
    return "all" if fraction == 1 else str(Fraction(fraction).limit_denominator(100))


def row_name(fraction: float, seed: int) -> str:
    return f"300 ms, {label(fraction)} of the training data, seed {seed}"


def before_refactor_row(seed: int) -> str:
    return f"300 ms, all of the training data, seed {seed}, trained before 0c2a13f"


def train_utterances(data: dict, fraction: float) -> int:
    """What a run at ``fraction`` trains on, from the manifests (the workers log the same count as
    ``train_utterances``)."""
    from data.manifest import read_manifest
    from training.causal.data import subset_keys

    return sum(len(subset_keys([r["key"] for r in read_manifest(data[k]).to_pylist() if r["split"] == "train"],
                               fraction)) for k in TRAIN_DATA)


def curve(results: dict[str, dict], data: dict, seed: int) -> dict:
    """Per fraction: training utterances, real and synthetic dev WER with 95 % intervals, each paired with the
    all-data adapter; and the reading of the module docstring."""
    points = []
    for fraction in FRACTIONS:
        point: dict = {"train_fraction": fraction, "train_utterances": train_utterances(data, fraction)}
        for key in SETS:
            row = next(r for r in results[key]["systems"] if r["name"] == row_name(fraction, seed))
            point[key] = {"wer": row["wer"], "ci95": row["ci95"]["wer"],
                          "minus_all_ci95": None if fraction == 1 else row["vs_reference"]["wer"]["ci95"],
                          "partial_rewrite_rate": row.get("partial_rewrite_rate")}
        points.append(point)
    quarter, half = (next(p for p in points if p["train_fraction"] == f)["real"]["minus_all_ci95"] for f in (0.25, 0.5))
    reading = ("binds: a quarter of the corpus is separably worse on real dev" if quarter[0] > 0 else
               "does not bind at this scale: neither a quarter nor a half of the corpus is separably worse on real dev"
               if half[0] <= 0 else "a half of the corpus is separably worse, a quarter is not: no monotone reading")
    return {"seed": seed, "points": points, "reading": reading}


def log_curve(tracking_uri: str, experiment: str, result: dict, adapters: dict[str, str]) -> str:
    """One MLflow run whose metrics are the curve (step = training utterances); its id."""
    from training.tracking import client, experiment_id, log_metrics

    mlflow = client(tracking_uri)
    run = mlflow.create_run(experiment_id(tracking_uri, experiment), run_name=CURVE_RUN,
                            tags={"whisperline.kind": "learning-curve", "evidence": f"selection/{PREFIX}*"})
    for p in result["points"]:  # MLflow keys allow no commas: the adapters by fraction
        mlflow.log_param(run.info.run_id, f"adapter.train_fraction_{p['train_fraction']}",
                         adapters[row_name(p["train_fraction"], result["seed"])])
    mlflow.log_param(run.info.run_id, "seed", result["seed"])
    for p in result["points"]:
        metrics = {"train_fraction": p["train_fraction"]}
        for key in SETS:
            metrics |= {f"{key}_dev_wer": p[key]["wer"], f"{key}_dev_wer_ci_low": p[key]["ci95"][0],
                        f"{key}_dev_wer_ci_high": p[key]["ci95"][1]}
        log_metrics(tracking_uri, run.info.run_id, metrics, p["train_utterances"])
    mlflow.set_terminated(run.info.run_id, status="FINISHED")
    return run.info.run_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--curve-only", action="store_true", help="the curve from the reports already written")
    args = parser.parse_args()

    from benchmarks.distill import chosen_recipe
    from benchmarks.seed_arms import train_recipe

    if args.curve_only:
        data = json.loads(Path(args.state).read_text())["datasets"]
        results = {k: json.loads(set_report_path(PREFIX, k).read_text()) for k in SETS}
        adapters = {r["name"]: r["spec"]["adapter_dir"] for r in results["real"]["systems"]}
    else:
        adapters = {}
        for fraction in FRACTIONS:
            data, trained = train_recipe(args.state, lambda s, f=fraction: row_name(f, s), (args.seed,),
                                         update={"train_fraction": fraction})
            adapters |= trained
        adapters[before_refactor_row(args.seed)] = BEFORE_REFACTOR.adapter(args.seed)
        results = score_adapters(data, adapters, PREFIX, reference=row_name(1.0, args.seed))
    result = curve(results, data, args.seed)
    cfg = chosen_recipe(args.state)[2]
    result["mlflow"] = {"tracking_uri": cfg.tracking_uri, "experiment": cfg.experiment,
                        "run_id": log_curve(cfg.tracking_uri, cfg.experiment, result, adapters)}
    refactor = next(r for r in results["real"]["systems"] if r["name"] == before_refactor_row(args.seed))
    result["before_refactor"] = {"wer": refactor["wer"], "minus_all_ci95": refactor["vs_reference"]["wer"]["ci95"]}
    (SELECTION / f"{PREFIX}_curve.json").write_text(json.dumps(result | {
        "adapters": adapters, "datasets": {k: data[k] for k in (*TRAIN_DATA, "real", "kokoro_dev")},
        "reports": [set_report_path(PREFIX, k).name for k in SETS], "command": " ".join(["python", *sys.argv])},
        indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
