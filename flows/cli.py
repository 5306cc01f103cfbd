"""The one user entry point: ``whisperline --help``.

Each command imports its flow (Prefect, Ray, torch), its stage config (pydantic models are built at import) and
other heavy helpers inside its body, so that ``--help`` and argument errors answer at once.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

from configs.dataset import load_dataset_config
from data.tracking import client, default_tracking_uri
from flows.cli_data import data_app, models_app
from flows.cli_serve import serve_model, stream_file_cmd

app = typer.Typer(help="whisperline: turn Whisper into a low-latency streaming recognizer.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(data_app, name="data")
sweep_app = typer.Typer(help="EMMA sweeps (Prefect → Ray Tune → MLflow) and their dashboards.", no_args_is_help=True)
registry_app = typer.Typer(help="MLflow model registry: promotion by aliases.", no_args_is_help=True)
app.add_typer(sweep_app, name="sweep")
app.add_typer(registry_app, name="registry")
app.command("serve-model")(serve_model)
app.command("stream-file")(stream_file_cmd)

DEFAULT_REALSPEECH = os.environ.get("WHISPERLINE_REALSPEECH", "../shared/data/realspeech")


@app.command("finetune")
def finetune(
    datasets: Annotated[list[str], typer.Argument(help="dataset version directories to train on")],
    chunk_ms: Annotated[Optional[list[int]], typer.Option("--chunk-ms", help="one run per chunk size (repeat)")] = None,
    random_chunk: Annotated[bool, typer.Option(help="also train one adapter over the --chunk-ms sizes ≤ 600 ms")] = False,
    random_chunk_ms: Annotated[Optional[list[int]], typer.Option(
        "--random-chunk-ms", help="train one random-chunk-size adapter over these sizes (repeat); without --chunk-ms "
                                  "no per-chunk adapter is trained")] = None,
    validation: Annotated[Optional[list[str]], typer.Option(help="dataset versions for streaming validation")] = None,
    config: Annotated[Optional[Path], typer.Option(help="YAML profile with a finetune: section")] = None,
    max_steps: Annotated[Optional[int], typer.Option()] = None,
    num_workers: Annotated[Optional[int], typer.Option(help="Ray Train workers")] = None,
    use_gpu: Annotated[Optional[bool], typer.Option()] = None,
    tracking_uri: Annotated[Optional[str], typer.Option(help="MLflow tracking URI")] = None,
    parallel_runs: Annotated[int, typer.Option(help="chunk sizes trained at the same time")] = 1,
) -> None:
    """Causal LoRA fine-tuning per chunk size (Prefect flow finetune-causal → Ray Train → MLflow registry)."""
    from configs.finetune import load_finetune_config
    from flows.finetune_causal import run_finetune_flow

    cfg = load_finetune_config(str(config) if config else None, datasets=tuple(datasets),
                               validation_datasets=tuple(validation) if validation else None, max_steps=max_steps,
                               num_workers=num_workers, use_gpu=use_gpu, tracking_uri=tracking_uri)
    per_chunk = chunk_ms or ([] if random_chunk_ms else [cfg.chunk_ms])
    rows = run_finetune_flow(cfg, per_chunk, random_chunk=random_chunk, max_parallel_runs=parallel_runs,
                             random_chunk_ms=random_chunk_ms)
    typer.echo(json.dumps(rows, indent=2))


@app.command("evaluate")
def evaluate_cmd(
    test: Annotated[list[str], typer.Argument(help="dataset versions whose held-out split is scored")],
    train: Annotated[Optional[list[str]], typer.Option(
        help="more training data to check for leakage (the artifacts' own records are always read)")] = None,
    train_split: Annotated[Optional[list[str]], typer.Option(help="their training splits")] = None,
    split: Annotated[str, typer.Option(help="the split scored: test (report) or dev (selection)")] = "test",
    chunk_ms: Annotated[Optional[list[int]], typer.Option("--chunk-ms", help="chunk sizes (repeat)")] = None,
    adapter: Annotated[Optional[list[str]], typer.Option(help="CHUNK_MS=ADAPTER_DIR, a tuned adapter per chunk")] = None,
    rcs_adapter: Annotated[Optional[str], typer.Option(help="a random-chunk-size adapter")] = None,
    emma: Annotated[Optional[str], typer.Option(help="an EMMA policy folder (with its adapter, --emma-adapter)")] = None,
    emma_adapter: Annotated[Optional[str], typer.Option()] = None,
    t_emma: Annotated[float, typer.Option()] = 0.3,
    peers: Annotated[bool, typer.Option(help="the real PyPI peers (whisperlivekit, faster-whisper)")] = True,
    live_peers: Annotated[bool, typer.Option(help="with --peers: whisperlivekit's streaming policies too (off: "
                                                  "faster-whisper offline alone beside)")] = True,
    peer_chunk_ms: Annotated[Optional[list[int]], typer.Option(
        "--peer-chunk-ms", help="the sizes the whisperlivekit peers run at (repeat; default: every chunk size "
                                "scored, with --model the model's)")] = None,
    limit: Annotated[Optional[int], typer.Option(help="first N utterances only (smoke runs)")] = None,
    repeats: Annotated[int, typer.Option(help="stream the set N times; timings are medians of the N")] = 1,
    out: Annotated[Optional[Path], typer.Option(help="folder for evaluation.json / .md / _pareto.png")] = None,
    tracking_uri: Annotated[Optional[str], typer.Option(help="MLflow tracking URI")] = None,
    ledger: Annotated[Optional[Path], typer.Option(help="test ledger (JSONL): a `test` scoring appends a line")] =
        Path("benchmarks/results/test_ledger.jsonl"),
    purpose: Annotated[str, typer.Option(help="why the test split is scored (release, smoke, ...)")] = "release",
    model: Annotated[Optional[list[str]], typer.Option(
        "--model", help="a registered recognizer, models:/NAME@ALIAS or models:/NAME/VERSION (repeat): scored as "
                        "registered (what serve-model serves), beside the offline references and, with --peers, the "
                        "PyPI peers at its chunk size")] = None,
    tag_test: Annotated[bool, typer.Option(help="with --model on the test split: each version's test numbers (WER, "
                                                "latency, RTF, per domain, with intervals) become its test_* tags, as "
                                                "the pipeline tags the champion it promotes")] = True,
) -> None:
    """Every system on the same held-out utterances in one run (Prefect flow evaluate → report + MLflow)."""
    from flows.evaluate import run_evaluate
    from recognizer.build import default_specs

    versions: list[tuple[str, dict]] = []
    if model:
        from recognizer.registry import load_spec

        pairs = [load_spec(tracking_uri or default_tracking_uri(), uri) for uri in model]
        loaded = [spec for spec, _ in pairs]
        versions = [(spec.name, version) for spec, version in pairs]
        chunks = sorted({s.chunk_ms for s in loaded if s.chunk_ms} | set(peer_chunk_ms or []))
        specs = [s for s in default_specs(chunks, peers=peers, peer_chunk_sizes=peer_chunk_ms)
                 if s.kind in ("offline", "faster-whisper") or (live_peers and s.kind.startswith("whisperlivekit"))
                 ] + loaded
    else:
        adapters = {int(k): v for k, v in (a.split("=", 1) for a in adapter or [])}
        emma_chunk = None
        if emma:
            from training.emma.artifact import read_policy_meta

            emma_chunk = read_policy_meta(emma)["config"]["chunk_ms"]  # the size it was trained at
        specs = default_specs(chunk_ms or [300, 1000], adapters, rcs_adapter, emma, emma_adapter, t_emma, peers,
                              emma_chunk_ms=emma_chunk, peer_chunk_sizes=peer_chunk_ms)
    result = run_evaluate(specs, test, train or [], train_split or ["train"], split, limit,
                          str(out) if out else None, tracking_uri, repeats=repeats,
                          ledger_path=str(ledger) if ledger else None, purpose=purpose)
    if versions and split == "test" and tag_test:
        from tasks.recognizer import tag_registered_test_numbers

        rows = {r["name"]: r for r in result["systems"]}
        for name, version in versions:
            tags = tag_registered_test_numbers(tracking_uri or default_tracking_uri(), version, rows[name],
                                               result["test_set"])
            typer.echo(f"{version['registered_model']} v{version['version']}: {len(tags)} test_* tags", err=True)
    typer.echo(json.dumps({k: v for k, v in result.items() if k != "systems"} | {"systems": [
        {k: r[k] for k in ("name", "source", "chunk_ms", "wer", "word_latency_ms_median", "rtf", "within_wer_cap")}
        for r in result["systems"]]}, indent=2, default=str))


@app.command("hush-word")
def hush_word(
    datasets: Annotated[list[str], typer.Argument(help="dataset version directories to train on")],
    validation: Annotated[Optional[list[str]], typer.Option(help="dataset versions for the validation loss")] = None,
    realspeech: Annotated[Optional[str], typer.Option(help="compare every padding on this real speech")] = None,
    eval_skip: Annotated[int, typer.Option(help="skip the first N real utterances (used in training)")] = 0,
    epochs: Annotated[Optional[int], typer.Option(help="default: the config's (chosen on dev)")] = None,
    amplitude_bound: Annotated[float, typer.Option()] = 0.1,
    num_workers: Annotated[int, typer.Option(help="Ray Train workers")] = 2,
    tracking_uri: Annotated[Optional[str], typer.Option(help="MLflow tracking URI")] = None,
) -> None:
    """Train a hush word (Prefect flow train-hush-word → Ray Train → MLflow registry) and compare it with paddings."""
    from configs.hush_word import HushWordConfig
    from flows.hush_word import run_hush_word_flow

    cfg = HushWordConfig(datasets=tuple(datasets), validation_datasets=tuple(validation or ()),
                         amplitude_bound=amplitude_bound, num_workers=num_workers, tracking_uri=tracking_uri,
                         **({"epochs": epochs} if epochs else {}))
    result = run_hush_word_flow(cfg, realspeech, eval_skip=eval_skip)
    for scores in result.get("evaluation", {}).values():
        scores.pop("hypotheses", None)
    typer.echo(json.dumps(result, indent=2, default=str))


@sweep_app.command("run")
def sweep_run(
    datasets: Annotated[list[str], typer.Argument(help="dataset version directories to train the policies on")],
    validation: Annotated[list[str], typer.Option(help="dataset versions every trial is scored on (streaming)")],
    adapter: Annotated[Optional[str], typer.Option(help="causal LoRA adapter (omit: the original encoder)")] = None,
    config: Annotated[Optional[Path], typer.Option(help="YAML profile with an emma_sweep: section")] = (
        Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml"),
    t_emma: Annotated[Optional[list[float]], typer.Option("--t-emma", help="thresholds (repeat)")] = None,
    lambda_latency: Annotated[Optional[list[float]], typer.Option("--lambda-latency", help="(repeat)")] = None,
    lambda_variance: Annotated[Optional[list[float]], typer.Option("--lambda-variance", help="(repeat)")] = None,
    variant: Annotated[Optional[str], typer.Option(help="pchoose or pchoose_value")] = None,
    chunk_ms: Annotated[Optional[int], typer.Option()] = None,
    max_steps: Annotated[Optional[int], typer.Option(help="training steps per policy")] = None,
    validation_limit: Annotated[Optional[int], typer.Option(help="first N validation utterances")] = None,
    asha: Annotated[Optional[bool], typer.Option(help="ASHA early stopping on the training loss")] = None,
    promote: Annotated[bool, typer.Option(help="promote the best trial afterwards")] = False,
    al_budget_ms: Annotated[Optional[float], typer.Option(help="promotion rule: lowest WER with AL ≤ this")] = None,
    tracking_uri: Annotated[Optional[str], typer.Option(help="MLflow tracking URI")] = None,
) -> None:
    """Sweep EMMA thresholds and latency/variance weights (Prefect flow sweep-emma)."""
    from configs.emma import load_sweep_config
    from flows.sweep_emma import run_sweep_flow

    base = {"datasets": tuple(datasets), "validation_datasets": tuple(validation), "validation_limit": validation_limit,
            "encoder": "causal_lora" if adapter else "original", "adapter_dir": adapter, "variant": variant,
            "chunk_ms": chunk_ms, "max_steps": max_steps, "tracking_uri": tracking_uri}
    sweep = load_sweep_config(str(config) if config else None, base, asha=asha, al_budget_ms=al_budget_ms,
                              t_emma=tuple(t_emma) if t_emma else None,
                              lambda_latency=tuple(lambda_latency) if lambda_latency else None,
                              lambda_variance=tuple(lambda_variance) if lambda_variance else None)
    result = run_sweep_flow(sweep, promote=promote)
    typer.echo(json.dumps({k: v for k, v in result.items() if k != "trials"}, indent=2, default=str))


@sweep_app.command("report")
def sweep_report(
    run_id: Annotated[str, typer.Argument(help="the sweep's MLflow parent run")],
    tracking_uri: Annotated[Optional[str], typer.Option(help="MLflow tracking URI")] = None,
    out: Annotated[Optional[Path], typer.Option(help="also write the dashboard files here")] = None,
) -> None:
    """Rebuild the sweep dashboard (Pareto scatter, parallel coordinates, table) from MLflow and log it to the run."""
    from training.emma.dashboard import log_dashboard, write_dashboard

    rows = log_dashboard(tracking_uri or default_tracking_uri(), run_id)
    if out:
        write_dashboard(rows, out)
    front = [r for r in rows if r["pareto"]]
    typer.echo(json.dumps({"trials": len(rows), "pareto": front}, indent=2))


@registry_app.command("promote")
def registry_promote(
    run_id: Annotated[str, typer.Argument(help="the sweep's MLflow parent run")],
    name: Annotated[Optional[str], typer.Option(help="registered model (default whisperline-emma-<model>-<chunk>ms)")] = None,
    al_budget_ms: Annotated[Optional[float], typer.Option(help="rule: lowest WER with AL ≤ this")] = None,
    tracking_uri: Annotated[Optional[str], typer.Option(help="MLflow tracking URI")] = None,
) -> None:
    """Register the sweep's best trial as challenger; move champion only if it beats the current one."""
    from training.emma.registry import promote

    uri = tracking_uri or default_tracking_uri()
    if name is None:
        params = client(uri).get_run(run_id).data.params
        name = f"whisperline-emma-{params['base.model']}-{params['base.chunk_ms']}ms"
    typer.echo(json.dumps(promote(uri, run_id, name, al_budget_ms), indent=2))


