"""Synthetic speech corpus from Debian espeak-ng, with the synthesizer's own word timings.

``write_synthetic_corpus(out_dir, n)`` writes a corpus folder that ``data.corpus.read_folder``
accepts::

    out_dir/transcripts.tsv              utt_id<TAB>text
    out_dir/speakers.tsv                 utt_id<TAB>voice (the espeak voice+variant is the speaker)
    out_dir/wav/<utt_id>.wav             16 kHz mono PCM16 (espeak's 22050 Hz resampled with soxr)
    out_dir/word_alignments_espeak.tsv   utt_id<TAB>word<TAB>start_s<TAB>end_s (one line per
                                         transcript word, normalized as data.text.transcript_words)
    out_dir/synth.json                   parameters, espeak version, file digests; written last

Timings come from libespeak-ng itself (``data.espeak``: ctypes, in a worker process that forks one child
per utterance, so the same inputs give byte-identical audio) and are mapped to transcript words by
``data.espeak_spans.word_spans``. The built-in sentences are ``data.synth_texts.BUILTIN_TEXTS``.

Leading/trailing silence: espeak's own (a few ms before the first phoneme, a sentence pause
at the end with espeakENDPAUSE) plus a seeded pad before (50–250 ms) and after (0–150 ms);
a seeded white-noise floor (-70…-60 dBFS RMS) lies under the whole file, so no stretch is
digital silence. Timings are absolute positions in the written file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import time
import wave
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soxr
from tqdm import tqdm

from data.espeak import SynthesisError, Worker, espeak_version
from data.espeak_spans import text_words, word_spans
from data.synth_texts import BUILTIN_TEXTS
from data.text import transcript_words

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
SAMPLE_RATE = 16_000
ALIGNMENT_FILE = "word_alignments_espeak.tsv"
ALIGNMENT_HEADER = "utt_id\tword\tstart_s\tend_s"
MANIFEST_FILE = "synth.json"

# espeak voice (language file) + variant; every one checked to exist when the worker starts.
# "en" is British English (gmw/en); "en-us" American; "en-gb-x-rp" Received Pronunciation.
VOICES: tuple[str, ...] = (
    "en-us",
    "en-us+m3",
    "en-us+f2",
    "en-us+f4",
    "en-us+klatt",
    "en+m1",
    "en+f3",
    "en-gb-x-rp+m7",
)
RATE_WPM = (140, 190)
PITCH = (40, 60)  # espeakPITCH, 0..100 (50 = the voice's own)
LEAD_PAD_S = (0.05, 0.25)
TRAIL_PAD_S = (0.0, 0.15)
# A seeded white-noise floor under the whole file: espeak's pauses and the pads are otherwise digital zeros,
# which no recording has and whose -inf log energy derails the pocketsphinx aligner.
NOISE_DBFS = (-70.0, -60.0)


# ---------------------------------------------------------------------------------------------
# Reading alignments back


def read_word_alignments(path: str | Path) -> dict[str, list[tuple[str, int, int]]]:
    """``utt_id<TAB>word<TAB>start_s<TAB>end_s`` lines → {utt_id: [(word, start_ms, end_ms), …]}.

    Reads word_alignments_espeak.tsv as well as the real-speech word_alignments_pocketsphinx.tsv
    (an optional ``utt_id word start_s end_s`` header line is skipped). Words keep file order.
    """
    out: dict[str, list[tuple[str, int, int]]] = {}
    path = Path(path)
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if n == 1 and fields[:1] == ["utt_id"]:
            continue
        if len(fields) != 4:
            raise ValueError(f"{path}:{n}: expected 4 tab-separated fields, got {line!r}")
        utt_id, word, start_s, end_s = fields
        try:
            start_ms, end_ms = int(round(float(start_s) * 1000)), int(round(float(end_s) * 1000))
        except ValueError:
            raise ValueError(f"{path}:{n}: bad time in {line!r}") from None
        out.setdefault(utt_id, []).append((word, start_ms, end_ms))
    return out


# ---------------------------------------------------------------------------------------------
# Corpus writer


@dataclass(frozen=True, slots=True)
class _Plan:
    utt_id: str
    text: str
    voice: str
    rate: int
    pitch: int
    lead_pad_s: float
    trail_pad_s: float
    noise_dbfs: float


def _clean_text(text: str) -> str:
    return " ".join(str(text).split())


def plan_utterances(n: int, texts: Sequence[str] | None = None, seed: int = 0) -> list[_Plan]:
    """What utterance i says, with which voice/rate/pitch/pads; independent of n (a prefix is stable).

    Ids: ``espeak-s<seed>-<i>`` (built-in texts) or ``espeak-<texts digest>-s<seed>-<i>``.
    Utterance i speaks text i mod len(texts) (the built-in list is shuffled by the seed; given
    texts keep their order). Each text gets a seeded starting voice and moves to the next voice
    on every cycle, so repeated texts are spoken by different voices (up to len(VOICES) cycles).
    """
    if n < 0:
        raise ValueError("n must be >= 0")
    if texts is None:
        pool = list(BUILTIN_TEXTS)
        random.Random(f"whisperline-synth:{seed}:order").shuffle(pool)
    else:
        pool = [_clean_text(t) for t in texts]
        if not pool and n:
            raise ValueError("texts is empty")
        for t in pool:
            if not transcript_words(t):
                raise ValueError(f"text has no words: {t!r}")
    # ids stay unique when corpora of different text lists are read together
    prefix = "espeak" if texts is None else f"espeak-{_texts_digest(texts)[:8]}"
    plans = []
    for i in range(n):
        t, cycle = i % len(pool), i // len(pool)
        offset = random.Random(f"whisperline-synth:{seed}:voice:{t}").randrange(len(VOICES))
        rng = random.Random(f"whisperline-synth:{seed}:utt:{i}")
        plans.append(_Plan(
            utt_id=f"{prefix}-s{seed}-{i:05d}",
            text=pool[t],
            voice=VOICES[(offset + cycle) % len(VOICES)],
            rate=rng.randint(*RATE_WPM),
            pitch=rng.randint(*PITCH),
            lead_pad_s=round(rng.uniform(*LEAD_PAD_S), 3),
            trail_pad_s=round(rng.uniform(*TRAIL_PAD_S), 3),
            noise_dbfs=round(rng.uniform(*NOISE_DBFS), 1),
        ))
    return plans


def _texts_digest(texts: Sequence[str] | None) -> str:
    body = json.dumps(list(BUILTIN_TEXTS) if texts is None else [_clean_text(t) for t in texts], ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


def _params(n: int, texts: Sequence[str] | None, seed: int, version: str) -> dict:
    return {
        "format": FORMAT_VERSION,
        "n": n,
        "seed": seed,
        "texts": "builtin" if texts is None else "given",
        "texts_sha256": _texts_digest(texts),
        "voices": list(VOICES),
        "rate_wpm": list(RATE_WPM),
        "pitch": list(PITCH),
        "lead_pad_s": list(LEAD_PAD_S),
        "trail_pad_s": list(TRAIL_PAD_S),
        "noise_dbfs": list(NOISE_DBFS),
        "sample_rate": SAMPLE_RATE,
        "espeak_version": version,
        "soxr_version": getattr(soxr, "__version__", "?"),
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _complete(folder: Path, params: dict | None = None) -> dict | None:
    """The folder's synth.json if it describes a complete corpus (matching ``params`` if given)."""
    try:
        meta = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("generator") != "whisperline data.synth":
        return None
    if params is not None and meta.get("params") != params:
        return None
    for name in ("transcripts.tsv", "speakers.tsv", ALIGNMENT_FILE):
        if not (folder / name).is_file():
            return None
    wavs = folder / "wav"
    if not wavs.is_dir() or len(list(wavs.glob("*.wav"))) != meta.get("params", {}).get("n"):
        return None
    return meta


