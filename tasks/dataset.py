"""Prefect tasks of the dataset build: thin wrappers around data.stages / data.parts / data.assemble.

Reuse does not go through Prefect's result cache: a batch's output is a Parquet part in the work store named by the
hash of its inputs' content, config, code and aligner (data/parts.py), found again by any runner — the process
pool, a Ray cluster, or a rerun after a kill — and per-utterance work inside a batch is memoized by content too.
Tasks return counts only, so the flow's memory does not grow with the corpus.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from configs.dataset import DatasetConfig
from data import fs, stages
from data.assemble import assemble, verify_version
from data.distributed import run_batches
from data.inputs import BatchRef, InputsRef, plan_batches, read_scan_rejects, write_inputs_table
from data.parts import process_batch
from data.scan import scan
from data.store import WorkStore
from data.tokens import tokenizer_id
from data.versioning import code_version, dataset_version_id


@task(name="scan-corpus", cache_policy=NO_CACHE)
def scan_corpus(corpus: str, cfg: DatasetConfig, work_dir: str) -> dict:
    """Always runs: hashing the inputs' bytes is how a change is noticed. Writes the inputs table (splits assigned,
    in build order) to the work store and returns where it is (``data.inputs.InputsRef``), not the inputs."""
    table, rejects = scan(corpus)
    ref = write_inputs_table(table, rejects, cfg, work_dir)
    del table
    get_run_logger().info("scanned %d inputs (%d rejected while reading) into %s", ref.n_inputs, ref.rejects, ref.path)
    return ref.to_json()


@task(name="plan-version", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=2)
def plan_version(inputs: dict, cfg: DatasetConfig, output_root: str) -> dict:
    aligner_version = stages.shared_aligner(cfg).version
    tokenizer = tokenizer_id(cfg.tokenizer)
    version_id = dataset_version_id(inputs["digest"], cfg, aligner_version, tokenizer)
    version_dir = fs.join(output_root, cfg.name, version_id)
    existing = verify_version(version_dir)
    return {"version_id": version_id, "version_dir": version_dir, "aligner_version": aligner_version,
            "code_version": code_version(), "tokenizer": tokenizer, "existing": existing}


@task(name="plan-batches", cache_policy=NO_CACHE)
def plan_build_batches(inputs: dict, cfg: DatasetConfig) -> list[BatchRef]:
    """Row ranges of the inputs table: a few dozen bytes per batch, whatever the corpus."""
    return plan_batches(InputsRef.from_json(inputs), cfg.align_batch_size)


def _versions(plan: dict) -> dict:
    return {k: plan[k] for k in ("code_version", "aligner_version", "tokenizer")}


@task(name="prepare-align", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=[2, 10])
def build_batch(batch: BatchRef, cfg: DatasetConfig, work_dir: str, plan: dict) -> dict:
    """Aligner failures on one utterance become rejects; a crash of the aligner itself is retried."""
    result = process_batch(batch, cfg, WorkStore(work_dir), **_versions(plan))
    get_run_logger().info("batch %d: aligned %d, reused %d, failed %d", batch.index, result.aligned_now,
                          result.reused, result.failed)
    return result.to_json()


@task(name="prepare-align-on-ray", cache_policy=NO_CACHE, retries=1, retry_delay_seconds=5)
def build_batches_on_ray(batches: list[BatchRef], cfg: DatasetConfig, work_dir: str, plan: dict,
                         ray_address: str, workers: int | None) -> list[dict]:
    logger = get_run_logger()
    results = []
    for n, result in enumerate(run_batches(batches, cfg, work_dir, address=ray_address, workers=workers,
                                           **_versions(plan)), start=1):
        results.append(result.to_json())
        if n % 50 == 0 or n == len(batches):
            logger.info("%d/%d batches built on Ray", n, len(batches))
    return sorted(results, key=lambda r: r["index"])


@task(name="assemble-dataset", cache_policy=NO_CACHE)
def assemble_dataset(results: list[dict], inputs: dict, cfg: DatasetConfig, work_dir: str, plan: dict) -> dict:
    keys = [r["part_key"] for r in sorted(results, key=lambda r: r["index"])]
    ref = InputsRef.from_json(inputs)
    return assemble(plan["version_dir"], keys, read_scan_rejects(ref), ref.n_inputs, cfg, WorkStore(work_dir),
                    version_id=plan["version_id"], aligner_version=plan["aligner_version"],
                    code_version=plan["code_version"])
