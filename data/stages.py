"""The dataset build as plain functions, one per stage: (scan: data.scan) → prepare → align → assemble.

Prefect tasks (tasks/dataset.py) wrap these; nothing here knows about Prefect. Every stage
returns accepted records and `Reject`s, never drops an input, and per-utterance work is
memoized in the `WorkStore` by content, so changing one input redoes that input only.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from configs.dataset import DatasetConfig
from data.aligners import AlignItem, Aligner, get_aligner
from data.audio import AudioReject, decode_audio, encode_audio, load_audio
from data.longform import cut, segment_recording
from data.records import Aligned, Prepared, Reject, Scanned, SegmentClip
from data.store import WorkStore, sha256_text
from data.text import TranscriptWord, transcript_words
from data.types import SAMPLE_RATE, AlignmentError, WordSpan

# Transcript/audio plausibility: English speech runs ~10-20 characters per second. Far outside
# that range the transcript does not belong to the audio (a swapped or truncated line).
MAX_CHARS_PER_S = 40.0
MIN_CHARS_PER_S = 1.0
MIN_CHECK_S = 3.0  # too little audio to judge a slow speaker below this


# ---------------------------------------------------------------- prepare
def prepare_key(s: Scanned, cfg: DatasetConfig, code_version: str) -> str:
    return sha256_text("prepare", s.content_key, cfg.audio_format, str(cfg.min_duration_s),
                       str(max_input_s(cfg)), code_version)


def max_input_s(cfg: DatasetConfig) -> float:
    """The longest input prepare accepts: a long-form recording is segmented later, at align."""
    return max(cfg.max_recording_s, cfg.max_duration_s) if cfg.long_form else cfg.max_duration_s


def prepare(batch: Sequence[Scanned], cfg: DatasetConfig, store: WorkStore, code_version: str) -> list[Prepared | Reject]:
    """Validate audio and transcript; store the 16 kHz mono clip; memoized per input."""
    out: list[Prepared | Reject] = []
    for s in batch:
        key = prepare_key(s, cfg, code_version)
        cached = store.get_json("prepared", key)
        if cached is None:
            cached = _prepare_one(s, cfg, store)
            store.put_json("prepared", key, cached)
        out.append(_prepared_from_json(s, cached))
    return out


def _prepare_one(s: Scanned, cfg: DatasetConfig, store: WorkStore) -> dict:
    item = s.item
    try:
        audio = load_audio(item.audio_path, start_s=item.start_s, duration_s=item.duration_s,
                           min_duration_s=cfg.min_duration_s, max_duration_s=max_input_s(cfg))
    except AudioReject as err:
        return {"reject": [err.reason, err.detail]}
    if not item.transcript.strip():
        return {"reject": ["empty_transcript", "transcript is empty"]}
    words = transcript_words(item.transcript)
    if not words:
        return {"reject": ["no_words", f"no speakable word in {item.transcript[:80]!r}"]}
    seconds = audio.duration_ms / 1000
    chars = sum(len(w.norm) for w in words)
    if chars / seconds > MAX_CHARS_PER_S:
        return {"reject": ["transcript_mismatch", f"{chars} characters in {seconds:.2f} s of audio"]}
    if seconds >= MIN_CHECK_S and chars / seconds < MIN_CHARS_PER_S:
        return {"reject": ["transcript_mismatch", f"only {chars} characters for {seconds:.2f} s of audio"]}
    blob = encode_audio(audio.samples, cfg.audio_format)
    audio_sha = store.put_blob("audio", blob, "." + cfg.audio_format)
    return {"audio_sha256": audio_sha, "duration_ms": audio.duration_ms, "orig_sample_rate": audio.orig_sample_rate,
            "orig_channels": audio.orig_channels, "notes": list(audio.notes)}


def _prepared_from_json(s: Scanned, rec: dict) -> Prepared | Reject:
    if "reject" in rec:
        reason, detail = rec["reject"]
        return Reject(s.item.utt_id, s.item.audio_path, s.source_sha256, "validate", reason, detail)
    return Prepared(s, rec["audio_sha256"], rec["duration_ms"], rec["orig_sample_rate"], rec["orig_channels"],
                    tuple(rec["notes"]), tuple(transcript_words(s.item.transcript)))


# ---------------------------------------------------------------- align
_ALIGNERS: dict[str, Aligner] = {}
_ALIGNERS_LOCK = threading.Lock()


def shared_aligner(cfg: DatasetConfig) -> Aligner:
    """One aligner per process and configuration: model start-up (seconds) is paid once."""
    key = f"{cfg.aligner}|{sorted(cfg.aligner_options.items())}"
    with _ALIGNERS_LOCK:
        if key not in _ALIGNERS:
            _ALIGNERS[key] = get_aligner(cfg.aligner, **cfg.aligner_options)
        return _ALIGNERS[key]


@dataclass
class AlignStats:
    aligned: int = 0  # utterances the aligner actually ran on in this call
    reused: int = 0  # taken from the work store
    failed: int = 0
    seconds_audio: float = 0.0
    utt_ids: list[str] = field(default_factory=list)  # the ones aligned now


def stop_if_orphaned() -> None:
    """End this process if it is a pool worker whose build driver has died.

    A process pool hands each worker queued batches, and a batch of long-form recordings aligns for minutes: without
    this, a killed driver leaves its workers aligning queued batches for nobody. Checked at every batch and before
    every long-form recording. ``os._exit``: raising would leave the worker waiting forever on the dead driver's call
    queue. Not a pool worker (the driver itself, a Ray actor): no parent, nothing to do.
    """
    parent = multiprocessing.parent_process()
    if parent is not None and not parent.is_alive():
        print(f"whisperline: build driver (pid {parent.pid}) is gone; worker {os.getpid()} stops", file=sys.stderr,
              flush=True)
        os._exit(3)


def align_key(p: Prepared, aligner_version: str, code_version: str, cfg: DatasetConfig) -> str:
    base = sha256_text("align", p.audio_sha256, " ".join(w.norm for w in p.words), aligner_version, code_version)
    if is_long_form(p, cfg):  # its segments also depend on the cut length and the clip format
        return sha256_text(base, "long-form", str(cfg.max_duration_s), cfg.audio_format)
    return base


def is_long_form(p: Prepared, cfg: DatasetConfig) -> bool:
    return p.duration_ms > cfg.max_duration_s * 1000


def align(batch: Sequence[Prepared], cfg: DatasetConfig, store: WorkStore, code_version: str,
          aligner: Aligner | Callable[[], Aligner] | None = None) -> tuple[list[Aligned | Reject], AlignStats]:
    """Force-align a batch; utterances aligned before (same audio, words, aligner) are reused. A long-form
    recording comes back as several `Aligned`, its segments in order."""
    stats = AlignStats()
    resolved: Aligner | None = aligner if isinstance(aligner, Aligner) else None

    def get() -> Aligner:
        nonlocal resolved
        if resolved is None:
            resolved = aligner() if callable(aligner) else shared_aligner(cfg)
        return resolved

    version = get().version
    key = {id(p): align_key(p, version, code_version, cfg) for p in batch}
    todo = [p for p in batch if store.get_json("align", key[id(p)]) is None]
    short = [p for p in todo if not is_long_form(p, cfg)]
    if short:
        items = [AlignItem(p.scanned.item.utt_id, _audio(p, cfg, store), tuple(w.norm for w in p.words)) for p in short]
        for p, result in zip(short, get().align_many(items), strict=True):
            if isinstance(result, AlignmentError):
                rec: dict = {"reject": [result.reason, result.detail]}
            else:
                rec = _plausible([[s.start_ms, s.end_ms] for s in result], len(p.words), p.duration_ms)
            store.put_json("align", key[id(p)], rec)
    for p in todo:
        if is_long_form(p, cfg):
            stop_if_orphaned()
            store.put_json("align", key[id(p)], _align_long_form(p, cfg, store, get()))
        stats.aligned += 1
        stats.utt_ids.append(p.scanned.item.utt_id)
        stats.seconds_audio += p.duration_ms / 1000
    out: list[Aligned | Reject] = []
    for p in batch:
        rec = store.get_json("align", key[id(p)])
        assert isinstance(rec, dict), "alignment record vanished from the work store"
        if "reject" in rec:
            stats.failed += 1
            out.append(Reject(p.scanned.item.utt_id, p.scanned.item.audio_path, p.scanned.source_sha256,
                              "align", rec["reject"][0], rec["reject"][1]))
        elif "segments" in rec:
            out += [_segment(p, n, seg) for n, seg in enumerate(rec["segments"])]
        else:
            out.append(Aligned(p, _spans(p.words, rec["spans"])))
    stats.reused = len(batch) - stats.aligned
    return out, stats


def _audio(p: Prepared, cfg: DatasetConfig, store: WorkStore):
    return decode_audio(store.get_blob("audio", p.audio_sha256, "." + cfg.audio_format))


def _spans(words: Sequence[TranscriptWord], spans: Sequence[Sequence[int]]) -> tuple[WordSpan, ...]:
    return tuple(WordSpan(w.text, a, b) for w, (a, b) in zip(words, spans, strict=True))


def _segment(p: Prepared, index: int, seg: dict) -> Aligned:
    a, b = seg["words"]
    clip = SegmentClip(index, seg["start_ms"], seg["duration_ms"], seg["audio_sha256"], p.words[a:b])
    return Aligned(p, _spans(clip.words, seg["spans"]), clip)


def _align_long_form(p: Prepared, cfg: DatasetConfig, store: WorkStore, aligner: Aligner) -> dict:
    """Align the whole recording (in windows), cut it at aligned pauses, store each segment's clip."""
    audio = _audio(p, cfg, store)
    try:
        segments = segment_recording(audio, tuple(w.norm for w in p.words), aligner,
                                     max_segment_ms=int(cfg.max_duration_s * 1000))
    except AlignmentError as err:
        return {"reject": [err.reason, err.detail]}
    out = []
    for seg in segments:
        clip = cut(audio, seg)
        duration_ms = int(round(len(clip) * 1000 / SAMPLE_RATE))
        spans = [[s.start_ms, s.end_ms] for s in seg.spans]
        checked = _plausible(spans, seg.word_slice[1] - seg.word_slice[0], duration_ms)
        if "reject" in checked:
            reason, detail = checked["reject"]
            return {"reject": [reason, f"segment {len(out)} at {seg.start_ms} ms: {detail}"]}
        sha = store.put_blob("audio", encode_audio(clip, cfg.audio_format), "." + cfg.audio_format)
        out.append({"start_ms": seg.start_ms, "duration_ms": duration_ms, "words": list(seg.word_slice),
                    "spans": spans, "audio_sha256": sha})
    return {"segments": out}


def _plausible(spans: list[list[int]], n_words: int, duration_ms: int) -> dict:
    """A forced aligner always answers; a wrong transcript shows up as crushed words."""
    if len(spans) != n_words:
        return {"reject": ["word_count_mismatch", f"{len(spans)} spans for {n_words} words"]}
    crushed = sum(1 for a, b in spans if b - a < 20)
    if len(spans) >= 4 and crushed / len(spans) > 0.3:
        return {"reject": ["implausible_alignment", f"{crushed}/{len(spans)} words shorter than 20 ms"]}
    if any(b > duration_ms + 10 for _, b in spans):
        return {"reject": ["alignment_outside_audio", f"a word ends after {duration_ms} ms"]}
    return {"spans": spans}
