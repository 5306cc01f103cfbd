"""The two-pass verifier's repetition guards (issue 64), decided on dev with the champion a newcomer's `make run`
trains.

    python benchmarks/repeat_guard.py --real DATASET_VERSION_DIR --adapter ADAPTER_DIR [--hush HUSH_DIR]
    # → benchmarks/results/selection/dev_repeat_guard.{json,md}

What is asked: ``streaming.verifier.Verifier`` no longer lets a pass say again a phrase of 3+ words that the audio
holds once (``_restated``: the second saying must take half the first's time by the pass's own alignment), and a
token loop inside one word that exhausts a pass's budget is kept once (``one_copy``). The ``off`` arm is the
verifier before them (both disabled here, in this file only); ``on`` is the product.

Systems: the curated served spec (``benchmarks/results/selection/served_two_pass.json``) and, with ``--hush``, the
hush-word two-pass candidate with self-agreement that `make run` promoted before issue 64, each over the smoke
adapter of a fresh `make run` (what a newcomer serves), precision ``auto``. Sets: the real `dev` split and the
continuous dev streams (each dev speaker's utterances joined, 20-120 s), each fed chunk by chunk, and the dev streams
again fed ``BEHIND_MS`` at a time: what a server that has fallen behind feeds in one catch-up step
(``serving.session``), made deterministic. Never test.

Fixed pieces rather than live feeding: the first run fed live on a machine shared with other jobs (load average 7
on 2 cores, RTF 1.96), so its transcripts measured the load, not the guard; it was stopped after one arm's row.

Rule, written before the run: per system, ``on`` is adopted where, on both sets, its WER minus ``off``'s has a paired
95 % interval not wholly above 0 and its repeated words (``evaluation.repetition``) are no more than ``off``'s, with
no token loop. Medians and p90s of final-word latency are reported, not judged.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).resolve().parent / "results"
BEHIND_MS = 1200  # four 300 ms chunks per step
OUT = RESULTS / "selection" / "dev_repeat_guard"


def served_spec(adapter: str):
    from evaluation.systems import SystemSpec

    values = json.loads((RESULTS / "selection" / "served_two_pass.json").read_text())
    return replace(SystemSpec(**values), name="served two-pass", adapter_dir=adapter, precision="auto")


def hush_spec(adapter: str, hush: str):
    return replace(served_spec(adapter), name="hush two-pass self-agreement", verifier="hush", hush_dir=hush,
                   final_verifier=None)


class guards_off:
    """The verifier without the two guards (the ``off`` arm), restored on exit."""

    def __enter__(self):
        import streaming.verifier as v

        self.saved = v.Verifier._restated, v.one_copy
        v.Verifier._restated = lambda self, final_tokens, new: None
        v.one_copy = lambda tokens: len(tokens)
        return self

    def __exit__(self, *exc):
        import streaming.verifier as v

        v.Verifier._restated, v.one_copy = self.saved


def dev_sets(real: str):
    from evaluation.longform import speaker_streams, speakers
    from evaluation.sets import load_split

    dev = load_split([real], ["dev"])
    streams = speaker_streams(dev, speakers([real], "dev"), max_s=120.0, min_s=20.0)
    return {"real dev": (dev, None), "dev streams": (streams, None),
            f"dev streams, {BEHIND_MS} ms per step": (streams, BEHIND_MS)}


def score(specs, utts, piece_ms: int | None) -> dict:
    """{name: report row} of ``specs`` on ``utts``, fed in fixed pieces (the chunk, or ``piece_ms``)."""
    from evaluation.report import evaluate_systems, score_rows
    from evaluation.systems import _Models, build
    from streaming.evaluate import evaluate_records, per_utterance, stream_all

    if piece_ms is None:
        res = evaluate_systems(specs, utts, test_set={"n_utterances": len(utts), "splits": ["dev"]}, live=False)
        return {r["name"]: r for r in res["systems"]}
    rows, models = [], _Models()
    for s in specs:
        recognizer, _ = build(s, models)
        records = stream_all(recognizer, utts, piece_ms, live=False)
        rows.append({"name": s.name, "kind": s.kind, "chunk_ms": s.chunk_ms, **evaluate_records(records, utts),
                     "per_utterance": per_utterance(records, utts)})
    score_rows(rows, reference=None, fallback_reference=False)
    return {r["name"]: r for r in rows}


def run(args) -> dict:
    from evaluation import intervals

    specs = [served_spec(args.adapter)] + ([hush_spec(args.adapter, args.hush)] if args.hush else [])
    out: dict = {"rule": __doc__.split("Rule, written before the run: ")[1].strip(), "adapter": args.adapter,
                 "sets": {}}
    if args.sets and OUT.with_suffix(".json").exists():  # the other sets' rows as written before
        out["sets"] = json.loads(OUT.with_suffix(".json").read_text())["sets"]
    from streaming.precision import machine_info

    for set_name, (utts, piece_ms) in dev_sets(args.real).items():
        if args.sets and set_name not in args.sets:
            continue
        rows = {}
        for arm in ("off", "on"):
            arm_specs = [replace(s, name=f"{s.name} [{arm}]") for s in specs]
            if arm == "off":
                with guards_off():
                    rows.update(score(arm_specs, utts, piece_ms))
            else:
                rows.update(score(arm_specs, utts, piece_ms))
            print(set_name, arm, {k: (v["wer"], v["repeated_words"]) for k, v in rows.items()}, flush=True)
        verdicts = {}
        for s in specs:
            off, on = rows[f"{s.name} [off]"], rows[f"{s.name} [on]"]
            c = intervals.compare(on["per_utterance"], off["per_utterance"], "wer")
            keep = {k: on.get(k) for k in ("wer", "repeated_words", "utterances_with_repeats", "token_loops",
                                           "word_latency_ms_median", "word_latency_ms_p90", "rtf")}
            verdicts[s.name] = {
                "off": {k: off.get(k) for k in keep}, "on": keep,
                "wer_diff": round(c["diff"], 4), "wer_diff_ci95": [round(x, 4) for x in c["ci95"]],
                # each utterance's final text: the rows can be scored again by a later metric
                "hyps": {arm: {e["utt_id"]: e["hyp"] for e in r["per_utterance"]} for arm, r in (("off", off),
                                                                                                ("on", on))},
                "qualifies": (c["ci95"][0] <= 0 and on["repeated_words"] <= off["repeated_words"]
                              and on["token_loops"] == 0)}
        out["sets"][set_name] = {"n": len(utts), "piece_ms": piece_ms, "systems": verdicts,
                                 "machine": machine_info()}
    out["adopted"] = {s.name: all(out["sets"][k]["systems"][s.name]["qualifies"] for k in out["sets"])
                      for s in specs}
    return out


def markdown(result: dict) -> str:
    lines = ["# Verifier repetition guards on dev (benchmarks/repeat_guard.py)", "", f"Rule: {result['rule']}", "",
             "| set | system | arm | WER | Δ on−off [95 % CI] | repeated words (utts) | loops | latency median / p90 |",
             "|---|---|---|---|---|---|---|---|"]
    for set_name, block in result["sets"].items():
        for name, v in block["systems"].items():
            for arm in ("off", "on"):
                r = v[arm]
                delta = (f"{100 * v['wer_diff']:+.2f} [{100 * v['wer_diff_ci95'][0]:+.2f}, "
                         f"{100 * v['wer_diff_ci95'][1]:+.2f}]" if arm == "on" else "—")
                lines.append(f"| {set_name} ({block['n']}) | {name} | {arm} | {100 * r['wer']:.2f} % | {delta} | "
                             f"{r['repeated_words']} ({r['utterances_with_repeats']}) | {r['token_loops']} | "
                             f"{r['word_latency_ms_median']} / {r['word_latency_ms_p90']} ms |")
    lines += ["", "Adopted: " + ", ".join(f"{k}: {'yes' if v else 'no'}" for k, v in result["adopted"].items()), ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", required=True, help="the real evaluation dataset version (its dev split)")
    parser.add_argument("--adapter", required=True, help="the smoke adapter of a fresh `make run`")
    parser.add_argument("--hush", help="the hush word of that run (adds the hush-word candidate)")
    parser.add_argument("--sets", nargs="*", help="only these sets (the others' rows are kept from the last run)")
    args = parser.parse_args()
    result = run(args)
    OUT.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str) + "\n")
    OUT.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
