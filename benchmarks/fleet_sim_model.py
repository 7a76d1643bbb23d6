"""The model of benchmarks/fleet_sim.py: trainer, regional buckets, routes and workers (SimPy).

One run publishes ``versions`` every ``cadence_s`` and follows every worker from
the commit to its install. Each part, and what it is modelled on:

* **trainer**: uploads each version at ``trainer_uplink_mbps`` (one copy per region
  for ``bucket`` and ``cdn``, the primary's only for ``relay``), stamps the manifest,
  then commits (three requests at ``trainer_rtt_s``: manifest create, LATEST read,
  LATEST compare-and-swap), as ``TrainerUplink`` in the planner.
* **regions** (``replicate``: the trainer writes the primary and the provider's
  replication shows each version in a replica after ``replication_lag_s``, 0.5-1.5x
  drawn per copy): a bucket each, every key under one rate-limited prefix (LATEST,
  manifests, listings, payload: the layout of one payload prefix), or with
  ``payload_prefixes`` K > 1 the payload objects dealt over K more prefixes as the
  publisher deals them (``PublishConfig.payload_prefix``: object n of version v under
  prefix (v + n) mod K), each with its own limit (:mod:`fleet_sim_store`). ``relay``: a
  replica sees a version after its relay's poll (``relay_poll_s``, jittered), copies
  the payload at ``relay_mbps`` and commits; ``cdn``: ``cdn_edges`` edges per region
  each fill a version from the bucket once, on the first request, at
  ``edge_fill_mbps``, and serve its workers (the manifest and payload; LATEST and
  listings stay on the bucket).
* **workers**: a poll thread (``WatchConfig``'s interval and jitter) and a fetch loop,
  as ``fetch/watch.py``: the poll that sees a version, then per version of the plan a
  listing and a manifest GET (in sequence) and, with payload prefixes, a listing of each
  payload prefix the plan reads, all at once (``Subscriber.missing``), then the payload in ranged
  GETs of ``request_bytes`` (``concurrency`` in flight), object after object in the
  manifest's order, at the link's goodput, then the install (``FetchModel``'s rates). A
  refused request (503 SlowDown) retries by ``RetryPolicy``'s budget for throttled
  requests; a call refused ``throttled_attempts`` times fails the fetch, which starts
  over after the watcher's backoff. Polls between publications are a steady background load, not
  events: only the poll that sees a version is simulated, its time drawn from the
  poll process's stationary residual (exact for a renewal process).
* **churn**: each worker crashes at ``crash_per_hour`` (exponential), comes back after
  ``restart_s`` with its installed version (a crashed process keeps its disk) or, with
  probability ``replace_share``, as a new host holding nothing; it polls at start.
* **aggregation**: a payload's parts are simulated ``batch_requests`` at a time (one
  event per batch, the batch's requests spread over the time its parts take on the
  link); one worker's times are the same for any batch size (tests/fleet).
"""

from __future__ import annotations

import bisect
import dataclasses
import heapq
import math
import random
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

import simpy
from fleet_sim_store import INF, CallFailed, Counters, Prefix

from wanrl_s3 import PublishConfig, RetryPolicy, UsageError, WatchConfig
from wanrl_s3.cost import FetchModel, FleetLinks, WorkerLink

MiB = 1 << 20
#: The reader's ranged GET for coded and delta payloads: ``Subscriber``'s window (128 MiB)
#: over its concurrency (16), at least 1 MiB and at most its range (64 MiB): 8 MiB.
READ_REQUEST_BYTES = 8 * MiB
#: Payload objects: one PUT each (``Publisher``'s 64 MiB objects).
OBJECT_BYTES = 64 * MiB
#: The commit's requests after the payload: manifest create, LATEST read, LATEST swap.
COMMIT_REQUESTS = 3
ROUTES = ("bucket", "cdn", "relay", "replicate")
#: What ``--route all`` runs: the trainer writing every region, behind a CDN, or a relay.
MAIN_ROUTES = ROUTES[:3]


@dataclass(frozen=True)
class Version:
    number: int
    kind: str  # "full" (a keyframe) or "delta"
    stored_bytes: int


def _positive(name: str, value: float, allow_zero: bool = False) -> None:
    ok = value >= 0 if allow_zero else value > 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok:
        rule = ">= 0" if allow_zero else "> 0"
        raise UsageError(f"{name} must be a number {rule}, got {value!r}")


