"""The served two-pass recognizer's precision (both passes' Linear layers), decided on dev for compute.

    python benchmarks/verifier_precision.py --set streams
    python benchmarks/verifier_precision.py --set real && python benchmarks/verifier_precision.py --set synthetic
    python benchmarks/verifier_precision.py --choose   # → selection/dev_verifier_precision_choice.json

Why: the served spec runs both passes in bf16 (chosen over float32 on dev, `selection/dev_serving.*`); int8 was
measured for the causal engine alone (`benchmarks/results/streaming.md`: a step 8.5 → 6.5 ms) but never for the
two-pass recognizer, whose verifier is about 70 % of a stream's compute. Compute per stream is what holds serving
at 2–3 real-time two-pass streams on 2 cores (`serve_load.md`; the issue asks for 8).

Arms: the served spec (bf16-all) against int8 dynamic quantization of the encoders' Linear layers
(``int8-encoder``) and of every Linear layer (``int8-all``) (``streaming.quantize``), in both passes; fixed
feeding on the continuous dev streams, live feeding on the real `dev` split and the synthetic dev set.
Rule, written before the run (``benchmarks.common.compute_choice``): a precision qualifies when, on real dev,
synthetic dev and the streams each, the upper end of the 95 % interval of its WER minus the served spec's is at
most 1.0 point (a non-inferiority margin: "not separably worse" alone let a change through on dev that cost 4
points on test, 2026-11-29), its streams RTF is separably lower and its streams median final-word latency is not
separably higher. Of the qualifying, the lowest streams RTF. None qualifies: bf16 stays.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

PREFIX = "dev_verifier_precision"
REFERENCE = "two-pass served (bf16-all)"
PRECISIONS = ("int8-encoder", "int8-all")
WER_MARGIN = 0.01


def arms() -> dict[str, tuple[str, dict]]:
    return {p: (f"two-pass served, {p}", {"precision": p}) for p in PRECISIONS}


if __name__ == "__main__":
    from benchmarks.common import compute_choice, dev_choice_cli, rule_text, score_served_arms

    def score(state: dict, which: str) -> None:
        score_served_arms(state, which, {REFERENCE: {}} | dict(arms().values()), PREFIX)

    def choose() -> dict:
        choice = compute_choice(PREFIX, REFERENCE, {p: name for p, (name, _) in arms().items()}, WER_MARGIN)
        return {"chosen_precision": choice.pop("chosen"), **choice,
                "rule": rule_text(__doc__)}

    dev_choice_cli(__doc__, score, choose, PREFIX)
