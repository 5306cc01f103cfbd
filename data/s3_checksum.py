"""S3 full-object SHA-256 checksums for ``data.fs``: uploads ask the store to keep one, and a version check reads it
back instead of re-hashing the object. Stores that refuse the header get uploads without it (their versions keep the
size check). Kept apart from ``data.fs`` because it is S3's wire protocol, not the path layer."""

from __future__ import annotations

import base64
import binascii
import errno
import logging
import os
from collections.abc import Callable
from typing import Any

import fsspec

# Objects below s3fs's multipart threshold (2 × its 50 MiB chunk) go up in one PUT, which can ask S3 to keep a
# full-object SHA-256 (`ChecksumAlgorithm`): the cheap version check compares it with the sha256 the marker records.
# A multipart object's checksum is a checksum of part checksums, not comparable: those keep the size check.
ONE_PUT_BYTES = 100 << 20

# S3-compatible stores that answered a checksum header with an error (e.g. an older MinIO or Ceph): their uploads go
# without it, once per process, and their versions keep the size check
NO_CHECKSUM_STORES: set[str] = set()
log = logging.getLogger(__name__)

# what a store answers to a header it does not take; a checksum that did not match (BadDigest, InvalidDigest,
# XAmzContentSHA256Mismatch) is an upload corrupted on the way, not a refusal
REFUSAL_CODES = frozenset({"NotImplemented", "InvalidArgument", "InvalidRequest", "400", "501"})


def checksum_kw(is_s3: bool, nbytes: int) -> dict[str, str]:
    return {"ChecksumAlgorithm": "SHA256"} if is_s3 and nbytes < ONE_PUT_BYTES else {}


def store_of(fs: fsspec.AbstractFileSystem) -> str:
    """Which object store ``fs`` talks to (its endpoint; AWS itself when none is set)."""
    return str(getattr(fs, "endpoint_url", None) or (getattr(fs, "client_kwargs", None) or {}).get("endpoint_url")
               or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "aws")


def refused_checksum(error: BaseException) -> bool:
    """Whether an upload's error is the store refusing a checksum header. s3fs turns the store's answer into an
    OSError or ValueError that keeps its message (which names the header) and has the ``ClientError`` as cause."""
    if not isinstance(error, (OSError, ValueError)) or "checksum" not in str(error).lower():
        return False
    code = str((getattr(error.__cause__, "response", None) or {}).get("Error", {}).get("Code", ""))
    return code in REFUSAL_CODES if code else getattr(error, "errno", None) == errno.ENOSYS


def upload(fs: fsspec.AbstractFileSystem, text: str, is_s3: bool, nbytes: int, put: Callable[..., object]) -> None:
    """``put(**kw)``: with the SHA-256 checksum header where the store keeps one, without it where the store refuses
    it (logged once per store and process; ``verify_version`` then compares sizes, ``deep=True`` still re-hashes)."""
    store = store_of(fs)
    kw = checksum_kw(is_s3, nbytes) if store not in NO_CHECKSUM_STORES else {}
    try:
        put(**kw)
        return
    except (OSError, ValueError) as error:
        if not kw or not refused_checksum(error):
            raise
        NO_CHECKSUM_STORES.add(store)
        log.warning("the object store at %s refused the SHA-256 checksum header (%s): uploading without it; its "
                    "dataset versions are checked by size (verify_version(deep=True) re-hashes)", store, error)
    try:
        put()
    except (OSError, ValueError) as error:
        if refused_checksum(error):  # botocore >= 1.36 adds a CRC32 checksum to every upload by itself
            raise OSError(f"{text}: the object store refuses checksum headers ({error}); set "
                          "AWS_REQUEST_CHECKSUM_CALCULATION=when_required so that botocore adds none") from error
        raise


def full_object_sha256(head: dict[str, Any]) -> str | None:
    """The hex SHA-256 in a ``head_object`` answer (asked with ``ChecksumMode="ENABLED"``), or None where the store
    keeps none or keeps a checksum of part checksums (a multipart upload)."""
    value = head.get("ChecksumSHA256")
    if not value or "-" in value or head.get("ChecksumType", "FULL_OBJECT") != "FULL_OBJECT":
        return None
    try:
        return base64.b64decode(value).hex()
    except (binascii.Error, ValueError):
        return None
