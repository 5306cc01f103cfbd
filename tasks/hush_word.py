"""Prefect tasks of the hush word: training (a Ray Train job, cached on its run key) and the condition comparison."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from configs.hush_word import HushWordConfig
from data.store import sha256_text
from data.tracking import default_tracking_uri
from data.weights import load_model
from evaluation.sets import load_realspeech
from streaming.hush.frontend import load_hush_word
from training.hush_word.evaluate import evaluate_conditions
from training.hush_word.run import train_hush_word
from training.raytrain import run_key


def _key(_context, parameters: dict) -> str:
    """The run key plus where the result lives (another MLflow store or output folder is another result)."""
    cfg: HushWordConfig = parameters["config"].resolved_paths()
    return sha256_text("hush-word", run_key(cfg.config_hash(), cfg.datasets, cfg.validation_datasets),
                       cfg.tracking_uri or default_tracking_uri(), str(Path(cfg.output_dir).resolve()))


@task(name="train-hush-word", retries=1, retry_delay_seconds=5, cache_key_fn=_key,
      cache_expiration=timedelta(days=30), persist_result=True)
def train_hush_word_task(config: HushWordConfig) -> dict:
    summary = train_hush_word(config, say=get_run_logger().info)
    get_run_logger().info("%s: val loss %s, registered %s v%s", summary["run_name"],
                          summary["metrics"].get("final_val_loss"), summary["registered_model"],
                          summary["registered_version"])
    return summary


@task(name="evaluate-hush-word", cache_policy=NO_CACHE)
def evaluate_hush_word_task(model_name: str, hush_word_dir: str | None, realspeech: str, skip: int = 0,
                            limit: int | None = None) -> dict:
    """Every input condition on the real speech utterances [skip : skip + limit] (speech the hush word never saw)."""
    utterances = load_realspeech(realspeech)[skip : (skip + limit) if limit else None]
    hush = load_hush_word(hush_word_dir) if hush_word_dir else None
    return evaluate_conditions(load_model(model_name).eval(), utterances, hush)
