"""Flow entry points for the Prefect deployments in infra/prefect.yaml: JSON-only parameters (a profile path), so a
scheduled run needs nothing but the repository and the profile."""

from __future__ import annotations

from prefect import flow

from configs.dataset import load_dataset_config
from configs.pipeline import load_pipeline_config
from flows.build_dataset import build_dataset
from flows.pipeline import pipeline


@flow(name="pipeline-profile")
def pipeline_profile(profile: str = "configs/smoke.yaml", realspeech: str | None = None) -> dict:
    return pipeline(config=load_pipeline_config(profile), realspeech=realspeech)


@flow(name="dataset-refresh")
def dataset_refresh(corpus: str, profile: str = "configs/smoke.yaml", output_root: str = "outputs/datasets") -> dict:
    return build_dataset(corpus=corpus, output_root=output_root, config=load_dataset_config(profile))
