"""The build's inputs as one Parquet table in the work store: what the driver passes on is where it is, not what.

The scan (``data.scan.scan``) streams the corpus description into a columnar table and hashes every input's bytes;
``write_inputs_table``
assigns the splits (this needs the whole corpus: ``split_by=auto`` counts a corpus's speakers), sorts the inputs
into the build order — (split, shard key), so the parts read back in batch order are the shards' order — and writes
them, with the scan's rejects, as a Parquet table named by its content. From then on the build passes an
``InputsRef`` (the table's path, its row count and the digest of its content keys) and ``BatchRef``s (a row
range): a worker reads its batch's rows itself (``read_batch``: the row groups that hold them), so the batches'
inputs never pass through the flow, its task parameters or its results. The scan and the write run in the driver
(a no-op rebuild must not wait for a worker's start-up); they hold the corpus as Arrow columns, not Python objects
(``data.scan``).
"""

from __future__ import annotations

import hashlib
import io
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from configs.dataset import DatasetConfig
from data import fs
from data.corpus import CorpusItem
from data.records import Reject, Scanned, content_key
from data.scan import item_table, rows_of
from data.splits import assign_split, deal_groups, known_speakers, share_dominant_groups, split_group
from data.text import written_form

# the columns of data.records.content_key, in its order
CONTENT_COLUMNS = ("source_sha256", "start_s", "duration_s", "transcript", "speaker", "utt_id")
# rows per row group: a batch (``align_batch_size`` rows, 32 by default) reads one or two groups, and the footer
# stays small (49 groups at 50,000 inputs)
ROW_GROUP = 1024

INPUTS_SCHEMA = pa.schema([
    ("utt_id", pa.string()), ("audio_path", pa.string()), ("transcript", pa.string()), ("speaker", pa.string()),
    ("corpus", pa.string()), ("start_s", pa.float64()), ("duration_s", pa.float64()),
    ("source_sha256", pa.string()), ("split", pa.string()),
])
SCAN_REJECTS_SCHEMA = pa.schema([
    ("utt_id", pa.string()), ("source_path", pa.string()), ("source_sha256", pa.string()), ("stage", pa.string()),
    ("reason", pa.string()), ("detail", pa.string()),
])


@dataclass(frozen=True, slots=True)
class InputsRef:
    """A written inputs table: ``digest`` identifies its content (inputs, splits, scan rejects)."""

    path: str  # the inputs, in build order
    rejects_path: str  # the scan's rejects
    rows: int
    rejects: int
    digest: str

    @property
    def n_inputs(self) -> int:
        return self.rows + self.rejects

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(value: dict) -> "InputsRef":
        return InputsRef(**value)


@dataclass(frozen=True, slots=True)
class BatchRef:
    """A batch: rows [start, stop) of the inputs table, ``index``-th in the build order."""

    index: int
    path: str
    start: int
    stop: int

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(value: dict) -> "BatchRef":
        return BatchRef(**value)


def assign_splits(table: pa.Table, cfg: DatasetConfig) -> pa.Array:
    """A split per row of a scan's table (``data.scan.SCANNED_SCHEMA``), read a record batch at a time: one
    string per row is held (the split's, interned), not the rows."""
    cols = ["utt_id", "speaker", "corpus"]
    known = known_speakers((r["speaker"], r["corpus"]) for r in rows_of(table, ["speaker", "corpus"])) \
        if cfg.split_by == "auto" else {}

    def group(r: dict) -> str:
        return split_group(r["utt_id"], r["speaker"], r["corpus"], cfg.split_by, known)

    if cfg.split_balance == "words":
        size: dict[str, float] = defaultdict(float)
        for r in rows_of(table, [*cols, "transcript"]):
            size[group(r)] += len(r["transcript"].split())
        dealt = deal_groups(size, cfg.splits, cfg.split_salt)
        chosen = [dealt[group(r)] for r in rows_of(table, cols)]
    else:
        chosen = [assign_split(group(r), cfg.splits, cfg.split_salt) for r in rows_of(table, cols)]
    if cfg.dominant_speaker_share is not None:
        rows = list(rows_of(table, [*cols, "transcript"]))  # ids and transcripts only: an evaluation corpus' size
        chosen, _ = share_dominant_groups(chosen, [group(r) for r in rows], [r["utt_id"] for r in rows],
                                          [len(r["transcript"].split()) for r in rows], cfg.splits, cfg.split_salt,
                                          cfg.dominant_speaker_share)
    return pa.array(chosen, pa.string())


