"""s3:// : any S3-compatible service through boto3 (AWS S3, R2, MinIO, SeaweedFS, Ceph RGW).

Where the service is: ``endpoint_url`` (or the standard ``AWS_ENDPOINT_URL``),
credentials from ``profile`` or the standard credential chain. Retries are ours
(:mod:`wanrl_s3.store.retry`, on an injectable clock), so botocore's own are
switched off: one retry layer, not two multiplying each other.

Integrity of what is read is ours (BLAKE3 per tensor, in the manifest), so
botocore's response checksums stay off. Integrity of what is *written* cannot
be: a byte flipped between this process and the disks of the service would be
committed, and every reader would then refuse the version. So every PUT and
every part carries an S3 checksum of its body (CRC32C where ``google-crc32c``
is installed, hardware-accelerated; CRC32 otherwise), computed here once; the
service refuses a body that does not match it (400 BadDigest, retried like
any transit fault), and a checksum that the service echoes back must equal
ours (it confirms the upload only from a service seen to refuse a wrong
one). A service that checks nothing (moto, Ceph RGW 16) is caught by
:mod:`wanrl_s3.store.s3_confirm`: no upload, plain or multipart, is reported
as written before an MD5 ETag or a read-back shows the bytes sent were
stored. Measured cost in docs/results/transfer.md.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import http.client
import logging
import os
import re
import uuid
from collections.abc import Iterator
from typing import Any, Self
from urllib.parse import urlsplit

import boto3
import botocore.exceptions as bx
from botocore.config import Config
from urllib3.exceptions import ProtocolError

from ..errors import (
    NotFoundError,
    PreconditionFailedError,
    StoreError,
    ThrottledError,
    TransientStoreError,
    UsageError,
)
from ..format.layout import cache_control, scratch_dir
from ..units import MiB
from .checksums import CHECKSUM_ALGORITHM, range_md5, upload_checksum
from .retry import THROTTLE_STATUSES, RetryPolicy
from .s3_confirm import UploadConfirmations
from .sink import StreamBroke, read_socket_into
from .spec import Blob, ObjectInfo, ObjectStore, PendingUpload

log = logging.getLogger(__name__)

#: Failures worth another try: the connection, not the request, went wrong.
RETRYABLE_EXCEPTIONS: tuple[type[BaseException], ...] = (
    bx.EndpointConnectionError,
    bx.ConnectionClosedError,
    bx.ConnectTimeoutError,
    bx.ReadTimeoutError,
    bx.ResponseStreamingError,
    bx.IncompleteReadError,
    ProtocolError,
    ConnectionError,
    TimeoutError,
)
#: S3 error codes that mean "try again later".
RETRYABLE_CODES = frozenset(
    {
        "InternalError",
        "ServiceUnavailable",
        "SlowDown",
        "RequestTimeout",
        "503",
        "500",
        "RequestTimeTooSkewed",
        "OperationAborted",
        # the body arrived damaged (it did not match its checksum or its signed hash):
        # nothing was stored, and a resend carries the same, intact bytes
        "BadDigest",
        "XAmzContentChecksumMismatch",
        "XAmzContentSHA256Mismatch",
    }
)
#: S3 error codes (and statuses) that mean "over the request rate: slow down": retried
#: after the longer backoff of a throttled request (``RetryPolicy.throttled_*``).
THROTTLE_CODES = frozenset(
    {"SlowDown", "ServiceUnavailable", "503", "TooManyRequests", "429", "RequestLimitExceeded"}
)
#: What botocore accepts as a bucket name (checked here first, so a typo is one line).
BUCKET_RE = re.compile(r"^[A-Za-z0-9.\-_]{1,255}$")
_NOT_FOUND_CODES = frozenset({"NoSuchKey", "404", "NotFound", "NoSuchUpload"})
# 409 ConditionalRequestConflict: S3 lost a race between two conditional writes.
_PRECONDITION_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict"})
_CHUNK_BYTES = MiB  # per chunk where botocore's stream is copied
# keys the service does not know, or a signature made with another secret
_CREDENTIAL_CODES = frozenset({"InvalidAccessKeyId", "SignatureDoesNotMatch"})
# a body that does not match the checksum sent with it
_DIGEST_CODES = frozenset({"BadDigest", "InvalidDigest", "XAmzContentChecksumMismatch"})


_STREAM_ERRORS: tuple[type[BaseException], ...] = (
    *RETRYABLE_EXCEPTIONS,
    http.client.HTTPException,
    OSError,
)


def _stream_into(body: Any, buf: memoryview) -> int:
    """Read a response body straight into ``buf``; returns the bytes read.

    Fast path: the HTTP response under botocore's stream, read from the socket
    into the tensor's memory (:func:`~.sink.read_socket_into`), one copy instead
    of three (chunk bytes, botocore, our buffer); this is what lets a pull keep up
    with s5cmd. It relies on botocore/urllib3 internals, so it is taken only when
    they are there; otherwise chunks are copied. :class:`~.sink.StreamBroke`
    reports what arrived when the connection breaks.
    """
    done = read_socket_into(getattr(body, "_raw_stream", None), buf)
    if done is not None:
        return done
    done = 0
    try:
        for chunk in body.iter_chunks(_CHUNK_BYTES):
            n = min(len(chunk), len(buf) - done)
            buf[done : done + n] = chunk[:n]
            done += n
        return done
    except _STREAM_ERRORS as exc:
        body.close()
        raise StreamBroke(done) from exc


class _NotModified(StoreError):
    """A conditional GET found the ETag unchanged (HTTP 304)."""


class _PastTheEnd(StoreError):
    """A ranged GET starts at or after the object's end (HTTP 416 InvalidRange)."""


