"""The causal LoRA's rank, decided on dev: the recipe's 32 or 8.

    python benchmarks/seed_soup.py             # first: the recipe's adapters at seeds 1-4 (rank 32), scored
    python benchmarks/lora_rank.py --state outputs/bench-evaluation/state.json   # train 4 runs, score, choose
    python benchmarks/lora_rank.py --choose-only                                 # the rule over the reports
    # → benchmarks/results/selection/dev_lora_rank*

Why: trained on synthetic speech alone, the adapter drifts from what Whisper knows about real speech; the teacher's
distillation, which holds it near Whisper's own distribution, was the one recipe choice that moved real dev by tens
of points (``selection/dev_distill*``). A smaller rank is the other way to keep it near: fewer directions in which
each projection may move. The recipe's rank 32 (alpha 32) is the paper's for base/small, never chosen on dev
here. Arm: rank 8 at the same alpha / r (alpha 8), so a direction moves at the same scale; everything else is the
recipe (``benchmarks.distill.chosen_recipe``: distilled w 0.5 / T 2, 160 steps, the same data, rate, targets and
augmentation).

Train (the `train` splits only) the arm at seeds 1-4; score each adapter alone, causal greedy + restart cut at
300 ms, live feeding, on the real `dev` split and the synthetic dev set. The reference rows are ``seed_soup.py``'s
recipe rows (rank 32, seeds 1-4, the same data build, scored with the same engine defaults).

Rule, written before the run: WER pooled over the four seeds (one unit per seed and utterance, an utterance's seeds
resampled together). Rank 8 replaces 32 in the recipe only where its pooled real-dev WER minus the recipe's has its
95 % interval below 0 and its pooled synthetic-dev difference does not have its interval above 0.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from benchmarks.common import rule_text  # noqa: E402
from benchmarks.seed_arms import SEEDS, trained_arm_cli  # noqa: E402

PREFIX = "dev_lora_rank"
RANK = 8


def row_name(seed: int) -> str:
    return f"300 ms, LoRA rank {RANK}, seed {seed}"


def train(state_arg: str) -> tuple[dict, dict[str, str]]:
    """(dataset versions, {row name: adapter dir}) for the arm at every seed (alpha / r as the recipe's)."""
    from benchmarks.distill import chosen_recipe
    from benchmarks.seed_arms import train_recipe

    lora = chosen_recipe(state_arg)[2].lora
    return train_recipe(state_arg, row_name, SEEDS, r=RANK, alpha=lora.alpha / lora.r * RANK)


def choose() -> dict:
    """The rule of the module docstring over the committed reports."""
    from benchmarks.seed_arms import arm_chosen, arm_vs_recipe

    compared = arm_vs_recipe(PREFIX, row_name, SEEDS)
    out = {key: {"rank 32 (the recipe)": c["recipe"], f"rank {RANK}": c["arm"], "minus_recipe": c["minus_recipe"]}
           for key, c in compared.items()}
    return {"chosen_rank": RANK if arm_chosen(compared) else 32, "seeds": list(SEEDS), **out,
            "rule": rule_text(__doc__)}


def main() -> None:
    trained_arm_cli(__doc__, PREFIX, train, choose, row_name(SEEDS[0]))


if __name__ == "__main__":
    main()
