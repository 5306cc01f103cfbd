"""A recipe screen on a lent GPU: the 300 ms causal recipe over distillation weights, step counts and seeds.

    python benchmarks/gpu_screen.py pack --state outputs/bench-evaluation/state.json   # here: .gpu/ (git-ignored)
    # device call 1, carry [.gpu/lo, .gpu/whl]: the low weight bytes and the wheels, kept on the warm machine
    mkdir -p /root/whisperline-stash && cp .gpu/lo/lo.xz /root/whisperline-stash/ && python3 -m pip install -q \
        --no-index --no-deps --target /root/whisperline-stash/site .gpu/whl/*.whl
    # device call 2 (within the 30 s the machine stays warm), carry [.gpu/weights, .gpu/data, .gpu/site,
    # .gpu/recipe.json]; $OUT/screen.jsonl comes back
    PYTHONPATH=$PWD:/root/whisperline-stash/site:$PWD/.gpu/site python3 benchmarks/gpu_screen.py run --screen 1
    python benchmarks/gpu_screen.py report --results S1/screen.jsonl --results S2/screen.jsonl ...  # → selection/

Why: the recipe's choices (``selection/dev_distill*``, ``dev_steps*``) rest on one training seed each, and on this
2-core machine one run costs ~7 minutes; neighbouring step counts differ by 10–25 points of real-dev WER, more than
seeds are known to move it. The screen trains every cell of a grid (weights × steps × seeds) and scores each adapter
on the whole real `dev` split, so that a recipe is chosen on its mean over seeds, not on one draw.

Same code as the Ray Train loop (``training.causal.loop``): the batches (``rank_batches``), augmentation,
``collate``, ``SamplePointLoss`` (block-causal student, full-context teacher), ``lr_lambda``, LoRA injection and the
streaming engine's scores, driven here without Ray, MLflow or Prefect (none is on the device machine); the recipe's
two Ray Train workers are emulated in one process (each rank's batch, their losses averaged as DDP averages the
gradients). What differs:
the base weights travel rounded to bfloat16 (the float16 checkpoint, 75.5 MB, does not fit the device's 64 MiB
transfer with the repository; LoRA trains in float32 on top), training runs on CUDA in float32 (TF32 matmuls), and
every job is one process, several sharing the GPU. Scores come from the streaming engine on the device's CPU cores
(one thread per job), offline feeding (the causal engine's words do not depend on the clock). Anything the screen
finds is confirmed here with the project's own training path before it changes a default.

Weights travel in two calls (the low bytes and wheels stashed on the warm machine by the first; the high bytes, the
data and the run in the second): with the repository, each call stays under the 64 MiB a call carries.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
GPU_DIR = REPO / ".gpu"
STASH = Path("/root/whisperline-stash")
SEEDS = (1, 2, 3, 4)
RECIPE_LR, RECIPE_T = 1e-3, 2.0  # the committed recipe's (configs/smoke.yaml, DistillSettings)
# Each screen's cells (one device call each): distillation weight, steps, learning rate, temperature.
SCREENS = {
    1: [(0.5, 160, RECIPE_LR, RECIPE_T), (0.9, 160, RECIPE_LR, RECIPE_T), (1.0, 160, RECIPE_LR, RECIPE_T),
        (0.5, 480, RECIPE_LR, RECIPE_T), (0.9, 480, RECIPE_LR, RECIPE_T)],
    # after screen 1 (the weight does not help, 480 steps no worse than 160): a lower rate over longer training,
    # a softer teacher, a lighter distillation weight
    2: [(0.5, 480, 3e-4, RECIPE_T), (0.5, 160, RECIPE_LR, 1.0), (0.25, 160, RECIPE_LR, RECIPE_T)],
    # after screen 2 (w 0.25 the lowest pooled WER, T 1 worse): lighter still, and w 0.25 trained longer
    3: [(0.1, 160, RECIPE_LR, RECIPE_T), (0.25, 480, RECIPE_LR, RECIPE_T)],
}
REFERENCE = (0.5, 160, RECIPE_LR, RECIPE_T)
CELL_KEYS = ("weight", "steps", "lr", "temperature")


def cell_of(row: dict) -> tuple:
    """A row's cell (screen 1's rows predate the lr / temperature keys: the recipe's)."""
    return (row["weight"], row["steps"], row.get("lr", RECIPE_LR), row.get("temperature", RECIPE_T))


