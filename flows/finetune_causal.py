"""finetune_causal flow: one Ray Train run per chunk size (+ the random-chunk-size variant), a results table.

Runs are submitted to a thread pool of ``max_parallel_runs`` (1 on a small machine: each run already uses every
core through its Ray workers; more on a cluster). A run that fails after its retries does not cancel the others:
finished runs stay registered in MLflow and cached in Prefect, the table marks the failure, and the flow fails
at the end so that a re-run redoes only what failed.
"""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_table_artifact
from prefect.task_runners import ThreadPoolTaskRunner

from configs.finetune import FinetuneConfig
from tasks.finetune import finetune_run
from tasks.runtime import prefect_api


@flow(name="finetune-causal", log_prints=True)
def finetune_causal(config: FinetuneConfig, chunk_sizes: list[int], random_chunk: bool = False,
                    random_chunk_ms: list[int] | None = None) -> list[dict]:
    """One adapter per size of ``chunk_sizes``; one random-chunk-size adapter over ``random_chunk_ms`` (or, with
    ``random_chunk``, over ``chunk_sizes``)."""
    configs = [config.for_chunk(c) for c in chunk_sizes]
    if random_chunk_ms or random_chunk:
        configs.append(config.for_random_chunks(random_chunk_ms or chunk_sizes))
    futures = [finetune_run.submit(c) for c in configs]
    rows, failed = [], []
    for cfg, future in zip(configs, futures):
        future.wait()
        if future.state.is_completed():
            s = future.result()
            m = s["metrics"]
            rows.append({"variant": s["variant"], "chunk_ms": s["chunk_ms"], "steps": m.get("step"),
                         "train_wall_s": s["train_wall_s"], "sample_points_per_s": m.get("sample_points_per_s"),
                         "val_wer": m.get("val_wer"), "val_arwer": m.get("val_arwer"), "val_al_ms": m.get("val_al_ms"),
                         "registered": f"{s['registered_model']} v{s['registered_version']}",
                         "run_id": s["run_id"], "adapter_dir": s["adapter_dir"], "status": "ok"})
        else:
            failed.append(cfg.variant)
            rows.append({"variant": cfg.variant, "chunk_ms": cfg.chunk_ms, "status": f"failed: {future.state.message}"})
    create_table_artifact(key="finetune-causal", table=rows, description="causal LoRA runs per chunk size")
    if failed:
        raise RuntimeError(f"runs failed: {failed}; finished runs are kept (cached) and a re-run redoes only these")
    return rows


def run_finetune_flow(config: FinetuneConfig, chunk_sizes: list[int], random_chunk: bool = False,
                      max_parallel_runs: int = 1, random_chunk_ms: list[int] | None = None) -> list[dict]:
    with prefect_api():
        runner = ThreadPoolTaskRunner(max_workers=max_parallel_runs)
        return finetune_causal.with_options(task_runner=runner)(config=config, chunk_sizes=chunk_sizes,
                                                                random_chunk=random_chunk,
                                                                random_chunk_ms=random_chunk_ms)
