"""Joined training clips, decided on dev: the recipe's clips alone, or half of them joined with 1-3 others.

    python benchmarks/seed_soup.py             # first: the recipe's adapters at seeds 1-4, scored
    python benchmarks/joined_clips.py --state outputs/bench-evaluation/state.json   # train 4 runs, score, choose
    python benchmarks/joined_clips.py --choose-only                                 # the rule over the reports
    # → benchmarks/results/selection/dev_joined_clips*

Why: the recipe's synthetic clips last 2-7 s (median 3.3 s) and the real dev speech up to 25 s. Read by clip
length on real dev (the recipe's four seeds pooled, ``seed_soup.py``'s rows), the causal adapter alone is furthest
from offline faster-whisper on the long clips: 24.0 % against 7.5 % on the 10 clips of 8-15 s (3.2x) and 65.5 %
against 5.2 % on the one of 25 s, where it is 1.3-1.5x below 8 s. The block-causal adapter never trained on
those encoder positions, nor on a decoder context of more than a sentence. Arm: ``join`` p = 0.5, up to 4 clips,
0-500 ms of silence between them, the joined speech ending by 24 s (``training.causal.join``); everything else
the recipe (``benchmarks.distill.chosen_recipe`` with the recipe's LoRA targets: distilled w 0.5 / T 2, 160 steps,
the same data, rate, rank and augmentation).

Train (the `train` splits only) the arm at seeds 1-4; score each adapter alone, causal greedy + restart cut at
300 ms, live feeding, on the real `dev` split and the synthetic dev set. The reference rows are ``seed_soup.py``'s
recipe rows (seeds 1-4, the same data build, scored with the same engine defaults). The WER by clip length is
reported beside the rule and is not part of it.

Rule, written before the run: WER pooled over the four seeds (one unit per seed and utterance, an utterance's seeds
resampled together). Joined clips enter the recipe only where the pooled real-dev WER minus the recipe's has its
95 % interval below 0 and the pooled synthetic-dev difference does not have its interval above 0.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from benchmarks.common import rule_text  # noqa: E402
from benchmarks.seed_arms import SEEDS, trained_arm_cli  # noqa: E402

PREFIX = "dev_joined_clips"
JOIN = {"p": 0.5, "max_utterances": 4, "gap_ms": (0, 500), "max_s": 24.0}
LENGTHS_S = ((0, 3), (3, 8), (8, 30))  # the clip-length bins of the descriptive breakdown


def row_name(seed: int) -> str:
    return f"300 ms, joined clips, seed {seed}"


def train(state_arg: str) -> tuple[dict, dict[str, str]]:
    """(dataset versions, {row name: adapter dir}) for the arm at every seed."""
    from benchmarks.seed_arms import train_recipe
    from configs.finetune import JoinSettings

    return train_recipe(state_arg, row_name, SEEDS, update={"join": JoinSettings(**JOIN)})


def by_length(rows: dict[int, dict]) -> dict[str, dict]:
    """Pooled WER over the seeds per clip-length bin (words, errors): where the arm moved, not a decision."""
    out = {}
    for lo, hi in LENGTHS_S:
        units = [u for row in rows.values() for u in row["per_utterance"] if lo * 1000 <= u["audio_ms"] < hi * 1000]
        words, errors = sum(u["ref_words"] for u in units), sum(u["errors"] for u in units)
        out[f"{lo}-{hi} s"] = {"utterances": len(units) // len(rows), "words": words // len(rows),
                               "wer_pooled": errors / max(1, words)}
    return out


def choose() -> dict:
    """The rule of the module docstring over the committed reports."""
    from benchmarks.seed_arms import arm_chosen, arm_vs_recipe

    compared = arm_vs_recipe(PREFIX, row_name, SEEDS)
    out = {key: {"the recipe": c["recipe"] | {"by_length": by_length(c["recipe_rows"])},
                 "joined clips": c["arm"] | {"by_length": by_length(c["arm_rows"])},
                 "minus_recipe": c["minus_recipe"]} for key, c in compared.items()}
    return {"chosen_join": JOIN if arm_chosen(compared) else None, "join": JOIN, "seeds": list(SEEDS), **out,
            "rule": rule_text(__doc__)}


def main() -> None:
    trained_arm_cli(__doc__, PREFIX, train, choose, row_name(SEEDS[0]))


if __name__ == "__main__":
    main()
