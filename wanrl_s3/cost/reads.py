"""The requests a reader makes for one version, counted as ``Subscriber`` makes them.

Per version of its plan, a worker lists the version's folder (is it whole yet?) and,
when the publisher dealt the payload over K payload prefixes (``--payload-prefixes``),
each payload prefix the version's objects lie under; reads the manifest; and reads the
payload in ranged GETs of :data:`READ_REQUEST_MB` (``Subscriber``'s 128 MiB window over
its 16 requests in flight), object after object in the manifest's order. The poll of
LATEST that finds the version is one of the polls, counted with them.

What the providers bill: GETs as GETs; a listing with the PUTs (S3's PUT, COPY, POST,
LIST; GCS's class A; Azure's list operations; R2's class A), so :class:`Traffic`
counts listings apart and prices them at the PUT rate. Pure functions, no network.
"""

from __future__ import annotations

import math

from ..errors import UsageError
from ..units import require_int, require_non_negative, require_positive

#: The reader's ranged GET for coded and delta payloads, in MB: ``Subscriber``'s window
#: (128 MiB) over its concurrency (16), at least 1 MiB, at most its range (64 MiB).
READ_REQUEST_MB = 8 * 2**20 / 1e6
#: Ranged GETs a reader has in flight at once (``Subscriber(concurrency=16)``).
READ_CONCURRENCY = 16
#: The most payload prefixes a version's objects may be dealt over (docs/format.md).
MAX_PAYLOAD_PREFIXES = 256


def chunk_count(payload_gb: float, chunk_mb: float) -> int:
    """Objects a payload is cut into; at least one, even for an empty delta."""
    require_non_negative("payload_gb", payload_gb)
    require_positive("chunk_mb", chunk_mb)
    return max(1, math.ceil(payload_gb * 1000.0 / chunk_mb))


def payload_reads(payload_gb: float, request_mb: float = READ_REQUEST_MB) -> int:
    """Ranged GETs one worker makes for a payload (at least one)."""
    require_positive("request_mb", request_mb)
    return max(1, math.ceil(payload_gb * 1000.0 / request_mb - 1e-9))


def require_prefixes(payload_prefixes: int) -> int:
    """A payload prefix count the format allows (1 to :data:`MAX_PAYLOAD_PREFIXES`)."""
    if require_int("payload_prefixes", payload_prefixes) > MAX_PAYLOAD_PREFIXES:
        raise UsageError(
            f"payload_prefixes must be at most {MAX_PAYLOAD_PREFIXES}, got {payload_prefixes}"
        )
    return payload_prefixes


def prefixes_read(payload_gb: float, chunk_mb: float, payload_prefixes: int) -> int:
    """The payload prefixes a version's objects lie under: none apart from its folder with
    one prefix, else one per object up to K."""
    if payload_prefixes == 1:
        return 0
    return min(payload_prefixes, chunk_count(payload_gb, chunk_mb))


def listings(payload_gb: float, chunk_mb: float, payload_prefixes: int = 1) -> int:
    """Listings per worker per version read: its folder, and each payload prefix it reads."""
    return 1 + prefixes_read(payload_gb, chunk_mb, payload_prefixes)


def fetch_gets(payload_gb: float) -> int:
    """GETs per worker per version read: the manifest, and the payload's ranged GETs."""
    return 1 + payload_reads(payload_gb)
