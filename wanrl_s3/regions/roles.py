"""Store roles: which stores to publish to, read from and collect, for one run.

A run is named either by one store URL or by a regions file. Every caller (the
CLI's ``publish``, ``pull``, ``worker``, ``gc`` and ``status``, the verl
adapter) asks this module, so the rules live in one place:

- **publish**: the store; or, with regions, every region in fanout mode and the
  primary alone in replicate and copy modes (replication or the relay does the rest).
- **read**: the store; or the region named, or ``auto`` (measured fastest, see
  :mod:`~wanrl_s3.regions.probe`).
- **collect** (gc): every store that the publisher or the relay writes: fanout
  and copy, every region; replicate, the primary only (the provider's bucket
  replication deletes on the replicas itself).
- **report**: every store a worker may write its status to (all regions).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..store import ObjectStore, open_store
from .config import RegionsConfig, load_regions
from .probe import AUTO, RegionChoice, choose_region


@dataclass(frozen=True, kw_only=True)
class StoreRoles:
    """One run's stores by role; opens each store when asked (a new client per call)."""

    url: str | None = None
    regions: RegionsConfig | None = None
    options: dict[str, Any] = field(default_factory=dict)  # open_store's options for ``url``

    def __post_init__(self) -> None:
        if (self.url is None) == (self.regions is None):
            raise UsageError(
                "give a store URL or a regions file, not both and not neither: "
                "the regions file names every store"
            )

    @property
    def where(self) -> str:
        """The run's stores, for messages."""
        if self.url is not None:
            return self.url
        return "regions " + ", ".join(self.regions.names if self.regions is not None else ())

    def _named(self, names: list[str]) -> dict[str, ObjectStore]:
        if self.regions is None:
            return {str(self.url): open_store(str(self.url), **self.options)}
        return {name: self.regions.store(name) for name in names}

    def publish(self) -> list[ObjectStore]:
        """Where a publisher writes, the primary first."""
        names = [] if self.regions is None else [r.name for r in self.regions.publish_regions]
        return list(self._named(names).values())

    def collect(self) -> dict[str, ObjectStore]:
        """Where gc collects, by region name (or by URL without regions)."""
        if self.regions is None:
            return self._named([])
        names = [r.name for r in self.regions.publish_regions]
        if self.regions.mode == "copy":
            names = [self.regions.primary, *(r.name for r in self.regions.replicas)]
        return self._named(names)

    def report(self) -> list[ObjectStore]:
        """Every store a rollout worker may report its status to."""
        names = [] if self.regions is None else list(self.regions.names)
        return list(self._named(names).values())

    def read(
        self, region: str | None = None, *, max_lag_versions: int | None = None
    ) -> tuple[ObjectStore, RegionChoice | None]:
        """The store to read from: the URL's, or the region named (``auto``: the fastest)."""
        if self.regions is None:
            return self._named([])[str(self.url)], None
        choice = choose_region(self.regions, region or AUTO, max_lag_versions=max_lag_versions)
        return self.regions.store(choice.region), choice


def store_roles(
    url: str | None = None, *, regions: str | RegionsConfig | None = None, **options: Any
) -> StoreRoles:
    """The roles of a run named by ``url`` (with ``open_store`` options) or a regions file."""
    loaded = load_regions(regions) if isinstance(regions, str) else regions
    return StoreRoles(url=url or None, regions=loaded, options=options)


__all__ = ["StoreRoles", "store_roles"]
