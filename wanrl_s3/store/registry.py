"""Which class serves which URL scheme, imported only when first used.

Like fsspec's registry: a scheme maps to a dotted class path and an install
hint, so a missing optional dependency is one clear line naming the fix, and
third parties add schemes with :func:`register_implementation`. Opening a URL
is a lookup and one call: the class parses its own URL
(:meth:`ObjectStore.from_url`) and gets the options it takes, ours and a third
party's alike.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any
from urllib.parse import urlsplit

from ..errors import UsageError
from .spec import ObjectStore

#: URL scheme -> the backend class (a dotted path, imported on first use) and the install
#: hint raised when its package is missing; :func:`register_implementation` adds to it.
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
_registry: dict[str, type[ObjectStore]] = {}


def register_implementation(
    protocol: str, cls: type[ObjectStore] | str, errtxt: str = "", *, clobber: bool = False
) -> None:
    """Map ``protocol`` to a class, or to a dotted path imported on first use.

    ``errtxt`` is the one line shown when that import fails (say what to install).
    """
    if not clobber and (protocol in _registry or protocol in known_implementations):
        raise UsageError(f"store protocol {protocol!r} is already registered")
    if isinstance(cls, str):
        known_implementations[protocol] = {"class": cls, "err": errtxt}
        _registry.pop(protocol, None)
    else:
        _registry[protocol] = _checked(protocol, cls)


def get_store_class(protocol: str) -> type[ObjectStore]:
    """The class serving ``protocol`` (or an alias), imported now if it was not yet."""
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
    _registry[protocol] = _checked(protocol, cls)
    return cls


def _checked(protocol: str, cls: object) -> type[ObjectStore]:
    if not (isinstance(cls, type) and issubclass(cls, ObjectStore)):
        raise UsageError(f"store protocol {protocol!r}: {cls!r} is not an ObjectStore subclass")
    return cls


def open_store(url: str, **options: Any) -> ObjectStore:
    """The store a URL names: ``s3://bucket/prefix``, ``gs://bucket/prefix``,
    ``az://container[@account]/prefix`` (or ``abfs://``), ``file:///dir``, ``memory://name``.

    A plain path is a ``file://`` store. ``options`` go to the backend
    (``endpoint_url`` for s3://, gs:// and az://, ``profile`` and ``region`` for
    s3://; ``retry`` for all); options a backend does not take, and options
    that are None, are dropped (see :func:`accepted_options`), so one set of CLI
    flags serves every scheme, a third party's too.
    """
    if not url:
        raise UsageError("a store URL is required, e.g. s3://bucket/prefix or file:///path")
    if "://" in url:
        parts = urlsplit(url)
        if parts.query or parts.fragment or url.endswith(("?", "#")):
            raise UsageError(  # urlsplit drops them: s3://b/x#y would be s3://b/x, silently
                f"store URL {url!r} has a query or fragment ('?' or '#'): a store URL is "
                "SCHEME://BUCKET/PREFIX, and a prefix cannot hold '?' or '#'"
            )
    cls = get_store_class(urlsplit(url).scheme if "://" in url else "file")
    names = accepted_options(cls)
    taken = {k: v for k, v in options.items() if v is not None and (names is None or k in names)}
    return cls.from_url(url, **taken)


@functools.cache
def accepted_options(cls: type[ObjectStore]) -> frozenset[str] | None:
    """The option names ``cls.from_url`` takes; None where it takes any.

    Its ``open_options`` where declared; otherwise its signature: the
    keyword-only parameters of ``from_url`` and, where ``from_url`` forwards
    ``**options`` (as the default does), of the constructor.
    """
    if cls.open_options is not None:
        return frozenset(cls.open_options)
    names: set[str] = set()
    for fn in (cls.from_url, cls.__init__):
        params = inspect.signature(fn).parameters.values()
        names |= {p.name for p in params if p.kind is inspect.Parameter.KEYWORD_ONLY}
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return frozenset(names)
    return None  # the constructor takes **options too: everything goes through
