"""Which partial words the served two-pass recognizer shows (issue 28's rewrite rate), chosen on the real *dev*
split: the served spec (``selection/served_two_pass.json``) once per ``partials`` policy
(``streaming.second_pass.PARTIALS``), fixed feeding so the finals are the same words in every row (checked), with
each policy's partial rewrite rate and display latency (``streaming.evaluate``) and paired 95 % bootstrap
intervals over utterances of both against the reference: the first policy named, the one served so far
(``causal`` by default; ``evaluation.intervals.compare``: BCa for the rate, percentile for the median).

The rule, fixed before the run: the policy with the lowest rewrite rate whose rewrite-rate difference to the
reference excludes 0 (lower) and whose median display latency stays below the row's median final-word latency
(partials that come no earlier than the finals buy nothing); none such: the reference stays.

    python benchmarks/partials.py            # -> benchmarks/results/selection/dev_partials.{json,md}
    python benchmarks/partials.py --policies verifier-held,verifier-fresh --name dev_partials_fresh
    python benchmarks/partials.py --min-probs 0,0.3,0.5,0.7 --name dev_partials_confident

``--min-probs``: the served policy at each ``partial_min_prob`` (the verifier's partials end before its first open
word with a token below it; 0, off, the reference). Its rule, fixed before the run: the smallest threshold whose
rewrite rate is at most issue 28's 10 %, separably lower than off's, with the median display latency below the
median final-word latency; none such: off.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
RESULTS = REPO / "benchmarks" / "results" / "selection"


REWRITE_BAR = 0.10  # issue 28's partial rewrite rate


def choose_min_prob(rows: list[dict]) -> float:
    """``--min-probs``' rule (module docstring): rows in ascending threshold, the first off."""
    ok = [r for r in rows[1:] if r["partial_rewrite_rate"] <= REWRITE_BAR
          and r["vs_reference_ci95"]["partial_rewrite_rate"][1] < 0
          and r["display_latency_ms_median"] < r["word_latency_ms_median"]]
    return ok[0]["partial_min_prob"] if ok else 0.0


def choose(rows: list[dict]) -> str:
    base = rows[0]
    ok = [r for r in rows[1:] if r["vs_reference_ci95"]["partial_rewrite_rate"][1] < 0
          and r["display_latency_ms_median"] < r["word_latency_ms_median"]]
    return min(ok, key=lambda r: r["partial_rewrite_rate"])["partials"] if ok else base["partials"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", default=str(REPO / "outputs/bench-evaluation/state.json"))
    parser.add_argument("--spec", default=str(RESULTS / "served_two_pass.json"))
    parser.add_argument("--limit", type=int, help="only the first N dev utterances (a quick check of the script)")
    parser.add_argument("--name", default="dev_partials")
    parser.add_argument("--policies", help="comma-separated, the first the reference (default: every policy)")
    parser.add_argument("--min-probs", help="comma-separated partial_min_prob arms of the served policy, ascending "
                        "from 0 (off, the reference)")
    args = parser.parse_args()

    from evaluation import intervals
    from evaluation.report import evaluate_systems
    from evaluation.sets import describe, load_split
    from evaluation.systems import SystemSpec
    from streaming.second_pass import PARTIALS

    real = json.loads(Path(args.state).read_text())["datasets"]["real"]
    dev = load_split([real], ["dev"])[: args.limit]
    served = json.loads(Path(args.spec).read_text())
    if args.min_probs:
        probs = [float(x) for x in args.min_probs.split(",")]
        if probs[0] != 0 or probs != sorted(probs):
            raise SystemExit("--min-probs: ascending, from 0 (off, the reference)")
        policies = [f"{served['partials']}, min prob {m}" for m in probs]
        specs = [SystemSpec(**{**served, "name": f"two-pass served, partials={p}", "partial_min_prob": m or None})
                 for p, m in zip(policies, probs)]
    else:
        policies = args.policies.split(",") if args.policies else list(PARTIALS)
        specs = [SystemSpec(**{**served, "name": f"two-pass served, partials={p}", "partials": p}) for p in policies]
    result = evaluate_systems(specs, dev, test_set=describe([real], ["dev"], dev), live=False)
    runs = dict(zip(policies, result["systems"], strict=True))
    hyps = {p: [u["hyp"] for u in r["per_utterance"]] for p, r in runs.items()}
    assert all(h == hyps[policies[0]] for h in hyps.values()), "the finals differ between policies"
    rows = []
    for p, r in runs.items():
        rows.append({"partials": p, "partial_min_prob": r["spec"].get("partial_min_prob", 0.0), "wer": r["wer"], "partial_rewrite_rate": r["partial_rewrite_rate"],
                     "partial_words_shown": r["partial_words_shown"],
                     "display_latency_ms_median": r["display_latency_ms_median"],
                     "display_latency_ms_p90": r["display_latency_ms_p90"],
                     "word_latency_ms_median": r["word_latency_ms_median"],
                     "word_latency_ms_p90": r["word_latency_ms_p90"], "rtf": r["rtf"],
                     "vs_reference_ci95": {m: [round(x, 4) for x in intervals.compare(
                         r["per_utterance"], runs[policies[0]]["per_utterance"], m)["ci95"]]
                         for m in intervals.PARTIAL_METRICS}})
    rule = (__doc__.split("Its rule, fixed before the run: ")[1] if args.min_probs
            else __doc__.split("The rule, fixed before the run: ")[1]).split("\n\n")[0].replace("\n", " ")
    out = {"split": "dev", "dev_set": result["test_set"], "spec": served, "feeding": "fixed", "reference": policies[0],
           "finals_identical": True, "rule": rule, "rows": rows,
           "chosen": choose_min_prob(rows) if args.min_probs else choose(rows),
           "command": " ".join(["python", *sys.argv])}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(out, indent=2) + "\n")
    lines = [f"Dev split: {out['dev_set']['n_utterances']} utterances, {out['dev_set']['n_words']} words; the served "
             "two-pass spec, fixed feeding (the finals are the same words in every row). [brackets]: paired 95 % "
             f"bootstrap intervals over utterances of the difference to `{policies[0]}`.", "",
             f"Rule: {out['rule']}", "",
             f"| partials | WER | rewrite rate [Δ vs {policies[0]}] | words shown | display latency median [Δ] / p90 ms "
             "| final-word latency median / p90 ms |", "|---|---|---|---|---|---|"]
    for r in rows:
        ci = r["vs_reference_ci95"]
        lines.append(f"| {r['partials']} | {r['wer']:.2%} | {r['partial_rewrite_rate']:.1%} "
                     f"{ci['partial_rewrite_rate']} "
                     f"| {r['partial_words_shown']} | {r['display_latency_ms_median']} "
                     f"{ci['display_latency_ms_median']} / {r['display_latency_ms_p90']} "
                     f"| {r['word_latency_ms_median']} / {r['word_latency_ms_p90']} |")
    lines += ["", f"Chosen: **{out['chosen']}**."]
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
