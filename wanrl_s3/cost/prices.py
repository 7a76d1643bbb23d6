"""Price data: the dated list prices shipped in ``prices.json``, or the user's own file.

Everything is converted on load to US dollars per *decimal* gigabyte, the unit
the rest of the planner counts bytes in, so a provider that bills per GiB
costs ~7% more per decimal GB than its list figure reads. Loading validates
every field and names the one that is wrong: a typo in a price file must not
turn into a silently free egress line.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ..errors import UsageError

_DECIMAL_GB = 1e9


@dataclass(frozen=True)
class EgressTier:
    """One step of a monthly volume ladder: this rate applies up to ``up_to_gb`` (None: no cap)."""

    up_to_gb: float | None
    usd_per_gb: float

    def __post_init__(self) -> None:
        _price("usd_per_gb", self.usd_per_gb)
        if self.up_to_gb is not None:
            _price("up_to_gb", self.up_to_gb)


@dataclass(frozen=True)
class StoragePrices:
    """One object-storage provider's list prices, per decimal GB."""

    name: str
    display: str
    source: str
    as_of: str
    storage_usd_per_gb_month: float
    put_usd_per_1000: float
    get_usd_per_1000: float
    inter_region_usd_per_gb: float
    egress_tiers: tuple[EgressTier, ...]
    free_egress_storage_multiple: float = 0.0
    hosts_compute: bool = True

    def __post_init__(self) -> None:
        for field in ("storage_usd_per_gb_month", "put_usd_per_1000", "get_usd_per_1000"):
            _price(f"{self.name}.{field}", getattr(self, field))
        _price(f"{self.name}.inter_region_usd_per_gb", self.inter_region_usd_per_gb)
        _price(f"{self.name}.free_egress_storage_multiple", self.free_egress_storage_multiple)
        _check_tiers(self.name, self.egress_tiers)


@dataclass(frozen=True)
class PriceBook:
    """All providers plus GPU hourly rates, with where and when they were read."""

    storage: Mapping[str, StoragePrices]
    gpu_usd_per_hour: Mapping[str, float]
    gpu_source: str
    gpu_as_of: str

    def __post_init__(self) -> None:
        if not self.storage:
            raise UsageError("prices: 'storage' lists no provider")
        for gpu, rate in self.gpu_usd_per_hour.items():
            _price(f"gpus.usd_per_hour.{gpu}", rate)

    def provider(self, name: str) -> StoragePrices:
        """Look a provider up, naming the known ones when the name is wrong."""
        try:
            return self.storage[name]
        except KeyError:
            known = ", ".join(sorted(self.storage))
            raise UsageError(f"unknown provider {name!r}; known: {known}") from None

    def gpu_rate(self, gpu: str) -> float:
        """Hourly price of one GPU model, naming the known ones when the name is wrong."""
        try:
            return self.gpu_usd_per_hour[gpu]
        except KeyError:
            known = ", ".join(sorted(self.gpu_usd_per_hour))
            raise UsageError(
                f"unknown GPU {gpu!r}; known: {known} (add it with --prices)"
            ) from None


