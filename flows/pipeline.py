"""The whole DAG as one Prefect flow: build_dataset → train_hush_word → finetune_causal → sweep_emma → evaluate →
promote. Every stage is a subflow that also runs alone (its own CLI command and deployment); parameters come
from one typed profile (``configs/pipeline.py``), checked before any work starts.

Re-running skips what is done: dataset versions are content-addressed (an existing version is returned as is),
training runs are cached on their run keys (config hash + dataset versions), a finished sweep with the same key
is read back from MLflow; changing only the sweep space re-runs only the sweep and the promotion.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from configs.pipeline import PipelineConfig
from flows.build_dataset import build_dataset
from flows.finetune_causal import finetune_causal
from flows.hush_word import train_hush_word_flow
from flows.sweep_emma import sweep_emma
from tasks.runtime import prefect_api


@task(name="preflight", cache_policy=NO_CACHE)
def preflight(config: PipelineConfig) -> str:
    """Before any work: the tracking store answers (bounded tries, clear error). The config itself was checked when
    it was built (``PipelineConfig`` validates every stage)."""
    from training.tracking import default_tracking_uri, require_tracking

    uri = config.tracking_uri or default_tracking_uri()
    require_tracking(uri)
    return uri


@task(name="synthesize-corpus", cache_policy=NO_CACHE)
def synthesize_corpus(root: str, n: int) -> str:
    from data.synth import write_synthetic_corpus

    return str(write_synthetic_corpus(Path(root) / "corpora" / f"synth-{n}", n, seed=0))  # skips existing files


@task(name="evaluate-champion", cache_policy=NO_CACHE)
def evaluate_summary(stages: dict) -> list[dict]:
    """One row per trained system with the scores its stage measured (streaming engine, same metrics)."""
    rows = []
    for r in stages.get("finetune_causal", []):
        rows.append({"system": f"causal LoRA {r['variant']} (stability rule)", "wer": r.get("val_wer"),
                     "arwer": r.get("val_arwer"), "al_ms": r.get("val_al_ms"), "model": r.get("registered")})
    sweep = stages.get("sweep_emma")
    if sweep:
        for r in sweep["dashboard_rows"]:
            if r["pareto"]:
                rows.append({"system": f"EMMA t={r['t_emma']} λ_lat={r['lambda_latency']}", "wer": r["wer"],
                             "arwer": r["arwer"], "al_ms": r["al_ms"], "model": r["run_id"]})
    return rows


class PipelineBusy(RuntimeError):
    """Another pipeline holds the output root (its datasets, adapters, checkpoints) for longer than allowed."""


@contextmanager
def output_root_lock(config: PipelineConfig) -> Iterator[None]:
    """One pipeline at a time per output root: a second one waits (up to ``lock_timeout_s``), then finds the first
    one's stages finished and skips them, instead of training the same run keys side by side into the same
    checkpoint folders. (Dataset builds are safe on their own: versions publish atomically under a lock.)"""
    from filelock import FileLock, Timeout

    root = Path(config.output_root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(root / ".pipeline.lock"))
    try:
        lock.acquire(timeout=config.lock_timeout_s)
    except Timeout as err:
        raise PipelineBusy(f"another pipeline has held {root} for more than {config.lock_timeout_s:.0f} s "
                           f"(lock file {lock.lock_file}); wait for it or use another output_root") from err
    try:
        yield
    finally:
        lock.release()


@flow(name="whisperline-pipeline", log_prints=True)
def pipeline(config: PipelineConfig, realspeech: str | None = None) -> dict:
    preflight(config)
    with output_root_lock(config):
        return _stages(config, realspeech)


def _stages(config: PipelineConfig, realspeech: str | None) -> dict:
    started = time.perf_counter()
    times: dict[str, float] = {}
    out: dict = {}

    def timed(name: str, fn, *args, **kwargs):
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        times[name] = round(time.perf_counter() - t0, 1)
        return result

    # build_dataset runs serially as a subflow; `whisperline data build` is the parallel path for large corpora
    root = Path(config.output_root).resolve()
    corpus = synthesize_corpus(str(root), config.n_synth)
    data_cfg = config.dataset.model_copy(update={"name": "synth"})
    synth = timed("build_dataset", build_dataset, corpus=corpus, output_root=str(root / "datasets"), config=data_cfg)
    datasets, validation = [synth["version_dir"]], [synth["version_dir"]]
    out["build_dataset"] = {"synthetic": synth}
    if realspeech:
        real = build_dataset(corpus=realspeech, output_root=str(root / "datasets"), config=config.real_dataset())
        datasets.append(real["version_dir"])
        validation = [real["version_dir"]]
        out["build_dataset"]["realspeech"] = real
    if "train_hush_word" in config.stages:
        out["train_hush_word"] = timed("train_hush_word", train_hush_word_flow, config.hush_word_config(datasets))
    adapters: dict[int, str] = {}
    if "finetune_causal" in config.stages:
        one_at_a_time = finetune_causal.with_options(task_runner=ThreadPoolTaskRunner(max_workers=1))
        rows = timed("finetune_causal", one_at_a_time, config.finetune_config(datasets, validation),
                     list(config.chunk_sizes))
        out["finetune_causal"] = rows
        adapters = {r["chunk_ms"]: r["adapter_dir"] for r in rows if r.get("status") == "ok" and r["variant"] != "rcs"}
    if "sweep_emma" in config.stages and config.sweep_chunk_ms in adapters:
        sweep = config.sweep_config(datasets, validation, adapters[config.sweep_chunk_ms])
        out["sweep_emma"] = timed("sweep_emma", sweep_emma, sweep, promote="promote" in config.stages)
    if "evaluate" in config.stages:
        out["evaluate"] = evaluate_summary(out)
        create_markdown_artifact(key="pipeline-results", markdown="\n".join(
            ["| system | WER | ARWER | AL ms |", "|---|---|---|---|"]
            + [f"| {r['system']} | {r['wer']} | {r['arwer']} | {r['al_ms']} |" for r in out["evaluate"]]))
    out["stage_s"] = times
    out["wall_s"] = round(time.perf_counter() - started, 1)
    return out


def run_pipeline(config: PipelineConfig, realspeech: str | None = None) -> dict:
    with prefect_api():
        return pipeline(config=config, realspeech=realspeech)
