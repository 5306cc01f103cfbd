"""Causal LoRA fine-tuning on this machine: does it lower streaming WER/ARWER, per chunk size and for one
random-chunk-size adapter? Writes benchmarks/results/finetune.json + .md.

Data: the `train` splits of the espeak-ng synthetic corpus (``--n-synth`` utterances, 8 voices) and of the real
speech (split as the pipeline splits it: by speaker where a corpus has several, by utterance where it has one),
validated on the real `dev` split. Evaluation: streaming on the real `test` split (held-out: no run trained or
selected on it), the same engine and metrics for the base causal model (no adapter) and every adapter. The peers
side by side: benchmarks/evaluation.py.

Run: ``python benchmarks/finetune.py [--steps 240] [--other-steps 120] [--chunks 40,100,200,300,1000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from benchmarks.common import markdown_table, realspeech_path, write_results  # noqa: E402

KEYS = ("wer", "rwer", "arwer", "al_ms", "laal_ms", "rtf", "word_latency_ms_median")


def build_datasets(out: Path, n_synth: int, realspeech: Path) -> tuple[str, str]:
    from configs.dataset import load_dataset_config
    from data.synth import write_synthetic_corpus
    from flows.build_dataset import run_build

    from configs.pipeline import load_pipeline_config

    cfg = load_dataset_config(str(Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml"))
    real_cfg = load_pipeline_config(str(Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml")).real_dataset()
    corpus = write_synthetic_corpus(out / "corpora" / f"synth-{n_synth}", n_synth, seed=0)
    synth = run_build(str(corpus), str(out / "datasets"), cfg.model_copy(update={"name": f"synth{n_synth}"}), 2)
    real = run_build(str(realspeech), str(out / "datasets"), real_cfg, 2)
    return synth["version_dir"], real["version_dir"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=240, help="steps of the 300 ms run (and the RCS run)")
    parser.add_argument("--other-steps", type=int, default=120, help="steps of the other chunk sizes")
    parser.add_argument("--chunks", default="40,100,200,300,1000")
    parser.add_argument("--n-synth", type=int, default=240)
    parser.add_argument("--no-rcs", action="store_true")
    parser.add_argument("--out", default="outputs/bench-finetune")
    parser.add_argument("--realspeech", default=None)
    args = parser.parse_args()
    chunks = [int(c) for c in args.chunks.split(",")]
    out = Path(args.out).resolve()
    os.environ.setdefault("PREFECT_HOME", str(out / ".prefect"))

    from configs.finetune import FinetuneConfig, default_tau0_ms
    from tasks.runtime import prefect_api
    from training.causal.evaluate import evaluate_streaming
    from training.causal.run import run_finetune
    from evaluation.sets import load_split

    import torch

    torch.set_num_threads(2)
    with prefect_api():
        synth, real = build_datasets(out, args.n_synth, realspeech_path(args.realspeech))
    utterances = load_split([real], ["test"])  # held-out: reported only
    started = time.perf_counter()
    base = evaluate_streaming("tiny.en", None, utterances, chunks)
    base_eval_s = time.perf_counter() - started

    base_cfg = FinetuneConfig(datasets=(synth, real), splits=("train",), validation_datasets=(real,),
                              validation_splits=("dev",), max_steps=args.steps, batch_size=4,
                              lr=1e-3, warmup_steps=20, checkpoint_every=40, storage_path=str(out / "ray"),
                              output_dir=str(out / "adapters"), tracking_uri=f"sqlite:///{out / 'mlflow.db'}",
                              experiment="bench-finetune")
    runs: dict[str, dict] = {}
    for chunk in chunks:
        cfg = base_cfg.for_chunk(chunk).model_copy(
            update={"max_steps": args.steps if chunk == 300 else args.other_steps})
        summary = run_finetune(cfg)
        m = summary["metrics"]
        runs[f"{chunk}ms"] = {"chunk_ms": chunk, "tau0_ms": default_tau0_ms(chunk), "steps": int(m["step"]),
                              "train_wall_s": summary["train_wall_s"],
                              "sample_points_per_s_last": round(m["sample_points_per_s"], 2),
                              "final_loss": round(m["loss"], 4), "run_id": summary["run_id"],
                              "tuned": {k: m[f"val_{k}"] for k in KEYS if f"val_{k}" in m},
                              "base": {k: base[chunk][k] for k in KEYS}}
    rcs = None
    if not args.no_rcs:
        cfg = base_cfg.for_random_chunks(chunks)
        summary = run_finetune(cfg)
        scores = evaluate_streaming("tiny.en", summary["adapter_dir"], utterances,
                                    [c for c in chunks if c in cfg.chunk_ms_choices], tau0_ms=cfg.resolved_tau0_ms)
        rcs = {"chunk_ms_choices": list(cfg.chunk_ms_choices), "tau0_ms": cfg.resolved_tau0_ms,
               "steps": int(summary["metrics"]["step"]), "train_wall_s": summary["train_wall_s"],
               "run_id": summary["run_id"], "per_chunk": {f"{c}ms": {k: s[k] for k in KEYS} for c, s in scores.items()}}

    main_run = runs.get("300ms")
    payload = {
        "model": "tiny.en",
        "eval_set": f"realspeech, {len(utterances)} utterances (held-in), streaming engine greedy, cache reuse",
        "training_data": {"synthetic": synth, "real": real, "splits": ["train"], "validation": "real dev",
                          "evaluation": "real test (held-out)"},
        "base_eval_s": round(base_eval_s, 1),
        "wer_base_300ms": main_run and main_run["base"]["wer"],
        "arwer_base_300ms": main_run and main_run["base"]["arwer"],
        "wer_tuned_300ms": main_run and main_run["tuned"].get("wer"),
        "arwer_tuned_300ms": main_run and main_run["tuned"].get("arwer"),
        "training": main_run and {"steps": main_run["steps"], "train_wall_s": main_run["train_wall_s"],
                                  "workers": base_cfg.num_workers, "batch_utterances_per_worker": base_cfg.batch_size,
                                  "sample_points_per_s": main_run["sample_points_per_s_last"],
                                  "lora_r": base_cfg.lora.r, "lr": base_cfg.lr},
        "per_chunk": runs,
        "random_chunk": rcs,
    }
    header = ["system", "chunk", "steps", "WER % base → tuned", "ARWER % base → tuned", "AL ms tuned", "RTF tuned"]
    rows = []
    for name, r in runs.items():
        t, b = r["tuned"], r["base"]
        rows.append([f"per-chunk {name}", name, r["steps"], f"{100 * b['wer']:.1f} → {100 * t['wer']:.1f}",
                     f"{100 * b['arwer']:.1f} → {100 * t['arwer']:.1f}", t.get("al_ms"), t.get("rtf")])
    for name, t in (rcs or {}).get("per_chunk", {}).items():
        b = runs.get(name, {}).get("base") or base[int(name[:-2])]
        rows.append(["random-chunk", name, rcs["steps"], f"{100 * b['wer']:.1f} → {100 * t['wer']:.1f}",
                     f"{100 * b['arwer']:.1f} → {100 * t['arwer']:.1f}", t.get("al_ms"), t.get("rtf")])
    table = (f"Causal LoRA fine-tuning, tiny.en, {base_cfg.num_workers} Ray Train CPU workers; eval: "
             f"{payload['eval_set']}\n\n" + markdown_table(header, rows))
    write_results("finetune", payload, table)


if __name__ == "__main__":
    main()
