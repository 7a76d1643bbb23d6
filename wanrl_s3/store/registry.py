"""Which class serves which URL scheme, imported only when first used.

Like fsspec's registry: a name maps to a dotted class path and an install hint,
so a missing optional dependency is one clear line naming the fix, and third
parties can add schemes with :func:`register_implementation`.
"""

from __future__ import annotations

import importlib
from typing import Any
from urllib.parse import urlsplit

from ..errors import UsageError
from .spec import ObjectStore

known_implementations: dict[str, dict[str, str]] = {
    "s3": {"class": "wanrl_s3.store.s3.S3Store", "err": "s3:// needs boto3: pip install boto3"},
    "gs": {
        "class": "wanrl_s3.store.gcs.GcsStore",
        "err": "gs:// needs google-cloud-storage: pip install 'wanrl-s3[gcs]'",
    },
    "az": {
        "class": "wanrl_s3.store.azure.AzureBlobStore",
        "err": "az:// needs azure-storage-blob: pip install 'wanrl-s3[azure]'",
    },
    "file": {"class": "wanrl_s3.store.local.LocalStore", "err": ""},
    "memory": {"class": "wanrl_s3.store.memory.MemoryStore", "err": ""},
}
_ALIASES = {"s3a": "s3", "local": "file", "gcs": "gs", "abfs": "az", "abfss": "az"}
_NETWORK_OPTIONS = {"endpoint_url", "max_connections", "retry", "read_timeout_s"}
_registry: dict[str, type[ObjectStore]] = {}


def register_implementation(
    protocol: str, cls: type[ObjectStore] | str, errtxt: str = "", *, clobber: bool = False
) -> None:
    """Map ``protocol`` to a class, or to a dotted path imported on first use."""
    if not clobber and (protocol in _registry or protocol in known_implementations):
        raise UsageError(f"store protocol {protocol!r} is already registered")
    if isinstance(cls, str):
        known_implementations[protocol] = {"class": cls, "err": errtxt}
        _registry.pop(protocol, None)
    else:
        _registry[protocol] = cls


def get_store_class(protocol: str) -> type[ObjectStore]:
    protocol = _ALIASES.get(protocol, protocol)
    if protocol in _registry:
        return _registry[protocol]
    spec = known_implementations.get(protocol)
    if spec is None:
        known = ", ".join(f"{p}://" for p in sorted(known_implementations))
        raise UsageError(f"unknown store protocol {protocol!r}; known: {known}")
    module_name, _, cls_name = spec["class"].rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), cls_name)
    except ImportError as exc:
        raise UsageError(spec["err"] or f"cannot import {spec['class']}: {exc}") from exc
    _registry[protocol] = cls
    return cls


def open_store(url: str, **options: Any) -> ObjectStore:
    """The store a URL names: ``s3://bucket/prefix``, ``gs://bucket/prefix``,
    ``az://container[@account]/prefix`` (or ``abfs://``), ``file:///dir``, ``memory://name``.

    A plain path is a ``file://`` store. ``options`` go to the backend
    (``endpoint_url`` for s3://, gs:// and az://, ``profile`` and ``region`` for
    s3://; ``retry`` for all);
    options a backend does not take are ignored, so one set of CLI flags serves
    every scheme.
    """
    if not url:
        raise UsageError("a store URL is required, e.g. s3://bucket/prefix or file:///path")
    if "://" not in url:
        local: Any = get_store_class("file")  # each backend has its own constructor
        return local(url, **_filter(options, {"retry"}))
    parts = urlsplit(url)
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise UsageError(  # urlsplit drops them: s3://b/x#y would be s3://b/x, silently
            f"store URL {url!r} has a query or fragment ('?' or '#'): a store URL is "
            "SCHEME://BUCKET/PREFIX, and a prefix cannot hold '?' or '#'"
        )
    protocol = _ALIASES.get(parts.scheme, parts.scheme)
    cls: Any = get_store_class(protocol)  # each backend has its own constructor
    if protocol == "s3":
        return cls(
            parts.netloc,
            parts.path,
            **_filter(
                options,
                {"endpoint_url", "profile", "region", "max_connections", "retry", "read_timeout_s"},
            ),
        )
    if protocol == "gs":
        return cls(parts.netloc, parts.path, **_filter(options, _NETWORK_OPTIONS))
    if protocol == "az":
        container, _, account = parts.netloc.partition("@")  # adlfs: container@account
        return cls(
            container,
            parts.path,
            account=account.split(".", 1)[0] or None,
            **_filter(options, _NETWORK_OPTIONS),
        )
    if protocol == "file":
        if parts.netloc not in ("", "localhost"):
            raise UsageError(f"file:// URLs take an absolute path, e.g. file:///data; got {url}")
        return cls(parts.path, **_filter(options, {"retry"}))
    if protocol == "memory":
        return cls(parts.netloc + parts.path, **_filter(options, {"retry"}))
    return cls(url, **options)


def _filter(options: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k in allowed and v is not None}