@dataclass(frozen=True)
class SimConfig:
    """One simulated run; validated on creation (UsageError: one line naming the field)."""

    versions: tuple[Version, ...]
    snapshot_bytes: int
    route: str = "bucket"
    cadence_s: float = 300.0
    watch: WatchConfig = field(default_factory=WatchConfig)
    # what a refused request does: the product's policy for throttled requests by default
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    fetch: FetchModel = field(default_factory=FetchModel)
    concurrency: int = 16
    request_bytes: int = READ_REQUEST_BYTES
    batch_requests: int = 16
    read_limit_per_s: float = INF
    window_s: float = 1.0
    payload_prefixes: int = 1
    start_jitter_s: float = 0.0
    trainer_uplink_mbps: float = 10_000.0
    trainer_rtt_s: float = 0.05
    relay_poll_s: float = 5.0
    relay_mbps: float = 5_000.0
    replication_lag_s: float = 10.0  # the provider's bucket replication: mean, per copy
    cdn_edges: int = 8
    edge_fill_mbps: float = 5_000.0
    edge_rtt_ms: float = 20.0
    crash_per_hour: float = 0.0
    restart_s: float = 60.0
    replace_share: float = 0.0
    start_held: bool = False  # workers start holding the keyframe (a warm fleet: deltas only)
    seed: int = 0
    tail_s: float = 4 * 3600.0

    def __post_init__(self) -> None:
        if not self.versions or self.versions[0].kind != "full":
            raise UsageError("the first version must be a keyframe (kind 'full')")
        if self.route not in ROUTES:
            raise UsageError(f"route must be one of {', '.join(ROUTES)}, got {self.route!r}")
        for name in (
            "cadence_s",
            "window_s",
            "trainer_uplink_mbps",
            "relay_poll_s",
            "relay_mbps",
            "edge_fill_mbps",
            "restart_s",
            "tail_s",
            "read_limit_per_s",
        ):
            _positive(name, getattr(self, name))  # fmt: skip
        for name in ("start_jitter_s", "trainer_rtt_s", "edge_rtt_ms", "crash_per_hour",
                     "replication_lag_s"):  # fmt: skip
            _positive(name, getattr(self, name), allow_zero=True)
        for name in (
            "concurrency",
            "request_bytes",
            "batch_requests",
            "payload_prefixes",
            "cdn_edges",
            "snapshot_bytes",
        ):
            value = getattr(self, name)  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be an integer >= 1, got {value!r}")
        if not 0.0 <= self.replace_share <= 1.0:
            raise UsageError(f"replace_share must be in [0, 1], got {self.replace_share!r}")

    def keyframe_of(self, version: int) -> int:
        """The newest keyframe at or before ``version``."""
        return max(v.number for v in self.versions if v.kind == "full" and v.number <= version)

    def by_number(self, version: int) -> Version:
        return self.versions[version - self.versions[0].number]


@dataclass
class Region:
    name: str
    base: Prefix
    payload: list[Prefix]
    workers: list[int] = field(default_factory=list)
    visible_s: dict[int, float] = field(default_factory=dict)  # version -> commit visible
    edges: dict[tuple[int, int], float] = field(default_factory=dict)  # (edge, v) -> fill start


@dataclass
class Worker:
    index: int
    link: WorkerLink
    region: int
    goodput_bytes_per_s: float
    held: int = 0  # 0: nothing
    want: int = 0
    seen_at_s: float = 0.0
    alive: bool = True
    epoch: int = 0
    manifests: set[int] = field(default_factory=set)
    wake: simpy.Event | None = None
    process: simpy.Process | None = None
    failures: int = 0  # fetches failed in a row (the watcher's backoff)

    @property
    def rtt_s(self) -> float:
        return self.link.rtt_s


