"""What every neural-TTS corpus writer shares (``data.tts_kokoro``): which texts are spoken,
the seeded plan of each utterance, the audio's finish (16 kHz, pads, a noise floor) and the corpus folder itself.

A corpus folder is what ``data.corpus.read_folder`` accepts::

    out_dir/transcripts.tsv   utt_id<TAB>text
    out_dir/speakers.tsv      utt_id<TAB>voice name
    out_dir/wav/<utt_id>.wav  16 kHz mono PCM16 (the synthesizer's rate resampled with soxr)
    out_dir/skipped.tsv       index<TAB>reason<TAB>text for texts that were not spoken
    out_dir/<engine>.json     parameters, package versions, model digests, file digests; written last

No word timings: the dataset build aligns these files with its aligner, as it does real speech. An engine supplies
only ``synthesize_all(plans, wav_dir) -> [(index, seconds, None | why it failed)]`` (writing ``wav/<utt_id>.wav``
with ``finish_utterance``) and the parameters that shape its audio (``corpus_params``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import multiprocessing
import os
import random
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soxr

from data.store import file_sha256
from data.synth import _clean_stale_partials, _write_wav
from data.text import transcript_words

log = logging.getLogger(__name__)

SAMPLE_RATE = 16_000
LEAD_PAD_S = (0.10, 0.25)
TRAIL_PAD_S = (0.10, 0.25)
# A seeded noise floor under the whole file: digital silence (the synthesizers pad with zeros) derails the
# pocketsphinx aligner (log-energy of an all-zero frame), see data.synth.NOISE_DBFS.
NOISE_DBFS = (-70.0, -60.0)
MAX_TEXT_CHARS = 400
# What the transcript can say literally: English letters, digits, and punctuation espeak reads as the text means
# (Kokoro phonemizes with espeak-ng).
_SPEAKABLE = re.compile(r"[A-Za-z0-9 .,;:!?'\"()&%$-]+")
_TYPOGRAPHIC = str.maketrans({"\u2019": "'", "\u2018": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": "-"})


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
class Plan:
    index: int
    utt_id: str
    text: str
    voice: str
    speed: float
    lead_pad_s: float
    trail_pad_s: float
    noise_dbfs: float


def plan_utterances(texts: Sequence[str], voices: Sequence[str], seed: int, speed: tuple[float, float],
                    engine: str) -> tuple[list[Plan], list[tuple[int, str, str]]]:
    """Plans for the speakable texts, and (index, reason, text) for the others.

    Text i is utterance i (ids keep i, so a skipped text leaves a gap). Each distinct text gets a seeded
    first voice and every repeat of it the next voice, so ``texts * k`` is spoken by k different voices
    (with one voice, k times at other speeds and pads). ``engine`` names the ids and the seeds' namespace.
    """
    digest = hashlib.sha256(json.dumps([list(texts), list(voices)]).encode()).hexdigest()[:8]
    seen: Counter[str] = Counter()
    plans, skipped = [], []
    for i, raw in enumerate(texts):
        text, reason = clean_text(raw)
        if reason:
            skipped.append((i, reason, text))
            continue
        first = random.Random(f"whisperline-{engine}:{seed}:voice:{text}").randrange(len(voices))
        rng = random.Random(f"whisperline-{engine}:{seed}:utt:{i}")
        plans.append(Plan(i, f"{engine}-{digest}-s{seed}-{i:05d}", text, voices[(first + seen[text]) % len(voices)],
                          round(rng.uniform(*speed), 2), round(rng.uniform(*LEAD_PAD_S), 3),
                          round(rng.uniform(*TRAIL_PAD_S), 3), round(rng.uniform(*NOISE_DBFS), 1)))
        seen[text] += 1
    return plans, skipped


def utterance_seed(engine: str, utt_id: str, what: str) -> int:
    """A 64-bit seed of one utterance: the same whatever the worker or the order it runs in."""
    return int.from_bytes(hashlib.sha256(f"whisperline-{engine}-{what}:{utt_id}".encode()).digest()[:8], "little")


def finish_utterance(audio: np.ndarray, rate: int, plan: Plan, engine: str,
                     wav_dir: str) -> tuple[int, float, str | None]:
    """The synthesizer's float audio at ``rate`` → 16 kHz with the plan's pads and noise floor, written as
    ``wav_dir/<utt_id>.wav``: (index, seconds, None), or (index, 0, why) for output too short to be speech."""
    audio = np.asarray(audio, dtype=np.float64)
    if audio.size < rate // 10:
        return plan.index, 0.0, f"{engine} produced {audio.size} samples"
    audio = soxr.resample(audio, rate, SAMPLE_RATE, quality="HQ")
    peak = float(np.max(np.abs(audio)))
    if peak > 0.97:  # rare loud outputs: scale down rather than clip
        audio *= 0.97 / peak
    lead, trail = int(round(plan.lead_pad_s * SAMPLE_RATE)), int(round(plan.trail_pad_s * SAMPLE_RATE))
    audio = np.concatenate([np.zeros(lead), audio, np.zeros(trail)])
    noise = np.random.Generator(np.random.PCG64(utterance_seed(engine, plan.utt_id, "noise"))).standard_normal(
        audio.size)
    audio += 10.0 ** (plan.noise_dbfs / 20.0) * noise
    pcm = np.clip(np.round(audio * 32768.0), -32768, 32767).astype("<i2")
    _write_wav(Path(wav_dir) / f"{plan.utt_id}.wav", pcm.tobytes())
    return plan.index, pcm.size / SAMPLE_RATE, None


def corpus_params(format_version: int, seed: int, texts: Sequence[str], voices: Sequence[str],
                  speed: tuple[float, float], runtime_packages: Sequence[str], **model: object) -> dict:
    """What shapes a corpus's audio (its identity in ``<engine>.json``): the plan's inputs, the finish, the
    runtime's package versions and the engine's model digests (``model``)."""
    return {"format": format_version, "seed": seed, "n_texts": len(texts), "voices": list(voices),
            "texts_sha256": hashlib.sha256(json.dumps(list(texts)).encode()).hexdigest(),
            "speed": list(speed), "lead_pad_s": list(LEAD_PAD_S), "trail_pad_s": list(TRAIL_PAD_S),
            "noise_dbfs": list(NOISE_DBFS), "sample_rate": SAMPLE_RATE, **model,
            "packages": {d: package_version(d) for d in runtime_packages}}


def package_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "?"


def _complete(folder: Path, params: dict, generator: str, manifest_file: str) -> dict | None:
    try:
        meta = json.loads((folder / manifest_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("params") != params or meta.get("generator") != generator:
        return None
    if not all((folder / name).is_file() for name in meta.get("files", {})):
        return None
    return meta


def synthesize_in_workers(plans: Sequence[Plan], wav_dir: str, workers: int | None, initializer: Callable[..., None],
                          initargs: tuple, synthesize: Callable[[Plan, str], tuple[int, float, str | None]],
                          ) -> list[tuple[int, float, str | None]]:
    """``synthesize(plan, wav_dir)`` for every plan, in up to ``workers`` processes (default: up to 2), each set up
    once by ``initializer(*initargs)``; one worker runs in this process."""
    n_workers = max(1, min(workers or min(2, os.cpu_count() or 1), len(plans)))
    if n_workers == 1:
        initializer(*initargs)
        return [synthesize(p, wav_dir) for p in plans]
    # spawn, not fork: the caller may hold torch/onnxruntime thread pools that do not survive a fork
    with ProcessPoolExecutor(n_workers, mp_context=multiprocessing.get_context("spawn"),
                             initializer=initializer, initargs=initargs) as pool:
        return list(pool.map(synthesize, plans, [wav_dir] * len(plans), chunksize=1))


SynthesizeAll = Callable[[Sequence[Plan], str], list[tuple[int, float, str | None]]]


def write_corpus(out_dir: str | Path, texts: Sequence[str], voices: Sequence[str], seed: int,
                 speed: tuple[float, float], engine: str, params: dict, synthesize_all: SynthesizeAll,
                 meta: dict) -> Path:
    """Speak ``texts[i]`` as utterance i into ``out_dir`` (module docstring) with ``synthesize_all``.

    Idempotent: a complete corpus with the same ``params`` (``<engine>.json``) is returned at once. Built in a
    hidden sibling folder and renamed into place, so an interrupted run never looks complete. ``meta`` (package
    names, digests) goes into the manifest beside what every corpus states.
    """
    generator, manifest_file = f"whisperline data.tts_{engine}", f"{engine}.json"
    out = Path(out_dir).expanduser().resolve()
    if _complete(out, params, generator, manifest_file) is not None:
        log.info("%s corpus %s is already complete", engine, out)
        return out
    if out.exists() and any(out.iterdir()) and not (out / manifest_file).exists():
        raise FileExistsError(f"{out} exists and is not a corpus written by data.tts_{engine}; refusing to "
                              "overwrite it")
    plans, skipped = plan_utterances(texts, voices, seed, speed, engine)
    out.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale_partials(out.parent, out.name)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "wav").mkdir(parents=True)
    try:
        started = time.perf_counter()
        results = synthesize_all(plans, str(tmp / "wav")) if plans else []  # all skipped: no model to load
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
        manifest = {"generator": generator, "params": params, "utterances": len(kept),
                    "skipped": len(skipped), "audio_seconds": round(audio_s, 3), "compute_seconds": round(elapsed, 3),
                    "speakers": sorted({p.voice for p in kept}), "plans": [asdict(p) for p in kept], **meta,
                    "files": {name: file_sha256(tmp / name) for name in names}}
        (tmp / manifest_file).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        log.info("%s: %d utterances, %.1f s of audio in %.1f s (%.2f s compute per s of audio), %d skipped",
                 engine, len(kept), audio_s, elapsed, elapsed / max(audio_s, 1e-9), len(skipped))
        if out.exists():
            shutil.rmtree(out)  # an older corpus of ours (checked above) or an empty folder
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


__all__ = ["SAMPLE_RATE", "Plan", "clean_text", "corpus_params", "finish_utterance", "package_version",
           "plan_utterances", "synthesize_in_workers", "utterance_seed", "write_corpus"]
