"""Where things live in a bucket, in one place (see docs/format.md).

```
<prefix>/LATEST                                   pointer, moved by compare-and-swap
<prefix>/v/<version:012d>/manifest.json           immutable, created If-None-Match: *
<prefix>/v/<version:012d>/<publish id>/<n:06d>.bin payload, written before the manifest
<prefix>/v/p<k>/<version:012d>/<publish id>/<n:06d>.bin  payload dealt over K prefixes
<prefix>/v/<version:012d>/shares/<run id>/<rank:06d>.json  a rank's share (ShardedPublisher)
<prefix>/v/<version:012d>/shares/<run id>/base.json  a launch's first delta base (the same)
<prefix>/workers/<worker id>.json                 each worker's status
<prefix>/checks/conditional-writes.json           the store's conditional writes, checked once
<prefix>/checks/scratch/<check id>/...            a store check's probes, removed by the check
```

The publish id (random per publish attempt) keeps two publishers racing for
the same version from overwriting each other's payload: only the one whose
manifest lands is referenced, the other's objects are orphans for the GC.

A publisher that expects more reads a second than one prefix of the store serves
deals each version's payload objects over K fixed prefixes ``v/p0/`` ... ``v/p<K-1>/``
(``PublishConfig.payload_prefixes``), which a store that partitions its keys by
their leading characters (S3) serves each at its own rate; the object's entry in
the manifest says which (``prefix``). The manifest, the listings and LATEST stay
where they are, and ``v/`` stays the first component, so the CDN's rules below
and a grant for ``v/`` cover the spread payload too. No version directory is
named ``p<k>``: a version is twelve digits.

Everything under ``v/`` is written once and never changed, so a CDN may cache
it for a year; LATEST and the workers' status objects change, so nothing may
cache them (:func:`cache_control`, which every backend that stores HTTP
headers sets on each object it writes).
"""

from __future__ import annotations

import re

from ..errors import UsageError

LATEST_KEY = "LATEST"
VERSIONS_DIR = "v"
WORKERS_DIR = "workers"
MANIFEST_NAME = "manifest.json"
SHARES_DIR = "shares"
CHECKS_DIR = "checks"
STORE_CHECK_KEY = f"{CHECKS_DIR}/conditional-writes.json"
MAX_VERSION = 10**12 - 1
#: The most payload prefixes a version may deal its objects over (``v/p0/`` ... ``v/p255/``).
MAX_PAYLOAD_PREFIXES = 256
PAYLOAD_PREFIX_LETTER = "p"
#: ``Cache-Control`` of the immutable keys (``v/``): a year, never revalidated.
IMMUTABLE_CACHE_CONTROL = "public, max-age=31536000, immutable"
#: ``Cache-Control`` of every other key (LATEST, status objects): never stored by a cache.
NO_STORE_CACHE_CONTROL = "no-store"
# a version's own directory, or its directory under a payload prefix (p0, p1, ... p255)
_VERSION_DIR_RE = re.compile(r"^v/(?:p(?:0|[1-9]\d{0,2})/)?(\d{12})/")
_WORKER_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,128}$")


def check_version(version: object, *, what: str = "version") -> int:
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version <= MAX_VERSION:
        raise UsageError(f"{what} must be an integer between 0 and {MAX_VERSION}, got {version!r}")
    return version


def version_dir(version: int) -> str:
    return f"{VERSIONS_DIR}/{check_version(version):012d}"


def manifest_key(version: int) -> str:
    return f"{version_dir(version)}/{MANIFEST_NAME}"


def check_payload_prefix(prefix: object, *, what: str = "payload prefix") -> int:
    if isinstance(prefix, bool) or not isinstance(prefix, int):
        raise UsageError(f"{what} must be an integer, got {prefix!r}")
    if not 0 <= prefix < MAX_PAYLOAD_PREFIXES:
        raise UsageError(f"{what} must be between 0 and {MAX_PAYLOAD_PREFIXES - 1}, got {prefix}")
    return prefix


def payload_dir(version: int, prefix: int | None = None) -> str:
    """Where a version's payload objects lie: its own directory (``prefix`` None), or
    its directory under payload prefix ``prefix`` (``v/p<prefix>/<version:012d>``)."""
    if prefix is None:
        return version_dir(version)
    k = check_payload_prefix(prefix)
    return f"{VERSIONS_DIR}/{PAYLOAD_PREFIX_LETTER}{k}/{check_version(version):012d}"


def payload_key(version: int, relative: str, prefix: int | None = None) -> str:
    """The store key of the payload object ``relative`` of a version (see :func:`payload_dir`)."""
    return f"{payload_dir(version, prefix)}/{relative}"


def shares_dir(version: int, run_id: str) -> str:
    """Where the ranks of run ``run_id`` post their shares of ``version`` (publish.shard)."""
    return f"{version_dir(version)}/{SHARES_DIR}/{run_id}"


def share_key(version: int, run_id: str, rank: int) -> str:
    return f"{shares_dir(version, run_id)}/{rank:06d}.json"


def scratch_dir(check_id: str) -> str:
    """Where one store check (``wanrl-s3 doctor``, publish's first check) writes its probes."""
    return f"{CHECKS_DIR}/scratch/{check_id}"


def directory_of(key: str) -> str | None:
    """The directory of a version's key (its own, or its payload prefix's: what a listing
    of that directory returns it in), or None if it is not one of a version's keys."""
    m = _VERSION_DIR_RE.match(key)
    return m.group(0)[:-1] if m else None


def version_of_key(key: str) -> int | None:
    """The version a key belongs to (in its directory or under a payload prefix), or None
    if it is not one of a version's keys."""
    m = _VERSION_DIR_RE.match(key)
    return int(m.group(1)) if m else None


def cache_control(key: str) -> str:
    """The ``Cache-Control`` a store sets on ``key`` when it writes it (docs/format.md).

    Keys under ``v/`` (manifests, payload, share records) are written once and are
    unique per publication, so an edge may keep them as long as it likes; a cached
    LATEST would freeze a fleet on an old version, so it and the rest are never cached.
    ``public`` lets a shared cache store a response to a signed request; the bucket
    stays private all the same.
    """
    if key.startswith(VERSIONS_DIR + "/"):
        return IMMUTABLE_CACHE_CONTROL
    return NO_STORE_CACHE_CONTROL


def check_worker_id(worker_id: str) -> str:
    """``worker_id`` if it can name a status object (``workers/<id>.json``): 1 to 128
    letters, digits, dots, dashes or underscores; else a :class:`UsageError` naming it."""
    if not _WORKER_ID_RE.match(worker_id or ""):
        raise UsageError(
            f"worker id {worker_id!r} must be 1-128 characters of letters, digits, '._-'"
        )
    return worker_id


def worker_status_key(worker_id: str) -> str:
    return f"{WORKERS_DIR}/{check_worker_id(worker_id)}.json"
