"""build_dataset flow: scan (→ the inputs table) → plan version → plan batches → prepare + align per batch →
assemble (streamed).

A version that already exists complete is returned without doing any work. The batches run as mapped Prefect tasks
in a process pool, or — when a Ray address is given (the profile's `build.ray_address`, `--ray-address`) — as one
Prefect task that runs them with Ray Data on the cluster (data/distributed.py says why). Either way the flow passes
references (the inputs table's path, row ranges: data/inputs.py), each batch writes a Parquet part to the work
store and the flow holds only counts; the dataset is byte-identical.
"""

from __future__ import annotations

import os

from prefect import flow, unmapped
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, get_current_settings, temporary_settings
from prefect.task_runners import ProcessPoolTaskRunner, ThreadPoolTaskRunner

from configs.dataset import DatasetConfig
from data import fs
from tasks.dataset import (assemble_dataset, build_batch, build_batches_on_ray, plan_build_batches, plan_version,
                           scan_corpus)
from tasks.runtime import prefect_api

MAX_LISTED_IDS = 10_000  # the summary lists the utterances aligned now up to this many (a corpus has 100,000s)


# serial by default (the aligners are not thread-safe, and a process pool cannot serve a subflow's mapped futures);
# `run_build` / `whisperline data build` give a top-level build its process pool
@flow(name="build-dataset", log_prints=True, task_runner=ThreadPoolTaskRunner(max_workers=1))
def build_dataset(corpus: str, output_root: str = "outputs/datasets", config: DatasetConfig | None = None,
                  ray_address: str | None = None, workers: int | None = None) -> dict:
    cfg = config or DatasetConfig()
    output_root = fs.absolute(output_root)  # Ray workers do not share the driver's working directory
    work_dir = fs.join(output_root, ".work")
    # in this process, not on the task runner: a no-op rebuild is this scan and a look at the version's marker, and a
    # pool worker's start-up (imports) would be most of it; the scan's lists are freed once their table is
    # written, and the flow keeps only where that table is
    inputs = scan_corpus(corpus, cfg, work_dir)
    plan = plan_version(inputs, cfg, output_root)
    if plan["existing"] is not None:
        return _summary(plan, plan["existing"], skipped=True, results=[])
    batches = plan_build_batches(inputs, cfg)
    if ray_address:
        results = build_batches_on_ray(batches, cfg, work_dir, plan, ray_address, workers)
    else:
        results = [f.result() for f in build_batch.map(batches, unmapped(cfg), unmapped(work_dir), unmapped(plan))]
    info = assemble_dataset(results, inputs, cfg, work_dir, plan)
    return _summary(plan, info, skipped=False, results=results)


def _summary(plan: dict, info: dict, *, skipped: bool, results: list[dict]) -> dict:
    aligned_ids = sorted(i for r in results for i in r["aligned_ids"])
    return {
        "version_id": plan["version_id"],
        "version_dir": plan["version_dir"],
        "skipped": skipped,
        "counts": info["counts"],
        "shards": [s["sha256"] for s in info["shards"]],
        "aligned_now": sum(r["aligned_now"] for r in results),
        "reused": sum(r["reused"] for r in results),
        "aligned_ids": aligned_ids[:MAX_LISTED_IDS],
        "seconds_audio_aligned": round(sum(r["seconds_audio"] for r in results), 3),
    }


def task_runner(workers: int | None = None):
    """Processes for the mapped stages (aligners hold the GIL and are not thread-safe: never a thread pool > 1)."""
    workers = workers or min(4, os.cpu_count() or 1)
    return ProcessPoolTaskRunner(max_workers=workers) if workers > 1 else ThreadPoolTaskRunner(max_workers=1)


def run_build(corpus: str, output_root: str, cfg: DatasetConfig, workers: int | None = None,
              ray_address: str | None = None) -> dict:
    """Run the flow: `workers` processes for the batches, or Ray (`ray_address`: "auto", "ray://…", or "local"
    for a Ray instance on this machine with `workers` CPUs)."""
    runner = ThreadPoolTaskRunner(max_workers=1) if ray_address else task_runner(workers)
    with prefect_api(), temporary_settings(heartbeat_settings()):
        return build_dataset.with_options(task_runner=runner)(corpus=corpus, output_root=output_root, config=cfg,
                                                              ray_address=ray_address, workers=workers)


def heartbeat_settings() -> dict:
    """Flow-run heartbeats off for a build run in this process, unless the user set their frequency.

    Heartbeats only feed a zombie-run automation (Prefect Cloud's managed one, or one a self-hosted user creates:
    prefect.io/v3/advanced/detect-zombie-flows); this project creates none. On, they cost every in-process build the
    join of the heartbeat thread, most of a no-op rebuild (docs/decisions/build-heartbeats.md). Whoever set
    ``PREFECT_FLOWS_HEARTBEAT_FREQUENCY`` (environment or profile) keeps it; deployment runs are not touched.
    """
    if "heartbeat_frequency" in get_current_settings().flows.model_fields_set:
        return {}
    return {PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}
