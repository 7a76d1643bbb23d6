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

Broadcast time is modelled as the bucket's, changed in two ways (:func:`cdn_read_s`).
An edge fills at least as fast as one worker downloads, so the bytes arrive when
they would from the bucket, but:

* **the fill:** a version's first reader at an edge waits for the edge's
  fetches from the bucket, :data:`FILL_ROUND_TRIPS` in sequence (the manifest,
  then the payload's first slice; later slices fill while the worker's slower
  link drains the first). Later readers find both cached, so on average a
  reader waits for the fill ``min(edges, workers) / workers`` of the time, as
  the poll term is the poll interval's average. ``--cdn-fill-rtt-ms`` is that
  fetch's round trip (default 0: left out).
* **the answer:** a worker's round trip to the bucket includes the store's own
  time to answer; an edge answering from its cache skips it on the
  :data:`EDGE_ROUND_TRIPS` reads it serves (the manifest and the payload; the
  poll and the listing stay on the bucket). ``--store-answer-ms`` is that time
  (default 0: left out; it needs a fleet, where round trips are modelled).
"""

from __future__ import annotations

from ..units import require_int, require_non_negative
from .egress import Traffic
from .reads import chunk_count, fetch_gets, listings

#: Edge caches a fleet spread over one continent typically reaches (an assumption, not a price).
DEFAULT_EDGES = 8
#: Fetches from the bucket a version's first reader at an edge waits for, one after the other.
FILL_ROUND_TRIPS = 2
#: Of a worker's fetch round trips (the poll, the listing, the manifest, the payload GET;
#: :data:`~wanrl_s3.cost.fleet.FETCH_ROUND_TRIPS`), those its edge answers.
EDGE_ROUND_TRIPS = 2


def cdn_fill_s(fill_rtt_s: float) -> float:
    """What a CDN adds to a bucket row's T_bcast: the edge's fetches on a miss, in sequence."""
    return FILL_ROUND_TRIPS * require_non_negative("cdn_fill_rtt_s", fill_rtt_s)


def cdn_read_s(fill_rtt_s: float, store_answer_s: float, workers: int, edges: int) -> float:
    """What reading through ``edges`` adds to a bucket row's T_bcast (negative when the
    edges' cached answers save more than the fill costs): the fill, waited for by the
    first reader at each edge, on average over the readers, less the store's answer time
    on the reads an edge serves from its cache (see the module doc)."""
    first_share = origin_fetches(workers, edges) / workers
    answer_s = require_non_negative("store_answer_s", store_answer_s)
    return cdn_fill_s(fill_rtt_s) * first_share - EDGE_ROUND_TRIPS * answer_s


def origin_fetches(workers: int, edges: int) -> int:
    """Copies of a version the edges pull from the bucket: one per edge reached."""
    require_int("workers", workers)
    require_int("cdn_edges", edges)
    return min(workers, edges)


def cdn_download_traffic(
    payload_gb: float, chunk_mb: float, workers: int, edges: int, payload_prefixes: int = 1
) -> Traffic:
    """One version through the CDN: each edge fills every object and the manifest from the
    bucket once; every worker asks its edge for the manifest and the payload's ranged
    GETs, and lists the bucket as the reader does (:mod:`.reads`)."""
    chunks = chunk_count(payload_gb, chunk_mb)
    fetches = origin_fetches(workers, edges)
    return Traffic(
        cdn_fill_gb=payload_gb * fetches,
        cdn_egress_gb=payload_gb * workers,
        get_requests=fetches * (chunks + 1),
        cdn_requests=workers * fetch_gets(payload_gb),
        list_requests=workers * listings(payload_gb, chunk_mb, payload_prefixes),
    )
