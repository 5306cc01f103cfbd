"""One batch of the build, end to end on one worker: prepare → align → manifest rows → a Parquet part.

This is the unit the build distributes (a Prefect task in a process pool, or a Ray Data actor on a cluster): it
takes a reference to a batch (a row range of the inputs table, data/inputs.py), reads those inputs with their
splits already assigned, and writes two small Parquet files into the work store — the batch's manifest rows (no
shard columns yet) and its rejects — then returns only counts. The driver never holds the inputs or the results;
`data.assemble` streams the parts back in batch order to write the shards.

A part is named by the hash of everything that determines it (inputs' content, splits, config, code, aligner,
tokenizer), so a batch built before — by this process, another one, or a killed run — is read back instead of
recomputed, whichever runner built it. Inside a batch the work store still memoizes per utterance.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from configs.dataset import DatasetConfig
from data import fs
from data.corpus import sample_key
from data.inputs import BatchRef, read_batch
from data.manifest import PART_SCHEMA, REJECTS_SCHEMA
from data.records import Aligned, Reject, Scanned
from data.stages import align, prepare, shared_aligner, stop_if_orphaned
from data.store import WorkStore, sha256_text
from data.tokens import token_end_times, word_tokens
from data.types import SAMPLE_RATE


@dataclass(frozen=True, slots=True)
class BatchInput:
    """What a worker builds: the batch's position in the build order and its inputs with their splits (read from
    the inputs table by the worker itself: ``load_batch``)."""

    index: int
    scanned: tuple[Scanned, ...]
    splits: tuple[str, ...]  # one per input, assigned when the inputs table was written (data.inputs)


def load_batch(ref: BatchRef) -> BatchInput:
    scanned, splits = read_batch(ref)
    return BatchInput(ref.index, tuple(scanned), tuple(splits))


@dataclass
class BatchResult:
    index: int
    part_key: str
    inputs: int
    accepted: int  # inputs that gave at least one utterance
    rejected: int
    utterances: int  # manifest rows (a long-form recording gives several)
    aligned_now: int
    reused: int
    failed: int
    seconds_audio: float
    aligned_ids: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return dict(self.__dict__)


def part_key(batch: BatchInput, cfg: DatasetConfig, code_version: str, aligner_version: str, tokenizer: str) -> str:
    return sha256_text("part", cfg.config_hash(), code_version, aligner_version, tokenizer,
                       *(f"{s.content_key}|{split}" for s, split in zip(batch.scanned, batch.splits, strict=True)))


def part_paths(store: WorkStore, key: str) -> tuple[str, str]:
    base = fs.join(store.root, "parts", key[:2], key)
    return base + ".rows.parquet", base + ".rejects.parquet"


def process_batch(ref: BatchRef, cfg: DatasetConfig, store: WorkStore, *, code_version: str,
                  aligner_version: str, tokenizer: str) -> BatchResult:
    """Build (or find) the part of the batch ``ref`` names; returns counts only."""
    stop_if_orphaned()
    batch = load_batch(ref)
    key = part_key(batch, cfg, code_version, aligner_version, tokenizer)
    rows_path, rejects_path = part_paths(store, key)
    if fs.exists(rows_path) and fs.exists(rejects_path):
        rows, rejects = read_part(rows_path), read_part(rejects_path)
        return _result(batch, key, rows, rejects, aligned_now=0, reused=len(batch.scanned) - _scan_like(rejects),
                       failed=sum(1 for r in rejects if r["stage"] == "align"), seconds=0.0, aligned_ids=[])

    prepared = prepare(batch.scanned, cfg, store, code_version)
    results, stats = align([p for p in prepared if not isinstance(p, Reject)], cfg, store, code_version,
                           shared_aligner(cfg))
    # A long-form recording gives several Aligned (its segments, in order); the rest one record each.
    by_input: dict[str, list[Aligned | Reject]] = {}
    for r in [*(p for p in prepared if isinstance(p, Reject)), *results]:
        by_input.setdefault(r.utt_id if isinstance(r, Reject) else r.prepared.scanned.item.utt_id, []).append(r)
    rows: list[dict] = []
    rejects: list[dict] = []
    for s, split in zip(batch.scanned, batch.splits, strict=True):  # the batch's order is the build order
        for result in by_input[s.item.utt_id]:
            if isinstance(result, Reject):
                rejects.append(reject_row(result))
            else:
                rows.append(manifest_row(result, split, cfg, aligner_version, tokenizer))
    write_part(rows_path, rows, PART_SCHEMA)
    write_part(rejects_path, rejects, REJECTS_SCHEMA)
    return _result(batch, key, rows, rejects, aligned_now=stats.aligned, reused=stats.reused, failed=stats.failed,
                   seconds=stats.seconds_audio, aligned_ids=stats.utt_ids)


def _scan_like(rejects: Sequence[dict]) -> int:
    """Rejects from validation (no alignment was attempted: neither aligned now nor reused)."""
    return sum(1 for r in rejects if r["stage"] != "align")


def _result(batch: BatchInput, key: str, rows: Sequence[dict], rejects: Sequence[dict], *, aligned_now: int,
            reused: int, failed: int, seconds: float, aligned_ids: list[str]) -> BatchResult:
    inputs = len(batch.scanned)
    if len({r["recording_id"] for r in rows}) + len(rejects) != inputs:
        raise AssertionError(f"batch {batch.index}: {inputs} inputs, {len(rows)} rows, {len(rejects)} rejects")
    return BatchResult(batch.index, key, inputs, inputs - len(rejects), len(rejects), len(rows), aligned_now,
                       reused, failed, seconds, sorted(aligned_ids))


def manifest_row(a: Aligned, split: str, cfg: DatasetConfig, aligner_version: str, tokenizer: str) -> dict:
    p = a.prepared
    item = p.scanned.item
    tokens = word_tokens(cfg.tokenizer, [w.text for w in a.words])
    return {
        "id": a.utt_id, "key": sample_key(a.utt_id), "recording_id": item.utt_id, "speaker": item.speaker,
        "corpus": item.corpus, "source_path": item.audio_path, "source_sha256": p.scanned.source_sha256,
        "source_start_ms": int(round(item.start_s * 1000)) + a.offset_ms, "audio_sha256": a.audio_sha256,
        "duration_ms": a.duration_ms, "sample_rate": SAMPLE_RATE, "orig_sample_rate": p.orig_sample_rate,
        "orig_channels": p.orig_channels, "notes": list(p.notes),
        # a segment's written form is its words' display forms (the recording's transcript is one long line)
        "transcript": item.transcript if a.segment is None else " ".join(w.text for w in a.words),
        "normalized_transcript": " ".join(w.norm for w in a.words),
        "words": [{"word": s.word, "start_ms": s.start_ms, "end_ms": s.end_ms} for s in a.spans],
        "token_ids": [t for ts in tokens for t in ts],
        "token_end_ms": token_end_times(tokens, a.spans, cfg.tokenizer),
        "tokenizer": tokenizer, "aligner": cfg.aligner, "aligner_version": aligner_version, "split": split,
    }


def reject_row(r: Reject) -> dict:
    return {"id": r.utt_id, "source_path": r.source_path, "source_sha256": r.source_sha256, "stage": r.stage,
            "reason": r.reason, "detail": r.detail}


def write_part(path: str, rows: Sequence[dict], schema: pa.Schema) -> None:
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(list(rows), schema=schema), buf, compression="zstd")
    fs.write_bytes(path, buf.getvalue())


def read_part(path: str) -> list[dict]:
    return pq.read_table(io.BytesIO(fs.read_bytes(path))).to_pylist()
