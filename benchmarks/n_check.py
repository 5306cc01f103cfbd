"""The stability rule's window, decided on dev: how many of the last emitted tokens a new chunk may still change.

    python benchmarks/seed_soup.py             # first: the recipe's adapters at seeds 1-4, scored with the window 2
    python benchmarks/n_check.py --state outputs/bench-evaluation/state.json
    python benchmarks/n_check.py --choose-only # the rule over the reports already written
    # → benchmarks/results/selection/dev_n_check*

Why: the causal adapter alone (the partials) stays about 1.65× offline faster-whisper's WER on real dev (issue 28
asks 1.5×, greedy). Streaming greedy decoding scores the last ``n_check`` emitted tokens again on every chunk
(CarelessWhisper's Definition 1) and commits the older ones for good; ``n_check`` = 2 is the paper's number, never
chosen on dev here (``streaming.engine.N_CHECK``). Two tokens are often less than a word, so a word written from
the first part of its audio is committed before the rest of it is heard. A larger window lets later audio change
it, at no extra compute with the exact decoder cache (the whole prefix is decoded again on every chunk anyway),
but commits later and may rewrite more partial words. Arms: 4 and 8 tokens. Everything else is the engine's
default (restart cut 3 words over the last 24, no stall guard); two-pass recognizers keep 2 unless a spec names
another.

Arms on the recipe's 300 ms adapters at seeds 1-4 (``benchmarks.seed_arms.SEED_SOUP``: the reference rows are
``seed_soup.py``'s recipe rows, scored with the window 2 on the same adapters), causal greedy at 300 ms, live
feeding, real `dev` and synthetic dev.

Rule, written before the run: WER pooled over the four seeds (an utterance's seeds resampled together). An arm
qualifies where its pooled real-dev WER minus the reference's has its 95 % interval below 0, its pooled
synthetic-dev difference does not have its interval above 0, and the mean over the seeds of its median final-word
latency on real dev is at most 200 ms above the reference's. Of the qualifying arms the smaller window (the earlier
commits) becomes the engine's default (``streaming.engine.N_CHECK``); if none qualifies, 2 stays.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import rule_text  # noqa: E402
from benchmarks.seed_arms import OFF, SEED_SOUP, SELECTION, SEEDS, arms_cli  # noqa: E402

PREFIX = "dev_n_check"
WINDOWS = (4, 8)
ARMS = {f"window {n}": {"n_check": n} for n in WINDOWS}
LATENCY_MARGIN_MS = 200.0


def name(label: str, seed: int) -> str:
    return f"300 ms recipe, seed {seed}, stability {label}"


def mean_median_latency(entry: dict) -> float:
    values = list(entry["per_seed_word_latency_ms_median"].values())
    return sum(values) / len(values)


def choose(out: dict, qualifying: list[str]) -> dict:
    """The rule of the module docstring over ``seed_arms.pooled_choice``'s result."""
    reference = mean_median_latency(out["real"][OFF])
    latency = {label: mean_median_latency(out["real"][label]) - reference for label in ARMS}
    chosen = [label for label in ARMS if label in qualifying and latency[label] <= LATENCY_MARGIN_MS]
    return {"chosen_n_check": ARMS[chosen[0]]["n_check"] if chosen else 2, "qualifying": chosen,
            "mean_median_latency_minus_off_ms": latency, "seeds": list(SEEDS), **out}


def main() -> None:
    choice = choose(*arms_cli(__doc__, PREFIX, ARMS, name, recipe=SEED_SOUP))
    choice |= {"rule": rule_text(__doc__), "command": " ".join(["python", *sys.argv])}
    (SELECTION / f"{PREFIX}_choice.json").write_text(json.dumps(choice, indent=1) + "\n")
    print(json.dumps({k: v for k, v in choice.items() if k != "rule"}, indent=1))


if __name__ == "__main__":
    main()
