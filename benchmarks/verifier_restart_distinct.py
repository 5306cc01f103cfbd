"""The verifier's restart cut with two different words (``verifier_restart_distinct``), decided on dev.

    python benchmarks/verifier_restart_distinct.py --set real && python benchmarks/verifier_restart_distinct.py --set synthetic
    python benchmarks/dev_longform.py --spec <served spec + "verifier_restart_distinct": 2> --label "two different words" \
        --merge benchmarks/results/selection/dev_longform_verifier_restart.json --name dev_longform_verifier_restart_distinct
    python benchmarks/verifier_restart_distinct.py --choose   # → selection/dev_verifier_restart_distinct_choice.json

Why: the 2-word cut (``verifier_restart.py``) also holds back a repeat said aloud. On the continuous dev streams of
joined spoken digits ("zero zero zero …") it took 51 → 66 errors: "0 0" again counted as a restart, so no zero was
final before the segment's last pass. A restart says again a run of *different* words ("Montreal Forest,"); the
module's design already treats one word said again as speech. ``verifier_restart_distinct`` 2: only a run of two
different words counts.

Arms: the served spec (2-word cut) against the same with ``verifier_restart_distinct`` 2, live feeding, on the real
`dev` split and the synthetic dev set; fixed feeding on the continuous dev streams.
Rule, written before the run: two different words replace the plain cut unless real-dev, synthetic-dev or
continuous-stream WER is separably higher than the plain cut's (a repeat said aloud is speech, the design's premise).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

SELECTION = Path(__file__).resolve().parent / "results" / "selection"
PREFIX = "dev_verifier_restart_distinct"
PLAIN, DISTINCT = "two-pass served, verifier restart cut 2 words", "two-pass served, restart cut 2 different words"
LONGFORM = "dev_longform_verifier_restart_distinct"


def score(state: dict, which: str) -> None:
    from benchmarks.common import score_served_arms

    score_served_arms(state, which, {PLAIN: {"verifier_restart_words": 2},
                                     DISTINCT: {"verifier_restart_words": 2, "verifier_restart_distinct": 2}}, PREFIX)


def choose() -> dict:
    from benchmarks.common import selection_result
    from evaluation.intervals import compare

    sets: dict[str, dict] = {}
    for which in ("real", "synthetic"):
        rows = {r["name"]: r for r in selection_result(PREFIX, which)["systems"]}
        sets[which] = {"plain_wer": rows[PLAIN]["wer"], "distinct_wer": rows[DISTINCT]["wer"],
                       "distinct_vs_plain_ci95": rows[DISTINCT]["vs_reference"]["wer"]["ci95"],
                       "plain_latency_ms_median": rows[PLAIN]["word_latency_ms_median"],
                       "distinct_latency_ms_median": rows[DISTINCT]["word_latency_ms_median"]}
    streams = json.loads((SELECTION / f"{LONGFORM}.json").read_text())["systems"]
    plain = next(r for r in streams if r["spec"].get("verifier_restart_words") == 2
                 and not r["spec"].get("verifier_restart_distinct"))
    distinct = next(r for r in streams if r["spec"].get("verifier_restart_distinct") == 2)
    sets["streams"] = {"plain_wer": plain["wer"], "distinct_wer": distinct["wer"],
                       "distinct_vs_plain_ci95": compare(distinct["per_utterance"], plain["per_utterance"],
                                                         "wer")["ci95"],
                       "plain_latency_ms_median": plain["word_latency_ms_median"],
                       "distinct_latency_ms_median": distinct["word_latency_ms_median"]}
    worse = [k for k, v in sets.items() if v["distinct_vs_plain_ci95"][0] > 0]
    return {"chosen_verifier_restart_distinct": 1 if worse else 2, "separably_worse_on": worse, "sets": sets,
            "rule": "two different words replace the plain 2-word cut unless real-dev, synthetic-dev or "
                    "continuous-stream WER is separably higher than the plain cut's"}


def main() -> None:
    from benchmarks.common import dev_choice_cli

    dev_choice_cli(__doc__, score, choose, PREFIX)


if __name__ == "__main__":
    main()