# ---------------------------------------------------------------------------------------------------------- pack
def pack(state_path: str, out: Path) -> None:
    """Into ``out``: the recipe's config (dataset paths made relative), the train and real-dev shards it reads,
    the base weights as bfloat16 high and low bytes (xz), and the wheels and whisper source the device lacks."""
    import torch

    from benchmarks.distill import chosen_recipe
    from training.weights import fetch_model

    data, chosen, cfg = chosen_recipe(state_path)
    cfg = cfg.for_chunk(300)
    (out / "data").mkdir(parents=True, exist_ok=True)
    rel = {}
    for version_dir, splits in [*((d, ("train",)) for d in cfg.datasets), (data["real"], ("dev",))]:
        src = Path(version_dir)
        dst = out / "data" / src.parent.name / src.name
        (dst / "shards").mkdir(parents=True, exist_ok=True)
        for name in ("dataset.json", "manifest.parquet"):
            shutil.copy2(src / name, dst / name)
        for shard in sorted((src / "shards").glob("*.tar")):
            if shard.name.split("-")[0] in splits:
                shutil.copy2(shard, dst / "shards" / shard.name)
        rel[str(version_dir)] = str(dst.relative_to(REPO))
    recipe = json.loads(cfg.model_dump_json())
    recipe["datasets"] = [rel[d] for d in cfg.datasets]
    recipe["validation_datasets"] = [rel[data["real"]]]
    chosen = {k: chosen[k] for k in ("steps", "seed")}
    (out / "recipe.json").write_text(json.dumps({"finetune": recipe, "chosen": chosen},
                                                indent=1))
    ckpt = torch.load(fetch_model(cfg.model, allow_download=False), map_location="cpu", weights_only=True)
    tensors, hi, lo = split_bf16(ckpt["model_state_dict"])
    (out / "weights").mkdir(exist_ok=True)
    (out / "weights" / "index.json").write_text(json.dumps({"dims": ckpt["dims"], "model": cfg.model,
                                                            "tensors": tensors}))
    (out / "weights" / "hi.xz").write_bytes(lzma.compress(hi, preset=6))
    (out / "lo").mkdir(exist_ok=True)
    (out / "lo" / "lo.xz").write_bytes(lzma.compress(lo, preset=0))
    import whisper

    shutil.copytree(Path(whisper.__file__).parent, out / "site" / "whisper", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "multilingual.tiktoken"))
    print("packed", {p.name: f"{sum(f.stat().st_size for f in p.rglob('*') if f.is_file()) / 2**20:.1f} MiB"
                     for p in out.iterdir() if p.is_dir()})


def split_bf16(state: dict) -> tuple[list, bytes, bytes]:
    """(tensor names and shapes, high bytes, low bytes) of every tensor rounded to bfloat16, flattened in order. The
    high bytes (sign, exponent) compress to ~half (xz); the low ones (mantissa) hardly at all."""
    import numpy as np
    import torch

    names = list(state)
    flat = np.concatenate([state[n].to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16).ravel()
                           for n in names])
    return ([[n, list(state[n].shape)] for n in names], (flat >> 8).astype(np.uint8).tobytes(),
            (flat & 0xFF).astype(np.uint8).tobytes())


def join_bf16(tensors: list, hi: bytes, lo: bytes) -> dict:
    """:func:`split_bf16` undone: float32 tensors holding the bfloat16-rounded values."""
    import numpy as np
    import torch

    high, low = np.frombuffer(hi, dtype=np.uint8), np.frombuffer(lo, dtype=np.uint8)
    if len(high) != len(low):
        raise ValueError(f"weight halves of {len(high)} and {len(low)} bytes")
    flat = torch.from_numpy(((high.astype(np.uint16) << 8) | low).view(np.int16).copy()).view(torch.bfloat16)
    state, at = {}, 0
    for name, shape in tensors:
        n = int(np.prod(shape)) if shape else 1
        state[name] = flat[at:at + n].reshape(shape).float()
        at += n
    if at != flat.numel():
        raise ValueError(f"the weight halves hold {flat.numel()} values, their index {at}")
    return state


def base_checkpoint(gpu_dir: Path, lo_path: Path, dest: Path) -> Path:
    """The bfloat16-rounded base checkpoint rebuilt from the two halves (float32 tensors, whisper's layout)."""
    import torch

    index = json.loads((gpu_dir / "weights" / "index.json").read_text())
    state = join_bf16(index["tensors"], lzma.decompress((gpu_dir / "weights" / "hi.xz").read_bytes()),
                      lzma.decompress(lo_path.read_bytes()))
    torch.save({"dims": index["dims"], "model_state_dict": state}, dest)
    return dest


