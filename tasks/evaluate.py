"""Prefect task of the evaluate stage: a thin wrapper around evaluation (no caching: timings are part of
the result, and a report is cheap to redo next to what it measures)."""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from data.provenance import check_artifacts_held_out
from evaluation.ledger import record_scoring
from evaluation.report import log_report, write_report
from evaluation.sets import describe, load_split
from recognizer.evaluate import evaluate_systems
from recognizer.spec import RecognizerSpec, artifact_dirs


@task(name="evaluate-systems", cache_policy=NO_CACHE)
def evaluate_held_out(specs: list[RecognizerSpec], test_datasets: list[str], train_datasets: list[str],
                      train_splits: list[str], split: str = "test", limit: int | None = None,
                      out_dir: str | None = None, tracking_uri: str | None = None,
                      experiment: str = "whisperline-evaluation", repeats: int = 1,
                      ledger_path: str | None = None, purpose: str = "release", reference: str | None = None,
                      stride: int = 1) -> dict:
    """Refuses (LeakageError) when the test audio is in the training data of any artifact scored (adapters, EMMA
    policies, hush words: the datasets and splits each records; ProvenanceError for one that records none) or in
    the caller's ``train_datasets``; streams every system; report + MLflow. Scoring a `test` split appends a line
    to the ledger at ``ledger_path`` (commit, systems, ``purpose``) and the report states how often that test set
    has been scored for ``purpose``."""
    provenance = check_artifacts_held_out(artifact_dirs(specs), test_datasets, [split],
                                          extra_train_dirs=train_datasets, extra_train_splits=train_splits, what=split)
    utterances = load_split(test_datasets, [split])
    # stride k: every k-th utterance in key order (a cheaper selection run that still spans every corpus)
    scored = utterances[::stride]
    scored = scored[:limit] if limit else scored
    # every system streams the first utterance once before the timed passes (caches, lazy imports) and then
    # scores it like the others: recognizers are reset per utterance, and real speech is too scarce to spend
    warmup = scored[0] if scored else None
    test_set = {**describe(test_datasets, [split], scored), "audio_sha256_overlap_with_training": provenance["overlap"],
                "provenance": provenance, "warmup_utterance": warmup.utt_id if warmup else None,
                **({"stride": stride} if stride > 1 else {})}
    if split == "test" and ledger_path:
        row = record_scoring(ledger_path, test_set=test_set, systems=[s.name for s in specs], purpose=purpose)
        test_set.update(times_scored=row["times_scored"], ledger=str(ledger_path), purpose=purpose)
    logger = get_run_logger()
    result = evaluate_systems(specs, scored, test_set=test_set, warmup=warmup, repeats=repeats,
                              log=logger.info, reference=reference)
    if out_dir:
        files = write_report(result, out_dir)
        if tracking_uri:
            result["mlflow_run_id"] = log_report(tracking_uri, experiment, result, files)
    return result
