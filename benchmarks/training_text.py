"""What more varied training speech adds, decided on dev: the 300 ms recipe against the same recipe on other data.

    python benchmarks/evaluation.py data --datasets kokoro_wordnet     # the corpus (data.wordnet_text), ~25 min
    python benchmarks/training_text.py --state outputs/bench-evaluation/state.json
    # → benchmarks/results/selection/dev_training_text*
    python benchmarks/evaluation.py data --datasets kokoro_voices      # the recipe's sentences in 6 voices
    python benchmarks/training_text.py --candidate voices
    # → benchmarks/results/selection/dev_training_voices*

Why: the GPU screen (``selection/gpu_screen.md``) found no setting of the distillation weight, temperature, rate or
steps that closes the causal adapter's gap to offline on real dev (about 40 % against 20.6 %), with seeds moving
WER by 13 points. The recipe's synthetic speech says about 60 distinct sentences (``kokoro_texts("train")`` in 2
voices, and espeak-ng's 122 sentences), so training sees the same few hundred words again and again. This run adds
``KOKORO_WORDNET_SENTENCES`` WordNet usage examples (each once, in one of the 22 training voices) and changes
nothing else: same config, steps, seeds. ``--candidate voices`` instead replaces the Kokoro corpus by the same
sentences in 6 of the 22 voices (``KOKORO_VOICES_REPEATS``; the 2 of the recipe's corpus among them): more
speakers, the same words.

Train (the `train` splits only): the chosen recipe (``benchmarks/distill_weight.py``'s reference, w 0.5) at seeds
1 and 2 on espeak-ng + Kokoro, and on espeak-ng + Kokoro + Kokoro-WordNet. Runs are keyed by config, data and
code: a finished one is reused.

Select (each adapter alone, causal greedy at 300 ms) on the real `dev` split and the synthetic dev set, each seed's
new adapter paired with the same seed's reference. Rule: the candidate's data replaces the recipe's only
where, at **every** seed, real-dev WER is separably lower (the 95 % interval of the paired difference lies below 0)
and synthetic-dev WER is not separably higher.
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
REFERENCE_DATA = ("synth", "kokoro_train")
# --candidate: (training datasets, row label, evidence file prefix)
CANDIDATES = {
    "wordnet": (("synth", "kokoro_train", "kokoro_wordnet"), "+ WordNet sentences", "dev_training_text"),
    "voices": (("synth", "kokoro_voices"), "Kokoro in 6 voices", "dev_training_voices"),
}


def row_name(data: tuple[str, ...], seed: int) -> str:
    label = next((c[1] for c in CANDIDATES.values() if c[0] == data), "recipe text")
    return f"300 ms, {label}, seed {seed}"


def train(state_arg: str, seeds: tuple[int, ...], candidate: tuple[str, ...]) -> tuple[dict, dict[str, str]]:
    """(dataset versions, {row name: adapter dir}) for the recipe's data and the candidate's at every seed."""
    from benchmarks.distill import chosen_recipe
    from training.causal.run import run_finetune

    adapters = {}
    data: dict = {}
    for train_data in (REFERENCE_DATA, candidate):
        data, _, cfg = chosen_recipe(state_arg, train=train_data)
        for seed in seeds:
            summary = run_finetune(cfg.for_chunk(300).model_copy(update={"seed": seed}))
            adapters[row_name(train_data, seed)] = summary["adapter_dir"]
            print("trained", row_name(train_data, seed), summary["adapter_dir"], summary["metrics"], flush=True)
    return data, adapters


def choose(results: dict[str, dict], seeds: tuple[int, ...], candidate: tuple[str, ...]) -> dict:
    """The rule of the module docstring: every seed's paired difference against the same seed's reference."""
    per_seed = {}
    for seed in seeds:
        rows = {}
        for key in ("real", "synthetic"):
            systems = results[key][seed]["systems"]
            new = next(x for x in systems if x["name"] == row_name(candidate, seed))
            ref = next(x for x in systems if x["name"] == row_name(REFERENCE_DATA, seed))
            rows[key] = {"wer": new["wer"], "reference_wer": ref["wer"],
                         "wer_vs_reference_ci95": new["vs_reference"]["wer"]["ci95"],
                         "partial_rewrite_rate": new.get("partial_rewrite_rate"),
                         "reference_partial_rewrite_rate": ref.get("partial_rewrite_rate")}
        rows["better"] = (rows["real"]["wer_vs_reference_ci95"][1] < 0
                          and rows["synthetic"]["wer_vs_reference_ci95"][0] <= 0)
        per_seed[str(seed)] = rows
    chosen = all(v["better"] for v in per_seed.values())
    return {"chosen": list(candidate if chosen else REFERENCE_DATA), "seeds": per_seed,
            "rule": "the candidate's training data replaces the recipe's only where, at every seed, its real-dev WER "
                    "is separably lower than the recipe's with the same seed and its synthetic-dev WER is not "
                    "separably higher"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--seed", type=int, action="append", help="training seeds (repeat; default 1 and 2)")
    parser.add_argument("--candidate", choices=sorted(CANDIDATES), default="wordnet")
    args = parser.parse_args()
    seeds = tuple(args.seed or (1, 2))
    candidate, _, prefix = CANDIDATES[args.candidate]

    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec

    data, adapters = train(args.state, seeds, candidate)
    results: dict[str, dict] = {"real": {}, "synthetic": {}}
    for key, dataset in (("real", data["real"]), ("synthetic", data["kokoro_dev"])):
        units = load_split([dataset], ["dev"])
        for seed in seeds:
            names = [row_name(REFERENCE_DATA, seed), row_name(candidate, seed)]
            specs = [SystemSpec(n, "causal", 300, adapter_dir=adapters[n]) for n in names]
            results[key][seed] = evaluate_systems(specs, units, test_set=describe([dataset], ["dev"], units),
                                                  reference=names[0])
            results[key][seed]["command"] = " ".join(["python", *sys.argv])
            write_report(results[key][seed], SELECTION,
                         f"{prefix}{'' if key == 'real' else '_synthetic'}_seed{seed}")
    choice = choose(results, seeds, candidate)
    (SELECTION / f"{prefix}_choice.json").write_text(json.dumps(choice | {
        "adapters": adapters, "datasets": {k: data[k] for k in dict.fromkeys(REFERENCE_DATA + candidate)},
        "command": " ".join(["python", *sys.argv])}, indent=1) + "\n")
    print(json.dumps(choice, indent=1))


if __name__ == "__main__":
    main()
