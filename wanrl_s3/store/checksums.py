"""The checksums uploads carry and are confirmed by, computed once here for every backend.

An upload sends a CRC32C of its body (hardware-accelerated through
``google-crc32c``; CRC32 where it is absent) for the service to check; the MD5
of the body is what a service's ETag (S3) or ``md5Hash`` is compared with, and
read-backs hash ranges the same way.
"""

from __future__ import annotations

import base64
import hashlib
import re
import zlib
from collections.abc import Callable
from typing import Any

from ..errors import UsageError
from ..units import MiB

_crc32c: Any
try:  # hardware CRC32C (3x zlib's CRC32 here); optional, so CRC32 is the fallback
    import google_crc32c as _crc32c
except ImportError:  # pragma: no cover - exercised where the package is absent
    _crc32c = None

#: The checksum algorithm sent with every upload.
CHECKSUM_ALGORITHM = "CRC32" if _crc32c is None else "CRC32C"
_READ_BACK_CHUNK_BYTES = 8 * MiB
# google-crc32c takes only bytes: a part buffer (bytearray) is fed in pieces this small,
# which malloc serves from memory it reuses; a 16 MiB bytes copy gets fresh pages, a page
# fault and a zeroing per 4 KiB (a third of a publish's client CPU in a perf profile).
_CRC_PIECE_BYTES = 64 * 1024
#: How services word a 400 for a body that did not match its checksum (nothing was
#: stored; a resend is the repair): GCS "Provided CRC32C ... doesn't match", Azure
#: "The MD5 value specified in the request did not match", Azurite "contentMD5 doesn't match".
DAMAGED_BODY_RE = re.compile(r"(crc32c|md5).*(doesn't|does not|didn't|did not) match", re.I)


def upload_checksum(
    data: bytes | bytearray | memoryview, algorithm: str = CHECKSUM_ALGORITHM
) -> str:
    """The base64, big-endian checksum of ``data`` as S3 (``x-amz-checksum-crc32c``,
    ``-crc32``) and GCS (``crc32c``) write it."""
    if algorithm == "CRC32C" and _crc32c is not None:
        value = _crc32c_of(data)
    elif algorithm == "CRC32":
        value = zlib.crc32(data)
    else:
        raise UsageError(f"unsupported upload checksum {algorithm!r}")
    return base64.b64encode(value.to_bytes(4, "big")).decode()


def _crc32c_of(data: bytes | bytearray | memoryview) -> int:
    if isinstance(data, bytes):
        return int(_crc32c.value(data))
    view, crc = memoryview(data).cast("B"), 0
    for lo in range(0, len(view), _CRC_PIECE_BYTES):
        crc = _crc32c.extend(crc, bytes(view[lo : lo + _CRC_PIECE_BYTES]))
    return int(crc)


def md5_hex(data: bytes | bytearray | memoryview) -> str:
    return hashlib.md5(data, usedforsecurity=False).hexdigest()


def range_md5(read: Callable[[int, memoryview], None], offset: int, size: int) -> str:
    """The MD5 of ``size`` bytes from ``offset``, read in chunks by ``read(offset, buf)``."""
    digest = hashlib.md5(usedforsecurity=False)
    buf = memoryview(bytearray(min(size, _READ_BACK_CHUNK_BYTES)))
    done = 0
    while done < size:
        piece = buf[: min(len(buf), size - done)]
        read(offset + done, piece)
        digest.update(piece)
        done += len(piece)
    return digest.hexdigest()
