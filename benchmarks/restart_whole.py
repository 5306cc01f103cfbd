"""The verifier restart cut made sharper (``verifier_restart_whole``), judged on the tail of final-word latency, on dev.

    python benchmarks/restart_whole.py --set streams
    python benchmarks/restart_whole.py --set real && python benchmarks/restart_whole.py --set synthetic
    python benchmarks/restart_whole.py --choose   # → selection/dev_restart_whole_choice.json

Why: the served spec's p90 final-word latency on the continuous dev streams is 7.7 s (median 742 ms). One cause,
found with a dev trace (`benchmarks/trace_two_pass.py LJ001-0015`): the verifier restart cut (2 different words said
again within the last 12 final words) read a sentence's second "should be" ("letters should be beautiful ... should
be reasonable") as Whisper restarting and cut every pass to nothing for 4 s. A 3-word cut let the words flow but lost
words past the margin (`selection/dev_restart_tail_choice.json`). Whisper's restarts say the sentence *again*: the
run goes on saying what followed its first saying, until that reaches where the run starts or the pass's words end.
A sentence that says two words twice goes its own way after them. ``verifier_restart_whole`` counts only the former.

Arms: the served spec (2 words, any run) against the same cut counting only whole restarts; fixed feeding on the
continuous dev streams, live feeding on the real `dev` split and the synthetic dev set.
Rule, written before the run: the whole-restart cut replaces the served one when, on real dev, synthetic dev and the
streams each, the upper end of the 95 % interval of its WER minus the served spec's is at most 1.0 point (a
non-inferiority margin); its pooled p90 final-word latency is not separably higher on real dev or the streams, and
separably lower on at least one of them; and its streams median final-word latency is not separably higher
(``benchmarks.common.tail_choice``, the rule of ``restart_tail.py``). Otherwise the served cut stays.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

PREFIX = "dev_restart_whole"
REFERENCE = "two-pass served (restart cut: any run of 2)"
ARM = "two-pass served, restart cut: whole restarts only"
WER_MARGIN = 0.01


if __name__ == "__main__":
    from benchmarks.common import tail_choice_cli

    tail_choice_cli(__doc__, PREFIX, REFERENCE, ARM, {"verifier_restart_whole": True}, WER_MARGIN,
                    "chosen_verifier_restart_whole", True, False)