def _render(plan: _Plan, answer: dict, espeak_rate: int) -> tuple[bytes, list[tuple[str, float, float]], float]:
    """Resample to 16 kHz PCM16, pad, and turn event samples into seconds in the written file."""
    raw = np.frombuffer(answer["audio"], dtype=np.int16)
    if raw.size == 0:
        raise SynthesisError(f"{plan.utt_id}: espeak produced no audio for {plan.text!r}")
    spans = word_spans(plan.text, answer["events"], int(raw.size), answer["counts"])
    lead = int(round(plan.lead_pad_s * espeak_rate))
    trail = int(round(plan.trail_pad_s * espeak_rate))
    padded = np.concatenate([np.zeros(lead, np.float32), raw.astype(np.float32) / 32768.0, np.zeros(trail, np.float32)])
    audio = soxr.resample(padded, espeak_rate, SAMPLE_RATE, quality="HQ")
    noise_seed = int.from_bytes(hashlib.sha256(f"whisperline-synth-noise:{plan.utt_id}".encode()).digest()[:8], "little")
    noise = np.random.Generator(np.random.PCG64(noise_seed)).standard_normal(len(audio))
    audio = audio + (10.0 ** (plan.noise_dbfs / 20.0)) * noise
    pcm = np.clip(np.round(audio * 32768.0), -32768, 32767).astype("<i2")
    duration = len(pcm) / SAMPLE_RATE
    timed = []
    for norm, a, b in spans:
        start_s = (lead + a) / espeak_rate
        end_s = min((lead + b) / espeak_rate, duration)
        timed.append((norm, start_s, end_s))
    return pcm.tobytes(), timed, duration


def _write_wav(path: Path, pcm: bytes) -> None:
    with wave.open(str(path), "wb") as fh:
        fh.setnchannels(1)
        fh.setsampwidth(2)
        fh.setframerate(SAMPLE_RATE)
        fh.writeframes(pcm)


def _clean_stale_partials(parent: Path, name: str) -> None:
    for tmp in parent.glob(f".{name}.partial-*"):
        pid_text = tmp.name.rsplit("-", 1)[-1]
        if not pid_text.isdigit():
            continue
        try:
            os.kill(int(pid_text), 0)
            continue  # its writer is still running
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
        except PermissionError:
            continue


