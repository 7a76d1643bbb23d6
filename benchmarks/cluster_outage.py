"""The distributed store under faults: a volume server, then the filer, crash mid-download.

The store is a SeaweedFS cluster (:func:`wanrl_s3.testing.local_seaweed_cluster`:
a master, volume servers keeping two copies of every volume, a filer, an S3
gateway). Used by benchmarks/wan_fleet.py (``--store seaweed-cluster``, workers
behind emulated WAN links) and by the fault campaign (benchmarks/faults.py, kinds
``cluster:volume_kill`` and ``cluster:filer_kill``, workers on this host).

One cycle per component killed (``volume``: a volume server that holds a copy of
the version being downloaded; ``filer``): publish version v and, as soon as a
worker has seen it, kill the component (SIGKILL); publish v + 1 while it is down
(with replication a volume server's crash should not stop writes; without the
filer nothing can be written); keep it down ``outage_s``; start it again on its
data; publish v + 2; wait until every worker holds v + 2. Then check, and count
(each must stay 0):

- ``partial_installs``: a worker's model file that, at any moment it was
  replaced, was not a whole published version (it must parse, name its version,
  and hold tensors that were published as that version: files are looked at
  every 0.2 s, so each install is seen); a temporary file left in a worker's
  folder once the workers stopped;
- ``forged_installs``: a model file naming version v whose tensors are not the
  ones published as v;
- ``versions_lost``: a version whose manifest is committed that a clean pull
  cannot fetch bit-exact; LATEST not at the newest committed version; a publish
  that failed with the store whole (before the kill, or after the restart);
- ``stuck_workers``: a worker that does not hold v + 2 within ``stuck_bound_s``;
- ``failures_unreported``: a worker whose metrics (``wanrl_s3_worker_failures_total``)
  counted failures between the kill and the end of the cycle, but whose status,
  as ``wanrl-s3 status --json`` prints it then, shows no stretch of failures in
  that time;
- ``tracebacks``: a worker's log with a traceback, or a worker that did not exit 0
  when stopped (SIGTERM); counted for the last cycle.

Reported beside the counters: what each publish did, how many workers were mid-
download at the kill, the outage, how long the fleet took to hold v + 2, and the
failures each worker counted and showed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np

from wanrl_s3 import FailureSpan, SafetensorsFile, Subscriber, open_store, pull_to_file
from wanrl_s3.testing import SeaweedCluster

COUNTERS = ("partial_installs", "forged_installs", "versions_lost", "stuck_workers",
            "failures_unreported", "tracebacks")  # fmt: skip
KINDS = {"volume": "volume_kill", "filer": "filer_kill"}
MODEL_FILE = "model.safetensors"  # what `wanrl-s3 worker` keeps in --out-dir
VERSION_KEY = "wanrl_s3.version"  # docs/format.md, "Files written by pull"
LOOK_S = 0.2  # how often the model files are looked at
SEEN_BOUND_S = 60.0  # how long a version may take to be seen by some worker

#: Publish ``version`` with these tensors; None once committed, else why not.
Publish = Callable[[int, dict[str, np.ndarray]], str | None]


@dataclasses.dataclass(frozen=True)
class OutageWorker:
    """A running ``wanrl-s3 worker`` as the scenario sees it (the caller starts and stops it)."""

    worker_id: str
    out_dir: Path
    metrics_url: str  # http://ADDR:PORT/metrics (--metrics-port)
    log: Path  # its stderr


@dataclasses.dataclass
class CycleReport:
    kind: str  # volume_kill | filer_kill
    killed: str = ""  # the component's name in the cluster
    versions: dict[int, str] = dataclasses.field(default_factory=dict)  # "committed" or why not
    workers: int = 0
    downloading_at_kill: int = 0  # workers that had seen v and not installed it
    outage_s: float = 0.0  # from the kill until the component served again
    converged_s: float | None = None  # from the publish of v + 2 until every worker held it
    failures_counted: dict[str, int] = dataclasses.field(default_factory=dict)
    failures_shown: dict[str, int] = dataclasses.field(default_factory=dict)  # in the status
    failed: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (counter, what)
    notes: list[str] = dataclasses.field(default_factory=list)

    def fail(self, counter: str, what: str) -> None:
        self.failed.append((counter, what))

    @property
    def counters(self) -> dict[str, int]:
        found = Counter(counter for counter, _ in self.failed)
        return {k: found[k] for k in COUNTERS}

    def summary(self) -> str:
        """One line: what was killed, how the fleet fared."""
        versions = ", ".join(f"v{v} {why}" for v, why in self.versions.items())
        counted = sum(self.failures_counted.values())
        shown = sum(self.failures_shown.values())
        converged = "never" if self.converged_s is None else f"{self.converged_s:g} s"
        return (
            f"{self.kind}: {self.killed} killed with {self.downloading_at_kill} of "
            f"{self.workers} workers downloading, down {self.outage_s:g} s; {versions}; "
            f"workers counted {counted} "
            f"failures, their status shows {shown}; all at the newest after {converged}"
        )

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        out["counters"] = self.counters
        out["versions"] = {str(v): why for v, why in self.versions.items()}
        out["failed"] = [f"{counter}: {what}" for counter, what in self.failed]
        return out


# -- what a file holds ----------------------------------------------------------------------
def state_digest(items: Iterable[tuple[str, np.ndarray]]) -> str:
    """A digest of tensors by name, dtype, shape and bytes: equal means bit-exact."""
    h = hashlib.blake2b(digest_size=20)
    for name, arr in sorted(items, key=lambda kv: kv[0]):
        h.update(f"{name}|{arr.dtype.name}|{arr.shape}|".encode())
        h.update(np.ascontiguousarray(arr).view(np.uint8).tobytes())
    return h.hexdigest()


def file_version(path: Path) -> tuple[int | None, str]:
    """(the version a model file names, its tensors' digest); (None, why) if unreadable."""
    try:
        f = SafetensorsFile(path)
        return int(f.metadata[VERSION_KEY]), state_digest(f.items())
    except Exception as exc:  # any failure to read it back is what this looks for
        return None, f"unreadable: {type(exc).__name__}: {exc}"


class InstallWatch(threading.Thread):
    """Looks at every worker's model file each :data:`LOOK_S`: each file put in place
    must be a whole version published as what it names. Keeps what each holds."""

    def __init__(self, workers: list[OutageWorker], published: dict[int, str]) -> None:
        super().__init__(name="install-watch", daemon=True)
        self.workers, self.published = workers, published
        self.held: dict[str, int] = {}
        self.findings: list[tuple[str, str]] = []  # (counter, what), taken by the cycles
        self._seen: dict[str, tuple[int, int, int]] = {}
        self._lock = threading.Lock()
        self._halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self._halt.wait(LOOK_S):
                for w in self.workers:
                    self._look(w)
        except BaseException as exc:  # seen by the caller: a dead watch must not pass as clean
            self.error = exc

    def _look(self, w: OutageWorker) -> None:
        path = w.out_dir / MODEL_FILE
        try:
            st = path.stat()
        except FileNotFoundError:
            return
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if self._seen.get(w.worker_id) == key:
            return
        self._seen[w.worker_id] = key
        version, digest = file_version(path)
        with self._lock:
            if version is None:
                self.findings.append(("partial_installs", f"{w.worker_id}: {digest}"))
            elif self.published.get(version) != digest:
                self.findings.append(
                    ("forged_installs", f"{w.worker_id}: v{version} holds other tensors")
                )
            else:
                self.held[w.worker_id] = version

    def take(self) -> list[tuple[str, str]]:
        with self._lock:
            found, self.findings = self.findings, []
        return found

    def holding(self, worker_id: str) -> int:
        with self._lock:
            return self.held.get(worker_id, 0)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


# -- a worker's metrics -----------------------------------------------------------------------
def scrape(url: str) -> dict[str, float]:
    """A worker's metrics: failures (all kinds), installed and latest version; {} if it
    does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    out = {"failures": 0.0}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("wanrl_s3_worker_failures_total{"):
            out["failures"] += float(value)
        elif name in ("wanrl_s3_worker_installed_version", "wanrl_s3_worker_latest_version"):
            out[name.removeprefix("wanrl_s3_worker_")] = float(value)
    return out


def series(
    first: Callable[[], dict[str, np.ndarray]],
    after: Callable[[dict[str, np.ndarray], int], dict[str, np.ndarray]],
) -> Callable[[int], dict[str, np.ndarray]]:
    """Versions asked for in order: ``first()``, then each ``after(the one before, v)``."""
    held: list[dict[str, np.ndarray]] = []

    def state(version: int) -> dict[str, np.ndarray]:
        held[:] = [after(held[0], version) if held else first()]
        return held[0]

    return state


# -- the scenario ---------------------------------------------------------------------------
class ClusterOutages:
    """Kill-and-restart cycles on a cluster while ``workers`` follow ``url`` (see the module
    docstring). ``states(v)``: the tensors of version v; ``publish``: the trainer's way."""

    def __init__(
        self,
        cluster: SeaweedCluster,
        url: str,
        workers: list[OutageWorker],
        publish: Publish,
        states: Callable[[int], dict[str, np.ndarray]],
        *,
        outage_s: float = 10.0,
        stuck_bound_s: float = 180.0,
        say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
    ) -> None:
        self.cluster, self.url, self.workers = cluster, url, workers
        self.publish, self.states = publish, states
        self.outage_s, self.stuck_bound_s, self.say = outage_s, stuck_bound_s, say
        self.store = open_store(url, endpoint_url=cluster.endpoint_url)
        self.published: dict[int, str] = {}  # version -> digest of what was published
        self.version = 0
        self.watch = InstallWatch(workers, self.published)

    def run(self, components: Iterable[str], stop_workers: Callable[[], dict[str, int | None]]):
        """One cycle per component (``volume``, ``filer``), then stop the workers (the
        caller's way: their exit codes by worker id) and check what they left."""
        reports: list[CycleReport] = []
        self._wait_metrics()
        self.watch.start()
        try:
            for component in components:
                reports.append(self.cycle(component))
        finally:
            codes = stop_workers()
            self.watch.stop()
        last = reports[-1] if reports else CycleReport("none")
        self._after_stop(last, codes)
        if self.watch.error is not None:
            raise RuntimeError(f"the install watch died: {self.watch.error!r}")
        return reports

    def cycle(self, component: str) -> CycleReport:
        report = CycleReport(KINDS[component], workers=len(self.workers))
        before = {w.worker_id: scrape(w.metrics_url).get("failures") for w in self.workers}
        first = self._publish(report, must_commit=True)
        self._wait_seen(first, report)
        report.killed = self._victim(component, first)
        killed_at = time.time()
        self.cluster.kill(report.killed)
        self.say(f"{report.kind}: killed {report.killed} with {report.downloading_at_kill} "
                 f"of {report.workers} workers downloading v{first}")  # fmt: skip
        self._publish(report, must_commit=False)
        time.sleep(max(0.0, killed_at + self.outage_s - time.time()))
        self.cluster.start(report.killed)
        report.outage_s = round(time.time() - killed_at, 2)
        self.say(f"{report.kind}: {report.killed} serves again after {report.outage_s} s")
        last = self._publish(report, must_commit=True)
        self._converge(last, report)
        self._check_reported(report, before, killed_at, time.time())
        self._check_versions(report)
        for counter, what in self.watch.take():
            report.fail(counter, what)
        return report

    # -- steps
    def _wait_metrics(self) -> None:
        """Until every worker serves its metrics: a cycle counts failures from them."""
        deadline = time.monotonic() + SEEN_BOUND_S
        silent = list(self.workers)
        while silent and time.monotonic() < deadline:
            silent = [w for w in silent if not scrape(w.metrics_url)]
            time.sleep(0.1 if silent else 0)
        if silent:
            raise RuntimeError(
                f"{', '.join(w.worker_id for w in silent)} served no metrics within "
                f"{SEEN_BOUND_S:g} s"
            )

    def _publish(self, report: CycleReport, *, must_commit: bool) -> int:
        self.version += 1
        v, state = self.version, self.states(self.version)
        self.published[v] = state_digest(state.items())
        why = self.publish(v, state)
        report.versions[v] = why or "committed"
        self.say(f"{report.kind}: v{v} {report.versions[v]}")
        if why and must_commit:
            report.fail("versions_lost", f"v{v} did not commit with the store whole: {why}")
        return v

    def _wait_seen(self, version: int, report: CycleReport) -> None:
        """Until some worker has seen ``version`` in LATEST (it is downloading it)."""
        deadline = time.monotonic() + SEEN_BOUND_S
        while time.monotonic() < deadline:
            found = [scrape(w.metrics_url) for w in self.workers]
            seen = [m for m in found if m.get("latest_version", 0) >= version]
            if seen:
                report.downloading_at_kill = sum(
                    m.get("installed_version", -1) < version for m in seen
                )
                return
            time.sleep(0.05)
        report.notes.append(f"no worker saw v{version} within {SEEN_BOUND_S:g} s: killed anyway")

    def _victim(self, component: str, version: int) -> str:
        """The filer; or a volume server that holds a copy of ``version``'s payload."""
        if component != "volume":
            return component
        bucket, _, prefix = self.url.removeprefix("s3://").partition("/")
        keys = [i.key for i in self.store.list(f"v/{version:012d}") if i.key.endswith(".bin")]
        holders = self.cluster.holders(bucket, f"{prefix}/{keys[0]}") if keys else set()
        return sorted(holders)[0] if holders else self.cluster.volume_names[0]

    def _converge(self, version: int, report: CycleReport) -> None:
        start = time.monotonic()
        behind = list(self.workers)
        while behind and time.monotonic() - start < self.stuck_bound_s:
            time.sleep(LOOK_S)
            behind = [w for w in behind if self.watch.holding(w.worker_id) < version]
        if not behind:
            report.converged_s = round(time.monotonic() - start, 2)
        for w in behind:
            tail = w.log.read_text(errors="replace").strip().splitlines()[-1:]
            held = self.watch.holding(w.worker_id)
            report.fail(
                "stuck_workers",
                f"{w.worker_id} holds v{held}, not v{version}, {self.stuck_bound_s:g} s on: {tail}",
            )

    def _check_reported(
        self, report: CycleReport, before: dict[str, float | None], from_s: float, to_s: float
    ) -> None:
        """Each worker whose metrics counted failures since the kill must show a stretch of
        failures in that time in ``wanrl-s3 status``; LATEST must be the newest commit."""
        status = self._status()
        shown = {w["worker_id"]: w.get("failures") or [] for w in status.get("workers", [])}
        for w in self.workers:
            after = scrape(w.metrics_url).get("failures")
            if after is None or before[w.worker_id] is None:
                report.notes.append(f"{w.worker_id}: no metrics to count its failures by")
                continue
            counted = int(after - (before[w.worker_id] or 0))
            report.failures_counted[w.worker_id] = counted
            spans = [  # failures told in this cycle: a stretch the previous cycle's failures
                span  # opened may end (at an install) just after this kill, so not overlaps()
                for span in map(FailureSpan.from_dict, shown.get(w.worker_id, []))
                if span.first_at_s <= to_s + 1 and span.last_at_s >= from_s - 1
            ]
            report.failures_shown[w.worker_id] = sum(span.count for span in spans)
            if report.failures_shown[w.worker_id] != counted:  # not a finding: say what
                report.notes.append(f"{w.worker_id} counted {counted}, shows " + "; ".join(
                    f"{s.count} from {s.first_at_s - from_s:+.1f} s to "
                    f"{s.last_at_s - from_s:+.1f} s, ended "
                    f"{'-' if s.ended_at_s is None else f'{s.ended_at_s - from_s:+.1f} s'}: "
                    f"{s.message[:100]}" for s in spans))  # fmt: skip
            if counted and not spans:
                report.fail("failures_unreported",
                            f"{w.worker_id} counted {counted} failures from the kill on; its "
                            "status shows none")  # fmt: skip
        newest = max((v for v, why in report.versions.items() if why == "committed"), default=None)
        if status.get("latest") != newest:
            report.fail("versions_lost", f"LATEST is v{status.get('latest')}, not v{newest}")

    def _status(self) -> dict:
        """``wanrl-s3 status --json``, the command an operator runs (its entry point, in
        this process: starting an interpreter costs seconds here)."""
        argv = ["status", "--store", self.url, "--endpoint-url", self.cluster.endpoint_url,
                "--json", "--no-record"]  # fmt: skip
        (entry,) = entry_points(group="console_scripts", name="wanrl-s3")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = entry.load()(argv)
        if code != 0:
            raise RuntimeError(f"wanrl-s3 status exited {code}: {err.getvalue()[-500:]}")
        return dict(json.loads(out.getvalue()))

    def _check_versions(self, report: CycleReport) -> None:
        """Every version of the cycle that is committed pulls bit-exact; one said committed is."""
        with Subscriber(self.store) as sub, tempfile.TemporaryDirectory() as tmp:
            for v, why in report.versions.items():
                if not self.store.exists(f"v/{v:012d}/manifest.json"):
                    if why == "committed":
                        report.fail("versions_lost", f"v{v} was committed; its manifest is gone")
                    continue
                out = Path(tmp) / f"v{v}.safetensors"
                try:
                    pull_to_file(sub, out, v)
                except Exception as exc:  # the finding: a committed version that cannot be read
                    report.fail("versions_lost", f"v{v}: a clean pull failed: {exc}")
                    continue
                got, digest = file_version(out)
                if got != v or digest != self.published[v]:
                    report.fail("forged_installs", f"a clean pull of v{v} gave other tensors")

    def _after_stop(self, report: CycleReport, codes: dict[str, int | None]) -> None:
        for w in self.workers:
            left = [
                p.name for p in w.out_dir.rglob("*") if ".tmp-" in p.name or p.suffix == ".lock"
            ]
            if left:
                report.fail("partial_installs", f"{w.worker_id} left {left[:3]}")
            log = w.log.read_text(errors="replace") if w.log.exists() else ""
            if "Traceback" in log or codes.get(w.worker_id) != 0:
                report.fail("tracebacks", f"{w.worker_id} exited {codes.get(w.worker_id)}; "
                                          f"log: {log.strip().splitlines()[-1:]}")  # fmt: skip
