"""az:// (also abfs://) : Azure Blob Storage through azure-storage-blob.

``az://CONTAINER/PREFIX`` or ``az://CONTAINER@ACCOUNT/PREFIX``, as adlfs writes
them. Credentials the way Azure's tools take them, first found wins:
``AZURE_STORAGE_CONNECTION_STRING``; an account key (``AZURE_STORAGE_KEY``) with
the account (from the URL or ``AZURE_STORAGE_ACCOUNT``); otherwise
``DefaultAzureCredential`` (azure-identity: managed identity, workload identity,
``az login``...). ``endpoint_url`` overrides the account URL (Azurite, a private
endpoint).

The manifest is created with ``If-None-Match: *`` and LATEST moves by
compare-and-swap on the blob's ETag (``If-Match``). Large objects are uploaded
as blocks staged in parallel and committed as one block list; block ids carry
the upload id, and a marker object lists the upload while it is in progress
(see :mod:`wanrl_s3.store.staging`). Retries are ours: the SDK's are off.

Every blob and every block is sent with the ``Content-MD5`` of its body, which
Azure (and Azurite) check before storing it: a body damaged in transit is
refused (400) and sent again, never reported as written. The block-list
commit joins blocks inside the service.
"""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable, Iterator
from typing import Any, Self, TypeVar
from urllib.parse import urlsplit

import azure.core.exceptions as ax
from azure.core import MatchConditions
from azure.core.rest import HttpRequest
from azure.storage.blob import BlobBlock, BlobServiceClient, ContentSettings

from ..errors import (
    NotFoundError,
    PreconditionFailedError,
    StoreError,
    ThrottledError,
    TransientStoreError,
    UsageError,
)
from ..format.layout import cache_control
from .checksums import DAMAGED_BODY_RE
from .retry import THROTTLE_STATUSES, RetryPolicy
from .sink import ranged_response
from .spec import Blob, ObjectInfo, ObjectStore
from .staging import MarkedUploads, PastTheEnd, marker_key, timestamp_s

T = TypeVar("T")

_BIG_GET_BYTES = 256 * 2**20  # one GET per whole-object read (the SDK would split at 4 MiB)
_COPY_POLL_S = 0.2
_TRANSIENT_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_STATUS_ERRORS: dict[int, type[ax.HttpResponseError]] = {
    401: ax.ClientAuthenticationError,  # the SDK maps both to this
    403: ax.ClientAuthenticationError,
    404: ax.ResourceNotFoundError,
}


def _status_error(response: Any) -> ax.HttpResponseError:
    """The SDK's exception for an error response (as its own operations raise them)."""
    response.read()  # the small error body: the connection can be reused
    kind = _STATUS_ERRORS.get(response.status_code, ax.HttpResponseError)
    error = kind(response=response)
    error.error_code = response.headers.get("x-ms-error-code")  # type: ignore[attr-defined]
    return error


def _settings(key: str) -> ContentSettings:
    """A blob's content headers: bytes, cached as the layout allows (docs/format.md)."""
    return ContentSettings(
        content_type="application/octet-stream", cache_control=cache_control(key)
    )


def _block_id(upload_id: str, number: int) -> str:
    # Every block id of a blob has one length: the upload id (32 hex) and 6 digits.
    return base64.b64encode(f"{upload_id}{number:06d}".encode()).decode()


