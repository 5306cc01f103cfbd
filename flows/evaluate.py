"""evaluate flow: the held-out `test` split through every system, ours and the real PyPI peers, in one run."""

from __future__ import annotations

from prefect import flow
from prefect.artifacts import create_markdown_artifact

from evaluation.report import markdown
from recognizer.spec import RecognizerSpec
from tasks.evaluate import evaluate_held_out
from tasks.runtime import prefect_api


@flow(name="evaluate", log_prints=True)
def evaluate(specs: list[RecognizerSpec], test_datasets: list[str], train_datasets: list[str],
             train_splits: list[str], split: str = "test", limit: int | None = None, out_dir: str | None = None,
             tracking_uri: str | None = None, repeats: int = 1, ledger_path: str | None = None,
             purpose: str = "release", reference: str | None = None, stride: int = 1) -> dict:
    result = evaluate_held_out(specs, test_datasets, train_datasets, train_splits, split, limit, out_dir,
                               tracking_uri, repeats=repeats, ledger_path=ledger_path, purpose=purpose,
                               reference=reference, stride=stride)
    create_markdown_artifact(key="evaluation", markdown=markdown(result))
    return result


def run_evaluate(*args, **kwargs) -> dict:
    with prefect_api():
        return evaluate(*args, **kwargs)
