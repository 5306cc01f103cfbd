"""Parquet schemas of manifest.parquet (one row per accepted utterance) and rejects.parquet.

Times are integer milliseconds relative to the utterance (segment) start. Version folders may be local paths or
``s3://…`` URLs (data/fs.py).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from data import fs

WORD = pa.struct([("word", pa.string()), ("start_ms", pa.int32()), ("end_ms", pa.int32())])

MANIFEST_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("key", pa.string()),  # WebDataset __key__ (no dots)
    ("recording_id", pa.string()),  # the input it came from: == id, or the long-form recording it was cut from
    ("speaker", pa.string()),
    ("corpus", pa.string()),
    ("source_path", pa.string()),
    ("source_sha256", pa.string()),
    ("source_start_ms", pa.int32()),
    ("audio_sha256", pa.string()),  # of the clip stored in the shard
    ("duration_ms", pa.int32()),
    ("sample_rate", pa.int32()),
    ("orig_sample_rate", pa.int32()),
    ("orig_channels", pa.int16()),
    ("notes", pa.list_(pa.string())),
    ("transcript", pa.string()),
    ("normalized_transcript", pa.string()),
    ("words", pa.list_(WORD)),
    ("token_ids", pa.list_(pa.int32())),
    ("token_end_ms", pa.list_(pa.int32())),
    ("tokenizer", pa.string()),
    ("aligner", pa.string()),
    ("aligner_version", pa.string()),
    ("split", pa.string()),
    ("shard", pa.string()),
    ("offset", pa.int32()),
])

# A batch's rows as a worker writes them (data/parts.py): the shard columns are only known when assembling.
PART_SCHEMA = pa.schema([f for f in MANIFEST_SCHEMA if f.name not in ("shard", "offset")])

REJECTS_SCHEMA = pa.schema([
    ("id", pa.string()),
    ("source_path", pa.string()),
    ("source_sha256", pa.string()),
    ("stage", pa.string()),
    ("reason", pa.string()),
    ("detail", pa.string()),
])


def write_table(path: str | Path, rows: Sequence[dict], schema: pa.Schema) -> None:
    table = pa.Table.from_pylist(list(rows), schema=schema)
    # No statistics timestamps exist in Parquet; fixed writer options keep the file reproducible.
    if not fs.is_remote(path):
        pq.write_table(table, path, compression="zstd", write_statistics=True)
        return
    buf = io.BytesIO()  # the same bytes, put as one object
    pq.write_table(table, buf, compression="zstd", write_statistics=True)
    fs.write_bytes(path, buf.getvalue())


def read_parquet(path: str | Path) -> pa.Table:
    """A Parquet file from a local path or a URL."""
    if not fs.is_remote(path):
        return pq.read_table(path)
    filesystem, inner = fs.fs_and_path(path)
    return pq.read_table(inner, filesystem=filesystem)


def read_manifest(version_dir: str | Path) -> pa.Table:
    return read_parquet(fs.join(version_dir, "manifest.parquet"))


def read_rejects(version_dir: str | Path) -> pa.Table:
    return read_parquet(fs.join(version_dir, "rejects.parquet"))
