"""Price data: the dated, sourced list prices shipped in ``prices.json``, or the user's own file.

Everything is converted on load to US dollars per *decimal* gigabyte, the unit
the rest of the planner counts bytes in, so a provider that bills per GiB
costs ~7% more per decimal GB than its list figure reads. Every entry keeps
where its figures came from and the day they were read (:class:`Provenance`),
so a report can say how old the price behind a number is. The file format and
its strict validation live in :mod:`wanrl_s3.cost.price_file`.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import UsageError


@dataclass(frozen=True)
class Provenance:
    """Where an entry's figures came from, when they were read, and how sure we are of them."""

    source: str
    read_on: date
    source_note: str

    def __post_init__(self) -> None:
        if not self.source.startswith("https://"):
            raise UsageError(f"prices: source must be an https:// URL, got {self.source!r}")


@dataclass(frozen=True)
class EgressTier:
    """One step of a monthly volume ladder: this rate applies up to ``up_to_gb`` (None: no cap)."""

    up_to_gb: float | None
    usd_per_gb: float

    def __post_init__(self) -> None:
        _price("usd_per_gb", self.usd_per_gb)
        if self.up_to_gb is not None:
            _price("up_to_gb", self.up_to_gb)


#: What one documented request-rate limit covers: a key prefix (S3 partitions), a whole
#: bucket (GCS), a storage account (Azure), or a single object.
REQUEST_SCOPES = ("prefix", "bucket", "account", "object")


@dataclass(frozen=True)
class RequestLimits:
    """The request rates a provider documents before it answers 503 (SlowDown, Server Busy).

    ``read_per_s`` (GET/HEAD, listings where the provider counts them as reads) and
    ``write_per_s`` apply to one ``scope``; ``object_read_per_s`` is a single object's
    own ceiling where one is documented (Azure's per-blob target), else None.
    """

    scope: str
    read_per_s: float
    write_per_s: float
    provenance: Provenance
    object_read_per_s: float | None = None

    def __post_init__(self) -> None:
        if self.scope not in REQUEST_SCOPES:
            raise UsageError(
                f"prices: request_limits.scope must be one of {', '.join(REQUEST_SCOPES)}, "
                f"got {self.scope!r}"
            )
        for name in ("read_per_s", "write_per_s", "object_read_per_s"):
            value = getattr(self, name)
            if value is not None and not _price(name, value) > 0:
                raise UsageError(f"prices: request_limits.{name} must be > 0, got {value!r}")


@dataclass(frozen=True)
class StoragePrices:
    """One object-storage provider's list prices, per decimal GB."""

    name: str
    display: str
    provenance: Provenance
    billed_gb_bytes: float
    storage_usd_per_gb_month: float
    put_usd_per_1000: float
    get_usd_per_1000: float
    inter_region_usd_per_gb: float
    egress_tiers: tuple[EgressTier, ...]
    free_egress_gb_per_month: float = 0.0
    free_egress_storage_multiple: float = 0.0
    hosts_compute: bool = True
    home_region: str = ""
    inter_region_to: Mapping[str, float] = field(default_factory=dict)
    request_limits: RequestLimits | None = None  # None: the provider documents none

    def __post_init__(self) -> None:
        for name in (
            "storage_usd_per_gb_month", "put_usd_per_1000", "get_usd_per_1000",
            "inter_region_usd_per_gb", "free_egress_gb_per_month", "free_egress_storage_multiple",
        ):  # fmt: skip
            _price(f"{self.name}.{name}", getattr(self, name))
        for region, rate in self.inter_region_to.items():
            _price(f"{self.name}.inter_region.to.{region}", rate)
        check_tiers(self.name, self.egress_tiers)

    def inter_region_rate(self, replicas: tuple[str, ...] = ()) -> float:
        """Average per-GB price of one copy to each replica region (the default with none named).

        Every replica receives the same bytes, so the mean pair rate prices them all.
        """
        if not replicas:
            return self.inter_region_usd_per_gb
        return statistics.fmean(
            self.inter_region_to.get(r, self.inter_region_usd_per_gb) for r in replicas
        )


@dataclass(frozen=True)
class CdnPrices:
    """A CDN in front of object storage: edge egress ladder, requests, and the fill per origin."""

    name: str
    display: str
    provenance: Provenance
    billed_gb_bytes: float
    egress_tiers: tuple[EgressTier, ...]
    request_usd_per_1000: float
    fill_usd_per_gb: Mapping[str, float]
    free_egress_gb_per_month: float = 0.0

    def __post_init__(self) -> None:
        _price(f"{self.name}.request_usd_per_1000", self.request_usd_per_1000)
        _price(f"{self.name}.free_egress_gb_per_month", self.free_egress_gb_per_month)
        for origin, rate in self.fill_usd_per_gb.items():
            _price(f"{self.name}.origins.{origin}", rate)
        check_tiers(self.name, self.egress_tiers)