def write_synthetic_corpus(out_dir: str | Path, n: int, texts: list[str] | None = None, seed: int = 0,
                           progress: bool = True, workers: int | None = None) -> Path:
    """Synthesize ``n`` utterances into ``out_dir`` (see the module docstring); returns the folder.

    Idempotent: a complete corpus with the same parameters (synth.json) is returned as is.
    The corpus is built in a hidden sibling folder and renamed into place at the end, so an
    interrupted run never leaves something that looks complete. A different corpus written by
    this function is replaced; any other non-empty folder is refused (FileExistsError).
    """
    out = Path(out_dir).expanduser().resolve()
    if n < 1:
        raise ValueError("n must be >= 1")
    params = _params(n, texts, seed, espeak_version())
    if _complete(out, params) is not None:
        log.info("synthetic corpus %s is already complete", out)
        return out
    if out.exists() and any(out.iterdir()) and not (out / MANIFEST_FILE).exists():
        raise FileExistsError(f"{out} exists and is not a corpus written by data.synth; refusing to overwrite it")
    out.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale_partials(out.parent, out.name)
    plans = plan_utterances(n, texts, seed)
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "wav").mkdir(parents=True)
    try:
        stats = _synthesize_all(plans, tmp, progress, workers)
        meta = {"generator": "whisperline data.synth", "params": params, **stats,
                "timing_rule": ("word = [its WORD event if that follows the previous word's last sounding phoneme, "
                                "else its first sounding phoneme; end of its last sounding phoneme]; a phoneme ends "
                                "at the next espeak event (phoneme, pause, word, end) with a later sample; pauses "
                                "belong to no word; words espeak merges are split by their isolated phoneme counts"),
                "files": {name: _sha256(tmp / name) for name in ("transcripts.tsv", "speakers.tsv", ALIGNMENT_FILE)}}
        (tmp / MANIFEST_FILE).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        if out.exists():
            if (out / MANIFEST_FILE).exists() or not any(out.iterdir()):
                shutil.rmtree(out)
        try:
            os.rename(tmp, out)
        except OSError:
            if _complete(out, params) is not None:  # a concurrent writer finished first
                shutil.rmtree(tmp, ignore_errors=True)
                return out
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def _synthesize_all(plans: Sequence[_Plan], folder: Path, progress: bool, workers: int | None) -> dict:
    n_workers = max(1, min(workers or min(2, os.cpu_count() or 1), len(plans)))
    pool: list[Worker] = []
    transcripts, speakers, alignments = [], [], [ALIGNMENT_HEADER]
    total_audio = 0.0
    started = time.perf_counter()
    bar = None
    if progress:
        bar = tqdm(total=len(plans), desc="espeak-ng", unit="utt")
    try:
        for _ in range(n_workers):
            pool.append(Worker(VOICES))
        info = pool[0].info
        espeak_rate = int(info["sample_rate"])
        pending: deque[tuple[_Plan, Worker]] = deque()

        def finish() -> None:
            nonlocal total_audio
            plan, worker = pending.popleft()
            answer = worker.recv()
            if not answer.get("ok"):
                raise SynthesisError(f"{plan.utt_id} ({plan.voice}, {plan.rate} wpm): {answer.get('error')} "
                                     f"— text {plan.text!r}")
            try:
                pcm, timed, duration = _render(plan, answer, espeak_rate)
            except SynthesisError as err:
                raise SynthesisError(f"{plan.utt_id} ({plan.voice}): {err}") from None
            _write_wav(folder / "wav" / f"{plan.utt_id}.wav", pcm)
            transcripts.append(f"{plan.utt_id}\t{plan.text}")
            speakers.append(f"{plan.utt_id}\t{plan.voice}")
            alignments.extend(f"{plan.utt_id}\t{w}\t{a:.3f}\t{b:.3f}" for w, a, b in timed)
            total_audio += duration
            if bar is not None:
                bar.update(1)

        for i, plan in enumerate(plans):
            worker = pool[i % n_workers]
            worker.send({"text": plan.text, "voice": plan.voice, "rate": plan.rate, "pitch": plan.pitch,
                         "words": [w.text for w in text_words(plan.text)]})
            pending.append((plan, worker))
            if len(pending) >= n_workers:
                finish()
        while pending:
            finish()
    finally:
        if bar is not None:
            bar.close()
        for worker in pool:
            worker.close()
    elapsed = time.perf_counter() - started
    log.info("synthesized %d utterances, %.1f s of audio in %.1f s (%.0fx real time)",
             len(plans), total_audio, elapsed, total_audio / max(elapsed, 1e-9))
    for name, lines in (("transcripts.tsv", transcripts), ("speakers.tsv", speakers), (ALIGNMENT_FILE, alignments)):
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"espeak": {"version": info["version"], "data_path": info["data_path"], "sample_rate": espeak_rate},
            "utterances": len(plans), "audio_seconds": round(total_audio, 3),
            "speakers": sorted({p.voice for p in plans})}
