"""The data-size curve's nearest point, at a second seed: does a quarter of the training speech bind?

    python benchmarks/data_size_seed2.py --state outputs/bench-evaluation/state.json   # train 1 run, score, pool
    python benchmarks/data_size_seed2.py --pool-only                                   # the reading from the reports
    # → benchmarks/results/selection/dev_data_size_seed2* and dev_data_size_quarter_pooled.json

Why: the learning curve (``data_size.py``, one seed) read "does not bind", but its 1/4 point was the nearest to
binding: +3.5 points [−0.2, +7.0] on real dev against the all-data adapter, where the recipe's seeds spread over
4.4 points. One more seed of that point, pooled with the first, tells whether a quarter of the corpus really does as
well. Train the recipe (``benchmarks.seed_arms.train_recipe``: distilled w 0.5 / T 2, joined clips, 160 steps) at
``train_fraction`` 1/4 and seed 2 (the same utterances as seed 1's quarter: ``subset_keys`` is seed-free); score it
alone (causal greedy + restart cut, 300 ms, live feeding) on the real dev split and the synthetic dev set. Pool it
with seed 1's quarter (``selection/dev_data_size*``) and pair with the all-data recipe at seeds 1 and 2
(``joined_clips.py``'s rows; its seed 1 scores the same errors on every utterance as the all-data adapter retrained
for the curve).

Reading, written before the run: the corpus's size **binds** at a quarter where the pooled real-dev WER of the
quarter minus the all-data recipe's has its 95 % interval above 0; otherwise the curve's reading stands, now on two
seeds. A description, not a selection: no default changes.
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
from benchmarks.data_size import PREFIX as CURVE  # noqa: E402
from benchmarks.data_size import row_name  # noqa: E402
from benchmarks.seed_arms import SELECTION, SETS, pooled, score_adapters, set_report_path  # noqa: E402

PREFIX = "dev_data_size_seed2"
FRACTION = 0.25
SEEDS = (1, 2)


def pool() -> dict:
    """The quarter pooled over seeds 1 and 2 against the all-data recipe at the same seeds, per dev set."""
    from evaluation.intervals import compare

    out: dict = {}
    for key in SETS:
        quarter = {}
        for seed, prefix in ((1, CURVE), (2, PREFIX)):
            rows = json.loads(set_report_path(prefix, key).read_text())["systems"]
            quarter[seed] = next(r for r in rows if r["name"] == row_name(FRACTION, seed))
        everything = {s: RECIPE.reference_row(key, s) for s in SEEDS}
        (q_units, q), (a_units, a) = pooled(quarter, SEEDS), pooled(everything, SEEDS)
        out[key] = {"quarter": q, "all": a, "quarter_minus_all": compare(q_units, a_units, "wer", groups="recording")}
    binds = out["real"]["quarter_minus_all"]["ci95"][0] > 0
    return {"train_fraction": FRACTION, "seeds": list(SEEDS), **out,
            "reading": "binds: a quarter of the corpus is separably worse on real dev, pooled over two seeds" if binds
            else "does not bind: a quarter of the corpus is not separably worse on real dev, pooled over two seeds"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--pool-only", action="store_true", help="the reading from the reports already written")
    args = parser.parse_args()
    if not args.pool_only:
        from benchmarks.seed_arms import train_recipe

        data, adapters = train_recipe(args.state, lambda s: row_name(FRACTION, s), (2,),
                                      update={"train_fraction": FRACTION})
        score_adapters(data, adapters, PREFIX, reference=row_name(FRACTION, 2))
    result = pool() | {"command": " ".join(["python", *sys.argv])}
    (SELECTION / "dev_data_size_quarter_pooled.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("real", "synthetic")} | {
        k: {"quarter": result[k]["quarter"]["wer_pooled"], "all": result[k]["all"]["wer_pooled"],
            "minus": result[k]["quarter_minus_all"]} for k in SETS}, indent=1))


if __name__ == "__main__":
    main()
