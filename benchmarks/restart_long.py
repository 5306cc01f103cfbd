"""The verifier restart cut counting whole restarts and long runs (``verifier_restart_whole`` with
``verifier_restart_long`` 4), judged on the tail of final-word latency, on dev.

    python benchmarks/restart_long.py --set synthetic
    python benchmarks/restart_long.py --set streams && python benchmarks/restart_long.py --set real
    python benchmarks/restart_long.py --choose   # → selection/dev_restart_long_choice.json

Why: whole restarts only (`restart_whole.py`, `selection/dev_restart_whole_choice.json`) let a sentence that says two
words twice flow (real dev p90 1,206 → 1,039 ms, separably lower, the same words; the streams 7,446 → 3,650 ms) but
lost words on synthetic dev, +0.8 points [+0.2, +2.1], past the 1-point margin. The three utterances that lost them
were Whisper saying the whole sentence again, not counted as a restart because the first saying differed somewhere:
a word split ("sand castle" ... "sandcastle") or a word said twice ("City Hospital. Hospital. Her brother ...").
Those runs went on for 5 and 9 words; "should be" said twice is 2. So a run counts when it is whole or when it goes
on for 4 words in all (the length fixed before the run: one arm).

Arms: the served spec (2 words, any run) against whole restarts or runs of 4; fixed feeding on the continuous dev
streams, live feeding on the real `dev` split and the synthetic dev set.
Rule, written before the run: the whole-or-long cut replaces the served one when, on real dev, synthetic dev and the
streams each, the upper end of the 95 % interval of its WER minus the served spec's is at most 1.0 point (a
non-inferiority margin); its pooled p90 final-word latency is not separably higher on real dev or the streams, and
separably lower on at least one of them; and its streams median final-word latency is not separably higher
(``benchmarks.common.tail_choice``, the rule of ``restart_tail.py`` and ``restart_whole.py``). Otherwise the served
cut stays.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

PREFIX = "dev_restart_long"
REFERENCE = "two-pass served (restart cut: any run of 2)"
ARM = "two-pass served, restart cut: whole restarts or runs of 4"
FIELDS = {"verifier_restart_whole": True, "verifier_restart_long": 4}
WER_MARGIN = 0.01


if __name__ == "__main__":
    from benchmarks.common import tail_choice_cli

    tail_choice_cli(__doc__, PREFIX, REFERENCE, ARM, FIELDS, WER_MARGIN, "chosen", FIELDS, None)
