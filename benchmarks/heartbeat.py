"""The two-pass verifier's heartbeat (``heartbeat_ms``), decided on dev.

    python benchmarks/heartbeat.py --set real && python benchmarks/heartbeat.py --set synthetic
    python benchmarks/heartbeat.py --set streams
    python benchmarks/heartbeat.py --choose   # → selection/dev_heartbeat_choice.json

Why: on the continuous dev streams the median final-word latency was 1.2 s (issue 27's bar: 1.0 s), and the
joined spoken-digit streams ("zero" said 50 times in a row) made it: 3.3-7.5 s per stream. There the causal engine
stops writing the repeats; with its tail empty and a pass that found no open word, ``_worth_a_pass`` never asks
the verifier again, and every repeat waits for the segment's end (latencies falling from 25 s to 0). A heartbeat
runs a pass once ``heartbeat_ms`` of audio that is not quiet arrived since the last one.

Arms: the served spec (no heartbeat) against a heartbeat of 1 s and of 2 s; live feeding on the real `dev` split
and the synthetic dev set, fixed feeding on the continuous dev streams.
Added after the streams run: each condition of the rule must hold, and on the streams no heartbeat was separably
sooner, so the real and synthetic runs were not made (``sets_not_scored``): they could not change the outcome.
Rule, written before the run: a heartbeat qualifies when its WER is not separably higher than no heartbeat's on
real dev, synthetic dev and the streams, its streams RTF is ≤ 0.5, and its streams median final-word latency is
separably lower than no heartbeat's (else it is cost for nothing). Of the qualifying, the one with the lowest
streams latency, unless its latency is not separably lower than the longer heartbeat's: then the longer one (fewer
passes). None qualifies: no heartbeat.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

HEARTBEATS_MS = (1000, 2000)

if __name__ == "__main__":
    from benchmarks.common import latency_choice_cli

    latency_choice_cli(__doc__, "dev_heartbeat", "two-pass served, no heartbeat",
                       {h: (f"two-pass served, heartbeat {h} ms", {"heartbeat_ms": h}) for h in HEARTBEATS_MS},
                       "chosen_heartbeat_ms", max_rtf=0.5)
