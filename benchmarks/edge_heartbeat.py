"""``hold_last_edge_ms`` with a heartbeat (``heartbeat_ms``), decided on dev.

    python benchmarks/edge_heartbeat.py --set streams
    python benchmarks/edge_heartbeat.py --set real && python benchmarks/edge_heartbeat.py --set synthetic
    python benchmarks/edge_heartbeat.py --choose   # → selection/dev_edge_heartbeat_choice.json

Why, from the two runs before it (``heartbeat.py``, ``hold_last_edge.py``; neither setting was adopted): alone,
an edge of 300 ms *raised* the streams' median final-word latency (LJSpeech 757 → 2,911 ms). A word finalised at
once leaves the pass no open word; with the causal tail empty too (the served causal pass, the original weights
block-causal, often writes nothing) ``_worth_a_pass`` asks the verifier nothing more until the causal engine
writes again: the stall the heartbeat was built for. Alone, the heartbeat helped little, because the held last
word kept the passes going everywhere but on the spoken digits. Together they may do what neither did.

Arms: the served spec against an edge of 300 ms with a heartbeat of 600 ms and of 1,000 ms; fixed feeding on the
continuous dev streams, live feeding on the real `dev` split and the synthetic dev set.
Rule, written before the run (``benchmarks.common.latency_choice``, the settings being the heartbeats): a pair
qualifies when its WER is not separably higher than the served spec's on real dev, synthetic dev and the streams,
its streams RTF is ≤ 0.5, and its streams median final-word latency is separably lower than the served spec's. Of
the qualifying, the one with the lowest streams latency, unless it is not separably sooner than the longer
heartbeat: then the longer (fewer passes). None qualifies: neither is served. A third try at one question on the
same dev streams: an adopted pair must also pass on real and synthetic dev, which the streams run did not see.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

EDGE_MS = 300
HEARTBEATS_MS = (600, 1000)

if __name__ == "__main__":
    from benchmarks.common import latency_choice_cli

    latency_choice_cli(__doc__, "dev_edge_heartbeat", "two-pass served",
                       {h: (f"two-pass served, last word final {EDGE_MS} ms clear of the edge, heartbeat {h} ms",
                            {"hold_last_edge_ms": EDGE_MS, "heartbeat_ms": h}) for h in HEARTBEATS_MS},
                       "chosen_heartbeat_ms", max_rtf=0.5, hold_last_edge_ms=EDGE_MS)