# ----------------------------------------------------------------------------------------------------------- run
def train_and_score(job: dict) -> dict:
    """One grid cell: train the recipe with (weight, steps, seed) on CUDA, score the adapter on real dev on CPU."""
    import torch
    from whisper.tokenizer import get_tokenizer

    from configs.finetune import DistillSettings, FinetuneConfig
    from streaming.engine import CausalStreamingEngine
    from streaming.evaluate import evaluate_records, per_utterance, stream_all
    from training.causal.data import rank_batches, read_all
    from training.causal.loop import MelCache, batch_loss, lr_lambda, optimizer_step, step_batch
    from training.causal.objective import SamplePointLoss
    from training.lora import apply_lora, merge_adapter, trainable_parameters
    from training.weights import load_checkpoint

    torch.set_num_threads(job["threads"])
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    base = FinetuneConfig.model_validate(job["finetune"])
    cfg = base.model_copy(update={"seed": job["seed"], "max_steps": job["steps"], "lr": job["lr"],
                                  "distill": DistillSettings(weight=job["weight"], temperature=job["temperature"])})
    device = torch.device(job.get("device", "cuda"))
    model = load_checkpoint(job["checkpoint"], name=cfg.model, device="cpu")
    apply_lora(model, cfg.lora, seed=cfg.seed)
    model.to(device).train()
    tokenizer = get_tokenizer(model.is_multilingual, num_languages=model.num_languages, language="en",
                              task="transcribe")
    module = SamplePointLoss(model, cfg.distill, eot=tokenizer.eot)
    optimizer = torch.optim.AdamW(trainable_parameters(model), lr=cfg.lr, weight_decay=cfg.weight_decay,
                                  eps=cfg.adam_eps)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    prefix = [*tokenizer.sot_sequence, tokenizer.no_timestamps]
    utterances = read_all(cfg.datasets, cfg.splits)
    mels = MelCache(cfg.margin_ms, model.dims.n_mels)
    world = cfg.num_workers  # the recipe's Ray Train workers, emulated in this one process (below)
    steps_per_epoch = len(rank_batches(len(utterances), world, 0, cfg.batch_size, cfg.seed, 0))
    started, losses = time.perf_counter(), []
    for step in range(cfg.max_steps):  # every rank's step of training.causal.loop.train_loop_per_worker:
        optimizer.zero_grad(set_to_none=True)  # DDP averages the ranks' gradients = the mean of their losses
        step_loss = 0.0
        for rank in range(world):
            batch, _, _ = step_batch(cfg, utterances, mels, step=step, rank=rank, world=world,
                                     steps_per_epoch=steps_per_epoch, prefix=prefix, eot=tokenizer.eot, device=device)
            loss = batch_loss(module, batch, cfg.seed, step, rank)
            (loss / world).backward()
            step_loss += float(loss.detach()) / world
        optimizer_step(model, optimizer, scheduler, cfg.grad_clip)
        losses.append(step_loss)
    if device.type == "cuda":
        torch.cuda.synchronize()
    train_s = time.perf_counter() - started
    model.to("cpu").eval()
    merge_adapter(model)  # as served (``merge_adapter: true``): the same words, fewer matmuls per step
    validation = [u.as_eval_utterance()
                  for u in read_all(cfg.validation_datasets, cfg.validation_splits, job.get("dev_limit"))]
    started = time.perf_counter()
    with torch.inference_mode():
        engine = CausalStreamingEngine(model, chunk_ms=cfg.chunk_ms, tau0_ms=cfg.resolved_tau0_ms)
        records = stream_all(engine, validation, cfg.chunk_ms)
    scores = evaluate_records(records, validation)
    rows = [{k: r[k] for k in ("utt_id", "ref_words", "errors", "hyp", "partials_shown", "partials_rewritten",
                               "compute_ms", "audio_ms")} for r in per_utterance(records, validation)]
    return {**{k: job[k] for k in CELL_KEYS}, "seed": job["seed"], "train_s": round(train_s, 1),
            "score_s": round(time.perf_counter() - started, 1), "loss_first": losses[0], "loss_last_10": losses[-10:],
            "wer": scores["wer"], "n_utterances": len(validation), "per_utterance": rows}


