"""Prefect tasks of the dataset build: thin wrappers around data.stages / data.assemble.

Cache keys are content hashes (inputs' sha256, config hash, code version, aligner version, work
store id), never file paths or run ids, so a re-run with nothing changed hits the cache across
flow runs and a changed input misses only for the batch that holds it. Inside a batch the work
store memoizes per utterance, so only the changed input is re-aligned.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from prefect import get_run_logger, task
from prefect.cache_policies import NO_CACHE

from configs.dataset import DatasetConfig
from data import stages
from data.assemble import assemble, verify_version
from data.records import Aligned, Prepared, Reject, Scanned
from data.store import WorkStore, sha256_text
from data.tokens import tokenizer_id
from data.versioning import code_version, dataset_version_id


def _batch_key(kind: str, parameters: dict, extra: str = "") -> str:
    cfg: DatasetConfig = parameters["cfg"]
    store = WorkStore(parameters["work_dir"])
    contents = []
    for rec in parameters["batch"]:
        scanned = rec if isinstance(rec, Scanned) else rec.scanned if isinstance(rec, Prepared) else None
        contents.append(scanned.content_key if scanned else f"reject:{rec.utt_id}:{rec.reason}")
    return sha256_text(kind, cfg.config_hash(), code_version(), store.store_id, extra, *contents)


@task(name="scan-corpus", cache_policy=NO_CACHE)
def scan_corpus(corpus: str) -> tuple[list[Scanned], list[Reject]]:
    """Always runs: hashing the inputs' bytes is how a change is noticed."""
    scanned, rejects = stages.scan(corpus)
    get_run_logger().info("scanned %d inputs (%d rejected while reading)", len(scanned) + len(rejects), len(rejects))
    return scanned, rejects


@task(name="plan-version", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=2)
def plan_version(scanned: list[Scanned], scan_rejects: list[Reject], cfg: DatasetConfig,
                 output_root: str) -> dict:
    aligner_version = stages.shared_aligner(cfg).version
    version_id = dataset_version_id(scanned, scan_rejects, cfg, aligner_version, tokenizer_id(cfg.tokenizer))
    version_dir = Path(output_root) / cfg.name / version_id
    existing = verify_version(version_dir)
    return {"version_id": version_id, "version_dir": str(version_dir), "aligner_version": aligner_version,
            "code_version": code_version(), "existing": existing}


@task(name="prepare-audio", cache_key_fn=lambda ctx, p: _batch_key("prepare", p),
      cache_expiration=timedelta(days=30))
def prepare_batch(batch: list[Scanned], cfg: DatasetConfig, work_dir: str) -> list[Prepared | Reject]:
    return stages.prepare(batch, cfg, WorkStore(work_dir), code_version())


@task(name="align", retries=2, retry_delay_seconds=[2, 10],
      cache_key_fn=lambda ctx, p: _batch_key("align", p, stages.shared_aligner(p["cfg"]).version),
      cache_expiration=timedelta(days=30))
def align_batch(batch: list[Prepared | Reject], cfg: DatasetConfig, work_dir: str) -> tuple[list[Aligned | Reject], dict]:
    """Aligner failures on one utterance become rejects; a crash of the aligner itself is retried."""
    passed = [r for r in batch if isinstance(r, Reject)]
    prepared = [r for r in batch if isinstance(r, Prepared)]
    results, stats = stages.align(prepared, cfg, WorkStore(work_dir), code_version())
    get_run_logger().info("aligned %d, reused %d, failed %d", stats.aligned, stats.reused, stats.failed)
    return results + passed, {"aligned": stats.aligned, "reused": stats.reused, "failed": stats.failed,
                              "aligned_ids": stats.utt_ids, "seconds_audio": stats.seconds_audio}


@task(name="assemble-dataset", cache_policy=NO_CACHE)
def assemble_dataset(results: list[Aligned | Reject], scan_rejects: list[Reject], n_inputs: int,
                     cfg: DatasetConfig, work_dir: str, plan: dict) -> dict:
    aligned = [r for r in results if isinstance(r, Aligned)]
    rejects = [r for r in results if isinstance(r, Reject)] + list(scan_rejects)
    return assemble(Path(plan["version_dir"]), aligned, rejects, n_inputs, cfg, WorkStore(work_dir),
                    version_id=plan["version_id"], aligner_version=plan["aligner_version"],
                    code_version=plan["code_version"])