class AzureBlobStore(MarkedUploads):
    protocol = "az"
    supports_server_side_copy = True
    supports_copy_from = True
    takes_part_buffers = True

    def __init__(
        self,
        container: str,
        prefix: str = "",
        *,
        account: str | None = None,
        endpoint_url: str | None = None,
        max_connections: int = 32,
        read_timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        client: Any = None,
    ) -> None:
        super().__init__(container, prefix, "az", retry)
        self.container = container
        self.account = account or os.environ.get("AZURE_STORAGE_ACCOUNT") or None
        self.endpoint_url = endpoint_url or None
        service = client or self._make_service(max_connections, read_timeout_s)
        self.account = self.account or service.account_name
        self._service = service
        self._container = service.get_container_client(container)
        # Ranged reads go through the SDK's pipeline itself (see _read_into).
        self._pipeline = self._container._pipeline
        self._api_version = str(self._container.api_version)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """``az://CONTAINER[@ACCOUNT][/PREFIX]`` as adlfs writes it (or ``abfs://``).

        The account may be a host name (``ACCOUNT.blob.core.windows.net``); one
        in the URL wins over an ``account`` option.
        """
        parts = urlsplit(url)
        container, _, account = parts.netloc.partition("@")
        options["account"] = account.split(".", 1)[0] or options.get("account")
        return cls(container, parts.path, **options)

    def _make_service(self, max_connections: int, read_timeout_s: float) -> Any:
        options: dict[str, Any] = {
            "retry_total": 0,  # one retry layer: ours
            "connection_timeout": 10,
            "read_timeout": read_timeout_s,
            "max_single_get_size": _BIG_GET_BYTES,
            "max_chunk_get_size": _BIG_GET_BYTES,
            "connection_data_block_size": 2**20,
        }
        options["transport"] = _transport(max_connections)
        conn = os.environ.get("AZURE_STORAGE_CONNECTION_STRING")
        if conn and not self.endpoint_url:
            return BlobServiceClient.from_connection_string(conn, **options)
        if not self.account and not self.endpoint_url:
            raise UsageError(
                "Azure needs an account: az://CONTAINER@ACCOUNT/PREFIX, AZURE_STORAGE_ACCOUNT "
                "or AZURE_STORAGE_CONNECTION_STRING"
            )
        url = self.endpoint_url or f"https://{self.account}.blob.core.windows.net"
        return BlobServiceClient(url, credential=self._credential(conn), **options)

    def _credential(self, conn: str | None) -> Any:
        """A shared key if one is configured, else Entra ID through DefaultAzureCredential."""
        key = os.environ.get("AZURE_STORAGE_KEY")
        if conn and "AccountKey=" in conn:
            parts = dict(p.split("=", 1) for p in conn.split(";") if "=" in p)
            return {"account_name": parts["AccountName"], "account_key": parts["AccountKey"]}
        if key:
            return {"account_name": self.account, "account_key": key}
        try:
            from azure.identity import DefaultAzureCredential
        except ImportError as exc:
            raise UsageError(
                "no Azure key or connection string; for Entra ID: pip install azure-identity"
            ) from exc
        return DefaultAzureCredential()

    @property
    def url(self) -> str:
        return f"az://{self.container}@{self.account}/{self.prefix}".rstrip("/")

    def _blob(self, key: str) -> Any:
        return self._container.get_blob_client(self._key(key))

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """One request, with its failures translated into our error classes."""
        where = f"{self.url}: {what}"
        try:
            return fn()
        except ax.ResourceNotFoundError as exc:
            if getattr(exc, "error_code", "") == "ContainerNotFound":
                raise StoreError(f"container {self.container!r} does not exist") from exc
            raise NotFoundError(f"{where}: not found") from exc
        except (ax.ResourceExistsError, ax.ResourceModifiedError) as exc:
            raise PreconditionFailedError(f"{where}: precondition failed") from exc
        except ax.ClientAuthenticationError as exc:
            raise UsageError(f"{where}: Azure refused the credentials: {exc.reason}") from exc
        except (ax.ServiceRequestError, ax.ServiceResponseError, ConnectionError) as exc:
            raise TransientStoreError(f"{where}: {exc}") from exc
        except ax.HttpResponseError as exc:
            if exc.status_code == 400 and DAMAGED_BODY_RE.search(str(exc.message)):
                # the body did not match its Content-MD5: nothing stored, send it again
                raise TransientStoreError(f"{where}: {exc.message}") from exc
            if exc.status_code == 416:
                raise PastTheEnd(f"{where}: the object ends before the range") from exc
            if exc.status_code in THROTTLE_STATUSES:
                raise ThrottledError(f"{where}: {exc.status_code}") from exc
            if exc.status_code in _TRANSIENT_STATUS:
                raise TransientStoreError(f"{where}: {exc.status_code}") from exc
            raise StoreError(f"{where}: {exc.status_code} {exc.reason}") from exc

    # -- primitives -------------------------------------------------------------
    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        blob = self._blob(key)
        options: dict[str, Any] = {"max_concurrency": 1}
        if if_none_match:
            options.update(etag=if_none_match, match_condition=MatchConditions.IfModified)
        if max_read_bytes is not None:  # one ranged GET (x-ms-range) of that many bytes
            options.update(offset=0, length=max_read_bytes)

        def download() -> Blob | None:
            try:
                stream = blob.download_blob(**options)
                return Blob(stream.readall(), stream.properties.etag)
            except ax.ResourceNotModifiedError:
                return None
            except ax.ResourceModifiedError:
                if if_none_match:
                    return None  # Azurite answers 412, not 304, for an unchanged ETag
                raise

        try:
            return self._call(f"GET {key}", download)
        except PastTheEnd:  # no byte 0: the object is empty
            return self._empty_object(key, if_none_match)

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        """One ranged GET through the SDK's pipeline, its body read into ``buf``.

        Not ``download_blob``: the SDK's downloader holds the whole range, joins
        its chunks and copies them out (4 copies of every byte in Python, an
        object per MiB), which held az:// pulls at a quarter of other libraries'
        speed on a loaded machine (profiles in docs/results/stores.md); and it
        retries a broken range from its start. Here the request goes through the
        client's own pipeline (credentials, API version, transport and its
        connection pool), the body lands in ``buf`` in one copy, and a broken
        stream reports the bytes that arrived, so :meth:`read_into` resumes there.
        """
        end = offset + len(buf) - 1
        request = HttpRequest(
            "GET",
            self._blob(key).url,
            headers={"x-ms-range": f"bytes={offset}-{end}", "x-ms-version": self._api_version},
        )
        response = self._call(
            f"GET {key}",
            lambda: ranged_response(
                self._pipeline.run(request, stream=True).http_response,
                offset,
                len(buf),
                self.url,
                _status_error,
            ),
        )
        if response is None:
            return 0  # past the end: the caller asks how long the object really is
        return self._body_into(f"GET {key}", getattr(response.internal_response, "raw", None), buf)

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        blob = self._blob(key)
        conditions: dict[str, Any] = {"overwrite": not if_none_match}
        if if_match is not None:
            conditions.update(etag=if_match, match_condition=MatchConditions.IfNotModified)
        resp = self._call(
            f"PUT {key}",
            lambda: blob.upload_blob(
                data,
                content_settings=_settings(key),
                max_concurrency=1,
                validate_content=True,
                **conditions,
            ),
        )
        return str(resp["etag"])

    def _head(self, key: str) -> ObjectInfo | None:
        try:
            props = self._call(f"HEAD {key}", self._blob(key).get_blob_properties)
        except NotFoundError:
            return None
        return ObjectInfo(key, int(props.size), str(props.etag), timestamp_s(props.last_modified))

    def _list_all(self, prefix: str) -> Iterator[ObjectInfo]:
        def listing() -> list[ObjectInfo]:
            return [
                ObjectInfo(
                    self._rel(b.name), int(b.size), str(b.etag), timestamp_s(b.last_modified)
                )
                for b in self._container.list_blobs(name_starts_with=self._key(prefix))
            ]

        return iter(self._call(f"LIST {prefix}", listing))

    def _delete_one(self, key: str) -> None:
        self._call(f"DELETE {key}", self._blob(key).delete_blob)

    # Multipart: blocks staged on the blob itself, committed as one list.
    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes | bytearray) -> str:
        """Put Block with the Content-MD5 of its body, which the service checks.

        The MD5 is ours, not the SDK's ``validate_content``, which takes only
        ``bytes``: a writer lends its part buffers (a ``bytearray``).
        """
        block = _block_id(upload_id, part_number)
        md5 = hashlib.md5(data, usedforsecurity=False).digest()
        self._call(
            f"PUT {key} part {part_number}",
            lambda: self._blob(key).stage_block(
                block, data, length=len(data), transactional_content_md5=md5
            ),
        )
        return block

    def _mpu_complete(self, key: str, upload_id: str, parts: list[tuple[int, str]]) -> str:
        return self._commit(key, upload_id, parts)

    def _mpu_complete_if_absent(
        self, key: str, upload_id: str, parts: list[tuple[int, str]]
    ) -> str:
        return self._commit(key, upload_id, parts, if_none_match="*")

    def _commit(
        self, key: str, upload_id: str, parts: list[tuple[int, str]], **conditions: str
    ) -> str:
        self._check_upload(key, upload_id)
        blocks = [BlobBlock(block_id=_block_id(upload_id, n)) for n, _ in sorted(parts)]
        resp = self._call(
            f"COMPLETE {key}",
            lambda: self._blob(key).commit_block_list(
                blocks, content_settings=_settings(key), **conditions
            ),
        )
        self._delete([marker_key(upload_id)])
        return str(resp["etag"])

    def _put_with_wrong_checksum(self, key: str, data: bytes) -> bool:
        """The body with the Content-MD5 of other bytes, which Azure checks on Put Blob."""
        wrong = base64.b64encode(hashlib.md5(data + b"\0", usedforsecurity=False).digest())
        blob = self._blob(key)
        try:
            self._call(
                f"PUT {key}",
                lambda: blob.upload_blob(
                    data,
                    content_settings=_settings(key),
                    max_concurrency=1,
                    overwrite=True,
                    headers={"Content-MD5": wrong.decode()},
                ),
            )
        except StoreError as exc:
            cause = exc.__cause__
            if isinstance(cause, ax.HttpResponseError) and cause.status_code == 400:
                return True
            raise
        return False

    def _discard_parts(self, key: str, upload_id: str) -> None:
        """Delete a blob that has only uncommitted blocks; Azure drops stale blocks itself.

        A committed blob of that name is left alone (its uncommitted blocks
        expire after seven days); a blob that never committed is deleted,
        blocks and all.
        """
        if self._head(key) is None:
            self._delete([key])

    def _copy(self, src_key: str, dst_key: str) -> None:
        self._copy_from(self, src_key, dst_key)

    def _copy_from(self, source: ObjectStore, src_key: str, dst_key: str) -> bool:
        """Copy Blob inside one storage account (server-side); anything else streams."""
        if not (
            isinstance(source, AzureBlobStore)
            and source.account == self.account
            and source.endpoint_url == self.endpoint_url
        ):
            return False
        dst = self._blob(dst_key)
        src_url = source._blob(src_key).url
        self._call(f"COPY {source.url}/{src_key}", lambda: self._copy_and_wait(dst, src_url))
        return True

    def _copy_and_wait(self, dst: Any, src_url: str) -> None:
        """Start a copy and wait for it: within an account it is usually done at once."""
        status = dst.start_copy_from_url(src_url).get("copy_status")
        while status == "pending":
            self.retry.clock.sleep(_COPY_POLL_S)
            status = dst.get_blob_properties().copy.status
        if status != "success":
            raise StoreError(f"copy to {dst.blob_name} ended {status}")


def _transport(max_connections: int) -> Any:
    """The SDK's requests transport, with a connection pool sized like boto3's."""
    import requests
    from azure.core.pipeline.transport import RequestsTransport

    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(
        pool_connections=max_connections, pool_maxsize=max_connections
    )
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return RequestsTransport(session=session, session_owner=True)