def write_inputs(scanned: Sequence[Scanned], scan_rejects: Sequence[Reject], cfg: DatasetConfig,
                 work_root: str) -> InputsRef:
    """:func:`write_inputs_table` for inputs held as objects."""
    table = item_table((s.item for s in scanned), (s.source_sha256 for s in scanned))
    return write_inputs_table(table, scan_rejects, cfg, work_root)


def write_inputs_table(table: pa.Table, scan_rejects: Sequence[Reject], cfg: DatasetConfig,
                       work_root: str) -> InputsRef:
    """Assign splits, sort into the build order and write the table (content-addressed: the same scan and split
    settings give the same path and bytes, whichever process writes it). ``table``: ``data.scan.SCANNED_SCHEMA``."""
    table = table.append_column("split", assign_splits(table, cfg))
    if cfg.text_form == "written":  # before the digest: the version is of the text that trains
        column = table.schema.get_field_index("transcript")
        table = table.set_column(column, "transcript", pa.array(
            [written_form(t) for t in table.column("transcript").to_pylist()], pa.string()))
    # the build order as indices; the table is taken, hashed into the digest and written (compressed, in memory:
    # the path is the digest) a row group at a time, as a sorted copy would double it
    order = pc.sort_indices(table.select(["split", "key"]), [("split", "ascending"), ("key", "ascending")])
    digest = hashlib.sha256()
    inputs_file = io.BytesIO()
    with pq.ParquetWriter(inputs_file, INPUTS_SCHEMA, compression="zstd") as writer:
        for start in range(0, table.num_rows, ROW_GROUP):
            part = table.take(order.slice(start, ROW_GROUP))
            for r in rows_of(part, [*CONTENT_COLUMNS, "split"]):
                digest.update(f"{content_key(*(r[c] for c in CONTENT_COLUMNS))}|{r['split']}\n".encode())
            writer.write_table(part.select(INPUTS_SCHEMA.names).cast(INPUTS_SCHEMA), row_group_size=ROW_GROUP)
    n_rows = table.num_rows
    ordered_rejects = sorted(scan_rejects, key=lambda r: (r.utt_id, r.reason, r.source_path))
    for r in ordered_rejects:
        digest.update(f"reject|{r.utt_id}|{r.reason}|{r.source_path}\n".encode())
    rejects = pa.Table.from_pylist([{name: getattr(r, name) for name in SCAN_REJECTS_SCHEMA.names}
                                    for r in ordered_rejects], schema=SCAN_REJECTS_SCHEMA)
    key = digest.hexdigest()
    base = fs.join(work_root, "inputs", key[:2], key)
    ref = InputsRef(base + ".inputs.parquet", base + ".rejects.parquet", n_rows, rejects.num_rows, key)
    if not fs.exists(ref.path):
        fs.write_bytes(ref.path, inputs_file.getvalue())
    if not fs.exists(ref.rejects_path):
        buf = io.BytesIO()
        pq.write_table(rejects, buf, compression="zstd", row_group_size=ROW_GROUP)
        fs.write_bytes(ref.rejects_path, buf.getvalue())
    return ref


def plan_batches(ref: InputsRef, batch_size: int) -> list[BatchRef]:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    return [BatchRef(n, ref.path, start, min(start + batch_size, ref.rows))
            for n, start in enumerate(range(0, ref.rows, batch_size))]


def read_batch(batch: BatchRef) -> tuple[list[Scanned], list[str]]:
    """The batch's inputs and their splits, read from the row groups that hold them."""
    with fs.open_read(batch.path) as fh:
        pf = pq.ParquetFile(fh)
        groups, first, at = [], None, 0
        for g in range(pf.num_row_groups):
            n = pf.metadata.row_group(g).num_rows
            if at < batch.stop and at + n > batch.start:
                groups.append(g)
                first = at if first is None else first
            at += n
        if batch.stop > at or batch.start < 0 or batch.start > batch.stop:
            raise ValueError(f"batch {batch.index}: rows [{batch.start}, {batch.stop}) are not in {batch.path} "
                             f"({at} rows)")
        rows = pf.read_row_groups(groups).slice(batch.start - (first or 0), batch.stop - batch.start).to_pylist()
    scanned = [Scanned(CorpusItem(**{k: r[k] for k in CorpusItem.__slots__}), r["source_sha256"]) for r in rows]
    return scanned, [r["split"] for r in rows]


def read_scan_rejects(ref: InputsRef) -> list[Reject]:
    table = pq.read_table(io.BytesIO(fs.read_bytes(ref.rejects_path)))
    return [Reject(**row) for row in table.to_pylist()]


__all__ = ["INPUTS_SCHEMA", "ROW_GROUP", "BatchRef", "InputsRef", "assign_splits", "plan_batches", "read_batch",
           "read_scan_rejects", "write_inputs", "write_inputs_table"]
