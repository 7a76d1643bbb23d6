"""How an s3:// upload is confirmed stored as sent, on a service that may check nothing.

Every PUT and part carries a CRC32C (or CRC32) of its body, and a service that
validates it (AWS S3, R2, SeaweedFS) refuses a damaged body with BadDigest: the
resend is the repair. Others store it (moto, Ceph RGW 16), and a 200 proves
nothing, so before an upload is reported as written this module looks for
evidence that the service holds the bytes sent, cheapest first:

0. **The service's own checksum of what it stored**, returned with the answer
   and equal to the one sent (``s3._check_echo``; a different one is
   damage): no MD5 is computed at all. Only from a service seen to refuse a
   body whose checksum does not match (probed once per store, with a small
   object under ``checks/scratch/``): one that stores the checksum it is sent
   and returns it unchecked would otherwise confirm every damaged body.
1. **The ETag is the MD5 of the bytes sent.** No MD5 is ever sent, so an ETag
   equal to ours was computed by the service from what it received: plain and
   part uploads on AWS S3 (SSE-S3 or none), MinIO, Ceph, SeaweedFS and moto
   (docs/security.md). Free: one MD5 of each body here.
2. **A read-back.** A service whose ETags are not MD5s (AWS with SSE-KMS or
   SSE-C) gives no such evidence: what it stored is read back (a plain upload
   whole, a multipart one as the ranges of its unconfirmed parts, hashed) and
   compared. It costs the object's bytes once more, as downloads; only such a
   service pays it.

Which kind a service is, this store learns from its answers: an ETag equal to
the MD5 says MD5s; a part whose ETag differs is sent again once (a damaged part
on an MD5 service comes back right the second time: that repairs it), and a
second mismatch, or a read-back that finds the bytes intact, says not MD5s.
An upload found damaged is never reported as written: a plain one is sent
again (a created one removed first), a multipart one is removed and refused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..errors import StoreError, TransientStoreError
from .checksums import md5_hex


def same_md5(etag: str, md5: str) -> bool:
    return etag.strip('"') == md5


@dataclass(frozen=True)
class _Part:
    size: int
    checksum: str  # what the completion lists
    md5: str
    confirmed: bool  # by its ETag; False: read back after the completion


class UploadConfirmations:
    """The evidence one S3 store has gathered about its service, and its parts in flight."""

    def __init__(self) -> None:
        #: Whether the service's ETags are MD5s of what it stored; None until an answer says.
        self.etag_is_md5: bool | None = None
        #: Whether the service refuses a body whose checksum does not match; None: not probed.
        self.checks_checksums: bool | None = None
        self._probing = threading.Lock()
        self._parts: dict[tuple[str, int], _Part] = {}
        self._lock = threading.Lock()
        self._learning = threading.Lock()  # one part at a time finds out what ETags are

    def echo_confirms(self, probe: Callable[[], bool | None]) -> bool:
        """Whether a checksum the service returns, equal to the one sent, proves what it
        stored: only where it checks what it is sent. ``probe`` (run once, by one
        thread) says whether the service refused a body with a wrong checksum; None
        (it could not tell: a transient failure) proves nothing and is asked again
        at the next upload."""
        if self.checks_checksums is None:
            with self._probing:
                if self.checks_checksums is None:
                    self.checks_checksums = probe()
        return bool(self.checks_checksums)

    # -- plain uploads ---------------------------------------------------------------
    def put_confirmed(self, data: bytes, etag: str, read_back: Callable[[], bytes]) -> bool:
        """Whether the object just written (``etag``) holds ``data``; reads it back if need be."""
        if same_md5(etag, md5_hex(data)):
            self.etag_is_md5 = True
            return True
        if self.etag_is_md5:
            return False  # an MD5 service stored other bytes
        if read_back() != data:
            return False
        self.etag_is_md5 = False  # intact, and its ETag is no MD5: from now on, read back
        return True

    # -- parts -------------------------------------------------------------------------
    def part(
        self, what: str, upload_id: str, number: int, data: bytes | bytearray, checksum: str,
        etag: str, send_again: Callable[[], str], *, echoed: bool = False,
    ) -> str:  # fmt: skip
        """Record a part just uploaded (``etag``); the ETag the completion must list.

        ``echoed``: the service returned its own checksum of the part, equal to the
        one sent, which confirms it without an MD5. Raises TransientStoreError (the
        caller's retry sends it again) when the service's ETags are MD5s and this
        one is not the part's.
        """
        if echoed:
            with self._lock:
                self._parts[upload_id, number] = _Part(len(data), checksum, "", True)
            return etag
        md5 = md5_hex(data)
        confirmed = same_md5(etag, md5)
        if not confirmed and self.etag_is_md5 is None:
            with self._learning:
                if self.etag_is_md5 is None:
                    etag = send_again()
                    confirmed = same_md5(etag, md5)
                    self.etag_is_md5 = confirmed  # right the second time: damage, repaired
        if confirmed:
            self.etag_is_md5 = True
        elif self.etag_is_md5:
            raise TransientStoreError(f"{what}: the service stored other bytes than were sent")
        with self._lock:
            self._parts[upload_id, number] = _Part(len(data), checksum, md5, confirmed)
        return etag

    def checksums(self, upload_id: str, numbers: list[int]) -> dict[int, str | None]:
        """Each part's checksum, for the completion that lists them (None: not recorded)."""
        with self._lock:
            found = {n: self._parts.get((upload_id, n)) for n in numbers}
        return {n: None if p is None else p.checksum for n, p in found.items()}

    def check_completed(
        self, what: str, upload_id: str, numbers: list[int],
        read_range_md5: Callable[[int, int], str],
    ) -> None:  # fmt: skip
        """After the completion: read back the parts no ETag confirmed; StoreError if damaged.

        ``read_range_md5(offset, size)`` hashes that range of the completed
        object. A part recorded by another process (none here) cannot be
        checked: that is refused too, never assumed.
        """
        with self._lock:
            parts = [self._parts.get((upload_id, n)) for n in sorted(numbers)]
        offset, damaged = 0, []
        for number, part in zip(sorted(numbers), parts, strict=True):
            if part is None:
                raise StoreError(f"{what}: part {number} was not uploaded by this store")
            if not part.confirmed and read_range_md5(offset, part.size) != part.md5:
                damaged.append(number)
            offset += part.size
        if damaged:
            raise StoreError(
                f"{what}: the service stored other bytes than were sent in part(s) "
                f"{', '.join(map(str, damaged))}; the object was removed, write it again"
            )

    def forget(self, upload_id: str) -> None:
        with self._lock:
            for done in [k for k in self._parts if k[0] == upload_id]:
                del self._parts[done]
