"""What a reader holds to read through a CDN: a grant, never a signing key.

A grant is the output of a signer (:mod:`.cloudfront`, :mod:`.cloudcdn`,
:mod:`.cloudflare`) for one key prefix of one run: a query string and/or
request headers that the provider's edge accepts for every object under that
prefix until ``expires_at_s``. Whoever holds the signing key (the trainer, or a
small minting service beside it) makes grants and hands them to workers, so a
worker that leaks its grant leaks read access to one run's snapshots for a few
hours, never the power to mint more.

Key ``K`` of the store is read at ``base_url/K`` (``base_url`` is what
``--cdn-url`` names: for CloudFront in front of ``s3://bucket/run`` it is
``https://dXXXX.cloudfront.net/run``). ``scope`` is the part of the key space the
grant covers, ``v/`` (manifests and payload, immutable) by default: LATEST is
always read from the store itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, urlsplit

from ..errors import UsageError
from ..units import require_int

PROVIDERS = ("cloudfront", "cloud-cdn", "cloudflare")
MAX_GRANT_BYTES = 64 * 1024  # a grant is a few hundred bytes; anything far larger is not one
_KEY_PART = re.compile(r"^[A-Za-z0-9!_.*'()=-]+$")  # S3's safe key characters, '/' apart
_HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_FIELDS = ("provider", "base_url", "scope", "expires_at_s", "query", "headers")


def plain_http_url(url: object) -> bool:
    """An absolute http(s) URL with a host, in ASCII, without spaces or a fragment."""
    if not isinstance(url, str) or not url.isascii() or any(c.isspace() for c in url):
        return False
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc) and not parts.fragment


def check_base_url(url: str, what: str = "base_url") -> str:
    """An http(s) URL with a host, no query, no fragment and no trailing '/'."""
    if not plain_http_url(url) or urlsplit(url).query or url.endswith(("/", "?")):
        raise UsageError(
            f"{what} must be an http(s) URL of the run prefix without a query or a trailing "
            f"'/', e.g. https://d111111abcdef8.cloudfront.net/runs/exp-42; got {url!r}"
        )
    return url


def check_key(key: str, what: str = "key") -> str:
    """A relative store key: '/'-separated safe parts, no '.' or '..' part, no empty part."""
    parts = key.split("/") if isinstance(key, str) and key else [""]
    if any(p in ("", ".", "..") or not _KEY_PART.match(p) for p in parts):
        raise UsageError(f"{what} {key!r} is not a relative store key (like v/000000000001/...)")
    return key


def check_scope(scope: str) -> str:
    """The key prefix a grant covers: empty (the whole run) or a relative key ending in '/'."""
    if scope != "" and not (isinstance(scope, str) and scope.endswith("/")):
        raise UsageError(
            f"scope must be '' or a key prefix ending in '/', e.g. 'v/'; got {scope!r}"
        )
    if scope:
        check_key(scope[:-1], "scope")
    return scope


@dataclass(frozen=True)
class CdnGrant:
    """Read access through a CDN to the keys under ``scope``, until ``expires_at_s``."""

    provider: str
    base_url: str
    scope: str
    expires_at_s: int
    query: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise UsageError(
                f"provider must be one of {', '.join(PROVIDERS)}; got {self.provider!r}"
            )
        check_base_url(self.base_url)
        check_scope(self.scope)
        require_int("expires_at_s", self.expires_at_s, minimum=0)
        if (
            not isinstance(self.query, str)
            or self.query.startswith(("?", "&"))
            or any(c in self.query for c in "# \t\r\n")
        ):
            raise UsageError(
                f"query must be a query string without '?', '#' or spaces; got {self.query!r}"
            )
        headers = dict(self.headers)
        for name, value in headers.items():
            if not (isinstance(name, str) and _HEADER_NAME.match(name)):
                raise UsageError(f"header name {name!r} is not a plain HTTP header name")
            if not isinstance(value, str) or not value.isascii() or any(c in value for c in "\r\n"):
                raise UsageError(f"header {name} must be one line of ASCII")
        object.__setattr__(self, "headers", MappingProxyType(headers))

    def covers(self, key: str) -> bool:
        """Whether ``key`` is a store key inside this grant's scope."""
        try:
            check_key(key)
        except UsageError:
            return False
        return key.startswith(self.scope)

    def url_for(self, key: str) -> str:
        """The URL at which the CDN serves ``key`` under this grant."""
        if not self.covers(key):
            raise UsageError(
                f"key {key!r} is outside the CDN grant's scope {self.scope!r}: "
                "read it from the store"
            )
        url = f"{self.base_url}/{quote(key, safe='/')}"
        return f"{url}?{self.query}" if self.query else url

    def expired(self, now_s: float) -> bool:
        """Whether the edge refuses this grant at ``now_s`` (UNIX seconds)."""
        return now_s >= self.expires_at_s

    def to_json(self) -> str:
        """The grant as one JSON object, to hand to a worker (a file, a secret, a variable)."""
        return json.dumps({name: _plain(getattr(self, name)) for name in _FIELDS}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> CdnGrant:
        """Parse :meth:`to_json`'s output; a UsageError naming the field for anything else."""
        if len(text) > MAX_GRANT_BYTES:
            raise UsageError(f"a CDN grant is at most {MAX_GRANT_BYTES} bytes; got {len(text)}")
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise UsageError(
                "the CDN grant is not a JSON object (CdnGrant.to_json makes one)"
            ) from exc
        if not isinstance(raw, dict) or set(raw) != set(_FIELDS):
            got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
            raise UsageError(f"a CDN grant has exactly the fields {', '.join(_FIELDS)}; got {got}")
        if not isinstance(raw["headers"], dict):
            raise UsageError("the CDN grant's headers must be a JSON object")
        return cls(**raw)


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value
