"""What a watcher tells an observer as it happens: the hooks metrics are built on.

A :class:`WatchObserver` is called from the watcher's own threads (the poll
thread, the download thread) and from the caller's ``install``. Every method
here does nothing; a subclass overrides the ones it needs
(:class:`wanrl_s3.WorkerMetrics` turns them into Prometheus metrics). A call
must be quick and must not raise: it runs inside the loop it reports on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..subscriber import Snapshot
    from .failures import Failure
    from .result import InstallResult
    from .watcher import Watcher


class WatchObserver:
    """Hooks of one watcher; the base class ignores every event."""

    def started(self, watcher: Watcher) -> None:
        """``watcher`` starts its threads (read its held and wanted versions from it)."""

    def polled(self, seconds: float, latest_version: int | None) -> None:
        """One read of LATEST took ``seconds``; the version it names (None: unchanged)."""

    def downloaded(self, snapshot: Snapshot) -> None:
        """A version is verified and ready to install (its bytes, download and verify time)."""

    def installed(self, result: InstallResult) -> None:
        """A version was installed."""

    def failed(self, failure: Failure) -> None:
        """One failure of the background work, of kind ``failure.what``."""


#: The observer of a watcher that was given none.
IGNORE = WatchObserver()
