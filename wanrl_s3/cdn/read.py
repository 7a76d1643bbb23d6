"""Reading a store's versions through a CDN: :class:`CdnReadStore`.

A read-only view of a store whose immutable part (``v/``: manifests and payload)
is read from a CDN that serves the store's prefix (key ``K`` at ``cdn_url/K``),
with ranged GETs over a pool of connections, and everything else from the store
itself: LATEST (it changes: a cached pointer would freeze the fleet), listings,
HEADs and writes (a worker's status object). A ``Subscriber``, a ``Watcher``,
``pull_to_file`` and the CLI read it like any store, so every byte gets the
verification it gets from a bucket.

An edge can be wrong, and it never decides what is installed:

- an answer that is not the object (403 for an expired or missing signature,
  404, an HTML error page served as 200, a range other than the one asked for,
  a copy that ends early) sends that object to the store, for good;
- a copy that arrives but fails its check (wrong or stale bytes, a stale
  manifest) is read again from the store: the verifying readers (the manifest
  owner, the stream) call :meth:`CdnReadStore.distrust` before their one second read;
- a manifest that no pin (LATEST, or the delta after it) vouches for is read
  from the store in the first place (:attr:`CdnReadStore.origin`);
- an edge that keeps failing on one object (connection errors, 5xx) gives that
  object up to the store after :data:`TRANSIENT_FAILURES_BEFORE_ORIGIN` tries.

The first such fall-back is a warning in the log, later ones are INFO lines:
the store's egress, which the CDN was there to save, is being paid for them.
"""

from __future__ import annotations

import builtins
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import TypeVar
from urllib.parse import quote

from ..errors import TransientStoreError, UsageError
from ..store import Blob, ObjectInfo, ObjectStore, RetryPolicy, check_key
from ..units import MiB, require_int, require_positive
from .edge import EdgeClient, PastTheEnd, WrongAnswer
from .grant import CdnGrant, check_base_url, check_scope
from .grants import GrantSource

log = logging.getLogger(__name__)
T = TypeVar("T")
#: The only keys ever read through a CDN: the immutable versions (docs/format.md).
VERSIONS = "v/"
#: The largest object read whole through the CDN (a manifest is bounded at 64 MiB).
MAX_WHOLE_BYTES = 64 * MiB
#: Failures in a row on one object (connection errors, 5xx) before it is read from the store.
TRANSIENT_FAILURES_BEFORE_ORIGIN = 3
#: Objects remembered as the store's to read; the oldest is forgotten past this many.
MAX_DISTRUSTED = 100_000


