"""The whole DAG as one Prefect flow: build_dataset → train_hush_word → finetune_causal → sweep_emma → evaluate →
promote (every recognizer the stages made registered, scored on `dev`, the gate's champion scored on `test`).
Every stage is a subflow that also runs alone (its own CLI command and deployment); parameters come from one typed
profile (``configs/pipeline.py``), checked before any work starts.

Re-running skips what is done: dataset versions are content-addressed (an existing version is returned as is),
training runs are cached on their run keys (config hash + dataset versions), a finished sweep with the same key
is read back from MLflow; changing only the sweep space re-runs only the sweep and the promotion.
"""

from __future__ import annotations

import time
from pathlib import Path

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from prefect.task_runners import ThreadPoolTaskRunner

from configs.pipeline import PipelineConfig
from flows.build_dataset import build_dataset
from flows.evaluate import evaluate
from flows.finetune_causal import finetune_causal
from flows.hush_word import train_hush_word_flow
from flows.sweep_emma import sweep_emma
from tasks.pipeline import (PipelineBusy, evaluate_summary, evaluation_specs, output_root_lock, preflight,
                            synthesize_corpus, tag_test_numbers)
from tasks.recognizer import (champion_spec, offline_references, promote_recognizers, recognizer_candidates,
                              register_candidates, tag_champion_test_numbers)
from tasks.runtime import prefect_api

__all__ = ["PipelineBusy", "pipeline", "run_pipeline"]


@flow(name="whisperline-pipeline", log_prints=True)
def pipeline(config: PipelineConfig, realspeech: str | None = None, real_train: str | None = None) -> dict:
    tracking_uri = preflight(config)
    with output_root_lock(config):
        return _stages(config, realspeech, real_train, tracking_uri)


def _stages(config: PipelineConfig, realspeech: str | None, real_train: str | None, tracking_uri: str) -> dict:
    started = time.perf_counter()
    times: dict[str, float] = {}
    out: dict = {}

    def timed(name: str, fn, *args, **kwargs):
        t0 = time.perf_counter()
        result = fn(*args, **kwargs)
        times[name] = round(time.perf_counter() - t0, 1)
        return result

    # build_dataset runs as a subflow: serially, or on Ray when the profile names an address (`build.ray_address`);
    # `whisperline data build` is the process-pool path for large corpora without a cluster
    root = Path(config.output_root).resolve()
    corpus = synthesize_corpus(str(root), config.n_synth)
    data_cfg = config.dataset.model_copy(update={"name": "synth"})
    on_ray = {"ray_address": config.build.ray_address, "workers": config.build.workers}
    synth = timed("build_dataset", build_dataset, corpus=corpus, output_root=str(root / "datasets"), config=data_cfg,
                  **on_ray)
    datasets, real_sets = [synth["version_dir"]], []
    out["build_dataset"] = {"synthetic": synth}
    if realspeech:  # its train split trains, its dev and test splits select and report
        real = build_dataset(corpus=realspeech, output_root=str(root / "datasets"), config=config.real_dataset(),
                             **on_ray)
        out["build_dataset"]["realspeech"] = real
        real_sets.append(real["version_dir"])
        datasets.append(real["version_dir"])
    fractions: dict[str, float] = {}
    if real_train:  # its dev and test speakers join dev and test (a domain of their own); its train speakers train
        name = Path(real_train).resolve().name  # by the adopted share (0: none)
        l2 = build_dataset(corpus=real_train, output_root=str(root / "datasets"),
                           config=config.real_train_dataset(name), **on_ray)
        out["build_dataset"][name] = l2
        real_sets.append(l2["version_dir"])
        if config.real_train_fraction > 0:
            datasets.append(l2["version_dir"])
            fractions = {name: config.real_train_fraction} if config.real_train_fraction < 1 else {}
    validation = real_sets or [synth["version_dir"]]  # dev selects on real speech where there is some
    if "train_hush_word" in config.stages:
        out["train_hush_word"] = timed("train_hush_word", train_hush_word_flow, config.hush_word_config(datasets))
    adapters: dict[int, str] = {}
    if "finetune_causal" in config.stages:
        one_at_a_time = finetune_causal.with_options(task_runner=ThreadPoolTaskRunner(max_workers=1))
        rows = timed("finetune_causal", one_at_a_time, config.finetune_config(datasets, validation, fractions),
                     list(config.chunk_sizes))
        out["finetune_causal"] = rows
        adapters = {r["chunk_ms"]: r["adapter_dir"] for r in rows if r.get("status") == "ok" and r["variant"] != "rcs"}
    if "sweep_emma" in config.stages and config.sweep_chunk_ms in adapters:
        sweep = config.sweep_config(datasets, validation, adapters[config.sweep_chunk_ms])
        out["sweep_emma"] = timed("sweep_emma", sweep_emma, sweep, promote="promote" in config.stages)
    if "evaluate" in config.stages:
        out["evaluate"] = evaluate_summary(out)  # what each stage measured on `dev` (selection)
        create_markdown_artifact(key="pipeline-results", markdown="\n".join(
            ["| system (dev split) | WER | ARWER | AL ms |", "|---|---|---|---|"]
            + [f"| {r['system']} | {r['wer']} | {r['arwer']} | {r['al_ms']} |" for r in out["evaluate"]]))
        hush_dir = ((out.get("train_hush_word") or {}).get("training") or {}).get("hush_word_dir")
        held_out = validation  # the same datasets' `test` splits
        specs = evaluation_specs(config, adapters, out.get("sweep_emma"), hush_dir)
        champion = None
        candidates = recognizer_candidates(config, adapters, out.get("sweep_emma"), hush_dir)
        if "promote" in config.stages and candidates:
            # every recognizer registered, scored on `dev` beside the offline references, the gate names the champion
            registered = register_candidates(tracking_uri, candidates)
            dev = timed("evaluate_dev", evaluate, offline_references(config) + candidates, validation, datasets,
                        ["train"], split="dev", out_dir=str(root / "evaluation-dev"), tracking_uri=config.tracking_uri)
            out["promote_recognizers_registered"] = registered
            out["promote_recognizers"] = promote_recognizers(tracking_uri, dev, registered, config)
            champion = out["promote_recognizers"]["aliases"]["champion"]
            specs.append(champion_spec(tracking_uri, champion["registered_model"], "champion",
                                       str(root / "champion")))
        # the held-out `test` split (real speech when given): every system, ours and the PyPI peers, one run
        out["evaluate_test"] = timed("evaluate", evaluate, specs, held_out, datasets, ["train"],
                                     limit=config.evaluate_limit, out_dir=str(root / "evaluation"),
                                     tracking_uri=config.tracking_uri, ledger_path=str(root / "test_ledger.jsonl"),
                                     purpose="pipeline")
        promotion = (out.get("sweep_emma") or {}).get("promotion")
        out["promotion_test_tags"] = tag_test_numbers(out["sweep_emma"]["tracking_uri"], promotion,
                                                      out["evaluate_test"]) if promotion else {}
        if champion:
            out["champion_test_tags"] = tag_champion_test_numbers(tracking_uri, champion, out["evaluate_test"])
    out["stage_s"] = times
    out["wall_s"] = round(time.perf_counter() - started, 1)
    return out


def run_pipeline(config: PipelineConfig, realspeech: str | None = None, real_train: str | None = None) -> dict:
    with prefect_api():
        return pipeline(config=config, realspeech=realspeech, real_train=real_train)
