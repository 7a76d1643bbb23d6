"""Several regional stores for one run: the regions file and its Python twin.

One bucket per region keeps every worker's pull on its own side of the
ocean. The file is what ``terraform output -raw regions_toml`` writes for
``terraform/examples/multi-region``; the same configuration can be built in
Python from :class:`Region` and :class:`RegionsConfig`::

    primary = "use1"
    mode = "replicate"            # fanout | replicate | copy
    [regions.use1]
    url = "s3://BUCKET/PREFIX"
    s3_region = "us-east-1"
    endpoint_url = ""             # empty: the provider's default endpoint
    profile = ""                  # empty: default credential chain
    price_class = "aws:us-east-1"

``mode`` says how a version reaches the replicas: ``fanout``, the publisher
writes every region itself; ``replicate``, the publisher writes the primary
and bucket replication copies the rest; ``copy``, the publisher writes the
primary and ``wanrl-s3 relay`` copies each version and commits it in the
replicas. Every error names the key and the fix.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..store import ObjectStore, open_store

MODES = ("fanout", "replicate", "copy")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
_S3_REGION_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_PRICE_CLASS_RE = re.compile(r"^[A-Za-z0-9._-]+(:[A-Za-z0-9._-]+)?$")
_REGION_KEYS = ("url", "s3_region", "endpoint_url", "profile", "price_class")
_TOP_KEYS = ("primary", "mode", "regions")


@dataclass(frozen=True)
class Region:
    """One regional store: where it is, how to reach it, and its price class for the planner."""

    name: str
    url: str
    s3_region: str = ""  # empty: from the profile, else us-east-1
    endpoint_url: str = ""  # empty: the provider's default endpoint
    profile: str = ""  # empty: the default credential chain
    price_class: str = ""  # "<provider>:<region>", e.g. "aws:us-east-1"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_RE.match(self.name):
            raise UsageError(
                f"region name {self.name!r} must be 1-64 letters, digits, '_' or "
                "'-', starting with a letter or digit (e.g. use1)"
            )
        where = f"regions.{self.name}"
        for key in _REGION_KEYS:
            if not isinstance(getattr(self, key), str):
                raise UsageError(f"{where}.{key} must be a string, got {getattr(self, key)!r}")
        if "://" not in self.url:
            raise UsageError(
                f"{where}.url must be a store URL such as s3://BUCKET/PREFIX, got {self.url!r}"
            )
        if self.url.startswith("s3://") and not self.url[5:].split("/")[0]:
            raise UsageError(f"{where}.url {self.url!r} names no bucket; write s3://BUCKET/PREFIX")
        if self.endpoint_url and not self.endpoint_url.startswith(("http://", "https://")):
            raise UsageError(
                f"{where}.endpoint_url must start with http:// or https://, got "
                f"{self.endpoint_url!r}; leave it empty for the provider's default"
            )
        if self.s3_region and not _S3_REGION_RE.match(self.s3_region):
            raise UsageError(
                f"{where}.s3_region must be a region name such as us-east-1, got {self.s3_region!r}"
            )
        if self.price_class and not _PRICE_CLASS_RE.match(self.price_class):
            raise UsageError(
                f"{where}.price_class must look like 'aws:us-east-1' "
                f"(provider:region), got {self.price_class!r}"
            )

    def store(self, **options: Any) -> ObjectStore:
        """Open this region's store; ``options`` (e.g. ``retry``) go to the backend."""
        return open_store(
            self.url,
            endpoint_url=self.endpoint_url or None,
            profile=self.profile or None,
            region=self.s3_region or None,
            **options,
        )