def run(args) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed
    import multiprocessing

    out = Path(os.environ.get("OUT", "outputs/gpu-screen"))
    out.mkdir(parents=True, exist_ok=True)
    lo = STASH / "lo.xz" if (STASH / "lo.xz").exists() else GPU_DIR / "lo" / "lo.xz"
    if not lo.exists():
        sys.exit(f"no low weight bytes at {STASH} or {GPU_DIR / 'lo'}: run the stash call first")
    import platform

    import torch

    (out / "machine.json").write_text(json.dumps({
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "torch": torch.__version__,
        "python": platform.python_version(), "cpus": os.cpu_count(), "jobs_at_once": args.jobs,
        "threads_per_job": args.threads}))
    checkpoint = base_checkpoint(GPU_DIR, lo, Path("/tmp/whisperline-base.pt"))
    recipe = json.loads((GPU_DIR / "recipe.json").read_text())
    cells, seeds, extra = SCREENS[args.screen], SEEDS, {}
    if args.smoke:  # the script's own check on a CPU: two cells of 2 steps, 3 dev utterances
        cells, seeds, extra = [(0.5, 2, RECIPE_LR, RECIPE_T), (0.9, 2, RECIPE_LR, RECIPE_T)], (1,), {
            "device": "cpu", "dev_limit": 3}
    jobs = [{"finetune": recipe["finetune"], "checkpoint": str(checkpoint), "threads": args.threads,
             **dict(zip(CELL_KEYS, cell)), "seed": seed, **extra} for seed in seeds for cell in cells]
    jobs.sort(key=lambda j: -j["steps"])  # the long ones first: the pool ends together
    print(f"{len(jobs)} jobs, {args.jobs} at a time", flush=True)
    started = time.perf_counter()
    with (ProcessPoolExecutor(max_workers=args.jobs, mp_context=multiprocessing.get_context("spawn")) as pool,
          open(out / "screen.jsonl", "a") as sink):
        futures = {pool.submit(train_and_score, j): j for j in jobs}
        for fut in as_completed(futures):
            j = futures[fut]
            try:
                row = fut.result()
            except Exception as err:  # one cell's failure is a row, not a lost screen
                row = {**{k: j[k] for k in CELL_KEYS}, "seed": j["seed"], "error": repr(err)[:2000]}
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            print(f"{time.perf_counter() - started:6.0f}s cell {cell_of(row)} seed {row['seed']}: "
                  f"{row.get('wer', row.get('error'))} (train {row.get('train_s')} s, score {row.get('score_s')} s)",
                  flush=True)


