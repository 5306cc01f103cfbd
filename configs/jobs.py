"""What every training job's config shares: where its data is, and where and how it runs (Ray, MLflow).

Only what a job *learns* goes into its config hash: the fields in ``RUNTIME_FIELDS`` (resources, storage,
tracking, dataset paths; the dataset *versions* go into the run key instead) are left out, so the same training on
another machine or cluster has the same hash and finds its checkpoints and cache entries.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

RUNTIME_FIELDS = frozenset({"num_workers", "use_gpu", "threads_per_worker", "storage_path", "tracking_uri",
                            "experiment", "register_model", "max_failures", "chaos", "ray_address", "output_dir",
                            "datasets", "validation_datasets"})


class JobConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = "tiny.en"
    datasets: tuple[str, ...] = Field(..., min_length=1, description="dataset version directories to train on")
    splits: tuple[str, ...] = ("train",)
    validation_datasets: tuple[str, ...] = ()
    validation_splits: tuple[str, ...] = ("dev",)
    validation_limit: int | None = Field(None, ge=1, description="first N validation utterances (by key)")
    # The leakage guard (data/leakage.py) refuses a run whose validation audio is in its training data; a smoke
    # test may validate on its training utterances only by saying so, and its numbers are then tagged held-in.
    allow_held_in_validation: bool = False

    num_workers: int = Field(2, ge=0, description="Ray Train workers")
    use_gpu: bool = False
    threads_per_worker: int = Field(1, ge=1)
    max_failures: int = Field(2, ge=0, description="worker-group restarts before the run fails")
    storage_path: str = Field("outputs/ray", description="Ray Train storage: a local path or s3://… on a cluster")
    ray_address: str | None = None
    tracking_uri: str | None = Field(None, description="MLflow; default sqlite:///<cwd>/mlruns/mlflow.db")
    register_model: bool = True

    def learned_values(self) -> dict:
        return self.model_dump(mode="json", exclude=set(RUNTIME_FIELDS))

    def config_hash(self) -> str:
        return hashlib.sha256(json.dumps(self.learned_values(), sort_keys=True, separators=(",", ":")).encode()
                              ).hexdigest()

    def resolved_paths(self):
        """Dataset paths and a local sqlite tracking store made absolute (Ray workers run in their own working
        directories, where a relative path names another file); URLs (``s3://…``, ``http://…``) are left as they
        are."""

        def resolved(d: str) -> str:
            return str(d) if "://" in str(d) and not str(d).startswith("file://") else str(Path(d).resolve())

        uri = self.tracking_uri
        if uri and uri.startswith("sqlite:///"):
            uri = f"sqlite:///{Path(uri.removeprefix('sqlite:///')).resolve()}"
        return self.model_copy(update={"datasets": tuple(resolved(d) for d in self.datasets),
                                       "validation_datasets": tuple(resolved(d) for d in self.validation_datasets),
                                       "tracking_uri": uri})
