"""Shorter segments for the causal adapter alone (the partials), ended at a pause relative to the room's noise
floor, decided on dev.

    python benchmarks/evaluation.py data --datasets synth,kokoro_train,kokoro_dev,real   # the state's datasets
    python benchmarks/causal_segments.py --state outputs/bench-evaluation/state.json
    python benchmarks/causal_segments.py --choose-only   # the rule over the reports already written
    python benchmarks/causal_segments.py --round 2       # round 2's arms on the same adapters (below)
    # → benchmarks/results/selection/dev_causal_segments*

Why: read per utterance, a third of the causal adapter's errors above offline faster-whisper's on real dev are one
recording (``dev_joined_clips_round2``, seeds 5-8 with joined clips: 113 errors above offline in all, 37.5 of them
on the 25 s spontaneous monologue mfa_cold_corpus3, where the decoder stops after 8-35 words and waits for the
rest of the recording; the stall guard, which forces writes, was not separably better: README "Stall guard").
The adapter was trained on clean synthetic clips of 2-7 s, half of them joined up to four at a time (<= 24 s,
silent gaps), and the 8-15 s real clips are where it is furthest from offline (``training.causal.join``: 3x).
``streaming.segmented.Segmented`` starts the recognizer afresh at the first quiet chunk past ``segment_ms``
(24 s by default), but its quiet test is absolute (-45 dBFS) and that recording's pauses sit at -40 to -44 dBFS:
it is never cut. A shorter segment with a quiet test relative to the segment's quietest chunk
(``quiet_margin_db``) gives the decoder fresh context at a pause, as at the start of a training clip. It cannot
change an utterance shorter than ``segment_ms``. Arms: 8 s and 12 s, margin 6 dB (chosen before the run, not
tuned).

Arms on the recipe's 300 ms adapters at seeds 1 and 2, trained here by ``seed_arms.train_recipe`` (the recipe
itself), causal greedy at 300 ms with the engine's defaults, scored beside the reference (the same adapters, the
default segmentation) in the same run: real `dev` and synthetic dev with live feeding, the continuous dev streams
(each dev speaker's utterances joined, 20-120 s, ``benchmarks.longform.dev_streams``) with fixed feeding.

Rule, written before the run: WER pooled over the two seeds (an utterance's, or stream's, seeds resampled together).
An arm qualifies where its pooled real-dev WER minus the reference's has its 95 % interval below 0, its pooled
synthetic-dev and dev-stream differences do not have their intervals above 0, and the mean over the seeds of its
median final-word latency on real dev is at most 100 ms above the reference's. Of the qualifying arms the one with
the lowest pooled real-dev WER becomes the causal systems' segmentation (``SystemSpec.segment_ms`` /
``quiet_margin_db`` of the pipeline's causal candidates and the evaluation's causal rows); two-pass recognizers keep
theirs (not asked here). If none qualifies, the default segmentation stays. p90 latencies are reported, not judged.

Round 1 (8 s and 12 s): neither qualified (real dev -0.5 [-2.5, +0.2] and -0.3 [-1.2, 0.0] points; the arms changed
the errors of two dev utterances: 8 s cut 8 of the 11 clips longer than 8 s, and six of them kept their errors,
while the stalled monologue went 50 -> 38 errors at seed 1 and 30 -> 31 at seed 2); on the continuous dev streams
8 s leaned better, 54.1 -> 49.4 % (-4.7 [-8.5, +2.8]).

Round 2, prompted by that lean (a second look, written before its run): shorter segments still, 4 s and 6 s at the
same 6 dB, on the same two adapters, scored the same way; the reference rows are round 1's (the same adapters, the
default segmentation, the same sets and feeding). The same rule decides, over round 2's arms alone; a round-2 arm
adopted is adopted as round 1's would have been.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import rule_text  # noqa: E402
from benchmarks.seed_arms import OFF, SELECTION, pooled_choice  # noqa: E402

PREFIX = "dev_causal_segments"
SEEDS = (1, 2)
REFERENCE = "default segments"
ARMS = {REFERENCE: {}, "8 s, 6 dB": {"segment_ms": 8000, "quiet_margin_db": 6.0},
        "12 s, 6 dB": {"segment_ms": 12000, "quiet_margin_db": 6.0}}
ROUND_ARMS = {2: {"4 s, 6 dB": {"segment_ms": 4000, "quiet_margin_db": 6.0},
                  "6 s, 6 dB": {"segment_ms": 6000, "quiet_margin_db": 6.0}}}
SETS = ("real", "synthetic", "streams")
LATENCY_MARGIN_MS = 100.0


def adapter_name(seed: int) -> str:
    return f"300 ms recipe, seed {seed}"


def name(label: str, seed: int) -> str:
    return f"300 ms recipe, seed {seed}, {label}"


def report_path(key: str, seed: int, round_: int = 1) -> Path:
    rnd = "" if round_ == 1 else f"_round{round_}"
    return SELECTION / f"{PREFIX}{rnd}{'' if key == 'real' else '_' + key}_seed{seed}.json"


def arms(round_: int) -> dict[str, dict]:
    """The arms scored in ``round_`` (round 1's include the reference)."""
    return ARMS if round_ == 1 else ROUND_ARMS[round_]


def score(state_path: str, round_: int = 1) -> dict:
    """Train (or reuse, by run key) the recipe's adapters, then every arm of ``round_`` on every set and seed; one
    report each."""
    from benchmarks.longform import dev_streams
    from benchmarks.seed_arms import train_recipe
    from evaluation.report import evaluate_systems, write_report
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec

    data, adapters = train_recipe(state_path, adapter_name, seeds=SEEDS)
    state = json.loads(Path(state_path).read_text())
    sets = {}
    for key, dataset in (("real", data["real"]), ("synthetic", data["kokoro_dev"])):
        units = load_split([dataset], ["dev"])
        sets[key] = (units, describe([dataset], ["dev"], units), True)
    units, described = dev_streams(state)
    sets["streams"] = (units, described, False)
    for key, (units, described, live) in sets.items():
        for seed in SEEDS:
            specs = [SystemSpec(name(label, seed), "causal", 300, adapter_dir=adapters[adapter_name(seed)], **fields)
                     for label, fields in arms(round_).items()]
            result = evaluate_systems(specs, units, test_set=described, reference=specs[0].name, live=live)
            result["command"] = " ".join(["python", *sys.argv])
            write_report(result, SELECTION, report_path(key, seed, round_).stem)
    return {"adapters": adapters, "datasets": {k: data[k] for k in ("synth", "kokoro_train", "real", "kokoro_dev")}}


def choose(round_: int = 1) -> dict:
    """The rule of the module docstring over the reports of ``round_`` (and round 1's reference rows, under
    ``seed_arms.OFF``), pooled by ``seed_arms.pooled_choice``."""
    labels = {REFERENCE: 1, **{label: round_ for label in arms(round_)}}
    rows: dict = {}
    for key in SETS:
        rows[key] = {}
        for seed in SEEDS:
            reports = {r: {row["name"]: row for row in json.loads(report_path(key, seed, r).read_text())["systems"]}
                       for r in set(labels.values())}
            for label, r in labels.items():
                rows[key].setdefault(OFF if label == REFERENCE else label, {})[seed] = reports[r][name(label, seed)]
    out, _ = pooled_choice(rows, SEEDS, SETS)

    def mean_latency(label: str) -> float:
        values = list(out["real"][label]["per_seed_word_latency_ms_median"].values())
        return sum(values) / len(values)

    verdicts = {}
    for label in arms(round_):
        if label == REFERENCE:
            continue
        v = {"real_dev_lower": out["real"][label]["minus_off"]["ci95"][1] < 0,
             "synthetic_not_worse": out["synthetic"][label]["minus_off"]["ci95"][0] <= 0,
             "streams_not_worse": out["streams"][label]["minus_off"]["ci95"][0] <= 0,
             "latency_minus_reference_ms": mean_latency(label) - mean_latency(OFF)}
        v["qualifies"] = (v["real_dev_lower"] and v["synthetic_not_worse"] and v["streams_not_worse"]
                          and v["latency_minus_reference_ms"] <= LATENCY_MARGIN_MS)
        verdicts[label] = v
    qualifying = sorted((a for a, v in verdicts.items() if v["qualifies"]), key=lambda a: out["real"][a]["wer_pooled"])
    scored = {REFERENCE: ARMS[REFERENCE], **arms(round_)}
    return {"round": round_, "reference": f"{OFF}: {REFERENCE}", "chosen": qualifying[0] if qualifying else REFERENCE,
            "chosen_fields": scored[qualifying[0]] if qualifying else {}, "verdicts": verdicts, "seeds": list(SEEDS),
            "arms": scored, **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--choose-only", action="store_true", help="the choice from the reports already written")
    parser.add_argument("--round", type=int, default=1, choices=(1, *ROUND_ARMS))
    args = parser.parse_args()
    path = SELECTION / f"{PREFIX}{'' if args.round == 1 else f'_round{args.round}'}_choice.json"
    if args.choose_only:
        extra = {k: v for k, v in json.loads(path.read_text()).items() if k in ("adapters", "datasets")}
    else:
        extra = score(args.state, args.round)
    choice = choose(args.round) | extra | {"rule": rule_text(__doc__), "command": " ".join(["python", *sys.argv])}
    path.write_text(json.dumps(choice, indent=1) + "\n")
    print(json.dumps({k: v for k, v in choice.items() if k not in ("rule", *SETS)}, indent=1))
    for key in SETS:
        for label, entry in choice[key].items():
            print(key, label, round(100 * entry["wer_pooled"], 2), entry.get("minus_off"))


if __name__ == "__main__":
    main()
