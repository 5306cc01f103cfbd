"""Which attention projections the causal LoRA adapts, decided on dev: the recipe's (encoder + decoder) or the encoder's.

    python benchmarks/lora_targets.py --state outputs/bench-evaluation/state.json   # train 8 runs, score, choose
    # → benchmarks/results/selection/dev_lora_targets*

Why: the causal adapter alone (the partials) stays about 2× offline faster-whisper's WER on real speech (issue 28
asks 1.5×), and no distillation weight, temperature, rate, step count or training text moved it
(``selection/gpu_screen.md``, ``dev_training_text*``): trained on synthetic speech, the adapter drifts from what
Whisper knows about real speech. The recipe adapts the encoder's self-attention and the decoder's self- and
cross-attention. The block-causal mask changes only what the encoder sees, while the decoder adapters can learn the
language of ~180 training sentences said again and again (the decoder's self-attention is Whisper's language
model). The candidate adapts the encoder's self-attention alone (``LoraSettings.targets = ("encoder.attn",)``):
the decoder stays Whisper's own and must learn to wait (end-of-text at a chunk boundary) from what the adapted
encoder gives it. Everything else is the recipe (``benchmarks.distill.chosen_recipe``: distilled w 0.5 / T 2,
160 steps, the same data, rank, rate and augmentation).

Train (the `train` splits only): both arms at seeds 1, 2, 3 and 4 (runs keyed by config, data and code: a
finished one is reused). Score each adapter alone, causal greedy at 300 ms, live feeding, on the real `dev` split
and the synthetic dev set.

Rule, written before the run: WER is pooled over the four seeds (one unit per seed and utterance, an utterance's
seeds resampled together, as ``benchmarks/gpu_screen.py`` pools). The encoder-only targets replace the recipe's only
where the pooled paired difference of real-dev WER (candidate − recipe) has its 95 % interval below 0 and the
pooled synthetic-dev difference does not have its interval above 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from benchmarks.common import rule_text  # noqa: E402

SELECTION = Path(__file__).resolve().parent / "results" / "selection"
PREFIX = "dev_lora_targets"
SEEDS = (1, 2, 3, 4)
# arm label → LoRA targets
ARMS = {"recipe": ("encoder.attn", "decoder.attn", "decoder.cross_attn"), "encoder only": ("encoder.attn",)}
REFERENCE, CANDIDATE = "recipe", "encoder only"


def row_name(arm: str, seed: int) -> str:
    return f"300 ms, LoRA {arm}, seed {seed}"


def train(state_arg: str, seeds: tuple[int, ...]) -> tuple[dict, dict[str, str]]:
    """(dataset versions, {row name: adapter dir}) for both arms at every seed."""
    from benchmarks.distill import chosen_recipe
    from training.causal.run import run_finetune

    data, _, cfg = chosen_recipe(state_arg)
    adapters = {}
    for seed in seeds:
        for arm, targets in ARMS.items():
            run_cfg = cfg.for_chunk(300).model_copy(
                update={"seed": seed, "lora": cfg.lora.model_copy(update={"targets": targets})})
            summary = run_finetune(run_cfg)
            adapters[row_name(arm, seed)] = summary["adapter_dir"]
            print("trained", row_name(arm, seed), summary["adapter_dir"], summary["metrics"], flush=True)
    return data, adapters


def choose(results: dict[str, dict[int, dict]], seeds: tuple[int, ...]) -> dict:
    """The rule of the module docstring over the per-seed dev reports (``results[set][seed]``)."""
    from benchmarks.seed_arms import pooled
    from evaluation.intervals import compare

    out: dict = {}
    for key in ("real", "synthetic"):
        units, out[key] = {}, {}
        for arm in ARMS:
            by_seed = {s: next(r for r in results[key][s]["systems"] if r["name"] == row_name(arm, s)) for s in seeds}
            units[arm], out[key][arm] = pooled(by_seed, seeds)
        out[key]["candidate_minus_recipe"] = compare(units[CANDIDATE], units[REFERENCE], "wer", groups="recording")
    real_ci = out["real"]["candidate_minus_recipe"]["ci95"]
    syn_ci = out["synthetic"]["candidate_minus_recipe"]["ci95"]
    chosen = real_ci[1] < 0 and syn_ci[0] <= 0
    return {"chosen": list(ARMS[CANDIDATE] if chosen else ARMS[REFERENCE]), "seeds": list(seeds), **out,
            "rule": rule_text(__doc__)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--seed", type=int, action="append", help="training seeds (repeat; default 1 2 3 4)")
    args = parser.parse_args()
    seeds = tuple(args.seed or SEEDS)

    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec

    data, adapters = train(args.state, seeds)
    results: dict[str, dict[int, dict]] = {"real": {}, "synthetic": {}}
    for key, dataset in (("real", data["real"]), ("synthetic", data["kokoro_dev"])):
        units = load_split([dataset], ["dev"])
        for seed in seeds:
            names = [row_name(arm, seed) for arm in ARMS]
            specs = [SystemSpec(n, "causal", 300, adapter_dir=adapters[n]) for n in names]
            results[key][seed] = evaluate_systems(specs, units, test_set=describe([dataset], ["dev"], units),
                                                  reference=names[0])
            results[key][seed]["command"] = " ".join(["python", *sys.argv])
            write_report(results[key][seed], SELECTION, f"{PREFIX}{'' if key == 'real' else '_synthetic'}_seed{seed}")
    choice = choose(results, seeds)
    (SELECTION / f"{PREFIX}_choice.json").write_text(json.dumps(choice | {
        "adapters": adapters, "datasets": {k: data[k] for k in ("synth", "kokoro_train", "real", "kokoro_dev")},
        "command": " ".join(["python", *sys.argv])}, indent=1) + "\n")
    print(json.dumps(choice, indent=1))


if __name__ == "__main__":
    main()
