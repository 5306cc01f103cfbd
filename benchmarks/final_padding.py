"""The two-pass end-of-stream pass's padding, decided on dev: openai-whisper's 30 s against faster-whisper's.

    python benchmarks/final_padding.py --set real & python benchmarks/final_padding.py --set synthetic
    python benchmarks/final_padding.py --choose      # → benchmarks/results/selection/dev_final_padding_choice.json

Why: on the real dev split the served two-pass scored 27.9 % where offline faster-whisper scores 20.6 %, and most of
the gap was single spoken digits (FSDD: 93 errors on 180 words, faster-whisper 54): "zero" came out as "See you,
bro." or "You don't.". The last pass decides them (they are too short for a mid-stream pass to finalise anything),
and it pads as openai-whisper does ("pad30": the log-mel of the audio followed by 30 s of silence); our own offline Whisper row
says the same words. faster-whisper computes the log-mel of the audio alone and pads the *features* with zeros
("pad30_features", ``training.hush_word.transcribe.condition_mel``), and says "zero".

Arms: the served spec (``selection/served_two_pass.json``) with ``final_verifier`` "pad30" (served) and
"pad30_features", live feeding, on the real `dev` split and the synthetic dev set, paired.
Rule, written before the run: "pad30_features" replaces "pad30" where real-dev WER is separably lower, synthetic-dev
WER is not separably higher and the median final-word latency on real dev is not separably higher.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

SELECTION = Path(__file__).resolve().parent / "results" / "selection"
ARMS = ("pad30", "pad30_features")
PREFIX = "dev_final_padding"


def score(state: dict, which: str) -> None:
    from benchmarks.common import score_served_arms

    score_served_arms(state, which, {f"two-pass served, last pass {arm}": {"final_verifier": arm} for arm in ARMS},
                      PREFIX)


def choose() -> dict:
    from benchmarks.common import selection_result

    rows = {}
    for which in ("real", "synthetic"):
        result = selection_result(PREFIX, which)
        new, ref = result["systems"][1], result["systems"][0]
        rows[which] = {"wer": new["wer"], "pad30_wer": ref["wer"],
                       "wer_vs_pad30_ci95": new["vs_reference"]["wer"]["ci95"],
                       "word_latency_ms_median": new["word_latency_ms_median"],
                       "pad30_word_latency_ms_median": ref["word_latency_ms_median"],
                       "latency_vs_pad30_ci95": new["vs_reference"]["word_latency_ms_median"]["ci95"]}
    better = (rows["real"]["wer_vs_pad30_ci95"][1] < 0 and rows["synthetic"]["wer_vs_pad30_ci95"][0] <= 0
              and rows["real"]["latency_vs_pad30_ci95"][0] <= 0)
    return {"chosen_final_verifier": ARMS[1] if better else ARMS[0], "rows": rows,
            "rule": "pad30_features replaces pad30 where real-dev WER is separably lower, synthetic-dev WER is not "
                    "separably higher and the median final-word latency on real dev is not separably higher"}


def main() -> None:
    from benchmarks.common import dev_choice_cli

    dev_choice_cli(__doc__, score, choose, PREFIX)


if __name__ == "__main__":
    main()
