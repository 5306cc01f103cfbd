"""Greedy decoding's restart cut (``streaming.decoding``, ``restart_words``), decided on dev.

    python benchmarks/restart_cut.py --seed 1 & python benchmarks/restart_cut.py --seed 2   # causal arms, per seed
    python benchmarks/restart_cut.py --two-pass [--partials causal]                        # the served two-pass
    python benchmarks/restart_cut.py --choose                 # → benchmarks/results/selection/dev_restart_choice.json

Why: on the real dev split a handful of utterances held a fifth to a quarter of the causal adapter's errors, each
a run of its own words said again ("which are an exact imitation, which are an exact imitation"), and those runs
moved the two seeds' WER apart (``selection/dev_training_text_seed*``: per-utterance hypotheses).

Arms: ``restart_words`` 0 (off), 2, 3 and 4 (words said again in a row, within the last 24 words), each scored with
the recipe's 300 ms adapters (``dev_training_text_choice.json``: seeds 1 and 2), causal greedy, live feeding, on the
real `dev` split and the synthetic dev set, paired with the same seed's arm 0.
Rule: the smallest ``restart_words`` whose real-dev WER is separably lower than off at **every** seed and whose
synthetic-dev WER is not separably higher at any seed (a smaller run cuts more, so it is taken when it is safe);
none: the cut stays off. ``--two-pass``: the served two-pass spec (``selection/served_two_pass.json``) with the cut
off and at the chosen value (``--partials causal`` shows the causal words, which the cut changes directly), so the
choice is checked on the system the registry serves (finals, latency, rewrites).
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
ARMS = (0, 2, 3, 4)
PREFIX = "dev_restart"


def row_name(restart_words: int, seed: int) -> str:
    cut = f"restart cut {restart_words} words" if restart_words else "no restart cut"
    return f"300 ms recipe, seed {seed}, {cut}"


def recipe_adapters() -> dict[int, str]:
    """The recipe's adapters per seed, as the training-text run recorded them."""
    choice = json.loads((SELECTION / "dev_training_text_choice.json").read_text())
    return {int(name.rsplit(" ", 1)[1]): path for name, path in choice["adapters"].items() if "recipe text" in name}


def score_seed(state: dict, seed: int) -> None:
    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec

    adapter = recipe_adapters()[seed]
    specs = [SystemSpec(row_name(n, seed), "causal", 300, adapter_dir=adapter, restart_words=n) for n in ARMS]
    for key, dataset in (("real", state["datasets"]["real"]), ("synthetic", state["datasets"]["kokoro_dev"])):
        units = load_split([dataset], ["dev"])
        result = evaluate_systems(specs, units, test_set=describe([dataset], ["dev"], units),
                                  reference=specs[0].name)
        result["command"] = " ".join(["python", *sys.argv])
        write_report(result, SELECTION, f"{PREFIX}{'' if key == 'real' else '_synthetic'}_seed{seed}")


def choose(seeds: tuple[int, ...]) -> dict:
    """The rule of the module docstring, read from the per-seed reports."""
    per_arm: dict[str, dict] = {}
    for n in ARMS[1:]:
        rows = {}
        for seed in seeds:
            for key in ("real", "synthetic"):
                result = json.loads((SELECTION / f"{PREFIX}{'' if key == 'real' else '_synthetic'}_seed{seed}.json")
                                    .read_text())
                row = next(x for x in result["systems"] if x["name"] == row_name(n, seed))
                off = next(x for x in result["systems"] if x["name"] == row_name(0, seed))
                rows[f"seed {seed} {key}"] = {"wer": row["wer"], "off_wer": off["wer"],
                                              "wer_vs_off_ci95": row["vs_reference"]["wer"]["ci95"],
                                              "partial_rewrite_rate": row.get("partial_rewrite_rate"),
                                              "off_partial_rewrite_rate": off.get("partial_rewrite_rate")}
        safe = all(rows[f"seed {s} real"]["wer_vs_off_ci95"][1] < 0
                   and rows[f"seed {s} synthetic"]["wer_vs_off_ci95"][0] <= 0 for s in seeds)
        per_arm[str(n)] = rows | {"passes": safe}
    chosen = next((n for n in ARMS[1:] if per_arm[str(n)]["passes"]), 0)
    return {"chosen_restart_words": chosen, "arms": per_arm, "seeds": list(seeds), "adapters": recipe_adapters(),
            "rule": "the smallest restart_words whose real-dev WER is separably lower than the cut off at every seed "
                    "and whose synthetic-dev WER is not separably higher at any seed; none: off"}


def score_two_pass(state: dict, restart_words: int, partials: str | None) -> None:
    from dataclasses import replace

    from benchmarks.common import served_spec
    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split

    base = served_spec("", **({"partials": partials} if partials else {}))
    specs = [replace(base, name=f"two-pass served, partials={base.partials or 'causal'}, "
                                f"{'restart cut ' + str(n) + ' words' if n else 'no restart cut'}", restart_words=n)
             for n in (0, restart_words)]
    units = load_split([state["datasets"]["real"]], ["dev"])
    result = evaluate_systems(specs, units, test_set=describe([state["datasets"]["real"]], ["dev"], units),
                              reference=specs[0].name)
    result["command"] = " ".join(["python", *sys.argv])
    write_report(result, SELECTION, f"{PREFIX}_two_pass" + (f"_{partials}" if partials else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--seed", type=int, help="score the arms with this seed's recipe adapter")
    parser.add_argument("--choose", action="store_true", help="apply the rule to seeds 1 and 2's reports")
    parser.add_argument("--two-pass", action="store_true", help="the served two-pass, off against the chosen cut")
    parser.add_argument("--partials", help="--two-pass: show these partials instead of the served spec's")
    args = parser.parse_args()
    state = json.loads(Path(args.state).read_text())
    if args.seed is not None:
        score_seed(state, args.seed)
    if args.choose:
        choice = choose((1, 2)) | {"command": " ".join(["python", *sys.argv])}
        (SELECTION / f"{PREFIX}_choice.json").write_text(json.dumps(choice, indent=1) + "\n")
        print(json.dumps(choice, indent=1))
    if args.two_pass:
        chosen = json.loads((SELECTION / f"{PREFIX}_choice.json").read_text())["chosen_restart_words"]
        score_two_pass(state, chosen or 3, args.partials)


if __name__ == "__main__":
    main()
