"""Which precision `auto` resolves to on each CPU path (issue 64), decided on dev with fp32 among the arms.

    python benchmarks/precision_paths.py --real DATASET_VERSION_DIR [--adapter ADAPTER_DIR]
    # → benchmarks/results/selection/dev_precision_paths.{json,md}

Paths: this CPU's own kernels (whatever it has: AMX on a Sapphire Rapids Xeon, AVX512-BF16 dot products on a Zen 4
EPYC; ``machine`` in each arm says which), oneDNN capped at AVX512_CORE_BF16 (bf16 dot products, no AMX), and an
AVX2-only CPU (``streaming.precision.AVX2_MACHINE``: oneDNN, MKL, FBGEMM and ATen all capped at AVX2). The caps are
read at start-up, so each path runs in its own interpreter. Arms on each path: fp32, bf16-all and int8-encoder (int8
on the encoder only: the decoder too changed 4x more of fp32's words, ``streaming/quantize.py``), the served two-pass
spec (``benchmarks/results/selection/served_two_pass.json``) over ``--adapter`` (default: the original weights), one
torch thread (a served replica's), fixed feeding (the transcript does not depend on the machine's speed, so the arms'
words differ by their arithmetic alone).

- Speed, every path: the first ``--speed-utterances`` real dev utterances; RTF and step-compute p90.
- Accuracy: every real dev utterance, the arm against fp32 on the same path (paired 95 % interval of the WER
  difference). bf16 rounds the same on every path (emulated where not native), so it is asked on the native path
  only; int8 on the path it would run on. An arm is asked only where it passed the speed bar, fastest first.

Rule, written before the run: on each path `auto` is the fastest arm whose RTF is below fp32's by at least 10 % and
whose real-dev WER minus fp32's has its 95 % interval not wholly above 0 and its point at most +0.5 points; else fp32.
(Revised 2026-12-05 before the int8 arm's first run: the fastest qualifying arm instead of bf16 alone, and the +0.5
point cap; bf16's earlier numbers meet it.)
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
PATHS = {"native": {}, "avx512-bf16": {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, "avx2": "AVX2_MACHINE"}
ARMS = ("fp32", "bf16-all", "int8-encoder")
MIN_SPEED_GAIN = 0.10
MAX_WER_POINTS = 0.5


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
    from streaming.precision import AVX2_MACHINE

    env = {k: v for k, v in os.environ.items() if k not in AVX2_MACHINE}
    env.update(AVX2_MACHINE if PATHS[path] == "AVX2_MACHINE" else PATHS[path])
    code = ("import json, sys; sys.path.insert(0, 'benchmarks'); from precision_paths import arm; "
            f"print('RESULT' + json.dumps(arm({real!r}, {adapter!r}, {precision!r}, {limit!r})))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent, env=env,
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{path} {precision}: {proc.stderr[-3000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT"))
    return json.loads(line.removeprefix("RESULT"))


def accuracy_path(arm_name: str, path: str) -> str:
    return "native" if arm_name.startswith("bf16") else path


def accuracy(result: dict, args, path: str, arm_name: str) -> dict:
    """The arm against fp32 on every real dev utterance, on the path its words depend on (cached in ``result``)."""
    from concurrent.futures import ThreadPoolExecutor

    from evaluation import intervals

    where = accuracy_path(arm_name, path)
    done = result["accuracy"].setdefault(where, {})
    if f"{arm_name}_minus_fp32" not in done:
        with ThreadPoolExecutor(2) as pool:  # words do not depend on load: both arms at once, one core each
            fp32, other = pool.map(lambda p: run_arm(where, args.real, args.adapter, p, None), ("fp32", arm_name))
        c = intervals.compare(other["per_utterance"], fp32["per_utterance"], "wer")
        done.update({"fp32": fp32["row"], arm_name: other["row"], "n_utterances": len(fp32["per_utterance"]),
                     f"{arm_name}_minus_fp32": {"diff": round(c["diff"], 4), "ci95": [round(x, 4) for x in c["ci95"]]},
                     "machine": fp32["machine"]})
    return done[f"{arm_name}_minus_fp32"]


def decide(result: dict, args) -> dict:
    """The rule of the docstring per path; asks accuracy (and caches it) only for arms that passed the speed bar."""
    choice = {}
    for path, arms in result["speed"].items():
        fp32 = arms["fp32"]["row"]["rtf"]
        fast = sorted((a["row"]["rtf"], name) for name, a in arms.items()
                      if name != "fp32" and a["row"]["rtf"] <= (1 - MIN_SPEED_GAIN) * fp32)
        choice[path] = {"auto": "fp32", "rtf_over_fp32": {n: round(a["row"]["rtf"] / fp32, 3) for n, a in arms.items()}}
        for _, name in fast:
            d = accuracy(result, args, path, name)
            if d["ci95"][0] <= 0 and d["diff"] <= MAX_WER_POINTS / 100:
                choice[path]["auto"] = name
                break
    return choice


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--real", required=True)
    parser.add_argument("--adapter")
    parser.add_argument("--speed-utterances", type=int, default=20)
    parser.add_argument("--paths", default=",".join(PATHS), help="the speed part's paths (where the CPU's own path "
                        "is AVX512-BF16, the avx512-bf16 cap is the same path)")
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--part", choices=("speed", "decide"), action="append",
                        help="run only this part (repeat): speed needs a quiet machine, decide runs the accuracy the "
                             "rule asks for (load-independent) on the last speed results")
    args = parser.parse_args()
    parts = args.part or ["speed", "decide"]
    last = json.loads(OUT.with_suffix(".json").read_text()) if OUT.with_suffix(".json").exists() else {}
    result: dict = {"rule": __doc__.split("Rule, written before the run: ")[1].strip(), "adapter": args.adapter,
                    "speed": last.get("speed", {}), "accuracy": last.get("accuracy", {})}
    if "speed" in parts:
        for path in args.paths.split(","):
            result["speed"][path] = {p: run_arm(path, args.real, args.adapter, p, args.speed_utterances)
                                     for p in args.arms.split(",")}
            for p in result["speed"][path].values():
                p.pop("per_utterance")
            OUT.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    if "decide" in parts:
        result["choice"] = decide(result, args)
        OUT.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        OUT.with_suffix(".md").write_text(markdown(result))
        print(markdown(result))


def markdown(r: dict) -> str:
    from streaming.precision import AVX2_MACHINE

    machine = next(iter(next(iter(r["speed"].values())).values()))["machine"]
    lines = ["# `auto` precision per CPU path, on dev (benchmarks/precision_paths.py)", "", f"Rule: {r['rule']}", "",
             f"CPU: {machine.get('cpu_model')}, flags {' '.join(machine.get('isa_flags') or [])}; one torch thread.",
             "", "| path | arm | RTF | step p90 | step median | auto |", "|---|---|---|---|---|---|"]
    for path, arms in r["speed"].items():
        caps = next(iter(arms.values()))["machine"].get("isa_caps") or {}
        for p, a in arms.items():
            row = a["row"]
            where = "own kernels" if not caps else " ".join(f"{k}={v}" for k, v in caps.items())
            lines.append(f"| {path} ({'AVX2_MACHINE' if caps == AVX2_MACHINE else where}) | {p} | "
                         f"{row['rtf']} | {row['step_ms_p90']} ms | {row['step_ms_median']} ms | "
                         f"{r['choice'][path]['auto'] if p == 'fp32' else ''} |")
    lines += ["", "Accuracy on every real dev utterance, the arm against fp32 on the same path:", "",
              "| path | n | fp32 WER | arm | arm WER | arm − fp32 [95 % CI] |", "|---|---|---|---|---|---|"]
    for path, acc in r["accuracy"].items():
        for key, d in acc.items():
            if key.endswith("_minus_fp32"):
                name = key.removesuffix("_minus_fp32")
                lines.append(f"| {path} | {acc['n_utterances']} | {100 * acc['fp32']['wer']:.2f} % | {name} | "
                             f"{100 * acc[name]['wer']:.2f} % | {100 * d['diff']:+.2f} "
                             f"[{100 * d['ci95'][0]:+.2f}, {100 * d['ci95'][1]:+.2f}] |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