def _parse_ts(value: Any) -> float:
    return value.timestamp() if isinstance(value, _dt.datetime) else 0.0


def _error_code(exc: bx.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _check_echo(what: str, resp: Any, sent: str) -> bool:
    """The service's own checksum of what it stored, where it returns one, must be ours.

    A service that validates refuses a mismatch before storing (BadDigest); this
    catches one that computes its checksum and does not compare. Retrying
    rewrites the object with the same bytes. True when the service returned its
    checksum (equal to ours): what it stored is then known to be what was sent,
    and the MD5 of the body (the ETag check, 14x the CPU of CRC32C) is not needed.
    """
    stored = resp.get(f"Checksum{CHECKSUM_ALGORITHM}")
    if stored and stored != sent:
        raise TransientStoreError(
            f"{what}: the service stored a body with {CHECKSUM_ALGORITHM} {stored}, "
            f"not the {sent} sent (damaged in transit)"
        )
    return bool(stored)


class S3Store(ObjectStore):
    protocol = "s3"
    supports_multipart = True
    takes_part_buffers = True
    supports_server_side_copy = True
    supports_copy_from = True
    upload_check = (
        "every upload and part is also checked against its ETag (the MD5 of what the "
        "service stored), or read back where ETags are not MD5s; damage is sent again"
    )

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        profile: str | None = None,
        region: str | None = None,
        max_connections: int = 32,
        read_timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(retry)
        if not bucket:
            raise UsageError("an s3:// URL needs a bucket: s3://BUCKET[/PREFIX]")
        if not BUCKET_RE.match(bucket):
            raise UsageError(
                f"{bucket!r} is not a bucket name: use letters, digits, '.', '-' and '_' "
                "(S3 itself: 3-63 lowercase letters, digits, '.' and '-')"
            )
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
        self.profile = profile or None
        self._client = client or self._make_client(profile, region, max_connections, read_timeout_s)
        # what confirms this service stored an upload as sent, and the parts in flight
        self._confirm = UploadConfirmations()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """``s3://BUCKET[/PREFIX]`` (or ``s3a://``); ``options`` are the constructor's."""
        parts = urlsplit(url)
        return cls(parts.netloc, parts.path, **options)

    def _make_client(
        self, profile: str | None, region: str | None, max_connections: int, read_timeout_s: float
    ) -> Any:
        config = Config(
            max_pool_connections=max_connections,
            retries={"total_max_attempts": 1},
            connect_timeout=10,
            read_timeout=read_timeout_s,
            tcp_keepalive=True,
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            # No SHA-256 of every body for its signature (botocore hashes it over plain
            # http, and over https too when the checksum is ours, not its own): 0.6
            # CPU s per GB of a publish. Every body carries its CRC32C in a signed
            # header, which the service checks; readers check every byte against the
            # manifest's BLAKE3, as a GET's answer is never signed.
            s3={"payload_signing_enabled": False},
        )
        try:
            session = boto3.session.Session(profile_name=profile or None)
            return session.client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=region or session.region_name or "us-east-1",
                config=config,
            )
        except bx.ProfileNotFound as exc:
            raise UsageError(f"AWS profile {profile!r} is not configured") from exc
        except ValueError as exc:
            raise UsageError(f"cannot make an S3 client: {exc}") from exc

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _rel(self, full_key: str) -> str:
        return full_key[len(self.prefix) + 1 :] if self.prefix else full_key

    def _call(self, what: str, fn: Any, **kwargs: Any) -> Any:
        """One request, with its failures translated into our error classes."""
        try:
            return fn(Bucket=self.bucket, **kwargs)
        except bx.ClientError as exc:
            raise self._translate(exc, what) from exc
        except RETRYABLE_EXCEPTIONS as exc:
            raise TransientStoreError(f"{what}: {exc}") from exc
        except bx.ParamValidationError as exc:  # botocore's message spans several lines
            first = str(exc).replace("Parameter validation failed:", "").strip().splitlines()
            raise UsageError(f"{what}: {first[0] if first else exc}") from exc
        except bx.NoCredentialsError as exc:
            raise UsageError(
                "no AWS credentials found: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                "AWS_PROFILE or pass --profile"
            ) from exc
        except bx.SSLError as exc:  # a handshake that cannot work: retrying will not help
            raise StoreError(
                f"{self.url}: {what}: TLS failed at {self.endpoint_url or 'the endpoint'} "
                f"(does it serve https?): {exc.kwargs.get('error', exc)}"
            ) from exc
        except bx.BotoCoreError as exc:  # e.g. an answer that is not S3's XML
            raise StoreError(f"{self.url}: {what}: {exc}") from exc

    def _translate(self, exc: bx.ClientError, what: str) -> Exception:
        err = exc.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        where = f"{self.url}: {what}"
        if status == 304 or code in ("304", "NotModified"):
            return _NotModified(where)
        if status == 416 or code == "InvalidRange":
            return _PastTheEnd(f"{where}: the object ends before the range")
        if code in _NOT_FOUND_CODES:
            return NotFoundError(f"{where}: not found")
        if code in _PRECONDITION_CODES or status in (409, 412):
            return PreconditionFailedError(f"{where}: precondition failed ({code})")
        if code in _CREDENTIAL_CODES:
            return UsageError(
                f"{where}: the service refused the credentials ({code}): check "
                "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or --profile"
            )
        if code == "NoSuchBucket":
            return StoreError(
                f"bucket {self.bucket!r} does not exist at "
                f"{self.endpoint_url or 'the default endpoint'}"
            )
        if code in THROTTLE_CODES or status in THROTTLE_STATUSES:
            return ThrottledError(f"{where}: {code or status}")
        if code in RETRYABLE_CODES or (status >= 500 and status != 501):  # 501: never will
            return TransientStoreError(f"{where}: {code or status}")
        return StoreError(f"{where}: {code or status} {err.get('Message', '')}".rstrip())

    # -- primitives -------------------------------------------------------------
    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        kwargs: dict[str, Any] = {"Key": self._key(key)}
        if if_none_match:
            kwargs["IfNoneMatch"] = if_none_match
        if max_read_bytes is not None:
            kwargs["Range"] = f"bytes=0-{max_read_bytes - 1}"
        try:
            resp = self._call(f"GET {key}", self._client.get_object, **kwargs)
        except _NotModified:
            return None
        except _PastTheEnd:  # no byte 0: the object is empty
            return self._empty_object(key, if_none_match)
        body = resp["Body"]
        try:
            if max_read_bytes is None:
                return Blob(body.read(), resp["ETag"])
            data = body.read(max_read_bytes)
            body.close()  # a service that ignored the range sends the rest to nobody
            return Blob(data, resp["ETag"])
        except RETRYABLE_EXCEPTIONS as exc:
            raise TransientStoreError(f"GET {key}: {exc}") from exc

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        end = offset + len(buf) - 1
        try:
            resp = self._call(
                f"GET {key}",
                self._client.get_object,
                Key=self._key(key),
                Range=f"bytes={offset}-{end}",
            )
        except _PastTheEnd:
            return 0  # nothing there: the caller asks how long the object really is
        body = resp["Body"]
        done = 0
        try:
            done = _stream_into(body, buf)
        except StreamBroke as broke:  # keep what arrived; the caller resumes after it
            done = broke.done
            if done == 0:
                raise TransientStoreError(f"GET {key}: {broke.__cause__}") from broke.__cause__
        return done

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        checksum = upload_checksum(data)

        def send(create: bool, match: str | None) -> tuple[str, bool]:
            kwargs: dict[str, Any] = {"IfNoneMatch": "*"} if create else {}
            if match is not None:
                kwargs["IfMatch"] = match
            resp = self._call(
                f"PUT {key}", self._client.put_object, Key=self._key(key), Body=data,
                CacheControl=cache_control(key),
                **{f"Checksum{CHECKSUM_ALGORITHM}": checksum}, **kwargs,
            )  # fmt: skip
            etag = str(resp["ETag"])
            if _check_echo(f"PUT {key}", resp, checksum) and self._echo_confirms():
                return etag, True  # the service's own checksum of what it stored is ours
            return etag, self._confirm.put_confirmed(
                data, etag, lambda: self._read_back(key, len(data))
            )

        def remove(etag: str) -> None:  # our own damaged create: nobody else could write it
            self._call(f"DELETE {key}", self._client.delete_object, Key=self._key(key))

        return self._write_confirmed(
            key, send, remove, if_none_match=if_none_match, if_match=if_match
        )

    def _read_back(self, key: str, size: int) -> bytes:
        """What the service holds at ``key``, to compare with what was just sent."""
        blob = self._get(key, max_read_bytes=size + 1)
        return b"" if blob is None else blob.data

    def _head(self, key: str) -> ObjectInfo | None:
        try:
            resp = self._call(f"HEAD {key}", self._client.head_object, Key=self._key(key))
        except NotFoundError:
            return None
        return ObjectInfo(
            key, int(resp["ContentLength"]), resp["ETag"], _parse_ts(resp.get("LastModified"))
        )

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        token: dict[str, str] = {}
        while True:
            resp = self._call(
                f"LIST {prefix}", self._client.list_objects_v2, Prefix=self._key(prefix), **token
            )
            for item in resp.get("Contents", []):
                yield ObjectInfo(
                    self._rel(item["Key"]),
                    int(item["Size"]),
                    item["ETag"],
                    _parse_ts(item.get("LastModified")),
                )
            if not resp.get("IsTruncated"):
                return
            token = {"ContinuationToken": resp["NextContinuationToken"]}

    def _delete(self, keys: list[str]) -> None:
        resp = self._call(
            "DELETE",
            self._client.delete_objects,
            Delete={"Objects": [{"Key": self._key(k)} for k in keys], "Quiet": True},
        )
        errors = [e for e in resp.get("Errors", []) if e.get("Code") != "NoSuchKey"]
        if errors:
            first = errors[0]
            raise StoreError(f"{self.url}: DELETE {first.get('Key')}: {first.get('Code')}")

    def _mpu_create(self, key: str) -> str:
        return str(
            self._call(
                f"CREATE upload {key}",
                self._client.create_multipart_upload,
                Key=self._key(key),
                CacheControl=cache_control(key),
                ChecksumAlgorithm=CHECKSUM_ALGORITHM,  # every part then must carry one
            )["UploadId"]
        )

    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes | bytearray) -> str:
        what = f"PUT {key} part {part_number}"
        checksum = upload_checksum(data)

        def send() -> tuple[str, bool]:
            resp = self._call(
                what,
                self._client.upload_part,
                Key=self._key(key),
                UploadId=upload_id,
                PartNumber=part_number,
                Body=data,
                **{f"Checksum{CHECKSUM_ALGORITHM}": checksum},
            )
            return str(resp["ETag"]), _check_echo(what, resp, checksum) and self._echo_confirms()

        etag, echoed = send()
        return self._confirm.part(
            what, upload_id, part_number, data, checksum, etag, lambda: send()[0], echoed=echoed
        )

    def _mpu_complete(self, key: str, upload_id: str, parts: list[tuple[int, str]]) -> str:
        return self._complete(key, upload_id, parts)

    def _mpu_complete_if_absent(
        self, key: str, upload_id: str, parts: list[tuple[int, str]]
    ) -> str:
        return self._complete(key, upload_id, parts, IfNoneMatch="*")

    def _complete(
        self, key: str, upload_id: str, parts: list[tuple[int, str]], **conditions: str
    ) -> str:
        numbers = [n for n, _ in parts]
        sums = self._confirm.checksums(upload_id, numbers)
        listed = [
            {"PartNumber": n, "ETag": e}
            | ({} if sums[n] is None else {f"Checksum{CHECKSUM_ALGORITHM}": sums[n]})
            for n, e in sorted(parts)
        ]
        resp = self._call(
            f"COMPLETE {key}",
            self._client.complete_multipart_upload,
            Key=self._key(key),
            UploadId=upload_id,
            MultipartUpload={"Parts": listed},
            **conditions,
        )
        try:  # parts no ETag confirmed are read back: only where ETags are not MD5s
            self._confirm.check_completed(
                f"COMPLETE {key}", upload_id, numbers,
                lambda offset, size: range_md5(
                    lambda at, buf: self.read_into(key, at, buf), offset, size
                ),
            )  # fmt: skip
        except StoreError:
            self._call(f"DELETE {key}", self._client.delete_object, Key=self._key(key))
            raise
        finally:
            self._confirm.forget(upload_id)
        return str(resp["ETag"])

    def _echo_confirms(self) -> bool:
        """Whether this service's echoed checksums prove what it stored (probed once)."""
        return self._confirm.echo_confirms(self._probe_checksum_check)

    def _probe_checksum_check(self) -> bool | None:
        """Whether the service refuses a small body sent with a wrong checksum (None: a
        transient failure hid the answer). A body it stored is removed again."""
        key = f"{scratch_dir(uuid.uuid4().hex)}/checksum"
        try:
            if self._put_with_wrong_checksum(key, b"wanrl-s3: is the checksum checked?"):
                return True
        except TransientStoreError:
            return None
        except StoreError as exc:  # e.g. no write access there: echoes confirm nothing
            log.info("%s: the checksum probe failed (%s); uploads are confirmed by MD5 "
                     "ETags or read-backs", self.url, exc)  # fmt: skip
            return False
        with contextlib.suppress(StoreError):
            self.delete([key])
        return False

    def _put_with_wrong_checksum(self, key: str, data: bytes) -> bool:
        """The body with the checksum of other bytes; a service that checks answers BadDigest."""
        wrong = upload_checksum(data + b"\0")
        try:
            self._call(
                f"PUT {key}",
                self._client.put_object,
                Key=self._key(key),
                Body=data,
                **{f"Checksum{CHECKSUM_ALGORITHM}": wrong},
            )
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, bx.ClientError) and _error_code(cause) in _DIGEST_CODES:
                return True
            raise
        return False

    def _mpu_abort(self, key: str, upload_id: str) -> None:
        self._confirm.forget(upload_id)
        with contextlib.suppress(NotFoundError):
            self._call(
                f"ABORT {key}",
                self._client.abort_multipart_upload,
                Key=self._key(key),
                UploadId=upload_id,
            )

    def _mpu_list(self, prefix: str) -> Iterator[PendingUpload]:
        marker: dict[str, str] = {}
        while True:
            resp = self._call(
                "LIST uploads",
                self._client.list_multipart_uploads,
                Prefix=self._key(prefix),
                **marker,
            )
            for up in resp.get("Uploads", []):
                yield PendingUpload(
                    self._rel(up["Key"]), up["UploadId"], _parse_ts(up.get("Initiated"))
                )
            if not resp.get("IsTruncated"):
                return
            marker = {
                "KeyMarker": resp["NextKeyMarker"],
                "UploadIdMarker": resp["NextUploadIdMarker"],
            }

    def _copy(self, src_key: str, dst_key: str) -> None:
        self._copy_from(self, src_key, dst_key)

    def _copy_from(self, source: ObjectStore, src_key: str, dst_key: str) -> bool:
        """CopyObject (multipart for big objects) from any bucket this client's service holds.

        Same endpoint and same credentials profile: one service, so the copy
        runs inside it; anything else is left to the caller to stream.
        """
        if not (
            isinstance(source, S3Store)
            and source.endpoint_url == self.endpoint_url
            and source.profile == self.profile
        ):
            return False
        try:
            self._client.copy(
                {"Bucket": source.bucket, "Key": source._key(src_key)},
                self.bucket,
                self._key(dst_key),
            )
        except bx.ClientError as exc:
            raise self._translate(exc, f"COPY {source.url}/{src_key}") from exc
        except RETRYABLE_EXCEPTIONS as exc:
            raise TransientStoreError(f"COPY {source.url}/{src_key}: {exc}") from exc
        return True
