"""The build's batches on a Ray cluster: Ray Data `map_batches` over an actor pool, one aligner per actor.

Why Ray Data and not prefect-ray's RayTaskRunner (each mapped Prefect task run becomes a Ray task):
- a forced aligner's start-up (pocketsphinx's acoustic model, MFA's Kaldi models, Whisper for whisper-dtw) is paid
  once per *actor* here (`_BatchWorker.__init__`); Ray tasks are stateless, so a task runner could only cache it
  per worker process by accident;
- Ray Data's streaming executor bounds the work in flight and hands back only what `map_batches` returns (a
  batch's counts: the rows go to Parquet parts in the work store), so the driver's memory stays flat;
- a corpus-scale build has thousands of batches: as Prefect task runs each writes states to one Prefect database (the
  "database is locked" failure mode); here it is one Prefect task with one state, while Ray's dashboard shows the
  per-batch progress and restarts lost actors and retries their batches.
The process pool (Prefect's ProcessPoolTaskRunner over `data.parts.process_batch`) stays the default without a
cluster. Both call the same `process_batch` on the same batches, so the parts — and the dataset — are byte-identical.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence

from configs.dataset import DatasetConfig
from data.inputs import BatchRef
from data.parts import BatchResult, process_batch
from data.stages import shared_aligner
from data.store import WorkStore

# What a worker must see of the driver's environment on a cluster it did not start (object storage, chaos drills).
_ENV_PREFIXES = ("AWS_", "FSSPEC_", "WHISPERLINE_")
# ...but never a secret's value: Ray keeps the runtime environment in its metadata and shows it on the dashboard.
# Workers of a cluster this process starts inherit its environment; those of a cluster started elsewhere get
# credentials from their own (a Kubernetes secret, an instance role) or a file a variable names
# (AWS_SHARED_CREDENTIALS_FILE, AWS_PROFILE: references, passed on).
_SECRET = re.compile(r"SECRET|TOKEN|PASSWORD|ACCESS_KEY|CREDENTIAL(?!S_FILE)", re.IGNORECASE)


def worker_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings of ``environ`` a worker needs (``_ENV_PREFIXES``), without any secret."""
    return {k: v for k, v in environ.items() if k.startswith(_ENV_PREFIXES) and not _SECRET.search(k)}


class _BatchWorker:
    """One Ray Data actor: loads the aligner once, then builds one batch's part per call."""

    def __init__(self, cfg_json: str, work_root: str, code_version: str, aligner_version: str, tokenizer: str):
        self.cfg = DatasetConfig.model_validate_json(cfg_json)
        self.store = WorkStore(work_root)
        self.kw = {"code_version": code_version, "aligner_version": aligner_version, "tokenizer": tokenizer}
        aligner = shared_aligner(self.cfg)  # the model start-up, paid here once per actor
        if aligner.version != aligner_version:
            raise RuntimeError(f"this worker's aligner is {aligner.version}, the build planned {aligner_version}: "
                               "the cluster's image differs from the driver's")

    def __call__(self, batch: dict) -> dict:
        results = [process_batch(BatchRef.from_json(json.loads(text)), self.cfg, self.store, **self.kw)
                   for text in batch["batch"]]
        return {"result": [json.dumps(r.to_json()) for r in results]}


def connect(address: str, workers: int | None) -> bool:
    """Join the cluster at ``address`` ("auto", "ray://…", host:port) or start a local instance ("local").
    Returns whether this call connected (and so should disconnect)."""
    import ray  # lazy: Ray only when a build runs on it (the process pool needs none)

    if ray.is_initialized():
        return False
    env = worker_env(os.environ)
    if address == "local":
        ray.init(num_cpus=workers or os.cpu_count(), include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": env} if env else None)
    else:
        ray.init(address=address, log_to_driver=False, runtime_env={"env_vars": env} if env else None)
    return True


def run_batches(batches: Sequence[BatchRef], cfg: DatasetConfig, work_root: str, *, code_version: str,
                aligner_version: str, tokenizer: str, address: str, workers: int | None = None) -> Iterator[BatchResult]:
    """Build every batch's part on the Ray cluster; yields the batches' counts as they finish (any order)."""
    import ray  # lazy: as in connect
    import ray.data

    connected = connect(address, workers)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        actors = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        items = [{"batch": json.dumps(b.to_json())} for b in batches]
        ds = ray.data.from_items(items, override_num_blocks=max(1, len(items)))
        # Ray Data restarts a lost actor and retries its batch by itself (a part is written whole or not at all)
        out = ds.map_batches(_BatchWorker, batch_size=1, compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=1,
                             fn_constructor_kwargs={"cfg_json": cfg.canonical_json(), "work_root": work_root,
                                                    "code_version": code_version, "aligner_version": aligner_version,
                                                    "tokenizer": tokenizer})
        for row in out.iter_rows():
            yield BatchResult(**json.loads(row["result"]))
    finally:
        if connected:
            ray.shutdown()
