"""Decoding options of the causal adapter alone, decided on dev over the recipe's four training seeds.

The adapters are the recipe's at seeds 1-4 from one training run (:class:`RecipeRuns`: ``lora_targets.py``'s recipe
arm, or ``seed_soup.py``'s recipe rows, trained again on a later machine's data build); the reference rows (the
option off) are that run's reports, so only the arms are scored here. WER is pooled over the seeds (one unit per
seed and utterance, an utterance's seeds resampled together, as ``benchmarks/gpu_screen.py`` pools). Used by
``stall_guard.py``, ``restart_context.py`` and ``n_check.py``, each with its own rule in its docstring.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import pooled_over_seeds

SELECTION = Path(__file__).resolve().parent / "results" / "selection"
SEEDS = (1, 2, 3, 4)
OFF = "off"
SETS = ("real", "synthetic")


def recipe_row_name(seed: int) -> str:
    return f"300 ms, LoRA recipe, seed {seed}"


@dataclass(frozen=True)
class RecipeRuns:
    """Where the recipe's seed adapters and their option-off dev rows are: ``<prefix>_choice.json`` names the
    adapters (``adapters[row(seed)]``); the rows are in one report per set and seed
    (``<prefix>[_synthetic]_seed<n>``) or, with ``per_seed`` False, one report per set (``<prefix>[_synthetic]``)."""

    prefix: str
    row: Callable[[int], str]
    per_seed: bool = True

    def adapter(self, seed: int) -> str:
        return json.loads((SELECTION / f"{self.prefix}_choice.json").read_text())["adapters"][self.row(seed)]

    def reference_row(self, key: str, seed: int) -> dict:
        """The option-off row for ``seed`` on set ``key`` ("real" / "synthetic")."""
        path = report_path(self.prefix, key, seed) if self.per_seed else set_report_path(self.prefix, key)
        report = json.loads(path.read_text())
        return next(r for r in report["systems"] if r["name"] == self.row(seed))


LORA_TARGETS = RecipeRuns("dev_lora_targets", recipe_row_name)
SEED_SOUP = RecipeRuns("dev_seed_soup", lambda seed: f"300 ms, recipe, seed {seed}", per_seed=False)


def pooled(by_seed: dict[int, dict], seeds: tuple[int, ...]) -> tuple[list[dict], dict]:
    """(one system's units pooled over ``seeds``, its pooled WER with its 95 % interval and per-seed WER);
    ``by_seed``: that system's report row per seed."""
    from evaluation.intervals import ci95

    units = pooled_over_seeds({s: by_seed[s]["per_utterance"] for s in seeds})
    return units, {"wer_pooled": sum(u["errors"] for u in units) / max(1, sum(u["ref_words"] for u in units)),
                   "ci95": list(ci95(units, "wer", groups="recording")),
                   "per_seed_wer": {str(s): by_seed[s]["wer"] for s in seeds}}


def train_recipe(state_arg: str, name: Callable[[int], str], seeds: tuple[int, ...] = SEEDS,
                 update: dict | None = None, **lora) -> tuple[dict, dict[str, str]]:
    """(dataset versions, {name(seed): adapter dir}): the 300 ms recipe (``benchmarks.distill.chosen_recipe`` with
    ``lora_targets.py``'s recipe targets, so the same config as its recipe arm) at every seed, with the LoRA settings
    ``lora`` and the config fields ``update`` over it (none: the recipe itself; joined clips are in it since
    2026-11-30, so an arm asked before that pins ``join`` off for its recipe rows). A finished run is reused by run
    key."""
    from benchmarks.distill import chosen_recipe
    from benchmarks.lora_targets import ARMS
    from training.causal.run import run_finetune

    data, _, cfg = chosen_recipe(state_arg)
    settings = cfg.lora.model_copy(update={"targets": ARMS["recipe"], **lora})
    adapters = {}
    for seed in seeds:
        summary = run_finetune(cfg.for_chunk(300).model_copy(update={**(update or {}), "seed": seed,
                                                                     "lora": settings}))
        adapters[name(seed)] = summary["adapter_dir"]
        print("trained", name(seed), summary["adapter_dir"], summary["metrics"], flush=True)
    return data, adapters


def score_adapters(data: dict, adapters: dict[str, str], prefix: str, reference: str) -> dict[str, dict]:
    """Each adapter alone (row name → adapter dir), causal greedy at 300 ms, live feeding, on the real dev split and
    the synthetic dev set, in one run per set; one report per set (``selection/<prefix>[_synthetic]``)."""
    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec

    results = {}
    for key, dataset in zip(SETS, (data["real"], data["kokoro_dev"])):
        units = load_split([dataset], ["dev"])
        specs = [SystemSpec(name, "causal", 300, adapter_dir=path) for name, path in adapters.items()]
        results[key] = evaluate_systems(specs, units, test_set=describe([dataset], ["dev"], units),
                                        reference=reference)
        results[key]["command"] = " ".join(["python", *sys.argv])
        write_report(results[key], SELECTION, set_report_path(prefix, key).stem)
    return results


def set_report_path(prefix: str, key: str) -> Path:
    """The report of one dev set that holds every seed's rows (``selection/<prefix>[_synthetic].json``)."""
    return SELECTION / f"{prefix}{'' if key == 'real' else '_synthetic'}.json"


def report_path(prefix: str, key: str, seed: int) -> Path:
    return SELECTION / f"{prefix}{'' if key == 'real' else '_synthetic'}_seed{seed}.json"


def score_arms(state_path: str, prefix: str, arms: dict[str, dict], name: Callable[[str, int], str],
               seeds: tuple[int, ...] = SEEDS, recipe: RecipeRuns = LORA_TARGETS) -> None:
    """Every arm (label → SystemSpec fields over causal greedy 300 ms) on each seed's adapter, on the real dev
    split and the synthetic dev set; one report per set and seed (``selection/<prefix>[_synthetic]_seed<n>``)."""
    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec

    data = json.loads(Path(state_path).read_text())["datasets"]
    for key, dataset in zip(SETS, (data["real"], data["kokoro_dev"])):
        units = load_split([dataset], ["dev"])
        for seed in seeds:
            specs = [SystemSpec(name(label, seed), "causal", 300, adapter_dir=recipe.adapter(seed), **fields)
                     for label, fields in arms.items()]
            result = evaluate_systems(specs, units, test_set=describe([dataset], ["dev"], units),
                                      reference=specs[0].name)
            result["command"] = " ".join(["python", *sys.argv])
            write_report(result, SELECTION, report_path(prefix, key, seed).stem)


def scored_rows(prefix: str, labels: list[str], name: Callable[[str, int], str],
                seeds: tuple[int, ...] = SEEDS,
                recipe: RecipeRuns = LORA_TARGETS) -> dict[str, dict[str, dict[int, dict]]]:
    """``rows[set][label][seed]``: the reference rows under :data:`OFF` and every arm's row from its reports."""
    rows: dict[str, dict[str, dict[int, dict]]] = {}
    for key in SETS:
        rows[key] = {OFF: {s: recipe.reference_row(key, s) for s in seeds}}
        for seed in seeds:
            report = {r["name"]: r for r in json.loads(report_path(prefix, key, seed).read_text())["systems"]}
            for label in labels:
                rows[key].setdefault(label, {})[seed] = report[name(label, seed)]
    return rows


def pooled_choice(rows: dict[str, dict[str, dict[int, dict]]], seeds: tuple[int, ...] = SEEDS,
                  sets: tuple[str, ...] = SETS) -> tuple[dict, list]:
    """(per set of ``sets`` and arm: WER pooled over the seeds with its interval, per-seed WER and median and p90
    word latency, pooled partial rewrites, and the paired pooled difference to :data:`OFF`; the arms that qualify:
    real-dev difference with its interval below 0, synthetic-dev difference not above 0, lowest pooled real-dev WER
    first)."""
    from evaluation.intervals import compare

    out: dict = {}
    for key in sets:
        out[key], off_units = {}, None
        for label, by_seed in rows[key].items():  # OFF first
            units, entry = pooled(by_seed, seeds)
            entry |= {"per_seed_word_latency_ms_median": {str(s): by_seed[s].get("word_latency_ms_median")
                                                          for s in seeds},
                      "per_seed_word_latency_ms_p90": {str(s): by_seed[s].get("word_latency_ms_p90") for s in seeds},
                      "partial_rewrite_rate_pooled": sum(u.get("partials_rewritten", 0) for u in units)
                      / max(1, sum(u.get("partials_shown", 0) for u in units))}
            if label == OFF:
                off_units = units
            else:
                entry["minus_off"] = compare(units, off_units, "wer", groups="recording")
            out[key][label] = entry
    arms = [label for label in out["real"] if label != OFF]
    qualifying = sorted((a for a in arms if out["real"][a]["minus_off"]["ci95"][1] < 0
                         and out["synthetic"][a]["minus_off"]["ci95"][0] <= 0),
                        key=lambda a: out["real"][a]["wer_pooled"])
    return out, qualifying


def _cli_args(doc: str) -> argparse.Namespace:
    """``--state`` and ``--choose-only`` (the choice from the reports already written), described by ``doc``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--choose-only", action="store_true", help="the choice from the reports already written")
    return parser.parse_args()


def arms_cli(doc: str, prefix: str, arms: dict[str, dict], name: Callable[[str, int], str],
             recipe: RecipeRuns = LORA_TARGETS) -> tuple[dict, list]:
    """The command line of a decoding option with no settings of its own (``--state``, ``--choose-only``): score the
    arms unless only choosing, then :func:`pooled_choice` over the reports."""
    args = _cli_args(doc)
    if not args.choose_only:
        score_arms(args.state, prefix, arms, name, recipe=recipe)
    return pooled_choice(scored_rows(prefix, list(arms), name, recipe=recipe))


def trained_arm_cli(doc: str, prefix: str, train: Callable[[str], tuple[dict, dict[str, str]]],
                    choose: Callable[[], dict], reference: str) -> dict:
    """The command line of a recipe arm that trains its own adapters (``--state``, ``--choose-only``): train and
    score them unless only choosing, then ``choose()`` over the reports; the choice (with the adapters and dataset
    versions it was made on) is written to ``selection/<prefix>_choice.json`` and returned."""
    args = _cli_args(doc)
    path = SELECTION / f"{prefix}_choice.json"
    if args.choose_only:
        extra = {k: v for k, v in json.loads(path.read_text()).items() if k in ("adapters", "datasets")}
    else:
        data, adapters = train(args.state)
        score_adapters(data, adapters, prefix, reference)
        extra = {"adapters": adapters, "datasets": {k: data[k] for k in ("synth", "kokoro_train", "real",
                                                                         "kokoro_dev")}}
    choice = choose() | extra | {"command": " ".join(["python", *sys.argv])}
    path.write_text(json.dumps(choice, indent=1) + "\n")
    print(json.dumps({k: v for k, v in choice.items() if k != "rule"}, indent=1))
    return choice


def arm_vs_recipe(prefix: str, name: Callable[[int], str], seeds: tuple[int, ...] = SEEDS,
                  recipe: RecipeRuns = SEED_SOUP) -> dict[str, dict]:
    """Per dev set: a trained arm's rows (``name(seed)`` in ``selection/<prefix>[_synthetic]``) and the recipe's
    (``recipe``'s reference rows), each pooled over ``seeds``, and the paired pooled difference arm minus recipe
    (an utterance's seeds resampled together)."""
    from evaluation.intervals import compare

    out: dict = {}
    for key in SETS:
        rows = {r["name"]: r for r in json.loads(set_report_path(prefix, key).read_text())["systems"]}
        arm_rows = {s: rows[name(s)] for s in seeds}
        ref_rows = {s: recipe.reference_row(key, s) for s in seeds}
        (arm_units, arm), (ref_units, ref) = pooled(arm_rows, seeds), pooled(ref_rows, seeds)
        out[key] = {"arm_rows": arm_rows, "recipe_rows": ref_rows, "arm": arm, "recipe": ref,
                    "minus_recipe": compare(arm_units, ref_units, "wer", groups="recording")}
    return out


def arm_chosen(compared: dict[str, dict]) -> bool:
    """The trained arms' rule: pooled real-dev difference with its interval below 0, synthetic not above 0."""
    return (compared["real"]["minus_recipe"]["ci95"][1] < 0
            and compared["synthetic"]["minus_recipe"]["ci95"][0] <= 0)
