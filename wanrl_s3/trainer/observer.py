"""What the trainer core tells an observer about each publication: the hooks of its metrics.

Every method of :class:`PublicationObserver` does nothing;
:class:`wanrl_s3.TrainerMetrics` overrides them. Calls come from the thread that
publishes (the background one, usually): quick, and never raising.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .publication import Publication


class PublicationObserver:
    """Hooks of one :class:`~wanrl_s3.TrainerPublisher`; the base class ignores them."""

    def published(self, publication: Publication) -> None:
        """A publication ended without stopping the run: committed, skipped or failed."""

    def fatal(self, version: int, error: BaseException) -> None:
        """A publication ended in an error that stops the run (its future raises it)."""


IGNORE = PublicationObserver()
