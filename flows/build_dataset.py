"""build_dataset flow: scan → plan version → prepare (mapped) → align (mapped) → assemble.

A version that already exists complete on disk is returned without doing any work; otherwise
the mapped stages run in parallel and hit Prefect's content-keyed cache for unchanged batches.
"""

from __future__ import annotations

import os
from pathlib import Path

from prefect import flow, unmapped
from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner

from configs.dataset import DatasetConfig
from tasks.dataset import align_batch, assemble_dataset, plan_version, prepare_batch, scan_corpus
from tasks.runtime import prefect_api


# serial by default (the aligners are not thread-safe, and a process pool cannot serve a subflow's mapped futures);
# `run_build` / `whisperline data build` give a top-level build its process pool
@flow(name="build-dataset", log_prints=True, task_runner=ThreadPoolTaskRunner(max_workers=1))
def build_dataset(corpus: str, output_root: str = "outputs/datasets", config: DatasetConfig | None = None) -> dict:
    cfg = config or DatasetConfig()
    work_dir = str(Path(output_root) / ".work")
    scanned, scan_rejects = scan_corpus(corpus)
    plan = plan_version(scanned, scan_rejects, cfg, output_root)
    n_inputs = len(scanned) + len(scan_rejects)
    if plan["existing"] is not None:
        return _summary(plan, plan["existing"], skipped=True, align_stats=[])
    size = cfg.align_batch_size
    batches = [scanned[i : i + size] for i in range(0, len(scanned), size)]
    prepared = prepare_batch.map(batches, unmapped(cfg), unmapped(work_dir))
    aligned = align_batch.map(prepared, unmapped(cfg), unmapped(work_dir))
    results, align_stats = [], []
    for future in aligned:
        batch_results, stats = future.result()
        results += batch_results
        # A cache hit replays the stats of the run that computed it: nothing was aligned now.
        cached = future.state.name == "Cached"
        n_prepared = stats["aligned"] + stats["reused"]
        align_stats.append({**stats, "aligned": 0, "reused": n_prepared, "aligned_ids": []} if cached else stats)
    info = assemble_dataset(results, scan_rejects, n_inputs, cfg, work_dir, plan)
    return _summary(plan, info, skipped=False, align_stats=align_stats)


def _summary(plan: dict, info: dict, *, skipped: bool, align_stats: list[dict]) -> dict:
    return {
        "version_id": plan["version_id"],
        "version_dir": plan["version_dir"],
        "skipped": skipped,
        "counts": info["counts"],
        "shards": [s["sha256"] for s in info["shards"]],
        "aligned_now": sum(s["aligned"] for s in align_stats),
        "reused": sum(s["reused"] for s in align_stats),
        "aligned_ids": sorted(i for s in align_stats for i in s["aligned_ids"]),
    }


def task_runner(workers: int | None = None):
    """Processes for the mapped stages (aligners hold the GIL and are not thread-safe: never a thread pool > 1)."""
    workers = workers or min(4, os.cpu_count() or 1)
    return ProcessPoolTaskRunner(max_workers=workers) if workers > 1 else ThreadPoolTaskRunner(max_workers=1)


def run_build(corpus: str, output_root: str, cfg: DatasetConfig, workers: int | None = None) -> dict:
    """Run the flow with `workers` processes for the mapped stages."""
    with prefect_api():
        return build_dataset.with_options(task_runner=task_runner(workers))(corpus=corpus, output_root=output_root,
                                                                            config=cfg)
