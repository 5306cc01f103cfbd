"""The two-pass verifier's restart cut (``verifier_restart_words``), decided on dev.

    python benchmarks/verifier_restart.py --set real && python benchmarks/verifier_restart.py --set synthetic
    python benchmarks/verifier_restart.py --choose   # → benchmarks/results/selection/dev_verifier_restart_choice.json

Why: with the spontaneous speech shared into the dev split (``selection/dev_domains.md``), the served two-pass scored
68.0 % on it where offline faster-whisper scores 35.4 % (+32.5 points [+3.5, +127.5]). Read on dev: a mid-stream
pass hears the audio then 5 s of zeros and fills them by saying the sentence again; two passes in a row say it alike,
so self-agreement made the restart final ("Montreal Forest, what's called a liner." four times over a 5 s clip).
``verifier_restart_words`` n: a mid-stream pass finalises nothing from the first run of n words in a row that say
again what is written (``streaming.events.restart_at``, the last 12 words, as the shown partials use it).

Arms: the served spec (``selection/served_two_pass.json``) with the cut off, at 2 and at 3 words, live feeding, on the
real `dev` split and the synthetic dev set, paired with the arm off.
Rule, written before the run: the smallest n whose real-dev WER is separably lower than off, whose synthetic-dev WER
is not separably higher, and whose median final-word latency on real dev is not separably higher; none: off.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

SELECTION = Path(__file__).resolve().parent / "results" / "selection"
ARMS = (0, 2, 3)
PREFIX = "dev_verifier_restart"


def row_name(n: int) -> str:
    return f"two-pass served, verifier restart cut {n} words" if n else "two-pass served, no verifier restart cut"


def score(state: dict, which: str) -> None:
    from benchmarks.common import score_served_arms

    score_served_arms(state, which, {row_name(n): {"verifier_restart_words": n} for n in ARMS}, PREFIX)


def choose() -> dict:
    from benchmarks.common import selection_result

    arms: dict[str, dict] = {}
    for which in ("real", "synthetic"):
        result = selection_result(PREFIX, which)
        rows = {r["name"]: r for r in result["systems"]}
        off = rows[row_name(0)]
        for n in ARMS[1:]:
            r = rows[row_name(n)]
            arms.setdefault(str(n), {})[which] = {
                "wer": r["wer"], "off_wer": off["wer"], "wer_vs_off_ci95": r["vs_reference"]["wer"]["ci95"],
                "word_latency_ms_median": r["word_latency_ms_median"],
                "off_word_latency_ms_median": off["word_latency_ms_median"],
                "latency_vs_off_ci95": r["vs_reference"]["word_latency_ms_median"]["ci95"],
                "partial_rewrite_rate": r.get("partial_rewrite_rate"),
                "off_partial_rewrite_rate": off.get("partial_rewrite_rate")}
    chosen = next((n for n in ARMS[1:]
                   if arms[str(n)]["real"]["wer_vs_off_ci95"][1] < 0
                   and arms[str(n)]["synthetic"]["wer_vs_off_ci95"][0] <= 0
                   and arms[str(n)]["real"]["latency_vs_off_ci95"][0] <= 0), 0)
    return {"chosen_verifier_restart_words": chosen, "arms": arms,
            "rule": "the smallest n whose real-dev WER is separably lower than off, whose synthetic-dev WER is not "
                    "separably higher, and whose median final-word latency on real dev is not separably higher; "
                    "none: off"}


def main() -> None:
    from benchmarks.common import dev_choice_cli

    dev_choice_cli(__doc__, score, choose, PREFIX)


if __name__ == "__main__":
    main()
