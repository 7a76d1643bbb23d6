"""A request-rate limit per key prefix, as S3 enforces one, for :class:`FaultProxy`.

S3 serves a documented number of reads a second per partitioned prefix (5,500
GET/HEAD) and answers the rest ``503 SlowDown``; a new bucket is one partition
until S3 has seen a rate for a while and split it. :class:`RateLimit` does the
same in front of a real server: requests are grouped into partitions by a
regular expression over the key they address, each partition admits at most
``per_s * window_s`` of them in each fixed window, and the proxy answers the rest
503 SlowDown without forwarding them.

The windows run on an injectable clock. With the clock of the clients' own retry
policy (a :class:`~wanrl_s3.store.FakeClock`), time moves only when a client
backs off: which requests are refused then depends on how many were asked of
each partition, not on how fast a loaded machine asked them.
"""

from __future__ import annotations

import re
import threading
import urllib.parse
from collections import Counter

from ..errors import UsageError
from ..store import SYSTEM_CLOCK, Clock

#: One partition for the whole bucket: a new bucket, before S3 has split anything.
ONE_PARTITION = r"^/[^/]+/"
#: One partition per payload prefix (``.../v/p<k>/``) and one for the rest of the bucket:
#: S3 once it has split a run's prefix at its payload prefixes.
PAYLOAD_PREFIX_PARTITIONS = r"^/[^/]+/(?:.*?/v/p\d+/)?"


class RateLimit:
    """At most ``per_s`` requests a second on each partition; the rest are refused.

    ``partition``: a regular expression matched at the start of the key a request
    addresses (``/bucket/key``; for a listing, ``/bucket/`` and its ``prefix``
    parameter); requests whose matches are equal share one budget, and a request
    it does not match is never limited. ``methods``: the requests that count (S3
    limits reads and writes apart; reads by default). ``window_s``: the limit is
    counted per fixed window of this length on ``clock``.
    """

    def __init__(
        self,
        per_s: float,
        *,
        partition: str = ONE_PARTITION,
        methods: tuple[str, ...] = ("GET", "HEAD"),
        window_s: float = 1.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if not per_s > 0 or not window_s > 0:
            raise UsageError(f"RateLimit needs per_s > 0 and window_s > 0, got {per_s}, {window_s}")
        self.budget = per_s * window_s
        self.window_s = window_s
        self._partition = re.compile(partition)
        self._methods = frozenset(methods)
        self._clock = clock
        self._lock = threading.Lock()
        self._window: dict[str, tuple[int, int]] = {}  # partition -> (window index, admitted)
        self.admitted: Counter[str] = Counter()  # per partition, over the run
        self.refused: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()  # the most admitted in one window, per partition

    def partition_of(self, method: str, target: str) -> str | None:
        """The partition a request counts against (``target``: its request target, query
        included), or None when it does not count."""
        if method not in self._methods:
            return None
        path, _, query = target.partition("?")
        key = urllib.parse.unquote(path)
        prefix = urllib.parse.parse_qs(query).get("prefix")
        if prefix and key.count("/") == 1:  # a listing: /bucket?prefix=...
            key = f"{key.rstrip('/')}/{prefix[0]}"
        found = self._partition.match(key)
        return None if found is None else found.group(0)

    def admit(self, method: str, target: str) -> bool:
        """Count the request against its partition's window: True if it is served."""
        name = self.partition_of(method, target)
        if name is None:
            return True
        index = int(self._clock.monotonic() // self.window_s)
        with self._lock:
            current, used = self._window.get(name, (index, 0))
            if current != index:
                current, used = index, 0
            if used >= self.budget:
                self.refused[name] += 1
                return False
            self._window[name] = (current, used + 1)
            self.admitted[name] += 1
            self.peak[name] = max(self.peak[name], used + 1)
            return True