@dataclass
class Outcome:
    """What one run produced: per version its commit and each worker's install time."""

    config: SimConfig
    links: FleetLinks
    region_names: list[str]
    stamps_s: dict[int, float]  # the manifest's stamp in the primary (status measures from it)
    alive_at_commit: dict[int, list[bool]]
    installed_s: dict[int, list[float]]  # version -> per worker, first install of >= it
    regions: list[Region]
    counters: dict[str, Counters]  # by kind: "full", "delta"
    started_s: dict[int, float] = field(default_factory=dict)  # the trainer's upload began
    seen_s: dict[int, list[float]] = field(default_factory=dict)  # its poll reached the bucket
    fetched: dict[int, int] = field(default_factory=dict)  # version -> fetches that read it
    inter_region_bytes: dict[str, float] = field(default_factory=dict)  # by kind
    put_requests: dict[str, int] = field(default_factory=dict)  # by kind
    held_at_commit: dict[int, list[int]] = field(default_factory=dict)  # version -> per worker
    down_s: list[list[float]] = field(default_factory=list)  # per worker: when it went down
    replaced_s: list[list[float]] = field(default_factory=list)  # per worker: a new host, when
    end_s: float = 0.0

    def t_bcast_s(self, version: int, since: str = "stamp") -> list[float]:
        """Each worker alive at the commit: seconds to its install (inf: never), from the
        manifest's stamp (as ``wanrl-s3 status`` measures) or from the upload's start
        (``since="start"``, as the planner's T_bcast counts: the publish term included)."""
        zero = self.stamps_s[version] if since == "stamp" else self.started_s[version]
        alive = self.alive_at_commit[version]
        return [t - zero for t, a in zip(self.installed_s[version], alive, strict=True) if a]

    def readers(self, version: int) -> list[bool]:
        """Each worker alive at the commit (as :meth:`t_bcast_s` lists them): whether it read
        ``version`` as the planner's worker does, holding the version before at the commit and
        staying up until it installed ``version``. The others were still on a keyframe or the
        chain after it (a host that crashed or was replaced since, or a slow first download),
        or went down in between: their time holds a keyframe's download or a restart."""
        stamp, held = self.stamps_s[version], self.held_at_commit[version]
        flags = []
        for i, (alive, done) in enumerate(
            zip(self.alive_at_commit[version], self.installed_s[version], strict=True)
        ):
            if alive:
                down = any(stamp < t < done for t in self.down_s[i])
                flags.append(held[i] == version - 1 and not down)
        return flags

    def total(self, name: str) -> float:
        return sum(getattr(c, name) for c in self.counters.values())


