"""Issue 66, item 5: the EMMA sweep on the release's adopted adapter, for the dev decision that says whether EMMA
joins the champion candidates (``docs/decisions/pending/emma-adopted.yaml``).

    python -m benchmarks.emma_release          # sweep (Prefect → Ray Tune → MLflow) over the state's adapter
    python -m benchmarks.decide docs/decisions/pending/emma-adopted.yaml \
        --adapter <state adapter> --emma <the policy this printed>

One policy is trained (configs/smoke.yaml's ``emma_sweep.base``: 80 steps, alignment supervision, the mean rule) on
the adopted recipe's training sets, over the adopted adapter; the thresholds are scored on the first
``--validation-limit`` dev utterances (the sweep's own dashboard and its threshold trade); the decision then scores
the chosen arms on the whole real + L2 dev split, live-fed. The policy folder goes to the state's
``artifacts.emma``. Nothing here touches test.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from benchmarks.evaluation import REPO, _eval_sets, _save, _state, _train_sets

THRESHOLDS = (0.2, 0.3, 0.4, 0.5)


def sweep_config(state: dict, out: Path, tracking: str, validation_limit: int):
    from configs.emma import load_sweep_config

    adapter = state["artifacts"]["adapter"]["adapter_dir"]
    base = {"model": "tiny.en", "chunk_ms": 300, "datasets": tuple(_train_sets(state)),
            "validation_datasets": tuple(_eval_sets(state)), "encoder": "causal_lora", "adapter_dir": adapter,
            "tracking_uri": tracking, "output_dir": str(out / "emma"), "validation_limit": validation_limit}
    return load_sweep_config(str(REPO / "configs" / "smoke.yaml"), base, t_emma=THRESHOLDS, lambda_latency=(0.05,),
                             lambda_variance=(0.1,), policy_store=str(out / "emma" / "policies"),
                             storage_path=str(out / "ray-tune"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="outputs/bench-evaluation")
    parser.add_argument("--validation-limit", type=int, default=120)
    args = parser.parse_args()
    out = Path(args.out).resolve()
    os.environ.setdefault("PREFECT_HOME", str(out / ".prefect"))
    state = _state(out)
    if "adapter" not in state.get("artifacts", {}):
        raise SystemExit(f"no adopted adapter in {out / 'state.json'}: run `python -m benchmarks.evaluation train`")
    from data.tracking import client
    from flows.sweep_emma import run_sweep_flow
    from training.emma.dashboard import trial_rows

    sweep = sweep_config(state, out, f"sqlite:///{out / 'mlflow.db'}", args.validation_limit)
    result = run_sweep_flow(sweep)  # a sweep finished before is not re-run: its trials are read back from MLflow
    rows = trial_rows(result["tracking_uri"], result["parent_run_id"])
    mlflow = client(result["tracking_uri"])
    policies = {mlflow.get_run(r["run_id"]).data.tags.get("policy_dir") for r in rows}  # each trial's policy
    if len(policies) != 1 or None in policies:
        raise SystemExit(f"expected the sweep's trials to share one trained policy, got {sorted(map(str, policies))}")
    keep = ("t_emma", "wer", "al_ms", "pareto")
    state.setdefault("artifacts", {})["emma"] = {
        "emma_dir": policies.pop(), "sweep_run_id": result["parent_run_id"], "validation_limit": args.validation_limit,
        "trials": [{k: r.get(k) for k in keep} for r in rows]}
    _save(out, state)
    print(json.dumps(state["artifacts"]["emma"], indent=1, default=str))


if __name__ == "__main__":
    main()
