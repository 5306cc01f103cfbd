"""train-hush-word flow: train the hush word (Ray Train job), then compare it with every padding on real speech."""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_table_artifact

from configs.hush_word import HushWordConfig
from tasks.hush_word import evaluate_hush_word_task, train_hush_word_task
from tasks.runtime import prefect_api


@flow(name="train-hush-word", log_prints=True)
def train_hush_word_flow(config: HushWordConfig, realspeech: str | None = None, eval_skip: int = 0,
                         eval_limit: int | None = None) -> dict:
    summary = train_hush_word_task(config)
    result = {"training": summary}
    if realspeech:
        scores = evaluate_hush_word_task(config.model, summary["hush_word_dir"], realspeech, eval_skip, eval_limit)
        result["evaluation"] = scores
        create_table_artifact(key="hush-word", table=[
            {"condition": c, **{k: v for k, v in s.items() if k != "hypotheses"}} for c, s in scores.items()])
    return result


def run_hush_word_flow(config: HushWordConfig, realspeech: str | None = None, eval_skip: int = 0,
                       eval_limit: int | None = None) -> dict:
    with prefect_api():
        return train_hush_word_flow(config=config, realspeech=realspeech, eval_skip=eval_skip, eval_limit=eval_limit)