class CdnReadStore(ObjectStore):
    """``origin`` read through the CDN at ``cdn_url`` for keys under ``scope``.

    ``grant``: what the CDN asks of a reader (a :class:`CdnGrant`, or a callable
    returning the current one: :class:`~.grants.GrantFile`,
    :class:`~.grants.MintedGrants`); None for a CDN that serves anyone (a private
    network's cache). A key outside the grant's scope is read from the store.
    ``scope``: ``v/`` or a folder under it; nothing that changes (LATEST, status
    objects) is ever read through the CDN, whatever a grant covers.
    """

    def __init__(
        self,
        origin: ObjectStore,
        cdn_url: str,
        *,
        grant: CdnGrant | GrantSource | None = None,
        scope: str = "v/",
        max_connections: int = 32,
        read_timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        super().__init__(retry or origin.retry)
        if isinstance(origin, CdnReadStore):
            raise UsageError("a CdnReadStore reads a store, not another CdnReadStore")
        self.cdn_url = check_base_url(cdn_url, "cdn_url")
        self._origin = origin
        self._grants: GrantSource | None = (lambda: grant) if isinstance(grant, CdnGrant) else grant
        first = None if self._grants is None else self._grants()
        if first is not None and first.base_url != self.cdn_url:
            raise UsageError(
                f"the CDN grant is for {first.base_url}, not for the CDN URL {self.cdn_url}: "
                "mint one for this URL, or read through the URL the grant names"
            )
        if not check_scope(scope).startswith(VERSIONS):
            raise UsageError(f"scope must be {VERSIONS!r} or a folder under it; got {scope!r}")
        self.scope = scope
        self._edge = EdgeClient(
            max_connections=require_int("max_connections", max_connections),
            read_timeout_s=require_positive("read_timeout_s", read_timeout_s),
        )
        self._lock = threading.Lock()
        self._distrusted: OrderedDict[str, str] = OrderedDict()  # key -> why
        self._failures: dict[str, int] = {}  # key -> transient failures in a row
        self._warned: set[str] = set()  # what was said at WARNING once

    # -- the store behind, and what is read from it ----------------------------------
    @property
    def url(self) -> str:
        """The origin store's URL: the CDN serves a copy of that bucket, not a store of its own."""
        return self._origin.url

    @property
    def origin(self) -> ObjectStore:
        """The store behind the CDN: what a distrusted key and every write go to."""
        return self._origin

    def distrust(self, key: str, reason: str) -> None:
        """``key`` from the CDN failed its check: read it from the store from now on."""
        self._fall_back(key, f"its copy did not verify ({reason})")

    def fallbacks(self) -> dict[str, str]:
        """The objects read from the store instead of the CDN, and why, oldest first."""
        with self._lock:
            return dict(self._distrusted)

    def check(self, key: str | None = None) -> bytes | None:
        """Refuse a CDN that cannot serve this store, as one UsageError line: an expired
        grant, a CDN that does not answer HTTP, or (with ``key``, an object the store
        holds under the scope) one that answers it with anything but an object (an
        error status, an HTML page). Returns what it served for ``key``, for the caller
        to check; reads nothing else."""
        grant = None if self._grants is None else self._grants()
        if grant is not None and grant.expired(self.retry.clock.time()):
            raise UsageError(
                f"the CDN grant for {self.cdn_url} expired at {grant.expires_at_s} (UNIX "
                "time): mint a fresh one"
            )
        headers = {} if grant is None else dict(grant.headers)
        why = self._edge.reachable(self.cdn_url + "/", headers)
        if why is not None:
            raise UsageError(f"the CDN at {self.cdn_url} cannot be reached: {why}")
        request = None if key is None else self._cdn_request(key)
        if request is None:
            return None
        try:
            data, _ = self._edge.get_whole(*request, MAX_WHOLE_BYTES)
        except (WrongAnswer, TransientStoreError) as exc:
            raise UsageError(
                f"the CDN at {self.cdn_url} does not serve this store: it answered {key} "
                f"with {exc}; check the CDN URL (key K is read at URL/K: it names the "
                "store's prefix) and the grant"
            ) from exc
        return data

    # -- primitives: v/ through the CDN, the rest from the store ------------------------
    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        def from_origin() -> Blob | None:
            return self._origin._get(
                key, if_none_match=if_none_match, max_read_bytes=max_read_bytes
            )

        request = None if if_none_match else self._cdn_request(key)
        if request is not None:
            # an object over the reader's bound is the store's to measure, with its bound
            limit = min(MAX_WHOLE_BYTES, max_read_bytes or MAX_WHOLE_BYTES)
            try:
                data, etag = self._answer(key, lambda: self._edge.get_whole(*request, limit))
                return Blob(data, etag)
            except WrongAnswer as exc:
                return self._instead(key, f"the CDN answered {exc}", from_origin)
        return from_origin()

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        request = self._cdn_request(key)
        if request is not None:
            try:
                return self._answer(key, lambda: self._edge.read_range(*request, offset, buf))
            except PastTheEnd:
                got = self._origin._read_into(key, offset, buf)
                if got:  # the store holds bytes there: the CDN's copy is cut short
                    self._fall_back(key, f"the CDN's copy ends before byte {offset} (truncated)")
                return got
            except WrongAnswer as exc:
                why = f"the CDN answered {exc}"
                return self._instead(key, why, lambda: self._origin._read_into(key, offset, buf))
        return self._origin._read_into(key, offset, buf)

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        return self._origin._put(key, data, if_none_match=if_none_match, if_match=if_match)

    def _head(self, key: str) -> ObjectInfo | None:
        return self._origin._head(key)

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        return self._origin._list(prefix)

    def _delete(self, keys: builtins.list[str]) -> None:
        self._origin._delete(keys)

    # -- the CDN side -------------------------------------------------------------------
    def _cdn_request(self, key: str) -> tuple[str, dict[str, str]] | None:
        """(URL, headers) to read ``key`` through the CDN; None when it is the store's
        to serve (outside the scope, distrusted, the grant expired)."""
        check_key(key)
        if not key.startswith(self.scope):
            return None
        with self._lock:
            if key in self._distrusted:
                return None
        grant = None if self._grants is None else self._grants()
        url = f"{self.cdn_url}/{quote(key, safe='/')}"
        if grant is None:
            return url, {}
        if not grant.covers(key):
            return None
        if grant.expired(self.retry.clock.time()):
            self._say_once(
                "expired",
                f"the CDN grant expired at {grant.expires_at_s} (UNIX time): reading from "
                f"{self._origin.url} until a fresh one arrives",
            )
            return None
        return (f"{url}?{grant.query}" if grant.query else url), dict(grant.headers)

    def _answer(self, key: str, request: Callable[[], T]) -> T:
        """``request()``; after repeated transient failures on ``key``, a WrongAnswer."""
        try:
            result = request()
        except TransientStoreError as exc:
            with self._lock:
                failures = self._failures.get(key, 0) + 1
                self._failures[key] = failures
            if failures < TRANSIENT_FAILURES_BEFORE_ORIGIN:
                raise
            raise WrongAnswer(f"{failures} failures in a row, the last: {exc}") from exc
        with self._lock:
            self._failures.pop(key, None)
        return result

    def _instead(self, key: str, why: str, read: Callable[[], T]) -> T:
        """``read()`` from the store for an object the CDN answered wrongly; the CDN is
        blamed only when the store has it (an object absent from both is just absent)."""
        result = read()
        self._fall_back(key, why)
        return result

    def _fall_back(self, key: str, why: str) -> None:
        """Read ``key`` from the store from now on; the first time, a warning."""
        with self._lock:
            self._failures.pop(key, None)
            self._distrusted[key] = why
            self._distrusted.move_to_end(key)
            while len(self._distrusted) > MAX_DISTRUSTED:
                self._distrusted.popitem(last=False)
        self._say_once(
            "fallback",
            f"{key} through the CDN at {self.cdn_url}: {why}; reading it from "
            f"{self._origin.url} instead (further objects like it are logged at INFO)",
            f"{key} through the CDN: {why}; reading it from the store",
        )

    def _say_once(self, topic: str, first: str, later: str | None = None) -> None:
        with self._lock:
            new = topic not in self._warned
            self._warned.add(topic)
        if new:
            log.warning("%s", first)
        elif later is not None:
            log.info("%s", later)
