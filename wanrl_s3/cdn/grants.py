"""Where a reader's grant comes from while it runs: a file kept fresh, or a signer.

A grant expires (hours, by design), and a worker runs for days, so a reader asks
for the current grant before each request instead of holding one:

- :class:`GrantFile` (recommended, docs/cdn.md): the file a minting service
  rewrites before each grant expires (a mounted Kubernetes secret, a file
  pushed by the trainer), read again whenever it changes;
- :class:`MintedGrants`: a signer held by the reader itself (CloudFront's
  alternative: a key of a key group that trusts only this run's distribution),
  minting a new grant once a quarter of the last one's life is left.

Both are plain callables returning a :class:`~.grant.CdnGrant`, as is any
function a user writes (``lambda: CdnGrant.from_json(my_secret_store.get())``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import UsageError, WanrlError
from ..units import require_positive
from .base import CdnSigner
from .grant import MAX_GRANT_BYTES, CdnGrant

log = logging.getLogger(__name__)
GrantSource = Callable[[], CdnGrant]
#: How often a :class:`GrantFile` looks at its file's modification time.
CHECK_INTERVAL_S = 5.0
#: A :class:`MintedGrants` mints again once this share of a grant's life is left.
REMINT_SHARE = 0.25


def read_grant_file(path: str | os.PathLike[str]) -> CdnGrant:
    """The grant in ``path`` (what ``CdnGrant.to_json`` wrote); one UsageError line else."""
    try:
        with open(path, "rb") as fh:
            text = fh.read(MAX_GRANT_BYTES + 1)
    except OSError as exc:
        raise UsageError(f"cannot read the CDN grant {path}: {exc.strerror or exc}") from exc
    try:
        return CdnGrant.from_json(text)
    except UsageError as exc:
        raise UsageError(f"the CDN grant {path}: {exc}") from exc


class GrantFile:
    """The grant in a file, read again when the file changes (checked every few seconds).

    A file that goes bad while the reader runs (half-written, deleted) keeps the
    last good grant in use and is said once in the log; the next good version of
    the file is taken up. A file bad at the start is a UsageError.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        check_interval_s: float = CHECK_INTERVAL_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self._interval_s = require_positive("check_interval_s", check_interval_s)
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._stamp = self._stat()
        self._grant = read_grant_file(self.path)
        self._checked_s = monotonic()
        self._bad: str | None = None

    def __call__(self) -> CdnGrant:
        with self._lock:
            if self._monotonic() - self._checked_s >= self._interval_s:
                self._checked_s = self._monotonic()
                self._reload()
            return self._grant

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def _reload(self) -> None:
        stamp = self._stat()
        if stamp == self._stamp:
            return
        try:
            grant = read_grant_file(self.path)
        except WanrlError as exc:
            if str(exc) != self._bad:
                log.warning("%s; still using the grant read before", exc)
                self._bad = str(exc)
            return
        self._stamp, self._grant, self._bad = stamp, grant, None
        log.info("read a new CDN grant from %s (expires at %d)", self.path, grant.expires_at_s)


class MintedGrants:
    """Grants minted by ``signer`` for ``base_url``'s ``scope``, minted again before they end.

    ``now_s``: the wall clock the grants' expiry is read against (UNIX seconds).
    """

    def __init__(
        self,
        signer: CdnSigner,
        base_url: str,
        scope: str = "v/",
        *,
        now_s: Callable[[], float] = time.time,
    ) -> None:
        self._signer, self._base_url, self._scope, self._now_s = signer, base_url, scope, now_s
        self._lock = threading.Lock()
        self._grant = signer.grant(base_url, scope)

    def __call__(self) -> CdnGrant:
        with self._lock:
            left_s = self._grant.expires_at_s - self._now_s()
            if left_s < REMINT_SHARE * self._signer.valid_for_s:
                self._grant = self._signer.grant(self._base_url, self._scope)
            return self._grant
