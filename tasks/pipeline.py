"""Prefect tasks of the whole-pipeline flow (flows/pipeline.py wires them): preflight, the embedded corpus, the
summary of what every stage measured, and the one-pipeline-per-output-root lock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout
from prefect import task
from prefect.cache_policies import NO_CACHE

from configs.pipeline import PipelineConfig
from data.synth import write_synthetic_corpus
from data.tracking import client, default_tracking_uri, require_tracking
from evaluation import domains
from evaluation.peers import peers_available
from recognizer.build import default_specs, peer_specs
from recognizer.card import write_card
from recognizer.spec import Decoding, RecognizerSpec, Weights, served


@task(name="preflight", cache_policy=NO_CACHE)
def preflight(config: PipelineConfig) -> str:
    """Before any work: the tracking store answers (bounded tries, clear error). The config itself was checked when
    it was built (``PipelineConfig`` validates every stage)."""
    uri = config.tracking_uri or default_tracking_uri()
    require_tracking(uri)
    return uri


@task(name="synthesize-corpus", cache_policy=NO_CACHE)
def synthesize_corpus(root: str, n: int) -> str:
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


def dev_selected_emma(config: PipelineConfig, adapters: dict[int, str], sweep: dict | None):
    """The decoding (``recognizer.spec.Decoding``: ``emma_dir`` and ``t_emma``) of the trial the sweep's dev-split
    gate chose (its policy folder is tagged on its MLflow run), when there is one and its adapter was trained here;
    else None."""
    trial = (sweep or {}).get("promotion", {}).get("trial") or {}
    if not trial.get("run_id") or config.sweep_chunk_ms not in adapters:
        return None
    tags = client(sweep["tracking_uri"]).get_run(trial["run_id"]).data.tags
    return Decoding(1, tags["policy_dir"], float(trial["t_emma"])) if tags.get("policy_dir") else None


def tag_version_test_numbers(tracking_uri: str, registered_model: str, version: str, row: dict, test_set: dict,
                             keys: tuple[str, ...]) -> dict[str, str]:
    """A version chosen on `dev` gets its held-out `test` numbers (reported, never selected on) as ``test_*`` tags."""
    tags = {f"test_{k}": str(row[k]) for k in keys} | domains.wer_tags(row, "test")
    if ci := (row.get("ci95") or {}).get("wer"):
        tags["test_wer_ci95"] = f"[{ci[0]}, {ci[1]}]"
    tags |= {"test_set": f"{test_set['n_utterances']} utterances, {test_set['seconds']} s, "
                         f"{test_set['speakers']} speakers",
             "test_set_audio_sha256": test_set.get("audio_sha256", ""), "selected_on": "dev split"}
    c = client(tracking_uri)
    for k, v in tags.items():
        c.set_model_version_tag(registered_model, version, k, v)
    write_card(tracking_uri, registered_model, version)  # the card follows the tags
    return tags


@task(name="evaluation-systems", cache_policy=NO_CACHE)
def evaluation_specs(config: PipelineConfig, adapters: dict[int, str], sweep: dict | None,
                     hush_dir: str | None = None) -> list:
    """What the evaluate stage compares on the held-out `test` split: offline Whisper, our causal engine with the
    original weights and with every tuned adapter, two-pass streaming (tuned adapter + the original weights as
    verifier, with this run's hush word), the dev-selected EMMA trial, and the real PyPI peers."""
    # the served spec with this run's hush word as its verifier's padding (tasks/recognizer.py's hush candidate)
    two_pass = hush_candidate(served(config), hush_dir) if hush_dir else None
    specs = default_specs(list(config.chunk_sizes), adapters, peers=False, model=config.model, two_pass=two_pass)
    if emma := dev_selected_emma(config, adapters, sweep):
        specs.append(RecognizerSpec(f"causal tuned + EMMA {config.sweep_chunk_ms} ms (dev-selected)", "causal",
                                    config.sweep_chunk_ms, Weights(config.model, adapters[config.sweep_chunk_ms]),
                                    decoding=emma))
    if config.evaluate_peers:
        if peers_available():
            specs += [s for c in config.evaluate_peer_chunk_ms for s in peer_specs(c, config.model)]
    return specs


def hush_candidate(spec, hush_dir: str):
    """``spec`` with the run's hush word as the verifier's mid-stream padding; the last pass keeps the spec's (on
    one-word clips a last pass padded with a hush word said nothing or the word twice: verifier-hush-real.md)."""
    return spec.with_(second_pass={"padding": "hush", "hush_dir": hush_dir})


@task(name="tag-test-numbers", cache_policy=NO_CACHE)
def tag_test_numbers(tracking_uri: str, promotion: dict | None, evaluation: dict) -> dict[str, str]:
    """The promoted model version was chosen on `dev`; its held-out `test` numbers (reported, never selected on)
    go onto the version as ``test_*`` tags next to the dev ones."""
    if not promotion or not promotion.get("version") or not promotion.get("registered_model"):
        return {}
    rows = [r for r in evaluation["systems"]
            if r["spec"]["decoding"]["emma_dir"] and not r["name"].startswith("champion")]
    if not rows:
        return {}
    return tag_version_test_numbers(tracking_uri, promotion["registered_model"], promotion["version"], rows[0],
                                    evaluation["test_set"],
                                    ("wer", "laal_ms", "word_latency_ms_median", "rtf", "step_ms_median"))
