"""The price file's schema, and strict validation that names the key and the fix.

A user drops their negotiated rates into a copy of ``prices.json`` (``wanrl-s3
prices --json`` prints one). A typo there must not turn into a silently free
egress line, so every object is checked for unknown and missing keys, every
value for its type, and each error is one line naming the key path and saying
what to write instead. The documented schema is docs/sizing-and-cost.md,
"Your own prices"; the keys below are that schema.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import date
from types import MappingProxyType
from typing import Any

from ..errors import UsageError
from .prices import (
    REQUEST_SCOPES,
    CdnPrices,
    EgressTier,
    PriceBook,
    Provenance,
    RequestLimits,
    StoragePrices,
    _price,
)

SCHEMA = 2
_DECIMAL_GB = 1e9
_UNITS = (1e9, 2.0**30)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_SEE = "see docs/sizing-and-cost.md, 'Your own prices'"

#: key -> (required, what to write). The hint is what an error message tells the user.
_PROVENANCE = {
    "source": (True, "the provider's pricing page, an https:// URL"),
    "read_on": (True, "the date you read the prices, YYYY-MM-DD"),
    "source_note": (True, "text: which figures the page confirmed, where the rest came from"),
}
_LADDER = {
    "display": (True, "a short name for reports, as text"),
    **_PROVENANCE,
    "notes": (False, "free text"),
    "billed_gb_bytes": (True, "1000000000 if the provider bills decimal GB, 1073741824 for GiB"),
    "egress_tiers": (True, 'a list of {"up_to_gb": N or null, "usd_per_gb": N}, last null'),
    "free_egress_gb_per_month": (False, "the free egress allowance per month, in billed GB"),
}
STORAGE_KEYS = {
    **_LADDER,
    "hosts_compute": (False, "true if a trainer can run at this provider, else false"),
    "storage_usd_per_gb_month": (True, "USD per billed GB stored for a month"),
    "put_usd_per_1000": (True, "USD per 1,000 PUT (write) requests"),
    "get_usd_per_1000": (True, "USD per 1,000 GET (read) requests"),
    "inter_region": (True, '{"from": REGION, "default_usd_per_gb": N, "to": {REGION: N}}'),
    "free_egress_storage_multiple": (False, "free egress as a multiple of the data stored (B2: 3)"),
    "request_limits": (False, "the documented request rates before 503s (see REQUEST_LIMIT_KEYS)"),
}
REQUEST_LIMIT_KEYS = {
    **_PROVENANCE,
    "scope": (True, f"what one limit covers: {', '.join(REQUEST_SCOPES)}"),
    "read_per_s": (True, "GET/HEAD requests per second the scope serves before answering 503"),
    "write_per_s": (True, "PUT/POST/DELETE requests per second the scope serves before 503"),
    "object_read_per_s": (False, "a single object's own read ceiling, where documented"),
    "notes": (False, "free text"),
}
CDN_KEYS = {
    **_LADDER,
    "request_usd_per_10000": (True, "USD per 10,000 requests the edges serve"),
    "origins": (True, "{STORAGE_PROVIDER: USD per billed GB the edges fetch from it}"),
}
INTER_REGION_KEYS = {
    "from": (True, "the bucket's home region, as text"),
    "default_usd_per_gb": (True, "USD per billed GB to a region not listed in 'to'"),
    "to": (False, "{REGION: USD per billed GB from the home region to it}"),
}
TIER_KEYS = {
    "up_to_gb": (True, "the cumulative monthly volume this rate covers, or null for the top tier"),
    "usd_per_gb": (True, "USD per billed GB in this tier"),
}
GPU_KEYS = {
    **_PROVENANCE,
    "usd_per_hour": (True, "{GPU_NAME: USD per hour}"),
}
TOP_KEYS = {
    "schema": (True, f"the number {SCHEMA}"),
    "recorded": (True, "the date the file was last updated, YYYY-MM-DD"),
    "note": (False, "free text"),
    "storage": (True, "{PROVIDER: {...}}, one object per object-storage provider"),
    "cdns": (False, "{CDN: {...}}, one object per CDN"),
    "gpus": (True, '{"source", "read_on", "source_note", "usd_per_hour"}'),
}


def _fail(where: str, message: str) -> UsageError:
    return UsageError(f"prices: {where} {message}")


def _checked(data: object, where: str, keys: Mapping[str, tuple[bool, str]]) -> Mapping[str, Any]:
    """The object itself after checking it is one, with no unknown and no missing keys."""
    if not isinstance(data, Mapping):
        raise _fail(where or "the file", f"must be a JSON object ({_SEE})")
    for key in data:
        if key not in keys:
            raise _fail(
                f"{where}.{key}".lstrip("."),
                f"is not a known key: remove it or fix its spelling (known: {', '.join(keys)})",
            )
    for key, (required, hint) in keys.items():
        if required and key not in data:
            raise _fail(f"{where}.{key}".lstrip("."), f"is missing: add it ({hint})")
    return data


def _number(
    data: Mapping[str, Any], key: str, where: str, hint: str, default: float = 0.0
) -> float:
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise _fail(f"{where}.{key}", f"must be a number >= 0 ({hint}), got {value!r}")
    return _price(f"{where}.{key}", value)


def _text(data: Mapping[str, Any], key: str, where: str, hint: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise _fail(f"{where}.{key}", f"must be text ({hint}), got {value!r}")
    return value


def _date(value: object, where: str) -> date:
    if isinstance(value, str) and _DATE.match(value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise _fail(where, f"must be a date written YYYY-MM-DD, got {value!r}")


def _provenance(data: Mapping[str, Any], where: str) -> Provenance:
    source = _text(data, "source", where, _PROVENANCE["source"][1])
    if not source.startswith("https://"):
        raise _fail(
            f"{where}.source", f"must be an https:// URL (the pricing page), got {source!r}"
        )
    return Provenance(
        source=source,
        read_on=_date(data["read_on"], f"{where}.read_on"),
        source_note=_text(data, "source_note", where, _PROVENANCE["source_note"][1]),
    )


def _per_gb(data: Mapping[str, Any], where: str) -> float:
    """Billed units in one decimal GB, from the entry's billed_gb_bytes."""
    unit = data["billed_gb_bytes"]
    if isinstance(unit, bool) or unit not in _UNITS:
        raise _fail(
            f"{where}.billed_gb_bytes",
            f"must be 1000000000 (decimal GB) or 1073741824 (GiB), got {unit!r}",
        )
    return _DECIMAL_GB / float(unit)


