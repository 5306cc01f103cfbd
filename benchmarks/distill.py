"""Distillation from the full-context teacher, decided on dev: the 300 ms recipe trained with and without the KL term.

    python benchmarks/distill.py --state outputs/bench27/state.json   # → results/selection/dev_distill.*

Train (the `train` splits only: espeak-ng + Kokoro speech in its 22 training voices, as ``benchmarks/evidence.py``
trains the evaluation's adapters): the 300 ms causal adapter of the smoke recipe, the same seed, steps and data,
once as it is and once per distillation setting (``configs.finetune.DistillSettings``). Runs are keyed by config,
data and code (``training.causal.run``), so a finished one is reused.

Select (the partials: each adapter alone, causal greedy at 300 ms, as the evaluation's ``causal tuned 300 ms`` row)
on the real `dev` split and on the synthetic dev set (Kokoro's 6 held-out voices, sentences disjoint from training),
each adapter's row paired with the undistilled one's. Rule: a distillation setting becomes the recipe's default only
where its real-dev WER is separably lower (the 95 % interval of the paired difference lies below 0) and its
synthetic-dev WER is not separably higher; else the recipe stays as it is and the evidence says by how much.
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
SETTINGS = ({"weight": 0.5, "temperature": 2.0},)  # Hinton's usual mix; one setting: each costs a training run


def recipe(data: dict, out: Path, steps: int, seed: int, train: tuple[str, ...] = ("synth", "kokoro_train")):
    """The recipe's fine-tuning config (chunk-free: the caller picks ``for_chunk`` or ``for_random_chunks``) on the
    ``train`` datasets, in the distillation runs' MLflow store under ``out``: comparable runs, one experiment."""
    from benchmarks.evidence import finetune_config

    cfg = finetune_config([data[k] for k in train], data["real"], steps, f"sqlite:///{out / 'mlflow.db'}", out)
    return cfg.model_copy(update={"seed": seed})


def train(state: dict, out: Path, steps: int, seed: int, settings) -> dict[str, str]:
    """{row name: adapter dir}: the recipe as it is, then with each distillation setting."""
    from configs.finetune import DistillSettings
    from training.causal.run import run_finetune

    base = recipe(state["datasets"], out, steps, seed).for_chunk(300)
    adapters = {}
    for setting in ({"weight": 0.0}, *settings):
        cfg = base.model_copy(update={"distill": DistillSettings(**setting)})
        name = "causal tuned 300 ms" + (f", distilled (w {setting['weight']}, T {setting['temperature']})"
                                         if setting["weight"] else "")
        summary = run_finetune(cfg)
        adapters[name] = summary["adapter_dir"]
        print("trained", name, summary["adapter_dir"], summary["metrics"], flush=True)
    return adapters


def chosen_recipe(state_arg: str, train: tuple[str, ...] = ("synth", "kokoro_train")):
    """For a run that varies the chosen recipe (``data_sources.py``, ``rcs_choice.py``): (the dataset versions, the
    choice of ``selection/dev_distill_choice.json``, :func:`recipe` on the ``train`` datasets with the choice's
    distillation setting, seed and steps)."""
    from configs.finetune import DistillSettings

    state_path = Path(state_arg).resolve()
    data = json.loads(state_path.read_text())["datasets"]
    chosen = json.loads((RESULTS / "selection" / "dev_distill_choice.json").read_text())
    cfg = recipe(data, state_path.parent / "distill", chosen["steps"], chosen["seed"], train)
    return data, chosen, cfg.model_copy(update={"distill": DistillSettings(**SETTINGS[0])})


def choose(results: dict[str, dict], reference: str) -> dict:
    """The rule of the module docstring over the real and synthetic dev evaluations."""
    real, synthetic = (results[k]["systems"] for k in ("real", "synthetic"))
    verdicts = {}
    for row in real:
        if row["name"] == reference:
            continue
        syn = next(r for r in synthetic if r["name"] == row["name"])
        real_ci, syn_ci = row["vs_reference"]["wer"]["ci95"], syn["vs_reference"]["wer"]["ci95"]
        verdicts[row["name"]] = {"real_dev_wer": row["wer"], "real_dev_wer_vs_undistilled_ci95": real_ci,
                                 "synthetic_dev_wer": syn["wer"], "synthetic_dev_wer_vs_undistilled_ci95": syn_ci,
                                 "chosen": real_ci[1] < 0 and syn_ci[0] <= 0}
    chosen = [name for name, v in verdicts.items() if v["chosen"]]
    ref_real = next(r for r in real if r["name"] == reference)
    ref_syn = next(r for r in synthetic if r["name"] == reference)
    return {"chosen": min(chosen, key=lambda n: verdicts[n]["real_dev_wer"]) if chosen else reference,
            "reference": {"real_dev_wer": ref_real["wer"], "synthetic_dev_wer": ref_syn["wer"]},
            "candidates": verdicts,
            "rule": "a distilled recipe only where its real-dev WER is separably lower than the undistilled one's "
                    "and its synthetic-dev WER is not separably higher"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench27/state.json")
    parser.add_argument("--steps", type=int, default=160)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec

    state_path = Path(args.state)
    state = json.loads(state_path.read_text())
    out = state_path.parent / "distill"
    out.mkdir(parents=True, exist_ok=True)
    adapters = train(state, out, args.steps, args.seed, SETTINGS)
    specs = [SystemSpec(name, "causal", 300, adapter_dir=adapter) for name, adapter in adapters.items()]
    reference = specs[0].name
    results = {}
    for key, dataset in (("real", state["datasets"]["real"]), ("synthetic", state["datasets"]["kokoro_dev"])):
        units = load_split([dataset], ["dev"])
        results[key] = evaluate_systems(specs, units, test_set=describe([dataset], ["dev"], units), reference=reference)
    choice = choose(results, reference)
    folder = RESULTS / "selection"
    write_report(results["real"], folder, "dev_distill")
    write_report(results["synthetic"], folder, "dev_distill_synthetic")
    (folder / "dev_distill_choice.json").write_text(json.dumps(choice | {
        "adapters": adapters, "steps": args.steps, "seed": args.seed, "command": " ".join(["python", *sys.argv])},
        indent=1) + "\n")
    print(json.dumps(choice, indent=1))


if __name__ == "__main__":
    main()
