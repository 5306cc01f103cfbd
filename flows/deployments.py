"""Flow entry points for the Prefect deployments in infra/prefect.yaml: JSON-only parameters (a profile path and
dataset paths), so a scheduled run needs nothing but the repository and the profile. Stage settings come from the
profile through ``PipelineConfig`` (the same merge as the whole pipeline)."""

from __future__ import annotations

from prefect import flow

from configs.dataset import load_dataset_config
from configs.pipeline import load_pipeline_config
from flows.build_dataset import build_dataset
from flows.finetune_causal import finetune_causal
from flows.hush_word import train_hush_word_flow
from flows.pipeline import pipeline
from flows.sweep_emma import sweep_emma


@flow(name="pipeline-profile")
def pipeline_profile(profile: str = "configs/smoke.yaml", realspeech: str | None = None,
                     real_train: str | None = None) -> dict:
    return pipeline(config=load_pipeline_config(profile), realspeech=realspeech, real_train=real_train)


@flow(name="dataset-refresh")
def dataset_refresh(corpus: str, profile: str = "configs/smoke.yaml", output_root: str = "outputs/datasets") -> dict:
    return build_dataset(corpus=corpus, output_root=output_root, config=load_dataset_config(profile))


@flow(name="hush-word-profile")
def hush_word_profile(datasets: list[str], profile: str = "configs/smoke.yaml", realspeech: str | None = None) -> dict:
    return train_hush_word_flow(config=load_pipeline_config(profile).hush_word_config(datasets), realspeech=realspeech)


@flow(name="finetune-causal-profile")
def finetune_profile(datasets: list[str], profile: str = "configs/smoke.yaml", validation: list[str] | None = None,
                     chunk_sizes: list[int] | None = None) -> list[dict]:
    cfg = load_pipeline_config(profile)
    return finetune_causal(config=cfg.finetune_config(datasets, validation or datasets),
                           chunk_sizes=chunk_sizes or list(cfg.chunk_sizes))


@flow(name="sweep-emma-profile")
def sweep_profile(datasets: list[str], validation: list[str], adapter_dir: str, profile: str = "configs/smoke.yaml",
                  promote: bool = True) -> dict:
    return sweep_emma(sweep=load_pipeline_config(profile).sweep_config(datasets, validation, adapter_dir),
                      promote=promote)
