"""Prefect tasks of causal fine-tuning: thin wrappers around training.causal.

A training task is cached on its run key (config hash + dataset version ids) and where its result lives (MLflow
store, output folder), so a flow re-run after a failure skips the chunk sizes that already finished; its retries
restart Ray Train under the same run name, which resumes from the last checkpoint instead of starting over.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from prefect import get_run_logger, task

from configs.finetune import FinetuneConfig
from data.store import sha256_text
from data.tracking import default_tracking_uri
from training.causal.run import run_finetune, run_key


def _run_cache_key(_context, parameters: dict) -> str:
    """The run key plus where the result lives: a run registered in another MLflow store (or written to another
    output folder) is not done for this one."""
    cfg = parameters["config"].resolved_paths()
    return sha256_text("finetune-causal", run_key(cfg), cfg.tracking_uri or default_tracking_uri(),
                       str(Path(cfg.output_dir).resolve()))


@task(name="finetune-causal-run", retries=1, retry_delay_seconds=5, cache_key_fn=_run_cache_key,
      cache_expiration=timedelta(days=30), persist_result=True)
def finetune_run(config: FinetuneConfig) -> dict:
    summary = run_finetune(config, say=get_run_logger().info)
    m = summary["metrics"]
    get_run_logger().info("%s: %d steps, val WER %s, registered %s v%s", summary["run_name"], m.get("step", 0),
                          m.get("val_wer"), summary["registered_model"], summary["registered_version"])
    return summary