@registry_app.command("register")
def registry_register(
    spec: Annotated[Path, typer.Argument(help="a recognizer spec file (YAML or JSON; recognizer.spec)")] = (
        Path(__file__).resolve().parent.parent / "configs" / "recognizer.yaml"),
    adapter: Annotated[Optional[str], typer.Option(help="the LoRA adapter folder its causal pass runs on")] = None,
    alias: Annotated[Optional[str], typer.Option(help="also point this alias at the version (e.g. champion)")] = None,
    tracking_uri: Annotated[Optional[str], typer.Option(help="MLflow tracking URI")] = None,
) -> None:
    """Register a recognizer spec (default: the served one, configs/recognizer.yaml) over an adapter; the pipeline
    registers its own candidates. The same spec, files and code keep their version."""
    from recognizer.registry import register_recognizer
    from recognizer.spec import load

    uri = tracking_uri or default_tracking_uri()
    reg = register_recognizer(uri, load(spec, **({"weights": {"adapter_dir": adapter}} if adapter else {})))
    if alias:
        client(uri).set_registered_model_alias(reg["registered_model"], alias, reg["version"])
    typer.echo(json.dumps({**reg, "alias": alias}, indent=2))


@app.command("pipeline")
def pipeline_cmd(
    config: Annotated[Path, typer.Option(help="YAML profile (smoke: this machine; cluster: Ray cluster + MLflow server)")] = (
        Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml"),
    realspeech: Annotated[Optional[str], typer.Option(help="also train/evaluate on this real-speech folder")] = None,
    real_train: Annotated[Optional[str], typer.Option(help="also this real-speech corpus of many speakers, split by "
                                                      "speaker: its dev/test speakers join dev/test, its train "
                                                      "speakers train by the profile's real_train_fraction")] = None,
    output_root: Annotated[Optional[Path], typer.Option()] = None,
    tracking_uri: Annotated[Optional[str], typer.Option(help="MLflow tracking URI")] = None,
    summary_json: Annotated[Optional[Path], typer.Option(help="also write the pipeline's result here (JSON)")] = None,
) -> None:
    """The whole DAG: dataset → hush word → causal LoRA → EMMA sweep → evaluate → promote (re-runs skip done stages)."""
    _run_pipeline(config, realspeech, output_root, tracking_uri, summary_json, real_train)


def _run_pipeline(config: Path, realspeech: str | None, output_root: Path | None, tracking_uri: str | None,
                  summary_json: Path | None = None, real_train: str | None = None) -> None:
    from configs.pipeline import load_pipeline_config
    from flows.pipeline import run_pipeline

    cfg = load_pipeline_config(str(config), output_root=str(output_root) if output_root else None,
                               tracking_uri=tracking_uri)
    result = run_pipeline(cfg, realspeech, real_train)
    if summary_json:
        summary_json.parent.mkdir(parents=True, exist_ok=True)
        summary_json.write_text(json.dumps(result, indent=2, default=str))
    uri = cfg.tracking_uri or default_tracking_uri()
    typer.echo(f"stages (s): {result['stage_s']}  wall: {result['wall_s']} s")
    if result.get("evaluate"):
        typer.echo("dev split (what the stages selected on):")
    for row in result.get("evaluate", []):
        wer = row["wer"] if row["wer"] is None else f"{100 * row['wer']:.2f} %"
        typer.echo(f"  {row['system']:<45} WER {wer}  AL {row['al_ms']} ms  [{row['model']}]")
    if test := result.get("evaluate_test"):
        ts = test["test_set"]
        typer.echo(f"held-out test split ({ts['n_utterances']} utterances, {ts['seconds']} s, {ts['speakers']} "
                   f"speakers; audio shared with training: {ts['audio_sha256_overlap_with_training']}):")
        for r in test["systems"]:
            typer.echo(f"  {r['name']:<52} WER {100 * r['wer']:6.2f} %  word latency {r['word_latency_ms_median']} ms"
                       f"  RTF {r['rtf']}  [{r['source']}]{'' if r['within_wer_cap'] else '  (over the WER cap)'}")
    if promoted := (result.get("promote_recognizers") or {}).get("aliases"):
        typer.echo("registered recognizers, chosen on dev (the gate's aliases):")
        for alias, a in promoted.items():
            typer.echo(f"  {alias:<16} {a['registered_model']} v{a['version']} ({a['kind']}): {a['reason']}")
        typer.echo(f"serve it: make serve-model  (whisperline serve-model --model {promoted['champion']['registered_model']}"
                   " --alias champion), then whisperline stream-file AUDIO")
    typer.echo(f"MLflow UI:  .venv/bin/mlflow ui --backend-store-uri {uri} --host 127.0.0.1")
    typer.echo(f"Prefect UI: PREFECT_HOME={os.environ.get('PREFECT_HOME', '~/.prefect')} .venv/bin/prefect server start "
               f"--host 127.0.0.1")


@app.command("serve")
def serve_cmd(
    port: Annotated[int, typer.Option(help="Prefect API/UI port on 127.0.0.1")] = 4200,
    deployment: Annotated[Optional[list[str]], typer.Option(help="deploy only these (repeat); default: all")] = None,
    param: Annotated[Optional[list[str]], typer.Option(help="key=value for the named deployments (repeat)")] = None,
    interval_s: Annotated[Optional[int], typer.Option(help="also run every N seconds (besides the cron schedules)")] = None,
    ui: Annotated[bool, typer.Option(help="serve the Prefect UI")] = True,
) -> None:
    """A real Prefect server + process worker on 127.0.0.1 running infra/prefect.yaml's deployments on schedule
    (Ctrl-C stops both)."""
    from flows.serve import POOL, serve  # lazy: urllib.request (http/ssl), not for --help

    params = dict(p.split("=", 1) for p in param or [])
    stack = serve(port, deployments={d: params for d in deployment} if deployment else None, interval_s=interval_s,
                  ui=ui)
    typer.echo(f"Prefect API {stack.api_url} (UI http://127.0.0.1:{port}); worker on pool {POOL}; logs in "
               f"{stack.log_dir}. Ctrl-C stops.")
    try:
        while all(p.poll() is None for p in stack.processes):
            time.sleep(2)
        typer.echo("a serving process exited: see the logs", err=True)
        raise typer.Exit(1)
    except KeyboardInterrupt:
        pass
    finally:
        stack.stop()


@app.command("run")
def run_main(
    realspeech: Annotated[Optional[str], typer.Option(help="also build a dataset from this real-speech folder")] = None,
    real_train: Annotated[Optional[str], typer.Option(help="also this real-speech corpus of many speakers, split by "
                                                      "speaker: its dev/test speakers join dev/test, its train "
                                                      "speakers train by the profile's real_train_fraction")] = None,
    n_synth: Annotated[int, typer.Option(help="synthetic utterances to generate")] = 40,
    output_root: Annotated[Path, typer.Option()] = Path("outputs"),
    config: Annotated[Optional[Path], typer.Option(help="YAML profile")] = Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml",
    dataset_only: Annotated[bool, typer.Option(help="only synthesize the corpus and build its dataset")] = False,
    summary_json: Annotated[Optional[Path], typer.Option(help="also write the pipeline's result here (JSON)")] = None,
) -> None:
    """The main job on the embedded default: the whole pipeline on an espeak-ng corpus (``--dataset-only``: just
    synthesize and build the dataset)."""
    if not dataset_only:
        _run_pipeline(config, realspeech, output_root, None, summary_json, real_train)
        return
    from data.synth import write_synthetic_corpus
    from flows.build_dataset import run_build

    corpus = write_synthetic_corpus(output_root / "corpora" / f"synth-{n_synth}", n_synth, seed=0)
    cfg = load_dataset_config(str(config) if config and config.exists() else None)
    summaries = {"synthetic": run_build(str(corpus), str(output_root / "datasets"), cfg.model_copy(update={"name": "synth"}))}
    if realspeech:
        summaries["realspeech"] = run_build(realspeech, str(output_root / "datasets"),
                                            cfg.model_copy(update={"name": "realspeech"}))
    for label, summary in summaries.items():
        c = summary["counts"]
        typer.echo(f"{label}: {summary['version_dir']} accepted={c['accepted']} rejected={c['rejected']} "
                   f"splits={c['per_split']} skipped={summary['skipped']}")


def main() -> None:
    """The `whisperline` command: the CLI, then any Ray instance a command started or joined is shut down here, in
    the main thread. Left to interpreter exit, a local instance started from a Prefect task's thread can be torn down
    in an order where the driver then waits a minute for its already stopped GCS."""
    try:
        app()
    finally:
        if "ray" in sys.modules:
            import ray  # lazy: only a command that loaded Ray has one to shut down

            if ray.is_initialized():
                ray.shutdown()


if __name__ == "__main__":
    main()