def _price(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"prices: {name} must be a number, got {value!r}")
    if not (math.isfinite(value) and value >= 0):
        raise UsageError(f"prices: {name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise UsageError(f"prices: {name} must be true or false, got {value!r}")
    return value


def _check_tiers(name: str, tiers: tuple[EgressTier, ...]) -> None:
    """Tiers must rise strictly and end open, or some volume would have no price."""
    if not tiers or tiers[-1].up_to_gb is not None:
        raise UsageError(f"prices: {name}.egress_tiers must end with a tier whose up_to_gb is null")
    bounds = [t.up_to_gb for t in tiers[:-1]]
    if any(b is None for b in bounds) or bounds != sorted(set(bounds)):  # type: ignore[type-var]
        raise UsageError(f"prices: {name}.egress_tiers up_to_gb must increase strictly")


def _field(data: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(data, Mapping) or key not in data:
        raise UsageError(f"prices: missing key {where}.{key}")
    return data[key]


def _parse_tier(data: Mapping[str, Any], where: str, per_gb: float) -> EgressTier:
    bound = _field(data, "up_to_gb", where)
    return EgressTier(
        up_to_gb=None if bound is None else _price(f"{where}.up_to_gb", bound) / per_gb,
        usd_per_gb=_price(f"{where}.usd_per_gb", _field(data, "usd_per_gb", where)) * per_gb,
    )


def _parse_provider(name: str, data: Mapping[str, Any]) -> StoragePrices:
    """Convert one provider from its billed unit to decimal GB."""
    where = f"storage.{name}"
    unit_bytes = _price(f"{where}.billed_gb_bytes", _field(data, "billed_gb_bytes", where))
    if unit_bytes not in (1e9, 2.0**30):
        raise UsageError(f"prices: {where}.billed_gb_bytes must be 1000000000 or 1073741824")
    per_gb = _DECIMAL_GB / unit_bytes  # billed units in one decimal GB
    raw_tiers = _field(data, "egress_tiers", where)
    if not isinstance(raw_tiers, list):
        raise UsageError(f"prices: {where}.egress_tiers must be a list")
    tiers = tuple(
        _parse_tier(t, f"{where}.egress_tiers[{i}]", per_gb) for i, t in enumerate(raw_tiers)
    )
    per_gb_prices = {
        key: _price(f"{where}.{key}", _field(data, key, where)) * per_gb
        for key in ("storage_usd_per_gb_month", "inter_region_usd_per_gb")
    }
    return StoragePrices(
        name=name,
        display=str(_field(data, "display", where)),
        source=str(_field(data, "source", where)),
        as_of=str(_field(data, "as_of", where)),
        put_usd_per_1000=_price(f"{where}.put", _field(data, "put_usd_per_1000", where)),
        get_usd_per_1000=_price(f"{where}.get", _field(data, "get_usd_per_1000", where)),
        egress_tiers=tiers,
        free_egress_storage_multiple=_price(
            f"{where}.free_egress_storage_multiple", data.get("free_egress_storage_multiple", 0)
        ),
        hosts_compute=_flag(f"{where}.hosts_compute", data.get("hosts_compute", True)),
        **per_gb_prices,
    )


def parse_prices(data: Mapping[str, Any]) -> PriceBook:
    """Build a validated :class:`PriceBook` from the decoded JSON document."""
    storage = _field(data, "storage", "")
    gpus = _field(data, "gpus", "")
    if not isinstance(storage, Mapping):
        raise UsageError("prices: 'storage' must be an object keyed by provider")
    rates = _field(gpus, "usd_per_hour", "gpus")
    if not isinstance(rates, Mapping):
        raise UsageError("prices: 'gpus.usd_per_hour' must be an object keyed by GPU")
    return PriceBook(
        storage=MappingProxyType({k: _parse_provider(k, v) for k, v in storage.items()}),
        gpu_usd_per_hour=MappingProxyType(
            {k: _price(f"gpus.usd_per_hour.{k}", v) for k, v in rates.items()}
        ),
        gpu_source=str(_field(gpus, "source", "gpus")),
        gpu_as_of=str(_field(gpus, "as_of", "gpus")),
    )


def load_prices(path: str | Path | None = None) -> PriceBook:
    """Read the shipped price file, or ``path`` when the user brings their own quotes."""
    try:
        if path is None:
            text = resources.files(__package__).joinpath("prices.json").read_text("utf-8")
        else:
            text = Path(path).read_text(encoding="utf-8")
        data = json.loads(text)
    except OSError as exc:
        raise UsageError(f"cannot read prices file {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise UsageError(f"prices file {path or 'prices.json'} is not valid JSON: {exc}") from exc
    return parse_prices(data)