class FleetSim:
    """Build with a fleet and a config, then :meth:`run`."""

    def __init__(self, links: FleetLinks, config: SimConfig) -> None:
        self.cfg, self.links = config, links
        self.env = simpy.Environment()
        self.rng = random.Random(config.seed)  # polls, lags, jitter: drawn in a route's order
        self.retry = dataclasses.replace(config.retry, rng=random.Random(config.seed + 1))
        self.deal = PublishConfig(payload_prefixes=config.payload_prefixes)
        self.counters = {"full": Counters(), "delta": Counters()}
        names = list(dict.fromkeys(w.region for w in links.workers))
        self.regions = [self._region(name) for name in names]
        self.workers: list[Worker] = []
        self.churn_rng: list[random.Random] = []
        for i, link in enumerate(links.workers):
            r = names.index(link.region)
            goodput = link.downlink_mbps * 1e6 / 8 * config.fetch.goodput_share
            held = config.versions[0].number if config.start_held else 0
            self.workers.append(Worker(i, link, r, goodput, held=held, want=held))
            # A worker's life (its crashes, which restart on a new host) has a stream of its
            # own, so one seed gives it the same crashes on every route: drawn from the
            # shared stream, they would move with the order in which a route draws its polls.
            self.churn_rng.append(random.Random(f"{config.seed}/churn/{i}"))
            self.regions[r].workers.append(i)
        for region in self.regions:  # LATEST polls between publications: a steady load
            region.base.background_per_s = len(region.workers) / config.watch.poll_interval_s
        n = len(self.workers)
        self.installed = {v.number: [INF] * n for v in config.versions}
        self.seen = {v.number: [INF] * n for v in config.versions}
        self.alive_at: dict[int, list[bool]] = {}
        self.held_at: dict[int, list[int]] = {}
        self.stamps: dict[int, float] = {}
        self.inter_region = {"full": 0.0, "delta": 0.0}
        self.puts = {"full": 0, "delta": 0}
        self.out = Outcome(config, links, names, self.stamps, self.alive_at, self.installed,
                           self.regions, self.counters, seen_s=self.seen,
                           held_at_commit=self.held_at,
                           down_s=[[] for _ in self.workers],
                           replaced_s=[[] for _ in self.workers])  # fmt: skip

    def _region(self, name: str) -> Region:
        c = self.cfg
        limit, w = c.read_limit_per_s, c.window_s
        base = Prefix(f"{name}/base", limit, w)
        if c.payload_prefixes == 1:  # today's layout: LATEST, manifests, payload in one prefix
            return Region(name, base, [base])
        payload = [Prefix(f"{name}/p{k}", limit, w) for k in range(c.payload_prefixes)]
        return Region(name, base, payload)

    # -- running ------------------------------------------------------------------------
    def run(self) -> Outcome:
        for w in self.workers:
            w.process = self.env.process(self._worker(w))
            if self.cfg.crash_per_hour > 0:
                self.env.process(self._churn(w))
        self.env.process(self._trainer())
        last = len(self.cfg.versions) - 1
        self.env.run(until=last * self.cfg.cadence_s + self.cfg.tail_s)
        self.out.end_s = self.env.now
        self.out.inter_region_bytes, self.out.put_requests = self.inter_region, self.puts
        return self.out

    def _upload_s(self, nbytes: float, copies: int) -> float:
        return nbytes * copies * 8 / (self.cfg.trainer_uplink_mbps * 1e6)

    def _trainer(self) -> Generator[simpy.Event, None, None]:
        c, env = self.cfg, self.env
        copies = 1 if c.route in ("relay", "replicate") else len(self.regions)
        for i, v in enumerate(c.versions):
            yield env.timeout(max(0.0, i * c.cadence_s - env.now))
            self.out.started_s[v.number] = env.now
            yield env.timeout(self._upload_s(v.stored_bytes, copies))
            self.stamps[v.number] = env.now
            self.alive_at[v.number] = [w.alive for w in self.workers]
            self.held_at[v.number] = [w.held for w in self.workers]
            objects = math.ceil(max(1, v.stored_bytes) / OBJECT_BYTES)
            self.puts[v.kind] += copies * (objects + 2)
            visible = env.now + COMMIT_REQUESTS * c.trainer_rtt_s
            targets = range(len(self.regions)) if copies > 1 else [0]
            for r in targets:
                self.env.process(self._announce(v.number, r, visible))
            self.inter_region[v.kind] += v.stored_bytes * (len(self.regions) - 1)
            for r in range(1, len(self.regions) if copies == 1 else 0):
                if c.route == "relay":
                    self.env.process(self._relay(v, r, visible))
                else:  # the provider replicates each object; the replica shows it after a lag
                    lag = c.replication_lag_s * self.rng.uniform(0.5, 1.5)
                    self.env.process(self._announce(v.number, r, visible + lag))

    def _relay(self, v: Version, region: int, visible_s: float):
        """Copy mode: the replica's relay sees the commit at its next poll, copies, commits."""
        c = self.cfg
        poll = c.relay_poll_s * self.rng.uniform(0.8, 1.2)
        copy_s = v.stored_bytes * 8 / (c.relay_mbps * 1e6)
        commit_s = 2 * c.trainer_rtt_s + COMMIT_REQUESTS * c.trainer_rtt_s  # read, list; commit
        yield self.env.timeout(visible_s - self.env.now + self.rng.uniform(0, poll))
        yield self.env.timeout(copy_s + commit_s)
        self.puts[v.kind] += math.ceil(max(1, v.stored_bytes) / OBJECT_BYTES) + 2
        yield from self._announce(v.number, region, self.env.now)

    # -- seeing a version ----------------------------------------------------------------
    def _residual_s(self, w: Worker) -> float:
        """Time from now to the worker's next poll at the server, in a stationary poll process:
        an inter-poll gap (a round trip, then the jittered wait) drawn length-biased, and a
        uniform point in it."""
        p, j = self.cfg.watch.poll_interval_s, self.cfg.watch.jitter_fraction
        lo, hi = w.rtt_s + p * (1 - j), w.rtt_s + p * (1 + j)
        gap = math.sqrt(lo * lo + self.rng.random() * (hi * hi - lo * lo))
        return self.rng.random() * gap

    def _announce(self, version: int, r: int, visible_s: float):
        """Every live worker of region ``r`` sees ``version`` at its first poll after it is
        visible; a refused poll retries, and one that fails polls again after the backoff."""
        env, region, c = self.env, self.regions[r], self.cfg
        ctr = self.counters[c.by_number(version).kind]
        yield env.timeout(max(0.0, visible_s - env.now))
        region.visible_s[version] = env.now
        heap = [(env.now + self._residual_s(self.workers[i]), 1, 0, i, self.workers[i].epoch)
                for i in region.workers if self.workers[i].alive]  # fmt: skip
        heapq.heapify(heap)
        while heap:
            t, attempt, failures, i, epoch = heapq.heappop(heap)
            yield env.timeout(max(0.0, t - env.now))
            w = self.workers[i]
            if w.epoch != epoch or not w.alive or w.want >= version:
                continue
            if region.base.admit_poll(env.now, self.rng):
                ctr.poll_gets += 1
                self.seen[version][i] = min(self.seen[version][i], env.now)
                self._see(w, version, env.now + w.rtt_s / 2)
                continue
            ctr.slowdowns += 1
            if attempt < self.retry.throttled_attempts:
                ctr.retries += 1
                nxt = env.now + w.rtt_s + self.retry.throttled_delay_s(attempt)
                heapq.heappush(heap, (nxt, attempt + 1, failures, i, epoch))
            else:
                ctr.poll_failures += 1
                wait = c.watch.failure_wait_s(c.watch.poll_interval_s, failures + 1, self.rng)
                heapq.heappush(heap, (env.now + w.rtt_s + wait, 1, failures + 1, i, epoch))

    def _see(self, w: Worker, version: int, at_s: float) -> None:
        if version <= w.want:
            return
        w.want, w.seen_at_s = version, at_s
        if w.wake is not None and not w.wake.triggered:
            w.wake.succeed()

    # -- a worker -------------------------------------------------------------------------
    def _worker(self, w: Worker):
        env = self.env
        while True:
            try:
                if w.want <= w.held:
                    w.wake = env.event()
                    yield w.wake
                yield env.timeout(max(0.0, w.seen_at_s - env.now))
                if self.cfg.start_jitter_s > 0:
                    yield env.timeout(self.rng.uniform(0, self.cfg.start_jitter_s))
                ctr = self.counters["full" if self.plan(w.held, w.want)[1] else "delta"]
                try:
                    yield from self._fetch_and_install(w, w.want, ctr)
                    w.failures = 0
                except CallFailed:
                    ctr.failed_fetches += 1
                    w.failures += 1
                    watch = self.cfg.watch
                    yield env.timeout(
                        watch.failure_wait_s(watch.retry_backoff_s, w.failures, self.rng)
                    )
            except simpy.Interrupt:
                yield from self._down(w)

    def _down(self, w: Worker):
        """Crashed: down for ``restart_s`` (interrupts meanwhile are ignored), then back,
        with its installed version or, as a replaced host, with nothing; it polls at start."""
        w.alive, w.epoch = False, w.epoch + 1
        self.out.down_s[w.index].append(self.env.now)
        replaced = self.churn_rng[w.index].random() < self.cfg.replace_share
        if replaced:
            self.out.replaced_s[w.index].append(self.env.now)
        yield self.env.timeout(self.cfg.restart_s)
        if replaced:
            w.held, w.manifests = 0, set()
        w.alive, w.want, w.failures = True, w.held, 0
        region = self.regions[w.region]
        newest = max(region.visible_s, default=0)
        self.counters["delta"].poll_gets += 1  # the poll at start
        self._see(w, newest, self.env.now + w.rtt_s)

    def _churn(self, w: Worker):
        env, rate_per_s = self.env, self.cfg.crash_per_hour / 3600.0
        horizon = (len(self.cfg.versions) - 1) * self.cfg.cadence_s + self.cfg.tail_s
        while True:
            yield env.timeout(self.churn_rng[w.index].expovariate(rate_per_s))
            if env.now >= horizon:
                return
            if w.alive and w.process is not None:
                w.process.interrupt()

    def plan(self, held: int, target: int) -> tuple[list[int], bool]:
        """Versions whose payload a fetch of ``target`` from ``held`` reads, and whether it
        starts from a keyframe (fetch/chain.py: a delta chain from what is held, else the
        newest keyframe and the deltas after it)."""
        keyframe = self.cfg.keyframe_of(target)
        start = held + 1 if held >= keyframe else keyframe
        return list(range(start, target + 1)), held < keyframe

    def _fetch_and_install(self, w: Worker, target: int, ctr: Counters):
        c, env = self.cfg, self.env
        versions, from_keyframe = self.plan(w.held, target)
        region = self.regions[w.region]
        for v in versions:  # Subscriber.missing(): a listing per version, then its manifest
            yield from self._call(w, region.base, ctr, listing=True)
            if v not in w.manifests:
                yield from self._call(w, region.base if c.route != "cdn" else None, ctr)
                w.manifests.add(v)
        sizes = [(v, c.by_number(v).stored_bytes) for v in versions]
        if c.payload_prefixes > 1:  # and each payload prefix the plan reads, listed at once
            ks = sorted({k for v, nbytes in sizes for k in self._prefixes_of(v, nbytes)})
            yield from self._list_at_once(w, [region.payload[k] for k in ks], ctr)
        if c.route == "cdn":
            yield from self._from_edge(w, sizes, ctr)
        else:
            yield from self._payload(w, region.payload, sizes, ctr)
        delta = not from_keyframe
        yield env.timeout(c.fetch.install_s(w.link, c.snapshot_bytes / 1e9, delta))
        for v in range(w.held + 1, target + 1):
            if v in self.installed and self.installed[v][w.index] == INF:
                self.installed[v][w.index] = env.now
        for v in versions:
            self.out.fetched[v] = self.out.fetched.get(v, 0) + 1
        w.held = target

    def _call(self, w: Worker, prefix: Prefix | None, ctr: Counters, listing: bool = False):
        """One request (a listing or a GET) in sequence: a round trip, retried when refused.
        ``prefix`` None: served by a CDN edge (no limit; the edge's round trip)."""
        if prefix is None:
            ctr.edge_requests += 1
            yield self.env.timeout(min(w.rtt_s, self.cfg.edge_rtt_ms / 1000))
            return
        attempt = 1
        while True:
            at = self.env.now + w.rtt_s / 2
            ok = prefix.book(at, at, 1) == 1
            yield self.env.timeout(w.rtt_s)
            if ok:
                if listing:
                    ctr.listing += 1
                else:
                    ctr.get += 1
                return
            attempt = yield from self._refused(attempt, 1, ctr)

    def _list_at_once(self, w: Worker, prefixes: list[Prefix], ctr: Counters):
        """A listing of each of ``prefixes``, all in one round trip; the refused ones again."""
        attempt = 1
        while prefixes:
            at = self.env.now + w.rtt_s / 2
            refused = [p for p in prefixes if p.book(at, at, 1) != 1]
            yield self.env.timeout(w.rtt_s)
            ctr.listing += len(prefixes) - len(refused)
            if refused:
                attempt = yield from self._refused(attempt, len(refused), ctr)
            prefixes = refused

    def _refused(self, attempt: int, n: int, ctr: Counters):
        """``n`` requests refused (503 SlowDown) at ``attempt``: wait as RetryPolicy says for
        a throttled request, or fail the call."""
        ctr.slowdowns += n
        if attempt >= self.retry.throttled_attempts:
            ctr.failed_calls += 1
            raise CallFailed
        ctr.retries += n
        yield self.env.timeout(self.retry.throttled_delay_s(attempt))
        return attempt + 1

    def _prefix_index(self, version: int, obj: int) -> int:
        """Which of a region's payload prefixes holds object ``obj`` of ``version``."""
        return self.deal.payload_prefix(version, obj) or 0

    def _prefixes_of(self, version: int, nbytes: int) -> set[int]:
        objects = min(math.ceil(max(1, nbytes) / OBJECT_BYTES), self.cfg.payload_prefixes)
        return {self._prefix_index(version, o) for o in range(objects)}

    def _part_prefix(self, sizes: list[tuple[int, int]]) -> Callable[[int], int]:
        """Part j of a fetch (its ``request_bytes`` ranges, the versions' payloads one after
        the other, each in its objects' order) -> the payload prefix it asks."""
        starts, size = [], self.cfg.request_bytes
        offset = 0
        for v, nbytes in sizes:
            starts.append((offset, v))
            offset += nbytes
        firsts = [a for a, _ in starts]

        def prefix(part: int) -> int:
            at = part * size
            i = max(0, bisect.bisect_right(firsts, at) - 1)
            start, v = starts[i]
            return self._prefix_index(v, (at - start) // OBJECT_BYTES)

        return prefix

    def _batches(self, total_bytes: int) -> Iterator[tuple[int, int, int]]:
        """(index of its first request, requests, bytes) per batch of the ranged GETs."""
        size, k = self.cfg.request_bytes, self.cfg.batch_requests
        requests = max(1, math.ceil(total_bytes / size))
        done = 0
        for first in range(0, requests, k):
            n = min(k, requests - first)
            nbytes = min(total_bytes - done, n * size)
            done += nbytes
            yield first, n, nbytes

    def _payload(
        self, w: Worker, prefixes: list[Prefix], sizes: list[tuple[int, int]], ctr: Counters
    ):
        """The payload's ranged GETs as the reader makes them: ``concurrency`` at once, then
        each time a part lands the next one, so GET j goes out when part j - concurrency
        is in. While ``concurrency`` parts cover a round trip the link never idles after
        the first byte (the planner's one payload round trip), whatever the batch size.
        Each part asks the prefix of the object it reads. Refused requests wait and ask
        again (the link idles meanwhile); bytes of a fetch that fails are counted as
        wasted."""
        env, rate, c = self.env, w.goodput_bytes_per_s, self.cfg
        total_bytes = sum(nbytes for _, nbytes in sizes)
        part_prefix = self._part_prefix(sizes)
        part_s = c.request_bytes / rate
        start = env.now
        base = link_free = start + w.rtt_s  # part m lands at base + (m + 1) * part_s

        def landed(m: int) -> float:
            return base + (m + 1) * part_s

        got_total = 0.0
        try:
            for first, n, nbytes in self._batches(total_bytes):
                lead = first - c.concurrency
                t_a = start if lead < 0 else landed(lead)
                t_b = start if lead + n - 1 < 0 else landed(lead + n - 1)
                yield env.timeout(max(0.0, t_a - env.now))
                asks = Counter(part_prefix(j) for j in range(first, first + n))
                pending, pending_bytes, attempt = n, nbytes, 1
                while pending:
                    t0 = env.now + w.rtt_s / 2
                    span = t_b - t_a if attempt == 1 else pending_bytes / rate
                    admitted = 0
                    for k, share in list(asks.items()):
                        took = prefixes[k].book(t0, t0 + span, share)
                        asks[k] -= took
                        admitted += took
                    got = pending_bytes * admitted / pending
                    link_free = max(link_free, env.now + w.rtt_s) + got / rate
                    ctr.get += admitted
                    got_total += got
                    pending, pending_bytes = pending - admitted, pending_bytes - got
                    asks = +asks  # drop the prefixes done
                    if pending:
                        yield env.timeout(w.rtt_s)  # the 503s come back
                        attempt = yield from self._refused(attempt, pending, ctr)
                base = max(base, link_free - (first + n) * part_s)  # delays move later parts
            yield env.timeout(max(0.0, link_free - env.now))
        except (CallFailed, simpy.Interrupt):
            ctr.wasted_bytes += got_total
            raise
        finally:
            ctr.bucket_bytes += got_total

    def _from_edge(self, w: Worker, sizes: list[tuple[int, int]], ctr: Counters):
        """The payload from the worker's edge: each version fills there once, from the
        bucket, starting at its first request; a byte reaches a worker no earlier than its
        edge holds it, and no faster than the worker's link."""
        c, env, region = self.cfg, self.env, self.regions[w.region]
        edge = w.index % c.cdn_edges
        rtt = min(w.rtt_s, c.edge_rtt_ms / 1000)
        fill_rate = c.edge_fill_mbps * 1e6 / 8
        t = env.now + rtt
        for v, nbytes in sizes:
            start = region.edges.get((edge, v))
            if start is None:
                start = region.edges[(edge, v)] = env.now + rtt / 2
                objects = math.ceil(max(1, nbytes) / OBJECT_BYTES)
                asks = Counter(self._prefix_index(v, o) for o in range(objects))
                for k, share in asks.items():
                    region.payload[k].book(start, start + nbytes / fill_rate, share)
                ctr.get += objects
                ctr.edge_fill_bytes += nbytes
            t = max(t + nbytes / w.goodput_bytes_per_s, start + nbytes / fill_rate + rtt / 2)
            ctr.edge_bytes += nbytes
            ctr.edge_requests += max(1, math.ceil(nbytes / c.request_bytes))
        yield env.timeout(max(0.0, t - env.now))