# -------------------------------------------------------------------------------------------------------- report
def report(results: list[Path], out: Path | None = None) -> None:
    """Per cell: WER pooled over seeds with a 95 % interval clustered by utterance, and the paired difference to
    the reference cell (the committed recipe); per seed: each cell's WER, so the spread between draws is visible.
    ``results``: each screen's ``screen.jsonl`` (its ``machine.json`` beside it), in screen order."""
    from benchmarks.common import pooled_over_seeds
    from evaluation.intervals import ci95, compare

    rows, machines = [], {}
    for n, path in enumerate(results, 1):
        rows += [{**json.loads(line), "screen": n} for line in path.read_text().splitlines() if line.strip()]
        if (path.parent / "machine.json").exists():
            machines[n] = json.loads((path.parent / "machine.json").read_text())
    failed = [r for r in rows if "error" in r]
    cells: dict[tuple, dict[int, list[dict]]] = {}
    screen_of: dict[tuple, int] = {}
    for r in rows:
        if "error" not in r:
            cells.setdefault(cell_of(r), {})[r["seed"]] = r["per_utterance"]
            screen_of[cell_of(r)] = r["screen"]
    seeds = sorted({s for c in cells.values() for s in c})

    def pooled(cell: dict[int, list[dict]]) -> list[dict]:  # one unit per (seed, utterance), grouped by utterance
        return pooled_over_seeds({s: cell[s] for s in seeds})

    def rate(units: list[dict], num: str, den: str) -> float:
        return sum(u[num] for u in units) / max(1, sum(u[den] for u in units))

    reference = REFERENCE if REFERENCE in cells else min(k for k in cells if k[0] == REFERENCE[0])  # smoke runs
    ref = pooled(cells[reference])
    table = []
    for key in sorted(cells, key=lambda k: (screen_of[k], k)):
        cell = cells[key]
        if sorted(cell) != seeds:
            continue  # a cell with a failed seed is not comparable pooled
        units = pooled(cell)
        entry = {**dict(zip(CELL_KEYS, key)), "screen": screen_of[key], "wer": rate(units, "errors", "ref_words"),
                 "ci95": ci95(units, "wer", groups="recording"),
                 "per_seed_wer": {s: rate(cell[s], "errors", "ref_words") for s in seeds},
                 "partial_rewrite_rate": rate(units, "partials_rewritten", "partials_shown")}
        if key != reference:
            entry["vs_reference"] = compare(units, ref, "wer", groups="recording")
        table.append(entry)
    better = [e for e in table if e.get("vs_reference", {}).get("verdict") == "better"]
    decision = (f"change the recipe to the best of {len(better)} separably better cells" if better else
                "no cell is separably better than the committed recipe: the recipe stays (rule: a cell replaces it "
                "only where the interval of its pooled paired difference lies below 0)")
    compact = ("utt_id", "ref_words", "errors", "partials_shown", "partials_rewritten")
    summary = {"screens": {n: [list(c) for c in SCREENS[n]] for n in sorted({r["screen"] for r in rows})},
               "cell_keys": list(CELL_KEYS), "reference": dict(zip(CELL_KEYS, reference)), "seeds": seeds,
               "n_utterances": rows[0]["n_utterances"] if rows else 0, "cells": table, "decision": decision,
               "failed_jobs": failed,
               "machines": machines,
               "per_job": [{**{k: v for k, v in r.items() if k != "per_utterance"},
                            "per_utterance": [{k: u[k] for k in compact} for u in r.get("per_utterance", [])]}
                           for r in rows]}
    folder = out or RESULTS / "selection"
    (folder / "gpu_screen.json").write_text(json.dumps(summary, indent=1) + "\n")
    lines = ["# Recipe screen on a lent GPU (`benchmarks/gpu_screen.py`)", "",
             f"The 300 ms causal adapter (tiny.en, LoRA r 32), each cell trained with seeds {seeds} and scored on "
             f"the whole real `dev` split ({summary['n_utterances']} utterances; causal greedy, offline feeding). "
             "WER pooled over the seeds, 95 % bootstrap interval over utterances (an utterance's seeds resampled "
             "together); Δ = cell − reference (the committed recipe), paired the same way. Screens ran in turn, "
             "each chosen after the one before (one device call each); the machine: "
             + "; ".join(f"screen {n}: {m.get('gpu')}, {m.get('jobs_at_once')} jobs at once"
                         for n, m in machines.items())
             + ".", "",
             "| screen | distill weight | temperature | lr | steps | WER pooled [95 % CI] | per seed "
             "| partial rewrites | Δ vs reference [95 % CI] | verdict |", "|---|---|---|---|---|---|---|---|---|---|"]
    for e in table:
        d = e.get("vs_reference")
        lines.append(f"| {e['screen']} | {e['weight']} | {e['temperature']} | {e['lr']:g} | {e['steps']} | "
                     f"{100 * e['wer']:.1f} % [{100 * e['ci95'][0]:.1f}, {100 * e['ci95'][1]:.1f}] | "
                     + ", ".join(f"{100 * v:.1f}" for v in e["per_seed_wer"].values())
                     + f" | {100 * e['partial_rewrite_rate']:.1f} % | "
                     + (f"{100 * d['diff']:+.1f} [{100 * d['ci95'][0]:+.1f}, {100 * d['ci95'][1]:+.1f}]"
                        if d else "reference") + f" | {d['verdict'] if d else ''} |")
    lines += ["", f"Decision: {decision}."]
    if failed:
        lines += ["", f"Failed jobs: {len(failed)} (in the json)."]
    (folder / "gpu_screen.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("pack", "run", "report"))
    parser.add_argument("--state", default="outputs/bench-evaluation/state.json")
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results", action="append", default=[], help="report: a screen.jsonl (repeat, in order)")
    parser.add_argument("--smoke", action="store_true", help="run: a two-cell CPU check of this script")
    parser.add_argument("--screen", type=int, default=1, choices=sorted(SCREENS), help="run: which cells")
    parser.add_argument("--out", default="", help="report: the folder for gpu_screen.{json,md} (default: selection)")
    args = parser.parse_args()
    if args.stage == "pack":
        pack(args.state, GPU_DIR)
    elif args.stage == "run":
        run(args)
    else:
        report([Path(r) for r in args.results], Path(args.out) if args.out else None)


if __name__ == "__main__":
    main()
