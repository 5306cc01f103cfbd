"""Does EMMA earn its place among the champion candidates? Decided on dev.

    python benchmarks/emma_choice.py --state outputs/bench27/state.json   # → results/selection/dev_emma.*

EMMA (WhisperEMMA's monotonic read/write policy) exists to write earlier than the stability rule at the same WER.
Trained here as issue 28 asks: on top of the best causal adapter on dev (``selection/dev_distill_choice.json``:
the same `train` splits, the exact decoder cache at decoding), with the recipe that led the held-in sweep
(``benchmarks/evidence.train_emma``: p_choose + value projections, alignment supervision, mean decision).

Scored on the real `dev` split at 300 ms, each EMMA threshold (``selection.T_EMMA``) paired with the same adapter
under the stability rule (greedy, ``n_check`` 2). Rule: EMMA stays a champion candidate only where some threshold's
median final-word latency is separably lower than the stability rule's (the 95 % interval of the paired difference
lies below 0) at a WER not separably higher (the interval of the WER difference includes 0 or lies below it);
else the pipeline leaves it out of the candidates it registers (``PipelineConfig.emma_candidate``).
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


def choose(result: dict, reference: str) -> dict:
    """The rule of the module docstring over the dev evaluation's rows."""
    rows = {r["name"]: r for r in result["systems"]}
    verdicts = {}
    for name, row in rows.items():
        if name == reference:
            continue
        vs = row["vs_reference"]
        wer_ci, lat_ci = vs["wer"]["ci95"], vs["word_latency_ms_median"]["ci95"]
        verdicts[name] = {"wer": row["wer"], "word_latency_ms_median": row["word_latency_ms_median"],
                          "word_latency_ms_p90": row["word_latency_ms_p90"], "wer_vs_stability_ci95": wer_ci,
                          "latency_vs_stability_ci95": lat_ci, "on_the_front": lat_ci[1] < 0 and wer_ci[0] <= 0}
    ref = rows[reference]
    return {"emma_candidate": any(v["on_the_front"] for v in verdicts.values()),
            "stability_rule": {k: ref[k] for k in ("wer", "word_latency_ms_median", "word_latency_ms_p90")},
            "emma": verdicts,
            "rule": "EMMA stays a champion candidate only where a threshold's median final-word latency is separably "
                    "lower than the stability rule's on the same adapter at a WER not separably higher"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench27/state.json")
    parser.add_argument("--steps", type=int, default=80)
    args = parser.parse_args()

    from benchmarks.evidence import train_emma
    from benchmarks.selection import T_EMMA
    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec

    state_path = Path(args.state).resolve()
    state = json.loads(state_path.read_text())
    data = state["datasets"]
    distill = json.loads((SELECTION / "dev_distill_choice.json").read_text())
    adapter = distill["adapters"][distill["chosen"]]
    out = state_path.parent / "emma-choice"
    out.mkdir(parents=True, exist_ok=True)
    emma = train_emma([data["synth"], data["kokoro_train"]], data["real"], adapter, out, args.steps,
                      f"sqlite:///{out / 'mlflow.db'}")
    reference = f"{distill['chosen']} (stability rule)"
    specs = [SystemSpec(reference, "causal", 300, adapter_dir=adapter)]
    specs += [SystemSpec(f"EMMA 300 ms t_emma {t}", "causal", 300, adapter_dir=adapter, emma_dir=emma["policy_dir"],
                         t_emma=t) for t in T_EMMA]
    units = load_split([data["real"]], ["dev"])
    result = evaluate_systems(specs, units, test_set=describe([data["real"]], ["dev"], units), reference=reference)
    result["command"] = " ".join(["python", *sys.argv])
    choice = choose(result, reference) | {"adapter": adapter, "policy_dir": emma["policy_dir"], "steps": args.steps,
                                          "train_wall_s": emma["train_wall_s"], "command": result["command"]}
    write_report(result, SELECTION, "dev_emma")
    (SELECTION / "dev_emma_choice.json").write_text(json.dumps(choice, indent=1) + "\n")
    print(json.dumps(choice, indent=1))


if __name__ == "__main__":
    main()