#: ``--cdn none``: price no CDN rows.
NO_CDN = "none"


@dataclass(frozen=True)
class PriceBook:
    """All providers, CDNs and GPU hourly rates, each with where and when it was read."""

    storage: Mapping[str, StoragePrices]
    gpu_usd_per_hour: Mapping[str, float]
    gpu_provenance: Provenance
    cdns: Mapping[str, CdnPrices] = field(default_factory=dict)
    recorded: date | None = None

    def __post_init__(self) -> None:
        if not self.storage:
            raise UsageError("prices: 'storage' lists no provider")
        for gpu, rate in self.gpu_usd_per_hour.items():
            _price(f"gpus.usd_per_hour.{gpu}", rate)

    def provider(self, name: str) -> StoragePrices:
        """Look a provider up, naming the known ones when the name is wrong."""
        return _lookup(self.storage, name, "provider", "")

    def cdn(self, name: str) -> CdnPrices:
        """Look a CDN up, naming the known ones when the name is wrong."""
        return _lookup(self.cdns, name, "CDN", f", or {NO_CDN}")

    def cdn_for(self, provider: str, requested: str | None = None) -> CdnPrices | None:
        """The CDN in front of ``provider``: the one asked for, else the first that lists it.

        A CDN that cannot front this provider (no fill price for it) is refused by name.
        """
        if requested == NO_CDN:
            return None
        if requested is None:
            return next((c for c in self.cdns.values() if provider in c.fill_usd_per_gb), None)
        cdn = self.cdn(requested)
        if provider not in cdn.fill_usd_per_gb:
            fronts = ", ".join(sorted(cdn.fill_usd_per_gb)) or "nothing"
            raise UsageError(
                f"CDN {requested!r} has no origin price for {provider!r} (it fronts: {fronts}); "
                f"pick another with --cdn, or --cdn {NO_CDN}"
            )
        return cdn

    def gpu_rate(self, gpu: str) -> float:
        """Hourly price of one GPU model, naming the known ones when the name is wrong."""
        return _lookup(self.gpu_usd_per_hour, gpu, "GPU", " (add it with --prices)")

    def entries(self) -> dict[str, Provenance]:
        """Every dated entry by its key in the file (storage.aws, cdns.cloudfront, gpus)."""
        found = {f"storage.{k}": v.provenance for k, v in self.storage.items()}
        for k, v in self.storage.items():
            if v.request_limits is not None:
                found[f"storage.{k}.request_limits"] = v.request_limits.provenance
        found.update({f"cdns.{k}": v.provenance for k, v in self.cdns.items()})
        found["gpus"] = self.gpu_provenance
        return found


def _lookup(table: Mapping[str, Any], name: str, what: str, extra: str) -> Any:
    try:
        return table[name]
    except KeyError:
        known = ", ".join(sorted(table))
        raise UsageError(f"unknown {what} {name!r}; known: {known}{extra}") from None


def _price(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"prices: {name} must be a number, got {value!r}")
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"prices: {name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_tiers(name: str, tiers: tuple[EgressTier, ...]) -> None:
    """Tiers must rise strictly and end open, or some volume would have no price."""
    if not tiers or tiers[-1].up_to_gb is not None:
        raise UsageError(
            f"prices: {name}.egress_tiers must end with a tier whose up_to_gb is null "
            "(the open-ended top tier)"
        )
    bounds = [t.up_to_gb for t in tiers[:-1]]
    if any(b is None for b in bounds) or bounds != sorted(set(bounds)):  # type: ignore[type-var]
        raise UsageError(
            f"prices: {name}.egress_tiers up_to_gb must increase strictly "
            "(each bound is a cumulative monthly volume)"
        )


def parse_prices(data: Mapping[str, Any]) -> PriceBook:
    """Build a validated :class:`PriceBook` from the decoded JSON document."""
    from .price_file import parse_document

    return parse_document(data)


def read_price_document(path: str | Path | None = None) -> Any:
    """The decoded JSON of the shipped file or of ``path``; unreadable or broken: UsageError."""
    try:
        if path is None:
            text = resources.files(__package__).joinpath("prices.json").read_text("utf-8")
        else:
            text = Path(path).read_text(encoding="utf-8")
        return json.loads(text)
    except OSError as exc:
        raise UsageError(f"cannot read prices file {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"prices file {path or 'prices.json'} is not valid JSON: {exc}") from exc


def load_prices(path: str | Path | None = None) -> PriceBook:
    """Read the shipped price file, or ``path`` when the user brings their own quotes."""
    return parse_prices(read_price_document(path))
