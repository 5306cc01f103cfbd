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

from configs.finetune import PAPER_TAU0_MS, FinetuneConfig
from tasks.finetune import finetune_run
from tasks.runtime import prefect_api


@flow(name="finetune-causal", log_prints=True)
def finetune_causal(config: FinetuneConfig, chunk_sizes: list[int], random_chunk: bool = False) -> list[dict]:
    configs = [config.for_chunk(c) for c in chunk_sizes]
    if random_chunk:
        configs.append(random_chunk_config(config, chunk_sizes))
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


def random_chunk_config(config: FinetuneConfig, chunk_sizes: list[int]) -> FinetuneConfig:
    """One adapter for every chunk size up to τ0 = 600 ms (the paper's first block; longer chunks would need a
    longer first block for all sizes), validated at the config's own chunk size."""
    choices = tuple(sorted(c for c in chunk_sizes if c <= PAPER_TAU0_MS))
    return FinetuneConfig.model_validate({**config.model_dump(), "chunk_ms_choices": choices, "tau0_ms": None,
                                          "chunk_ms": config.chunk_ms if config.chunk_ms in choices else choices[-1]})


def run_finetune_flow(config: FinetuneConfig, chunk_sizes: list[int], random_chunk: bool = False,
                      max_parallel_runs: int = 1) -> list[dict]:
    with prefect_api():
        runner = ThreadPoolTaskRunner(max_workers=max_parallel_runs)
        return finetune_causal.with_options(task_runner=runner)(config=config, chunk_sizes=chunk_sizes,
                                                                random_chunk=random_chunk)
