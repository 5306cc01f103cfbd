"""How far back the causal restart cut looks, decided on dev: the last 24 words or the whole transcript.

    python benchmarks/lora_targets.py          # first: the recipe's adapters at seeds 1-4, scored with 24 words
    python benchmarks/restart_context.py --state outputs/bench-evaluation/state.json
    # → benchmarks/results/selection/dev_restart_context*

Why (dev, read per utterance in ``selection/dev_stall_guard*``): on the 58-word spontaneous clip mfa_cold_corpus3
the adapter's last step appends the transcript's beginning again ("That should be good. Alright, so this is the
support of the"; seed 3 without any guard: "all right, all right, so that's"). The restart cut
(``restart_words`` 3, ``streaming.decoding``) compares the open words with the last ``restart_context`` = 24 words
only, a number fixed with the cut, never chosen on dev; a restart from further back passes. The arm looks at the
whole transcript (``restart_context`` 224: more words than Whisper's 224-token text can hold). Everything else is
the engine's default (restart run 3 words, no stall guard).

Arm and reference on the recipe's 300 ms adapters at seeds 1-4 (``benchmarks.seed_arms``: the reference rows are
``lora_targets.py``'s, scored with 24 words), causal greedy at 300 ms, live feeding, real `dev` and synthetic dev.

Rule, written before the run: WER pooled over the four seeds (an utterance's seeds resampled together). The whole
transcript replaces 24 words as the engine's default (``streaming.engine.RESTART_CONTEXT``) only where its pooled
real-dev WER minus the reference's has its 95 % interval below 0 and its pooled synthetic-dev difference does not
have its interval above 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import rule_text  # noqa: E402
from benchmarks.seed_arms import SELECTION, arms_cli  # noqa: E402

PREFIX = "dev_restart_context"
WHOLE = 224
ARMS = {"whole transcript": {"restart_context": WHOLE}}


def name(label: str, seed: int) -> str:
    return f"300 ms recipe, seed {seed}, restart cut over the {label}"


def main() -> None:
    out, qualifying = arms_cli(__doc__, PREFIX, ARMS, name)
    choice = {"chosen_restart_context": WHOLE if qualifying else 24, "seeds": [1, 2, 3, 4], **out,
              "rule": rule_text(__doc__), "command": " ".join(["python", *sys.argv])}
    (SELECTION / f"{PREFIX}_choice.json").write_text(json.dumps(choice, indent=1) + "\n")
    print(json.dumps(choice, indent=1))


if __name__ == "__main__":
    main()
