"""The scan stage: a corpus description → its inputs as one columnar table, each input's audio hashed.

Why columnar: the driver must hold the whole corpus until the inputs table is written (the splits need the whole
corpus: ``split_by: auto`` counts each corpus's speakers; duplicate ids need a sort), and a Python object per input
would make that grow by about a kilobyte per input. The readers (``data.corpus.iter_corpus``) stream into Arrow
record batches of ``CHUNK`` rows, so an input costs its bytes in Arrow buffers and Python objects exist for one
chunk at a time.

Order of work: read (reader rejects kept), reject ids that collide as shard keys
(the first in (utt_id, audio_path) order keeps the key), then hash each kept input's bytes (inputs are identified by
content; a file that cannot be read becomes ``unreadable_audio``). The table keeps the reading order: what comes
after (splits, build order) does not depend on it. One filtered copy of the table is made, at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import pyarrow as pa
import pyarrow.compute as pc

from data.audio import file_sha256
from data.corpus import CorpusItem, ScanReject, iter_corpus, sample_key
from data.records import Reject

CHUNK = 8192  # rows per record batch: the Python objects alive at a time

ITEM_FIELDS = CorpusItem.__slots__
SCANNED_SCHEMA = pa.schema([
    ("utt_id", pa.string()), ("audio_path", pa.string()), ("transcript", pa.string()), ("speaker", pa.string()),
    ("corpus", pa.string()), ("start_s", pa.float64()), ("duration_s", pa.float64()),
    ("key", pa.string()),  # the shard key (``sample_key(utt_id)``): the build order's and the dedupe's
    ("source_sha256", pa.string()),
])


def _batch(rows: list[CorpusItem], hashes: list[str | None] | None = None) -> pa.RecordBatch:
    columns = {name: [getattr(r, name) for r in rows] for name in ITEM_FIELDS}
    columns["key"] = [sample_key(r.utt_id) for r in rows]
    columns["source_sha256"] = hashes if hashes is not None else [None] * len(rows)
    return pa.RecordBatch.from_pydict(columns, schema=SCANNED_SCHEMA)


def item_table(items: Iterable[CorpusItem], hashes: Iterable[str | None] | None = None) -> pa.Table:
    """Items (and their audio hashes, if known) as a table of ``SCANNED_SCHEMA``, built ``CHUNK`` rows at a time."""
    batches, rows, sums = [], [], []
    hash_iter = iter(hashes) if hashes is not None else None
    for item in items:
        rows.append(item)
        if hash_iter is not None:
            sums.append(next(hash_iter))
        if len(rows) == CHUNK:
            batches.append(_batch(rows, sums if hash_iter is not None else None))
            rows, sums = [], []
    if rows or not batches:
        batches.append(_batch(rows, sums if hash_iter is not None else None))
    return pa.Table.from_batches(batches, schema=SCANNED_SCHEMA)


def rows_of(table: pa.Table, columns: list[str] | None = None) -> Iterator[dict]:
    """The rows of a table as dicts, one record batch at a time (never the whole table as Python objects)."""
    for batch in (table.select(columns) if columns else table).to_batches(max_chunksize=CHUNK):
        yield from batch.to_pylist()


def _scan_reject(r: ScanReject) -> Reject:
    return Reject(r.utt_id, r.source_path, None, "scan", r.reason, r.detail)


def reject_duplicates(table: pa.Table) -> tuple[pa.Array, list[Reject]]:
    """(a mask of the rows to keep, a reject per id that collides as a shard key with a kept one).

    The row kept for a key is the first in (utt_id, audio_path) order. Only the sort's indices are materialised, not a
    sorted copy of the table."""
    n = table.num_rows
    if n == 0:
        return pa.array([], pa.bool_()), []
    order = pc.sort_indices(table.select(["key", "utt_id", "audio_path"]),
                            [("key", "ascending"), ("utt_id", "ascending"), ("audio_path", "ascending")])
    keys = table["key"].take(order)
    repeat = pc.equal(keys.slice(1), keys.slice(0, n - 1)).combine_chunks()
    keep = [True] * n
    if not pc.any(repeat).as_py():
        return pa.array(keep, pa.bool_()), []
    rejects, kept = [], 0
    # in sorted order a repeated key follows the row that keeps it
    for i, repeated in zip(order.to_pylist(), [False, *repeat.to_pylist()]):
        if not repeated:
            kept = i
            continue
        keep[i] = False
        rejects.append(Reject(table["utt_id"][i].as_py(), table["audio_path"][i].as_py(), None, "scan",
                              "duplicate_id", f"shard key {table['key'][i].as_py()!r} already used by "
                              f"{table['audio_path'][kept].as_py()}"))
    return pa.array(keep, pa.bool_()), rejects


def hash_audio(table: pa.Table, keep: pa.Array, hash_file: Callable[[str], str] = file_sha256
               ) -> tuple[pa.ChunkedArray, list[Reject]]:
    """(``source_sha256`` per row: None where not kept or unreadable; an ``unreadable_audio`` reject each).

    Built ``CHUNK`` hashes at a time (a list of every hash would be ~110 bytes of Python per input)."""
    chunks, sums = [], []
    rejects = []
    for row, kept in zip(rows_of(table, ["utt_id", "audio_path"]), keep.to_pylist()):
        if not kept:
            sums.append(None)
        else:
            try:
                sums.append(hash_file(row["audio_path"]))
            except OSError as err:
                sums.append(None)
                rejects.append(Reject(row["utt_id"], row["audio_path"], None, "scan", "unreadable_audio", str(err)))
        if len(sums) == CHUNK:
            chunks.append(pa.array(sums, pa.string()))
            sums = []
    chunks.append(pa.array(sums, pa.string()))
    return pa.chunked_array(chunks, pa.string()), rejects


def scan(spec: str, hash_file: Callable[[str], str] = file_sha256) -> tuple[pa.Table, list[Reject]]:
    """(every readable input of the corpus, hashed, in reading order; every reject with its reason)."""
    rejects: list[Reject] = []

    def items() -> Iterator[CorpusItem]:
        for read in iter_corpus(spec):
            if isinstance(read, ScanReject):
                rejects.append(_scan_reject(read))
            else:
                yield read

    table = item_table(items())
    keep, duplicates = reject_duplicates(table)
    sums, unreadable = hash_audio(table, keep, hash_file)
    table = table.set_column(table.schema.get_field_index("source_sha256"), "source_sha256", sums)
    if duplicates or unreadable:  # a filtered copy only when something was rejected
        table = table.filter(pc.is_valid(sums))
    return table, rejects + duplicates + unreadable


__all__ = ["CHUNK", "SCANNED_SCHEMA", "hash_audio", "item_table", "reject_duplicates", "rows_of", "scan"]
