"""What the relay tells an observer as it happens: the hooks its metrics are built on.

Every method of :class:`RelayObserver` does nothing; :class:`wanrl_s3.RelayMetrics`
overrides them. Calls come from the relay's loop: quick, and never raising.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .relay import RelayedVersion

#: The region label of the primary, for a failure to read its LATEST.
PRIMARY = "primary"


class RelayObserver:
    """Hooks of one relay; the base class ignores every event."""

    def polled(self, seconds: float, latest_version: int | None) -> None:
        """One read of the primary's LATEST took ``seconds``; its version (None: unchanged)."""

    def synced(self, region: str, version: int) -> None:
        """``region``'s LATEST is at ``version`` (or past it)."""

    def relayed(self, done: RelayedVersion) -> None:
        """One version was committed in one replica."""

    def failed(self, region: str, error: BaseException) -> None:
        """Relaying to ``region`` failed (``PRIMARY``: reading the primary's LATEST)."""


IGNORE = RelayObserver()
