"""The two-pass ``hold_last_edge_ms``: when the verifier's last word is final without waiting a pass, decided on dev.

    python benchmarks/hold_last_edge.py --set streams
    python benchmarks/hold_last_edge.py --set real && python benchmarks/hold_last_edge.py --set synthetic
    python benchmarks/hold_last_edge.py --choose   # → selection/dev_hold_last_edge_choice.json

Why: ``hold_last`` never finalises the last word of a pass (the audio's edge may cut inside it), so every word
waits at least one more pass. Tracing a dev stream of one spoken digit said 50 times showed the other cost: the
mid-stream loop cut leaves a pass two open words at most, and self-agreement then finalised one repeat per two
passes (600 ms), slower than they were said (about 400 ms each), so the finals fell further behind all along.
``hold_last_edge_ms``: a last word the verifier's own alignment ends at least that far before the audio's end
is not cut by the edge, and need not wait.

Arms: the served spec (the last word always held) against an edge of 300 ms and of 600 ms; fixed feeding on the
continuous dev streams, live feeding on the real `dev` split and the synthetic dev set.
Rule, written before the run (``benchmarks.common.latency_choice``): an edge qualifies when its WER is not
separably higher than the served spec's on real dev, synthetic dev and the streams, its streams RTF is ≤ 0.5, and
its streams median final-word latency is separably lower than the served spec's. Of the qualifying, the one with
the lowest streams latency, unless it is not separably sooner than the larger edge: then the larger (the cautious
end). None qualifies: the last word stays held.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

EDGES_MS = (300, 600)

if __name__ == "__main__":
    from benchmarks.common import latency_choice_cli

    latency_choice_cli(__doc__, "dev_hold_last_edge", "two-pass served, last word held",
                       {e: (f"two-pass served, last word final {e} ms clear of the edge", {"hold_last_edge_ms": e})
                        for e in EDGES_MS}, "chosen_hold_last_edge_ms", max_rtf=0.5)
