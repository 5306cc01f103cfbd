"""A microphone-and-codec channel in the training augmentation, decided on dev: the recipe's, or the recipe's with
every augmented clip also passed through a random channel.

    python benchmarks/channel_augment.py --state outputs/bench-evaluation/state.json   # train 4 runs, score, choose
    python benchmarks/channel_augment.py --choose-only                                 # the rule over the reports
    # → benchmarks/results/selection/dev_channel_augment*

Why: the learning curve over data size (``selection/dev_data_size*``) found that a quarter of the training speech
does as well on real dev as all of it, and more text or more voices (``dev_training_text*``,
``dev_training_voices*``) did not help: the gap to offline is in the *kind* of speech, not its amount. The
training speech is clean synthetic audio at 24 kHz resampled to 16 kHz; real dev speech comes through microphones
and codecs the recipe's augmentation (speed, leading silence, a synthetic room, gain, coloured noise) never
imitates: spoken digits recorded at 8 kHz (a 4 kHz band), LibriSpeech decoded from MP3, AN4's close-talking
microphone, FLEURS' laptop and phone microphones. Arm: ``augment.channel_p`` 1, so every augmented clip (half of
them, the recipe's ``p`` 0.5) also passes ``training.causal.augment.channel``: a high-pass at 20-300 Hz, a low-pass
at 3.4-7.5 kHz, a seven-band equalizer of ±6 dB and MP3 at 16-64 kbit/s, each stage with probability 1/2, no stage
moving a word in time. Everything else is the recipe (``benchmarks.distill.chosen_recipe`` with the recipe's LoRA
targets and joined clips: distilled w 0.5 / T 2, 160 steps, the same data, rate and rank).

Train (the `train` splits only) the arm at seeds 1-4; score each adapter alone, causal greedy + restart cut at
300 ms, live feeding, on the real `dev` split and the synthetic dev set. The reference rows are the recipe's at
seeds 1-4 (``joined_clips.py``'s rows: the recipe since joined clips entered it, the same data build, scored with
the same engine defaults; its seed 1 retrained by the current loss code scores the same on every utterance,
``dev_data_size``).

Rule, written before the run: WER pooled over the four seeds (one unit per seed and utterance, an utterance's seeds
resampled together). The channel enters the recipe only where the pooled real-dev WER minus the recipe's has its
95 % interval below 0 and the pooled synthetic-dev difference does not have its interval above 0.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from benchmarks.common import rule_text  # noqa: E402
from benchmarks.data_size import BEFORE_REFACTOR as RECIPE  # noqa: E402  (joined_clips.py's recipe rows)
from benchmarks.seed_arms import SEEDS, trained_arm_cli  # noqa: E402

PREFIX = "dev_channel_augment"
CHANNEL_P = 1.0


def row_name(seed: int) -> str:
    return f"300 ms, augmentation with a channel, seed {seed}"


def train(state_arg: str) -> tuple[dict, dict[str, str]]:
    """(dataset versions, {row name: adapter dir}) for the arm at every seed."""
    from benchmarks.distill import chosen_recipe
    from benchmarks.seed_arms import train_recipe

    augment = chosen_recipe(state_arg)[2].augment
    return train_recipe(state_arg, row_name, SEEDS,
                        update={"augment": augment.model_copy(update={"channel_p": CHANNEL_P})})


def choose() -> dict:
    """The rule of the module docstring over the committed reports."""
    from benchmarks.seed_arms import arm_chosen, arm_vs_recipe

    compared = arm_vs_recipe(PREFIX, row_name, SEEDS, recipe=RECIPE)
    out = {key: {"the recipe": c["recipe"], "with a channel": c["arm"], "minus_recipe": c["minus_recipe"]}
           for key, c in compared.items()}
    return {"chosen_channel_p": CHANNEL_P if arm_chosen(compared) else 0.0, "seeds": list(SEEDS), **out,
            "rule": rule_text(__doc__)}


def main() -> None:
    trained_arm_cli(__doc__, PREFIX, train, choose, row_name(SEEDS[0]))


if __name__ == "__main__":
    main()
