"""EMMA sweep on the real speech: Prefect → Ray Tune → MLflow, Pareto front (WER vs AL) next to offline Whisper and
the causal LoRA model with the stability rule.

Policies train on the `train` splits of the synthetic corpus + the real speech (dataset versions of the finetune
benchmark), on top of the 300 ms causal LoRA adapter; every trial streams the real `dev` split at 300 ms (a sweep
selects, so it sees dev, never test; the leakage guard refuses anything else). A second, smaller sweep covers the other training variants (p_choose + value projections; the original
encoder). Writes ``benchmarks/results/emma_sweep.json`` (+ .md, + the dashboard PNG).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from benchmarks.common import RESULTS, markdown_table, write_results  # noqa: E402

FIELDS = ("t_emma", "lambda_latency", "lambda_variance", "lambda_alignment", "decision", "chunk_ms", "variant",
          "encoder", "wer", "arwer", "al_ms", "laal_ms", "rtf", "pareto")


def newest(pattern: str) -> str:
    found = sorted(glob.glob(pattern), key=os.path.getmtime)
    if not found:
        raise SystemExit(f"nothing matches {pattern}: run benchmarks/finetune.py first (or pass the path)")
    return found[-1]


def offline_wer(utterances) -> dict:
    from streaming.baselines.offline import OfflineWhisper
    from streaming.evaluate import evaluate_records, stream_all
    from training.weights import load_model

    scores = evaluate_records(stream_all(OfflineWhisper(load_model("tiny.en")), utterances, 1000), utterances)
    return {k: scores[k] for k in ("wer", "al_ms", "rtf")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--t-emma", default="0.2,0.3,0.4,0.5")
    parser.add_argument("--lambda-latency", default="0.01,0.05")
    parser.add_argument("--lambda-variance", default="0.0,0.1")
    parser.add_argument("--variants", action="store_true", help="also sweep the other training variants")
    parser.add_argument("--adapter", default=None, help="300 ms causal LoRA adapter (default: newest in outputs/)")
    parser.add_argument("--synth", default=None, help="synthetic dataset version (default: newest synth240)")
    parser.add_argument("--real", default=None, help="real-speech dataset version (default: newest)")
    parser.add_argument("--out", default="outputs/bench-emma")
    parser.add_argument("--main-run", default=None, help="reuse this finished main sweep (parent run id in --out)")
    parser.add_argument("--realspeech", default=None)
    args = parser.parse_args()
    out = Path(args.out).resolve()
    if out.exists() and not args.main_run:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(out / ".prefect"))

    from configs.emma import EmmaConfig, SweepConfig
    from flows.sweep_emma import run_sweep_flow
    from evaluation.sets import load_split

    adapter = str(Path(args.adapter or newest("outputs/adapters/causal-tiny.en-300ms-*")).resolve())
    synth = str(Path(args.synth or newest("outputs/datasets/synth240/*")).resolve())
    real = str(Path(args.real or newest("outputs/datasets/realspeech/*")).resolve())
    utterances = load_split([real], ["dev"])  # what the trials are scored on: the references must be too
    offline = offline_wer(utterances)
    finetune = json.loads((RESULTS / "finetune.json").read_text())["per_chunk"]["300ms"]["tuned"]
    references = {"offline Whisper (30 s pad)": (offline["al_ms"], offline["wer"]),
                  "causal LoRA 300 ms, stability rule": (finetune["al_ms"], finetune["wer"])}

    floats = lambda s: tuple(float(x) for x in s.split(","))  # noqa: E731
    base = EmmaConfig(datasets=(synth, real), splits=("train",), validation_datasets=(real,),
                      validation_splits=("dev",), adapter_dir=adapter, max_steps=args.steps,
                      batch_size=4, log_every=5, lr=1e-3, lambda_alignment=1.0, decision="mean",
                      tracking_uri=f"sqlite:///{out / 'mlflow.db'}").resolved_paths()
    sweep = SweepConfig(base=base, t_emma=floats(args.t_emma), lambda_latency=floats(args.lambda_latency),
                        lambda_variance=floats(args.lambda_variance), policy_store=str(out / "policies"),
                        storage_path=str(out / "ray-tune"), al_budget_ms=finetune["al_ms"])
    started = time.perf_counter()
    if args.main_run:  # the main sweep finished earlier: read it back from MLflow (same code as `sweep report`)
        from training.emma.dashboard import log_dashboard
        from training.tracking import client as mlflow_client

        runs = mlflow_client(base.tracking_uri).get_run(args.main_run)
        rows = log_dashboard(base.tracking_uri, args.main_run, references)
        result = {"parent_run_id": args.main_run, "dashboard_rows": rows, "trials": json.loads(
            Path(out / "main_trials.json").read_text()), "promotion": json.loads(Path(out / "promotion.json").read_text())}
        sweep_s = float(runs.data.metrics.get("sweep_wall_s", 0))
    else:
        result = run_sweep_flow(sweep, promote=True, references=references)
        sweep_s = time.perf_counter() - started
        (out / "main_trials.json").write_text(json.dumps(result["trials"], default=str))
        (out / "promotion.json").write_text(json.dumps(result.get("promotion"), default=str))
        from training.tracking import client as mlflow_client

        mlflow_client(base.tracking_uri).log_metric(result["parent_run_id"], "sweep_wall_s", sweep_s)
    rows = result["dashboard_rows"]
    variant_rows, variants_s = [], None
    if args.variants:
        started = time.perf_counter()
        variants = [  # (variant, encoder, overrides, thresholds)
            ("pchoose_value", "causal_lora", {}, (0.3, 0.4)),
            ("pchoose", "original", {}, (0.3, 0.4)),
            ("pchoose", "causal_lora", {"lambda_alignment": 0.0, "decision": "min", "lr": 3e-4}, (0.05, 0.1)),  # as published
        ]
        for variant, encoder, overrides, thresholds in variants:
            vb = base.model_copy(update={"variant": variant, "encoder": encoder, **overrides,
                                         "adapter_dir": adapter if encoder == "causal_lora" else None})
            vs = sweep.model_copy(update={"base": vb, "t_emma": thresholds, "lambda_latency": (0.05,),
                                          "lambda_variance": (0.0,)})
            variant_rows += run_sweep_flow(vs)["dashboard_rows"]
        variants_s = time.perf_counter() - started

    from training.tracking import client

    c = client(base.tracking_uri)
    with_png = out / "dashboard"
    c.download_artifacts(result["parent_run_id"], "dashboard", str(out))
    shutil.copy(with_png / "wer_al_pareto.png", RESULTS / "emma_sweep_pareto.png")
    trials = [{k: r.get(k) for k in FIELDS} for r in rows]
    payload = {
        "model": "tiny.en",
        "offline_wer": offline["wer"],
        "offline": offline,
        "causal_lora_stability_300ms": {k: finetune[k] for k in ("wer", "arwer", "al_ms", "laal_ms", "rtf")},
        "eval_set": f"realspeech dev split, {len(utterances)} utterances (selection), 300 ms chunks, causal engine",
        "training": {"steps": args.steps, "batch_utterances": base.batch_size, "adapter": adapter,
                     "datasets": [synth, real], "policy_trainings": len({r.get("training_key") for r in result["trials"]})},
        "sweep_wall_s": round(sweep_s, 1),
        "trials_total": len(result["trials"]),
        "trials_ok": sum(t["status"] == "ok" for t in result["trials"]),
        "promotion": result.get("promotion"),
        "trials": trials,
        "variant_trials": [{k: r.get(k) for k in FIELDS} for r in variant_rows],
        "variants_wall_s": variants_s and round(variants_s, 1),
    }
    header = ["t_emma", "λ_lat", "λ_var", "variant/encoder/λ_align/decision", "WER %", "ARWER %", "AL ms", "LAAL ms", "RTF", "Pareto"]
    table_rows = [[r["t_emma"], r["lambda_latency"], r["lambda_variance"], f"{r['variant']}/{r['encoder']}/{r['lambda_alignment']}/{r['decision']}",
                   f"{100 * r['wer']:.2f}", f"{100 * r['arwer']:.2f}", r["al_ms"], r["laal_ms"], r["rtf"],
                   "yes" if r["pareto"] else ""] for r in sorted(trials + payload["variant_trials"],
                                                                  key=lambda r: r["al_ms"])]
    table_rows += [["offline", "", "", "", f"{100 * offline['wer']:.2f}", "", offline["al_ms"], "", offline["rtf"], ""],
                   ["stability", "", "", "causal LoRA", f"{100 * finetune['wer']:.2f}",
                    f"{100 * finetune['arwer']:.2f}", finetune["al_ms"], finetune["laal_ms"], finetune["rtf"], ""]]
    write_results("emma_sweep", payload, markdown_table(header, table_rows)
                  + f"\n\nSweep wall time: {sweep_s:.0f} s for {len(trials)} trials on {os.cpu_count()} CPUs.")


if __name__ == "__main__":
    main()
