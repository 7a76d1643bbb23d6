"""Object storage behind a CDN: what one version costs when edges, not the bucket, serve the fleet.

Fanning one immutable version out to N workers is a cache's best case: every
chunk and the manifest are written once and never change, so each edge cache
fetches a version from the bucket once and serves every worker behind it. The
model, per version:

* origin fetches: one copy per edge the fleet reaches, ``min(edges, workers)``
  (an upper bound: workers are assumed to land on distinct edges until the
  edges run out). ``edges`` is an input (``--cdn-edges``, default
  :data:`DEFAULT_EDGES`); a shielded CDN (one mid-tier cache in front of the
  origin) is ``--cdn-edges 1``.
* cache fill: those copies, billed at the CDN's price for that origin
  (S3 to CloudFront and R2 or B2 to Cloudflare are free; Cloud CDN bills it).
* edge egress: every worker's copy, on the CDN's own monthly ladder.
* requests: every worker's chunk and manifest GETs hit the CDN; the edges'
  fetches hit the bucket. LATEST is *not* cached (a stale pointer would hide new
  versions), so its per-version read and the polling stay on the bucket.

Broadcast time is modelled as the bucket's: an edge fills at least as fast as
one worker downloads, so the last worker finishes when it would from the bucket.
"""

from __future__ import annotations

from ..units import require_int
from .egress import Traffic, chunk_count

#: Edge caches a fleet spread over one continent typically reaches (an assumption, not a price).
DEFAULT_EDGES = 8


def origin_fetches(workers: int, edges: int) -> int:
    """Copies of a version the edges pull from the bucket: one per edge reached."""
    require_int("workers", workers)
    require_int("cdn_edges", edges)
    return min(workers, edges)


def cdn_download_traffic(payload_gb: float, chunk_mb: float, workers: int, edges: int) -> Traffic:
    """One version through the CDN: fills from the bucket, every worker served by an edge."""
    chunks = chunk_count(payload_gb, chunk_mb)
    fetches = origin_fetches(workers, edges)
    return Traffic(
        cdn_fill_gb=payload_gb * fetches,
        cdn_egress_gb=payload_gb * workers,
        get_requests=fetches * (chunks + 1) + workers,  # edge fills, plus LATEST per worker
        cdn_requests=workers * (chunks + 1),  # chunks and the manifest, from the edges
    )
