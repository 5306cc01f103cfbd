"""The verifier restart cut's length (``verifier_restart_words``) judged on the tail of final-word latency, on dev.

    python benchmarks/restart_tail.py --set streams
    python benchmarks/restart_tail.py --set real && python benchmarks/restart_tail.py --set synthetic
    python benchmarks/restart_tail.py --choose   # → selection/dev_restart_tail_choice.json

Why: the served cut (2 distinct words said again within the last 12 final words, `selection/dev_verifier_restart*`)
was chosen as "the smallest n that qualifies" on WER and *median* latency, where 2 and 3 words were alike (real dev
24.73 against 24.95 %, 575 against 578 ms). A dev trace (`benchmarks/trace_two_pass.py LJ001-0015`) shows its cost
in the tail: a sentence that says "should be" twice had its second "should be ..." read as Whisper restarting, and
every pass was cut to nothing for 4 s, to the utterance's end. With 3 words the words flowed.

Arms: the served spec (2 words) against 3 words; fixed feeding on the continuous dev streams, live feeding on the
real `dev` split and the synthetic dev set.
Rule, written before the run: 3 words replaces 2 when, on real dev, synthetic dev and the streams each, the upper
end of the 95 % interval of its WER minus the served spec's is at most 1.0 point (a non-inferiority margin); its
pooled p90 final-word latency is not separably higher on real dev or the streams, and separably lower on at least
one of them; and its streams median final-word latency is not separably higher. Otherwise 2 words stay.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

PREFIX = "dev_restart_tail"
REFERENCE = "two-pass served (restart cut 2 words)"
ARM = "two-pass served, restart cut 3 words"
WER_MARGIN = 0.01


if __name__ == "__main__":
    from benchmarks.common import tail_choice_cli

    tail_choice_cli(__doc__, PREFIX, REFERENCE, ARM, {"verifier_restart_words": 3}, WER_MARGIN,
                    "chosen_verifier_restart_words", 3, 2)
