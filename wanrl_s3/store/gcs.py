"""gs:// : Google Cloud Storage through its own JSON API (google-cloud-storage).

GCS's conditional writes are native here, not the S3 interoperability layer's:
a manifest is created with ``ifGenerationMatch=0`` (only if absent) and LATEST
moves by compare-and-swap on the object's generation, which is what this store
hands out as an object's ETag. Credentials are Google's application default
credentials; ``STORAGE_EMULATOR_HOST`` (or an ``endpoint_url`` on 127.0.0.1)
points at an emulator with anonymous credentials instead.

Retries are ours (:mod:`wanrl_s3.store.retry`): every SDK call gets
``retry=None``. So is integrity: reads are checked against the manifest
(BLAKE3 per tensor), so SDK checksums are off; every upload carries the CRC32C
of its body, which GCS checks before storing it, and the CRC32C the service
reports for what it stored must equal it (fake-gcs-server checks nothing but
reports that), so an upload damaged in transit is sent again, never reported
as written. Parts are uploads like any other; ``compose`` joins them inside
the service.
Large objects are uploaded as parts, each its own object under ``.uploads/``,
then joined by ``compose`` (32 sources a call, so in rounds for more) and the
parts deleted; see :mod:`wanrl_s3.store.staging` for how pending uploads are
listed and aborted.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.client
import os
from collections.abc import Callable, Iterator
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit

import google.api_core.exceptions as gx
import google.auth.exceptions
import requests
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from urllib3.exceptions import ProtocolError

from ..errors import (
    NotFoundError,
    PreconditionFailedError,
    StoreError,
    ThrottledError,
    TransientStoreError,
    UsageError,
)
from ..format.layout import cache_control
from .checksums import DAMAGED_BODY_RE, upload_checksum
from .retry import THROTTLE_STATUSES, RetryPolicy
from .sink import CappedSink, ranged_response
from .spec import Blob, ObjectInfo, ObjectStore
from .staging import UPLOADS_PREFIX, MarkedUploads, PastTheEnd, timestamp_s

T = TypeVar("T")
_COMPOSE_MAX = 32  # GCS's limit of source objects per compose request
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Failures worth another try: the connection, not the request, went wrong.
RETRYABLE_EXCEPTIONS: tuple[type[BaseException], ...] = (
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    requests.exceptions.ChunkedEncodingError,
    http.client.HTTPException,
    ProtocolError,
    ConnectionError,
    TimeoutError,
)
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})


def _etag(generation: Any) -> str:
    return str(generation)


def _generation(etag: str, where: str) -> int:
    try:
        return int(etag)
    except ValueError:
        raise PreconditionFailedError(f"{where}: {etag!r} is not a GCS generation") from None


class GcsStore(MarkedUploads):
    protocol = "gs"
    supports_server_side_copy = True
    supports_copy_from = True
    upload_check = (
        "the CRC32C the service reports for what it stored is compared with the one sent "
        "(read back where it reports none); damage is sent again"
    )

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        project: str | None = None,
        max_connections: int = 32,
        read_timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(bucket, prefix, "gs", retry)
        self.bucket_name = bucket
        self.endpoint_url = endpoint_url or os.environ.get("STORAGE_EMULATOR_HOST") or None
        self._timeout = (10.0, read_timeout_s)
        self._client = client or self._make_client(project, max_connections)
        self._bucket = self._client.bucket(bucket)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """``gs://BUCKET[/PREFIX]`` (or ``gcs://``); ``options`` are the constructor's."""
        parts = urlsplit(url)
        return cls(parts.netloc, parts.path, **options)

    def _make_client(self, project: str | None, max_connections: int) -> Any:
        """ADC for Google's endpoint; anonymous for an emulator on this machine."""
        options: dict[str, Any] = {}
        credentials: Any = None
        if self.endpoint_url:
            options["client_options"] = {"api_endpoint": self.endpoint_url}
            if urlsplit(self.endpoint_url).hostname in _LOOPBACK:
                credentials, project = AnonymousCredentials(), project or "local"
        try:
            client = storage.Client(project=project, credentials=credentials, **options)
        except google.auth.exceptions.DefaultCredentialsError as exc:
            raise UsageError(
                "no Google credentials found: run `gcloud auth application-default login`, "
                "set GOOGLE_APPLICATION_CREDENTIALS, or STORAGE_EMULATOR_HOST for an emulator"
            ) from exc
        adapter = requests.adapters.HTTPAdapter(
            pool_connections=max_connections, pool_maxsize=max_connections
        )
        for scheme in ("http://", "https://"):
            client._http.mount(scheme, adapter)  # the SDK's session: one pool, sized for us
        return client

    @property
    def url(self) -> str:
        return f"gs://{self.bucket_name}/{self.prefix}".rstrip("/")

    def _blob(self, key: str) -> Any:
        return self._bucket.blob(self._key(key))

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """One request, with its failures translated into our error classes."""
        where = f"{self.url}: {what}"
        try:
            return fn()
        except gx.NotFound as exc:
            raise NotFoundError(f"{where}: not found") from exc
        except gx.PreconditionFailed as exc:
            raise PreconditionFailedError(f"{where}: precondition failed") from exc
        except gx.RequestRangeNotSatisfiable as exc:
            raise PastTheEnd(f"{where}: the object ends before the range") from exc
        except RETRYABLE_EXCEPTIONS as exc:
            raise TransientStoreError(f"{where}: {exc}") from exc
        except google.auth.exceptions.GoogleAuthError as exc:
            raise UsageError(f"{where}: Google credentials failed: {exc}") from exc
        except gx.GoogleAPICallError as exc:
            if exc.code in THROTTLE_STATUSES:
                raise ThrottledError(f"{where}: {exc.code}") from exc
            if exc.code in _TRANSIENT_STATUS or isinstance(exc, gx.ServerError):
                raise TransientStoreError(f"{where}: {exc.code}") from exc
            if isinstance(exc, gx.BadRequest) and DAMAGED_BODY_RE.search(str(exc.message)):
                # the body did not match the CRC32C sent with it: nothing stored, send again
                raise TransientStoreError(f"{where}: {exc.message}") from exc
            raise StoreError(f"{where}: {exc.code} {exc.message}") from exc

    # -- primitives -------------------------------------------------------------
    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        blob = self._blob(key)
        # an ETag that is no generation (another store's) cannot match: read unconditionally
        not_match = int(if_none_match) if if_none_match and if_none_match.isdigit() else None
        # bounded: the range asked for, and never more kept should the server send more
        sink = CappedSink(max_read_bytes or 0)

        def download() -> bytes | None:
            options = {"if_generation_not_match": not_match, "checksum": None}
            try:
                if max_read_bytes is None:
                    return bytes(
                        blob.download_as_bytes(**options, retry=None, timeout=self._timeout)
                    )
                blob.download_to_file(
                    sink, start=0, end=max_read_bytes - 1, **options, retry=None,
                    timeout=self._timeout,
                )  # fmt: skip
            except gx.NotModified:
                return None
            except CappedSink.Full:
                pass
            return bytes(sink.data)

        try:
            data = self._call(f"GET {key}", download)
        except PastTheEnd:  # no byte 0: the object is empty
            return self._empty_object(key, if_none_match)
        if data is None:
            return None
        etag = _etag(blob.generation)
        # GCS answers 304 above; an emulator that ignores the condition is caught here.
        return None if etag == if_none_match else Blob(data, etag)

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        """One ranged media GET through the client's authorized session, into ``buf``.

        Not ``download_to_file``: google-resumable-media copies every chunk
        through Python objects on its way to a file object (a third of the
        throughput a plain ranged GET reaches on the emulator, docs/results/stores.md).
        The request goes through the client's own session (credentials, their
        refresh, the connection pool) and the body lands in ``buf`` in one copy.
        """
        url = f"{self._client.api_endpoint}/download/storage/v1{self._blob(key).path}?alt=media"
        end = offset + len(buf) - 1
        headers = {"Range": f"bytes={offset}-{end}", "Accept-Encoding": "identity"}
        response = self._call(
            f"GET {key}",
            lambda: ranged_response(
                self._client._http.get(url, headers=headers, stream=True, timeout=self._timeout),
                offset,
                len(buf),
                self.url,
                gx.from_http_response,  # reads the (small) error body
            ),
        )
        if response is None:
            return 0  # past the end: the caller asks how long the object really is
        return self._body_into(f"GET {key}", response.raw, buf)

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        sent = upload_checksum(data, "CRC32C")

        def send(create: bool, match: str | None) -> tuple[str, bool]:
            blob = self._blob(key)
            blob.cache_control = cache_control(key)
            blob.crc32c = sent  # in the upload's metadata: GCS refuses a body that does not match
            generation = 0 if create else None if match is None else _generation(match, key)
            self._call(
                f"PUT {key}",
                lambda: blob.upload_from_string(
                    data,
                    content_type="application/octet-stream",
                    if_generation_match=generation,
                    checksum=None,  # ours is sent above, and the service's compared below
                    retry=None,
                    timeout=self._timeout,
                ),
            )
            stored = blob.crc32c  # the service's own CRC32C of what it stored
            if stored is None:  # a service that reports none: what it holds, read back
                got = self._get(key, max_read_bytes=len(data) + 1)
                stored = sent if got is not None and got.data == data else None
            return _etag(blob.generation), stored == sent

        def remove(etag: str) -> None:  # exactly our own damaged create
            blob = self._blob(key)
            with contextlib.suppress(NotFoundError, PreconditionFailedError):
                self._call(
                    f"DELETE {key}",
                    lambda: blob.delete(
                        if_generation_match=int(etag), retry=None, timeout=self._timeout
                    ),
                )

        return self._write_confirmed(
            key, send, remove, if_none_match=if_none_match, if_match=if_match
        )

    def _head(self, key: str) -> ObjectInfo | None:
        blob = self._call(
            f"HEAD {key}",
            lambda: self._bucket.get_blob(self._key(key), retry=None, timeout=self._timeout),
        )
        if blob is None:
            return None
        return ObjectInfo(key, int(blob.size), _etag(blob.generation), timestamp_s(blob.updated))

    def _list_all(self, prefix: str) -> Iterator[ObjectInfo]:
        def page() -> list[ObjectInfo]:
            found = self._client.list_blobs(
                self._bucket, prefix=self._key(prefix), retry=None, timeout=self._timeout
            )
            return [
                ObjectInfo(
                    self._rel(b.name), int(b.size), _etag(b.generation), timestamp_s(b.updated)
                )
                for b in found
            ]

        return iter(self._call(f"LIST {prefix}", page))

    def _delete_one(self, key: str) -> None:
        blob = self._blob(key)
        self._call(f"DELETE {key}", lambda: blob.delete(retry=None, timeout=self._timeout))

    # Multipart: parts are objects .uploads/<id>/<n>, joined by compose.
    def _part_key(self, upload_id: str, number: int) -> str:
        return f"{UPLOADS_PREFIX}{upload_id}/{number:05d}"

    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes | bytearray) -> str:
        return self._put(self._part_key(upload_id, part_number), bytes(data))

    def _mpu_complete(self, key: str, upload_id: str, parts: list[tuple[int, str]]) -> str:
        return self._join(key, upload_id, parts, None)

    def _mpu_complete_if_absent(
        self, key: str, upload_id: str, parts: list[tuple[int, str]]
    ) -> str:
        return self._join(key, upload_id, parts, 0)  # generation 0: only if absent

    def _join(
        self, key: str, upload_id: str, parts: list[tuple[int, str]], if_generation: int | None
    ) -> str:
        self._check_upload(key, upload_id)
        sources = [self._part_key(upload_id, n) for n, _ in sorted(parts)]
        for round_number in range(64):  # 32**64 parts: never the limit
            if len(sources) <= _COMPOSE_MAX:
                break
            sources = [
                self._compose(f"{UPLOADS_PREFIX}{upload_id}/r{round_number}-{i:05d}", group)
                for i, group in enumerate(_groups(sources, _COMPOSE_MAX))
            ]
        etag = self._compose(key, sources, if_generation)
        self._mpu_abort(key, upload_id)  # the parts and the marker, now joined
        return etag

    def _compose(self, dst_key: str, src_keys: list[str], if_generation: int | None = None) -> str:
        dst = self._blob(dst_key)
        dst.content_type = "application/octet-stream"
        dst.cache_control = cache_control(dst_key)
        self._call(
            f"COMPOSE {dst_key}",
            lambda: dst.compose(
                [self._blob(k) for k in src_keys],
                if_generation_match=if_generation,
                retry=None,
                timeout=self._timeout,
            ),
        )
        return _etag(dst.generation)

    def _put_with_wrong_checksum(self, key: str, data: bytes) -> bool:
        """The body with the MD5 of other bytes in its metadata, which GCS checks."""
        blob = self._blob(key)
        wrong = hashlib.md5(data + b"\0", usedforsecurity=False).digest()
        blob.md5_hash = base64.b64encode(wrong).decode()
        try:
            self._call(
                f"PUT {key}",
                lambda: blob.upload_from_string(
                    data,
                    content_type="application/octet-stream",
                    checksum=None,
                    retry=None,
                    timeout=self._timeout,
                ),
            )
        except StoreError as exc:
            if isinstance(exc.__cause__, gx.BadRequest):
                return True
            raise
        return False

    def _discard_parts(self, key: str, upload_id: str) -> None:
        staged = [o.key for o in self._list_all(f"{UPLOADS_PREFIX}{upload_id}/")]
        self._delete(staged)

    def _copy(self, src_key: str, dst_key: str) -> None:
        self._copy_from(self, src_key, dst_key)

    def _copy_from(self, source: ObjectStore, src_key: str, dst_key: str) -> bool:
        """A rewrite (server-side, any size, across buckets and locations) on one service."""
        if not (isinstance(source, GcsStore) and source.endpoint_url == self.endpoint_url):
            return False
        dst = self._blob(dst_key)
        src = source._blob(src_key)

        def rewrite() -> None:
            token = None
            while True:
                token, _, _ = dst.rewrite(src, token=token, retry=None, timeout=self._timeout)
                if token is None:
                    return

        self._call(f"COPY {source.url}/{src_key}", rewrite)
        return True


def _groups(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