@dataclass(frozen=True)
class RegionsConfig:
    """The regions of one run: which is the primary, and how versions reach the others."""

    primary: str
    mode: str
    regions: tuple[Region, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "regions", tuple(self.regions))
        if self.mode not in MODES:
            raise UsageError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not self.regions:
            raise UsageError("regions: none given; add a [regions.NAME] table with a url")
        for r in self.regions:
            if not isinstance(r, Region):
                raise UsageError(f"regions must hold Region objects, got {r!r}")
        names = [r.name for r in self.regions]
        seen: dict[tuple[str, str], str] = {}
        for r in self.regions:
            if names.count(r.name) > 1:
                raise UsageError(f"regions.{r.name} is given twice; region names must differ")
            other = seen.setdefault((r.url.rstrip("/"), r.endpoint_url), r.name)
            if other != r.name:
                raise UsageError(
                    f"regions.{r.name}.url is the same store as regions.{other}; "
                    "each region needs its own bucket or prefix"
                )
        if self.primary not in names:
            raise UsageError(
                f"primary {self.primary!r} is not one of the regions "
                f"({', '.join(names)}); set primary to one of them"
            )

    @property
    def names(self) -> tuple[str, ...]:
        """The regions' names, in the order configured."""
        return tuple(r.name for r in self.regions)

    def region(self, name: str) -> Region:
        """The region called ``name``; raises UsageError naming the regions there are."""
        for r in self.regions:
            if r.name == name:
                return r
        raise UsageError(f"no region {name!r}; the regions are {', '.join(self.names)}")

    @property
    def primary_region(self) -> Region:
        """The region named ``primary``: where the trainer publishes; the others are replicas."""
        return self.region(self.primary)

    @property
    def replicas(self) -> tuple[Region, ...]:
        """Every region but the primary, in file order."""
        return tuple(r for r in self.regions if r.name != self.primary)

    @property
    def publish_regions(self) -> tuple[Region, ...]:
        """The regions the publisher writes itself: all in fanout mode, else the primary."""
        if self.mode == "fanout":
            return (self.primary_region, *self.replicas)
        return (self.primary_region,)

    def store(self, name: str, **options: Any) -> ObjectStore:
        """Open the named region's store (a new client each call: keep what you open)."""
        return self.region(name).store(**options)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RegionsConfig:
        """Build from parsed TOML (or any mapping of the same shape), checking every key."""
        _no_unknown(data, _TOP_KEYS, "the top level")
        for key in ("primary", "mode"):
            if key not in data:
                fix = (
                    'primary = "NAME"'
                    if key == "primary"
                    else 'mode = "fanout" (or "replicate", "copy")'
                )
                raise UsageError(f"{key}: missing; add {fix}")
            if not isinstance(data[key], str):
                raise UsageError(f"{key} must be a string, got {data[key]!r}")
        tables = data.get("regions")
        if not isinstance(tables, Mapping) or not tables:
            raise UsageError(
                'regions: none given; add a [regions.NAME] table with url = "s3://BUCKET/PREFIX"'
            )
        regions = []
        for name, table in tables.items():
            if not isinstance(table, Mapping):
                raise UsageError(f"regions.{name} must be a table ([regions.{name}])")
            _no_unknown(table, _REGION_KEYS, f"[regions.{name}]")
            if "url" not in table:
                raise UsageError(f'regions.{name}.url: missing; add url = "s3://BUCKET/PREFIX"')
            regions.append(Region(str(name), **table))
        return cls(data["primary"], data["mode"], tuple(regions))


def _no_unknown(table: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    for key in table:
        if key not in known:
            raise UsageError(f"unknown key {key!r} in {where}; the keys are {', '.join(known)}")


def load_regions(path: str | os.PathLike[str]) -> RegionsConfig:
    """Read and validate a regions file; any problem is one UsageError naming the key."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the regions file {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise UsageError(f"the regions file {path} is not UTF-8 text") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from exc
    try:
        return RegionsConfig.from_dict(data)
    except UsageError as exc:
        raise UsageError(f"{path}: {exc}") from exc


__all__ = ["MODES", "Region", "RegionsConfig", "load_regions"]
