"""The verifier's end-of-text at the first open word (``verifier_first_eot_min_prob`` 0.5), judged on the tail of
final-word latency, on dev.

    python benchmarks/first_eot.py --set streams && python benchmarks/first_eot.py --set real
    python benchmarks/first_eot.py --set synthetic
    python benchmarks/first_eot.py --choose   # → selection/dev_first_eot_choice.json

Why: the continuous dev streams' p90 final-word latency is about 4 s (`selection/dev_restart_long_choice.json`). Read
on a dev trace (`trace_two_pass.py LJ001-0001+15`): after a segment's first final words "for your hand.", 12
mid-stream passes in a row (3.6 s of speech) heard nothing. Each ended the text at its first open token, end-of-text
at probability 0.2-0.6 with " Simpl" / " Sim" next, and 15 words waited up to 11.8 s. The arm lets a mid-stream pass
with a forced prefix end there only when end-of-text is more likely than every other token together (p ≥ 0.5, fixed
before the run: one arm); otherwise the likeliest other token starts the open words, which stay open until a later
pass agrees. The last pass keeps Whisper's own end.

Arms: the served spec against the same with the option; fixed feeding on the continuous dev streams, live feeding on
the real `dev` split and the synthetic dev set.
Rule, written before the run (``benchmarks.common.tail_choice``, the rule of ``restart_tail.py``, ``restart_whole.py``
and ``restart_long.py``): the option joins the served spec when, on real dev, synthetic dev and the streams each, the
upper end of the 95 % interval of its WER minus the served spec's is at most 1.0 point (a non-inferiority margin);
its pooled p90 final-word latency is not separably higher on real dev or the streams, and separably lower on at least
one of them; and its streams median final-word latency is not separably higher. Otherwise the served spec stays.

Result (after the run; `selection/dev_first_eot*`): **not adopted**. On the streams (scored first) the WER went
21.78 → 27.39 % (+5.6 points [−0.2, +19.4], past the margin), so real and synthetic dev were not scored. The trace's
stream did what was meant (LJ001-0001+15: p90 1,379 → 903 ms, the longest wait 11.3 → 2.0 s), but on the
spontaneous stream (mfa_cold_corpus3+21) a pass that went on past a likely end ran into a loop ("P-P-P -P-P ...") that
two passes then agreed on: 63 → 107 errors. Scored at commit 86f7a6f: the option has since been given a guard (a pass
that went on and then loops or echoes the final words hears nothing), judged in `first_eot_guard.py`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

PREFIX = "dev_first_eot"
REFERENCE = "two-pass served (Whisper's own end of text)"
ARM = "two-pass served, end of text at the first open word only at p >= 0.5"
FIELDS = {"verifier_first_eot_min_prob": 0.5}
WER_MARGIN = 0.01


if __name__ == "__main__":
    from benchmarks.common import tail_choice_cli

    tail_choice_cli(__doc__, PREFIX, REFERENCE, ARM, FIELDS, WER_MARGIN, "chosen", FIELDS, None)
