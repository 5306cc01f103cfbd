"""Which precision `auto` resolves to on each CPU path (issue 64), decided on dev with fp32 among the arms.

    python benchmarks/precision_paths.py --real DATASET_VERSION_DIR [--adapter ADAPTER_DIR]
    # → benchmarks/results/selection/dev_precision_paths.{json,md}

Paths: this CPU's own kernels (whatever it has: AMX on a Sapphire Rapids Xeon, AVX512-BF16 dot products on a Zen 4
EPYC; ``machine`` in each arm says which), oneDNN capped at AVX512_CORE_BF16 (bf16 dot products, no AMX), and capped
at AVX2 (no bf16 dot products: an AVX2-only EPYC). oneDNN reads the cap at start-up, so each
path runs in its own interpreter. Arms on each path: fp32 and bf16-all, the served two-pass spec
(``benchmarks/results/selection/served_two_pass.json``) over ``--adapter`` (default: the original weights), one torch
thread (a served replica's), fixed feeding (the transcript does not depend on the machine's speed, so the arms'
words differ by their arithmetic alone).

- Speed, every path: the first ``--speed-utterances`` real dev utterances; RTF and step-compute p90.
- Accuracy, the native path: every real dev utterance, fp32 against bf16 (paired 95 % interval of the WER
  difference); the capped paths compute the same bf16 rounding (emulated), so their words are not asked again.

Rule, written before the run: on each path the resolver picks bf16 only where bf16's RTF is below fp32's by at least
10 % and, on the native path's dev set, bf16's WER minus fp32's has its interval not wholly above 0; else fp32.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

RESULTS = Path(__file__).resolve().parent / "results"
OUT = RESULTS / "selection" / "dev_precision_paths"
PATHS = {"native": None, "avx512-bf16": "AVX512_CORE_BF16", "avx2": "AVX2"}
ARMS = ("fp32", "bf16-all")
MIN_SPEED_GAIN = 0.10


def spec(adapter: str | None, precision: str):
    from evaluation.systems import SystemSpec

    values = json.loads((RESULTS / "selection" / "served_two_pass.json").read_text())
    return replace(SystemSpec(**values), name=f"served two-pass {precision}", adapter_dir=adapter,
                   precision=precision)


def force_bf16() -> None:
    """The bf16 arm runs bf16 on every path: the product's resolver would turn a bf16 name into fp32 where bf16 is not
    native, which is what this experiment asks about (in this file only, in this interpreter)."""
    import streaming.precision as sp

    product = sp.resolve_precision

    def forced(requested):
        chosen = product(requested)
        if requested and requested.startswith("bf16"):
            return replace(chosen, effective=requested, reason="bf16 forced by benchmarks/precision_paths.py")
        return chosen

    sp.resolve_precision = forced


def arm(real: str, adapter: str | None, precision: str, limit: int | None) -> dict:
    """One arm in this interpreter: the report row and its per-utterance results."""
    import torch

    from evaluation.report import evaluate_systems
    from evaluation.sets import load_split

    torch.set_num_threads(1)
    if precision.startswith("bf16"):
        force_bf16()
    utts = load_split([real], ["dev"])[:limit]
    res = evaluate_systems([spec(adapter, precision)], utts, test_set={"n_utterances": len(utts), "splits": ["dev"]},
                           warmup=utts[0], live=False)
    row = res["systems"][0]
    return {"row": {k: row.get(k) for k in ("name", "wer", "rtf", "step_ms_p90", "step_ms_median",
                                            "word_latency_ms_median", "repeated_words", "token_loops")},
            "per_utterance": row["per_utterance"], "machine": res["machine"]}


def run_arm(path: str, real: str, adapter: str | None, precision: str, limit: int | None) -> dict:
    env = {**os.environ}
    env.pop("ONEDNN_MAX_CPU_ISA", None)
    if PATHS[path]:
        env["ONEDNN_MAX_CPU_ISA"] = PATHS[path]
    code = ("import json, sys; sys.path.insert(0, 'benchmarks'); from precision_paths import arm; "
            f"print('RESULT' + json.dumps(arm({real!r}, {adapter!r}, {precision!r}, {limit!r})))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent, env=env,
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{path} {precision}: {proc.stderr[-3000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line.removeprefix("RESULT"))


def main() -> None:
    from evaluation import intervals

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", required=True)
    parser.add_argument("--adapter")
    parser.add_argument("--speed-utterances", type=int, default=20)
    parser.add_argument("--paths", default=",".join(PATHS), help="the speed part's paths (where the CPU's own path "
                        "is AVX512-BF16, the avx512-bf16 cap is the same path)")
    parser.add_argument("--part", choices=("speed", "accuracy"), action="append",
                        help="run only this part (repeat); the other's results are kept from the last run. Accuracy "
                             "does not depend on the machine's load, speed does: run it on a quiet machine")
    args = parser.parse_args()
    parts = args.part or ["speed", "accuracy"]
    last = json.loads(OUT.with_suffix(".json").read_text()) if OUT.with_suffix(".json").exists() else {}
    result: dict = {"rule": __doc__.split("Rule, written before the run: ")[1].strip(), "adapter": args.adapter,
                    "speed": last.get("speed", {}) if "speed" not in parts else {},
                    "accuracy": last.get("accuracy", {}) if "accuracy" not in parts else {}}
    if "speed" in parts:
        for path in args.paths.split(","):
            result["speed"][path] = {p: run_arm(path, args.real, args.adapter, p, args.speed_utterances) for p in ARMS}
            for p in ARMS:
                result["speed"][path][p].pop("per_utterance")
    if "accuracy" in parts:
        full = {p: run_arm("native", args.real, args.adapter, p, None) for p in ARMS}
        c = intervals.compare(full["bf16-all"]["per_utterance"], full["fp32"]["per_utterance"], "wer")
        result["accuracy"] = {p: full[p]["row"] for p in ARMS} | {
            "n_utterances": len(full["fp32"]["per_utterance"]), "bf16_minus_fp32": round(c["diff"], 4),
            "ci95": [round(x, 4) for x in c["ci95"]], "machine": full["fp32"]["machine"]}
    OUT.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    if not (result["speed"] and result["accuracy"]):
        print("partial run written; run the other part to decide")
        return
    accurate = result["accuracy"]["ci95"][0] <= 0
    result["choice"] = {}
    for path, arms in result["speed"].items():
        fp32, bf16 = arms["fp32"]["row"]["rtf"], arms["bf16-all"]["row"]["rtf"]
        faster = bf16 <= (1 - MIN_SPEED_GAIN) * fp32
        result["choice"][path] = {"auto": "bf16-all" if faster and accurate else "fp32",
                                  "bf16_rtf_over_fp32": round(bf16 / fp32, 3)}
    OUT.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    OUT.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))


def markdown(r: dict) -> str:
    machine = next(iter(next(iter(r["speed"].values())).values()))["machine"]
    lines = ["# `auto` precision per CPU path, on dev (benchmarks/precision_paths.py)", "", f"Rule: {r['rule']}", "",
             f"CPU: {machine.get('cpu_model')}, flags {' '.join(machine.get('isa_flags') or [])}; one torch thread.",
             "",
             "| path | arm | RTF | step p90 | step median | auto |", "|---|---|---|---|---|---|"]
    for path, arms in r["speed"].items():
        for p, a in arms.items():
            row = a["row"]
            lines.append(f"| {path} ({a['machine'].get('onednn_max_cpu_isa') or 'own kernels'}) | {p} | {row['rtf']} | "
                         f"{row['step_ms_p90']} ms | {row['step_ms_median']} ms | "
                         f"{r['choice'][path]['auto'] if p == 'fp32' else ''} |")
    a = r["accuracy"]
    lines += ["", f"Accuracy, native path, real dev ({a['n_utterances']} utterances): fp32 {100 * a['fp32']['wer']:.2f} %,"
              f" bf16 {100 * a['bf16-all']['wer']:.2f} %, bf16 − fp32 {100 * a['bf16_minus_fp32']:+.2f} points "
              f"[{100 * a['ci95'][0]:+.2f}, {100 * a['ci95'][1]:+.2f}].", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
