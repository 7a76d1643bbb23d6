"""The stores of benchmarks/fleet_sim.py: prefixes with a request-rate limit, and 503 retries.

A prefix admits at most ``limit_per_s * window_s`` read requests in each fixed window
of ``window_s`` (1 s by default: the providers document their limits per second) and
answers the rest 503 SlowDown, as a rate-limiting proxy does. Two kinds of load:

* **background**: the fleet's LATEST polls, a steady rate (workers / poll interval)
  that is not simulated poll by poll; it takes its share of every window first, and
  whatever of it exceeds the window's capacity is counted as SlowDowns. The one poll
  per worker that sees a new version is drawn from it (:meth:`Prefix.admit_poll`).
* **discrete requests**: the polls that see a new version, listings, manifests and
  payload GETs. A group of ``n`` requests issued over ``[t0, t1]`` (a batch of parts
  is issued one part at a time, as the previous ones complete) is spread over the
  windows it covers and admitted first come, first served on what is left.

A client whose request was refused waits as ``wanrl_s3.RetryPolicy`` says (the
product's own policy object: capped exponential backoff with full jitter) and asks
again; after ``max_attempts`` refusals the call fails, as ``ObjectStore`` calls do.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

INF = math.inf


@dataclass(eq=False)  # compared and hashed by identity: one region may list it twice
class Prefix:
    """One rate-limited prefix of one region's bucket: its windows, and what it served."""

    name: str
    limit_per_s: float  # math.inf: no limit
    window_s: float = 1.0
    background_per_s: float = 0.0
    offered: list[float] = field(default_factory=list)  # discrete requests, per window
    admitted: list[float] = field(default_factory=list)
    discrete_slowdowns: int = 0

    @property
    def capacity(self) -> float:
        return self.limit_per_s * self.window_s

    @property
    def background(self) -> float:
        return self.background_per_s * self.window_s

    def _grow(self, index: int) -> None:
        if index >= len(self.offered):
            more = index + 1 - len(self.offered) + 256
            self.offered.extend([0.0] * more)
            self.admitted.extend([0.0] * more)

    def _left(self, index: int) -> float:
        return self.capacity - min(self.background, self.capacity) - self.admitted[index]

    def book(self, t0_s: float, t1_s: float, n: int) -> int:
        """Offer ``n`` requests spread evenly over [t0, t1]; how many were admitted."""
        if n <= 0:
            return 0
        w = self.window_s
        first, last = int(t0_s / w), int(max(t0_s, t1_s - 1e-12) / w)
        self._grow(last)
        span = max(t1_s - t0_s, 1e-12)
        admitted = placed = 0
        for index in range(first, last + 1):
            if first == last:
                share = n
            else:  # integer requests per window, by cumulative rounding of the overlap
                end = min(t1_s, (index + 1) * w) - t0_s
                share = (n if index == last else round(n * end / span)) - placed
            placed += share
            if share <= 0:
                continue
            self.offered[index] += share
            take = share if self.limit_per_s == INF else max(0, min(share, int(self._left(index))))
            self.admitted[index] += take
            admitted += take
        self.discrete_slowdowns += n - admitted
        return admitted

    def admit_poll(self, t_s: float, rng: random.Random) -> bool:
        """One poll that would see a new version: one of the background polls, so it is
        not counted again; it gets through with the window's share of its capacity,
        capacity / (background + discrete requests offered), at most certainly."""
        index = int(t_s / self.window_s)
        self._grow(index)
        offered = self.background + self.offered[index]
        if self.limit_per_s == INF or offered <= self.capacity:
            return True
        if rng.random() < self.capacity / offered:
            return True
        self.discrete_slowdowns += 1
        return False

    # -- what it saw ----------------------------------------------------------------
    def windows(self, until_s: float) -> int:
        return max(1, math.ceil(until_s / self.window_s))

    def offered_per_s(self, until_s: float) -> list[float]:
        """Requests offered per second in each window (background polls included)."""
        n = self.windows(until_s)
        self._grow(n)
        return [(self.offered[i] + self.background) / self.window_s for i in range(n)]

    def admitted_per_s(self, until_s: float) -> list[float]:
        n = self.windows(until_s)
        self._grow(n)
        bg = min(self.background, self.capacity)
        return [(self.admitted[i] + bg) / self.window_s for i in range(n)]

    def background_slowdowns(self, until_s: float) -> float:
        """Background polls refused over the run (their excess over each window's capacity)."""
        if self.limit_per_s == INF:
            return 0.0
        return max(0.0, self.background - self.capacity) * self.windows(until_s)


class CallFailed(Exception):
    """A request refused ``max_attempts`` times: the store call raised StoreError."""


@dataclass
class Counters:
    """Requests and bytes by outcome, for one kind of version (the bill and the report).

    A fetch counts under the kind it starts from: "full" (a keyframe: the fleet's
    start, a host that joins holding nothing) or "delta"."""

    get: int = 0  # GETs the bucket served: manifests, payload, edge fills
    poll_gets: int = 0  # polls that saw a version (part of the steady poll load, billed there)
    listing: int = 0
    edge_requests: int = 0  # GETs a CDN edge served (manifests and payload)
    slowdowns: int = 0
    retries: int = 0
    failed_calls: int = 0  # StoreErrors: a request refused max_attempts times
    failed_fetches: int = 0  # downloads the watcher had to start over
    poll_failures: int = 0
    bucket_bytes: float = 0.0  # payload bytes out of the buckets to workers
    edge_bytes: float = 0.0  # payload bytes out of CDN edges to workers
    edge_fill_bytes: float = 0.0  # payload bytes the edges fetched from the buckets
    wasted_bytes: float = 0.0  # downloaded by fetches that failed (and started over)