def _tiers(data: Mapping[str, Any], where: str, per_gb: float) -> tuple[EgressTier, ...]:
    raw = data["egress_tiers"]
    if not isinstance(raw, list):
        raise _fail(f"{where}.egress_tiers", f"must be a list ({_LADDER['egress_tiers'][1]})")
    tiers = []
    for i, item in enumerate(raw):
        at = f"{where}.egress_tiers[{i}]"
        tier = _checked(item, at, TIER_KEYS)
        bound = tier["up_to_gb"]
        tiers.append(
            EgressTier(
                up_to_gb=None if bound is None else _number(tier, "up_to_gb", at, "") / per_gb,
                usd_per_gb=_number(tier, "usd_per_gb", at, TIER_KEYS["usd_per_gb"][1]) * per_gb,
            )
        )
    return tuple(tiers)


def _rates(raw: object, where: str, hint: str, scale: float = 1.0) -> Mapping[str, float]:
    if not isinstance(raw, Mapping):
        raise _fail(where, f"must be an object ({hint})")
    return MappingProxyType({str(k): _number(raw, k, where, hint) * scale for k in raw})


def _inter_region(data: Mapping[str, Any], where: str, per_gb: float) -> dict[str, Any]:
    at = f"{where}.inter_region"
    spec = _checked(data["inter_region"], at, INTER_REGION_KEYS)
    return {
        "home_region": _text(spec, "from", at, INTER_REGION_KEYS["from"][1]),
        "inter_region_usd_per_gb": _number(spec, "default_usd_per_gb", at, "USD per GB") * per_gb,
        "inter_region_to": _rates(spec.get("to", {}), f"{at}.to", "{REGION: USD}", per_gb),
    }


