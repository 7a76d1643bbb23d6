"""What the trainer core asks of a publisher: :class:`VersionPublisher`.

:class:`~wanrl_s3.Publisher` (one process publishes each version whole) and
:class:`~wanrl_s3.ShardedPublisher` (R ranks each publish a share, one commits)
both are one, and :class:`~wanrl_s3.TrainerPublisher` drives either through these
members and nothing else. A new way to publish is one class with them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..io.tensors import StateDict
    from ..publish.assign import ShareSelector
    from ..publish.publisher import PublishConfig, PublishResult
    from ..store import ObjectStore


@runtime_checkable
class VersionPublisher(Protocol):
    """Publishes numbered versions of one run; this process is one of ``ranks``."""

    @property
    def stores(self) -> tuple[ObjectStore, ...]:
        """Every store each version is written to; the first is the primary."""
        ...

    @property
    def config(self) -> PublishConfig:
        """The publication settings (delta mode, keyframes, coding) of every version."""
        ...

    @property
    def run_id(self) -> str:
        """The run the versions belong to (each manifest records it; a reader may keep to one)."""
        ...

    @property
    def rank(self) -> int:
        """This process among the ranks that publish each version (0 commits)."""
        ...

    @property
    def ranks(self) -> int:
        """How many processes publish each version together (1: this one alone)."""
        ...

    def share_selector(self) -> ShareSelector | None:
        """A fresh selector of this rank's share of one version's stream, when the rank
        publishes a share picked out of a stream every rank sees whole; else None."""
        ...

    def publish(
        self,
        tensors: StateDict,
        version: int,
        *,
        metadata: Mapping[str, str] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> PublishResult | None:
        """Publish ``tensors`` as ``version``; its figures on the committing rank, else None.

        Raises VersionConflictError (nothing changed) if the stores already hold the
        version or a newer one, StoreError when a store fails.
        """
        ...