def _request_limits(data: Mapping[str, Any], where: str) -> RequestLimits | None:
    if "request_limits" not in data:
        return None
    at = f"{where}.request_limits"
    spec = _checked(data["request_limits"], at, REQUEST_LIMIT_KEYS)
    per_object = None
    if "object_read_per_s" in spec:
        per_object = _number(spec, "object_read_per_s", at, "requests per second")
    return RequestLimits(
        scope=_text(spec, "scope", at, REQUEST_LIMIT_KEYS["scope"][1]),
        read_per_s=_number(spec, "read_per_s", at, "requests per second"),
        write_per_s=_number(spec, "write_per_s", at, "requests per second"),
        provenance=_provenance(spec, at),
        object_read_per_s=per_object,
    )


def _parse_storage(name: str, raw: object) -> StoragePrices:
    """Convert one provider from its billed unit to decimal GB."""
    where = f"storage.{name}"
    data = _checked(raw, where, STORAGE_KEYS)
    per_gb = _per_gb(data, where)
    compute = data.get("hosts_compute", True)
    if not isinstance(compute, bool):
        raise _fail(f"{where}.hosts_compute", f"must be true or false, got {compute!r}")
    return StoragePrices(
        name=name,
        display=_text(data, "display", where, STORAGE_KEYS["display"][1]),
        provenance=_provenance(data, where),
        billed_gb_bytes=float(data["billed_gb_bytes"]),
        storage_usd_per_gb_month=_number(data, "storage_usd_per_gb_month", where, "USD") * per_gb,
        put_usd_per_1000=_number(data, "put_usd_per_1000", where, "USD per 1,000"),
        get_usd_per_1000=_number(data, "get_usd_per_1000", where, "USD per 1,000"),
        egress_tiers=_tiers(data, where, per_gb),
        free_egress_gb_per_month=_number(data, "free_egress_gb_per_month", where, "GB") / per_gb,
        free_egress_storage_multiple=_number(data, "free_egress_storage_multiple", where, "x"),
        hosts_compute=compute,
        request_limits=_request_limits(data, where),
        **_inter_region(data, where, per_gb),
    )


def _parse_cdn(name: str, raw: object) -> CdnPrices:
    where = f"cdns.{name}"
    data = _checked(raw, where, CDN_KEYS)
    per_gb = _per_gb(data, where)
    return CdnPrices(
        name=name,
        display=_text(data, "display", where, CDN_KEYS["display"][1]),
        provenance=_provenance(data, where),
        billed_gb_bytes=float(data["billed_gb_bytes"]),
        egress_tiers=_tiers(data, where, per_gb),
        request_usd_per_1000=_number(data, "request_usd_per_10000", where, "USD") / 10.0,
        fill_usd_per_gb=_rates(data["origins"], f"{where}.origins", CDN_KEYS["origins"][1], per_gb),
        free_egress_gb_per_month=_number(data, "free_egress_gb_per_month", where, "GB") / per_gb,
    )


def _section(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    section = data.get(key, {})
    if not isinstance(section, Mapping):
        raise _fail(key, f"must be an object ({TOP_KEYS[key][1]})")
    return section


def parse_document(data: object) -> PriceBook:
    """Build a validated :class:`PriceBook` from the decoded JSON document."""
    if isinstance(data, Mapping) and data.get("schema") != SCHEMA and "schema" in data:
        raise _fail(
            "schema",
            f"is {data['schema']!r}; this version reads schema {SCHEMA} (entries carry read_on "
            "and source_note instead of as_of): start from 'wanrl-s3 prices --json'",
        )
    top = _checked(data, "", TOP_KEYS)
    _date(top["recorded"], "recorded")
    storage, cdns = _section(top, "storage"), _section(top, "cdns")
    gpus = _checked(top["gpus"], "gpus", GPU_KEYS)
    book = PriceBook(
        storage=MappingProxyType({str(k): _parse_storage(str(k), v) for k, v in storage.items()}),
        cdns=MappingProxyType({str(k): _parse_cdn(str(k), v) for k, v in cdns.items()}),
        gpu_usd_per_hour=_rates(gpus["usd_per_hour"], "gpus.usd_per_hour", "{GPU: USD per hour}"),
        gpu_provenance=_provenance(gpus, "gpus"),
        recorded=_date(top["recorded"], "recorded"),
    )
    for cdn in book.cdns.values():
        for origin in cdn.fill_usd_per_gb:
            if origin not in book.storage:
                raise _fail(
                    f"cdns.{cdn.name}.origins.{origin}",
                    f"names no storage provider (known: {', '.join(book.storage)})",
                )
    return book
