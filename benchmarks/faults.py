"""The fault campaign: the CLI against SeaweedFS under injected faults, kills, races,
tampering, full disks, oversized objects and fuzzed arguments, every outcome checked.

```
.venv/bin/python benchmarks/faults.py --seed 14            # the whole campaign
.venv/bin/python benchmarks/faults.py --seed 14 --quick    # its fast part (make test runs it)
.venv/bin/python benchmarks/faults.py --seed 14 --json     # the summary as JSON
.venv/bin/python benchmarks/faults.py --store moto         # every part on moto
.venv/bin/python benchmarks/faults.py --oversize-mib 256   # smaller oversized objects
.venv/bin/python benchmarks/faults.py --parts cluster_outages --cluster-ns-prefix NAME
                                   # part 9 alone, its cluster spread over namespaces (root)
```

Everything goes through the real command line: in this process through the
``wanrl-s3`` console script's entry point (``main(argv)``, its output captured),
or, where a process must be killed, in a child forked from this one that runs
the same ``main`` (a fork starts in milliseconds; ``python -m wanrl_s3.cli``
spends seconds importing here). Faults come from :class:`wanrl_s3.testing.FaultProxy`
in front of the store; tampering edits the bucket directly.

The store is a SeaweedFS server (``weed mini``, :func:`wanrl_s3.testing.local_s3`)
started for the run. One part runs on moto instead, because it needs what a real
server cannot give: ``multipart_faults`` flips bits inside multipart parts to show
that the store's own upload confirmation (docs/security.md) keeps a damaged part
out of a committed version. SeaweedFS, like AWS S3, validates the
CRC32C each part carries and refuses the damaged part itself (BadDigest, then a
resend), so the confirmation would never be reached; moto validates no checksum and
stores the damaged bytes. ``--store moto`` runs every part on moto.

After each case it checks and counts, per kind (each must stay 0):

- ``partial_installs``: an output file that is neither absent (or unchanged) nor a
  whole published version, or a temporary file left by a command that exited;
- ``forged_installs``: installed tensors that this run never published for the
  version the file names (another run's, a replayed version, edited bytes);
- ``versions_lost``: a version whose publish exited 0, or whose manifest is
  committed, that a clean pull cannot fetch; LATEST not serving a version whose
  publish exited 0; a store where a fault-free publish no longer works;
- ``stuck_workers``: a worker that does not install the newest version within a
  bound once faults stop;
- ``tracebacks``: a traceback, "internal error", an exit code outside 0..7, or
  more than one line on stderr from the CLI;
- ``freezes_unseen``: a verifying worker that holds the version an expired signed
  LATEST names and does not show the freeze in its status (or keeps showing it
  once the next version installed);
- ``collections_blocked``: ``gc`` that fails or collects nothing, or ``inspect`` that
  lists nothing, because of one manifest they cannot read;
- ``bad_input_accepted``: a local file whose safetensors header breaks the format,
  a store URL with a query or fragment, or an out-of-range ``--version``, that
  ``publish`` took (or that changed the store);
- ``wrong_exits``: a defined failure with another exit code than its class's
  (``wanrl_s3/errors.py``): bad input not 2, a truncated object not 3 on every
  backend, a worker that cannot stage not 2, a racing publisher given no base 2.
- ``relayed_unverified``: a replica that, after ``relay --once`` over a tampered
  primary (a payload flipped, replaced or truncated, a manifest edited, another
  run's version planted), serves a LATEST that a clean pull refuses, or a
  version the relay should have refused; a relay that exits 0 over damage it
  could see;
- ``replicas_unhealed``: a replica that does not serve the primary's newest
  version, manifest and LATEST byte for byte, one relay pass after the primary
  was repaired;
- ``untrusted_bases``: a signing publisher that built a delta on a newest version
  signed by a key its readers do not trust (a bucket writer's, a revoked one);
- ``planted_installs``: another run's genuine version (same key), planted with its
  LATEST in this run's prefix, installed by a verifying worker or returned by
  ``pull latest --verify-key --run``;
- ``failures_unreported``: a worker whose metrics counted failures while a
  component of a SeaweedFS cluster was down, whose ``wanrl-s3 status`` shows no
  stretch of failures in that time (part 9, benchmarks/cluster_outage.py, which
  also counts its partial and forged installs, lost versions and stuck workers
  under the counters above);
- ``unbounded_reads``: a CLI child (``pull``, ``worker``, ``status``) facing a
  LATEST, manifest or status object of ``--oversize-mib`` whose peak memory grew
  by more than that reader's limit (docs/format.md) plus 12 MiB over the same
  command's before the object grew (figures under ``oversized_memory``).

Multipart uploads get their own class (``multipart_flip``): bits flipped inside
parts by publishers whose first object is multipart, so that no plain upload
has shown them what the service's ETags are.

Part 9 runs on a SeaweedFS cluster of its own (a master, three volume servers
keeping two copies of every volume, a filer, the S3 gateway): on 127.0.0.1, or
with ``--cluster-ns-prefix`` (root and iproute2) on three namespaced machines of a
store LAN, as benchmarks/wan_fleet.py places it. ``--parts`` runs the parts named
(the methods of :class:`Campaign` in ``_run``), in their order.

Retries are the repeated requests the proxy saw (same method, target, range and
conditions): the store's retry layer re-sends a request after each transient failure.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import hashlib
import io
import itertools
import json
import logging
import multiprocessing
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import blake3
import boto3
import numpy as np

from wanrl_s3 import PublishConfig, Publisher, SafetensorsFile, Signer, open_store, write_file
from wanrl_s3.testing import (
    CREDENTIALS,
    Fault,
    FaultProxy,
    Rule,
    SeaweedCluster,
    free_port,
    local_azure,
    local_gcs,
    local_moto,
    local_s3,
    local_seaweed_cluster,
    make_azure_container,
    make_bucket,
    make_gcs_bucket,
    worker_command,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster_outage import (
    ClusterOutages,
    OutageWorker,
    Publish,
    series,
)  # benchmarks/ is on sys.path
from wan_fleet_outage import regional_store

COUNTERS = (
    "partial_installs", "forged_installs", "versions_lost", "stuck_workers", "tracebacks",
    "freezes_unseen", "collections_blocked", "bad_input_accepted", "wrong_exits",
    "failures_unreported",
    "relayed_unverified", "replicas_unhealed", "untrusted_bases", "planted_installs",
    "unbounded_reads",
)  # fmt: skip
VERSION_KEY = "wanrl_s3.version"  # docs/format.md, "Files written by pull"
MODEL_FILE = "model.safetensors"  # what `wanrl-s3 worker` keeps in --out-dir
STUCK_BOUND_S = 30.0
EXPIRY_S = 3.0  # a signed LATEST's lifetime in the expiry_held case
# What a reader accepts (docs/format.md, "Reading JSON from a store"), and the slack a
# child's peak memory may grow by beyond it over the same command on a normal object.
JSON_LIMITS = {"latest": 64 * 1024, "manifest": 64 * 2**20, "status": 4 * 2**20}
MEMORY_SLACK_BYTES = 12 * 2**20  # measured noise between two runs of one command: +-4 MiB
WORKER_EDITS = ("latest_far_ahead", "deep_json", "latest_edited", "latest_rollback")
LOGGERS = ("worker", "relay")  # commands that log as they go: "<time> wanrl-s3 worker: ..."


@functools.cache
def cli_main() -> Callable[[list[str]], int]:
    """The ``wanrl-s3`` console script's entry point: the command line users run."""
    (entry,) = entry_points(group="console_scripts", name="wanrl-s3")
    return entry.load()  # type: ignore[no-any-return]


# -- sizes --------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Plan:
    """How many cases of each kind; ``quick`` is the part `make test` runs."""

    cycles_per_fault: int = 20
    publisher_kills: int = 50
    worker_kills: int = 50
    races: int = 20
    tamperings: int = 20
    worker_tamperings: int = 5
    worker_tamper_edits: int = 4
    both_signing_modes: bool = True  # False: each tampering kind once, signed or not by the seed
    full_disks: int = 20
    fuzz_examples: int = 300
    fuzz_worker_examples: int = 20
    hostile_rounds: int = 5  # each worker-side hostile case, this many times
    estimate_fuzz: int = 300  # mutated fleet files
    clouds: bool = True  # truncated objects on gs:// and az:// too (their emulators)
    cluster_cycles: int = 3  # each: a volume server's crash, then the filer's (part 9)
    cluster_outage_s: float = 10.0  # how long each stays down
    cluster_ns_prefix: str | None = None  # part 9's cluster in namespaces so named (root)
    relay_tamperings: int = 4  # per kind and signing mode
    untrusted_bases: int = 4  # per kind of untrusted key
    cross_run_plants: int = 4
    multipart_cycles: int = 20
    oversize_mib: int = 1024  # LATEST, manifest and status objects this large
    oversize_targets: tuple[str, ...] = ("latest", "worker_latest", "manifest", "status")

    @classmethod
    def quick(cls) -> Plan:
        return cls(
            cycles_per_fault=1, publisher_kills=2, worker_kills=1, races=2, tamperings=1,
            worker_tamperings=1, worker_tamper_edits=2, both_signing_modes=False,
            full_disks=2, fuzz_examples=40, fuzz_worker_examples=3, hostile_rounds=1,
            estimate_fuzz=20, clouds=False, relay_tamperings=1, untrusted_bases=1,
            cross_run_plants=1, cluster_cycles=1, cluster_outage_s=4.0, multipart_cycles=1,
            oversize_mib=32, oversize_targets=("latest", "status"),
        )  # fmt: skip


@dataclasses.dataclass
class KindStats:
    count: int = 0
    retries: int = 0
    faults: int = 0
    exits: Counter[int] = dataclasses.field(default_factory=Counter)
    partial_installs: int = 0
    forged_installs: int = 0
    versions_lost: int = 0
    stuck_workers: int = 0
    tracebacks: int = 0
    freezes_unseen: int = 0
    collections_blocked: int = 0
    bad_input_accepted: int = 0
    wrong_exits: int = 0
    failures_unreported: int = 0
    relayed_unverified: int = 0
    replicas_unhealed: int = 0
    untrusted_bases: int = 0
    planted_installs: int = 0
    unbounded_reads: int = 0


@dataclasses.dataclass(frozen=True)
class Done:
    code: int
    out: str
    err: str


# -- models ---------------------------------------------------------------------------
def make_model(rng: np.random.Generator, total_bytes: int) -> dict[str, np.ndarray]:
    """A few tensors of mixed dtypes adding up to about ``total_bytes``."""
    n = max(1, total_bytes // 4 // 4)
    return {
        "layers.0.w": rng.standard_normal(n).astype(np.float32),
        "layers.1.w": rng.standard_normal((n // 64, 64)).astype(np.float32),
        "layers.2.h": rng.standard_normal(n).astype(np.float16),
        "embed": rng.integers(-100, 100, (n // 32, 32), dtype=np.int32),
        "norm": np.ones(16, np.float32),
    }


def nudge(rng: np.random.Generator, model: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The next version: a few values of a few tensors move (a sparse delta)."""
    out = {k: v.copy() for k, v in model.items()}
    for name in rng.choice(sorted(out), size=2, replace=False):
        flat = out[name].reshape(-1)
        idx = rng.integers(0, flat.size, max(1, flat.size // 100))
        flat[idx] = flat[idx] + flat.dtype.type(1)
    return out


def tensors_digest(tensors: Iterator[tuple[str, np.ndarray]] | dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    items = tensors.items() if isinstance(tensors, dict) else tensors
    for name, arr in sorted(items, key=lambda kv: kv[0]):
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


def file_state(path: Path) -> tuple[str, int | None, str] | None:
    """(file bytes digest, version it names, tensors digest) or None if absent.

    An unreadable file is ("<bytes digest>", None, "unreadable").
    """
    if not path.exists():
        return None
    raw = hashlib.sha256(path.read_bytes()).hexdigest()
    try:
        f = SafetensorsFile(path)
        version = int(f.metadata[VERSION_KEY])
        return raw, version, tensors_digest(f.items())
    except Exception:  # any failure to read it back is what we are looking for
        return raw, None, "unreadable"


# -- processes ------------------------------------------------------------------------
# Children start from multiprocessing's fork server: a clean interpreter with the CLI
# already imported, so a child starts in milliseconds (``python -m wanrl_s3.cli`` spends
# seconds importing here) and inherits no threads or thread pools from this process.
_CTX = multiprocessing.get_context("forkserver")
_CTX.set_forkserver_preload(["numpy", "boto3", "wanrl_s3.cli.app", "wanrl_s3.cli.publish",
                             "wanrl_s3.cli.pull", "wanrl_s3.cli.worker"])  # fmt: skip


def _child_main(argv: list[str], err_path: str) -> None:
    """In the child: ``wanrl-s3 ARGV`` with stderr to a file; exits with its code."""
    code = 1
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
        os.dup2(os.open(err_path, os.O_WRONLY | os.O_TRUNC), 2)
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        code = cli_main()(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # a traceback here is a finding: show it
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
            peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
            Path(err_path + ".rss").write_text(str(peak_kib * 1024))
        os._exit(code)


@dataclasses.dataclass
class Child:
    """A process running the CLI's ``main``; its stderr in a file."""

    proc: Any
    err_path: Path

    @property
    def pid(self) -> int:
        return int(self.proc.pid)

    def poll(self) -> int | None:
        code = self.proc.exitcode
        return None if code is None else (128 - code if code < 0 else code)

    def wait(self, timeout_s: float) -> int | None:
        self.proc.join(timeout_s)
        return self.poll()

    def stop(self, sig: int = signal.SIGKILL, timeout_s: float = 30.0) -> int:
        """Send ``sig`` (if still running) and reap; SIGKILL if it outlives ``timeout_s``."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)
        code = self.wait(timeout_s)
        if code is None:
            self.proc.kill()
            code = self.wait(timeout_s)
        return 137 if code is None else code

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace") if self.err_path.exists() else ""

    def peak_rss_bytes(self) -> int | None:
        """The child's peak resident memory, as it wrote it on exit (None if it was killed)."""
        path = self.err_path.with_name(self.err_path.name + ".rss")
        return int(path.read_text()) if path.exists() else None


def fork_cli(argv: list[str], log_dir: Path) -> Child:
    """Start ``wanrl-s3 ARGV`` in a child process (stdout discarded, stderr to a file)."""
    fd, name = tempfile.mkstemp(prefix="stderr-", dir=log_dir)
    os.close(fd)
    proc = _CTX.Process(target=_child_main, args=(argv, name), daemon=True)
    proc.start()
    return Child(proc, Path(name))


def output_problem(code: int, err: str, *, worker: bool = False) -> str | None:
    """Why this CLI outcome breaks the one-line-error promise, or None."""
    if "Traceback" in err or "internal error" in err:
        return "traceback or internal error"
    if not 0 <= code <= 7:
        return f"exit code {code}"
    lines = err.strip().split("\n") if err.strip() else []  # what a terminal shows as lines
    if worker:  # a worker (or the relay) logs; only its final error must be one line
        lines = [ln for ln in lines if not any(f" wanrl-s3 {c}: " in ln for c in LOGGERS)]
    if len(lines) > 1:
        return f"{len(lines)} lines on stderr"
    return None


# -- the campaign ------------------------------------------------------------------------
class Campaign:
    """The campaign's parts (its methods in ``PARTS``) on the store at ``endpoint``.

    ``unchecked_endpoint``: a store that validates no upload checksum (moto), for the
    part that needs one (``multipart_faults``); None runs that part on ``endpoint`` too.
    """

    def __init__(
        self, endpoint: str, workdir: Path, seed: int, plan: Plan,
        unchecked_endpoint: str | None = None,
    ) -> None:  # fmt: skip
        self.endpoint, self.workdir, self.seed, self.plan = endpoint, workdir, seed, plan
        self.unchecked_endpoint = unchecked_endpoint
        self.rng = random.Random(seed)
        self.nprng = np.random.default_rng(seed)
        self.proxy = FaultProxy(endpoint, seed=seed, trickle_max_s=0.3)
        self.slow = FaultProxy(
            endpoint, seed=seed, trickle_bytes=64 * 1024, trickle_delay_s=0.02, trickle_max_s=3.0
        )
        self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        self.main = cli_main()
        self.stats: dict[str, KindStats] = {}
        self.findings: list[str] = []
        self.notes: list[str] = []
        self.crashed: list[str] = []
        self.published: dict[tuple[str, int], set[str]] = {}  # (url, version) -> tensors digests
        self.memory: dict[str, dict[str, Any]] = {}  # oversized target -> peak memory figures
        self.kind = "setup"
        self.logs = self.path("logs/x").parent
        self.logs.mkdir(exist_ok=True)
        self.keys = self._keygen()
        self._other_run: str | None = None  # another run under the same key (other_run)

    # -- bookkeeping
    def stat(self, kind: str | None = None) -> KindStats:
        return self.stats.setdefault(kind or self.kind, KindStats())

    def fail(self, counter: str, what: str) -> None:
        setattr(self.stat(), counter, getattr(self.stat(), counter) + 1)
        if len(self.findings) < 200:
            self.findings.append(f"[{self.kind}] {counter}: {what}")

    def new_store(self, tag: str) -> str:
        return f"s3://{make_bucket(self.endpoint)}/{tag}"

    @contextlib.contextmanager
    def on_store(self, endpoint: str | None) -> Iterator[None]:
        """Every bucket, command and proxied request of the block on ``endpoint`` (None:
        the campaign's store), through a fault proxy of its own."""
        if endpoint is None or endpoint == self.endpoint:
            yield
            return
        saved = self.endpoint, self.proxy, self.s3
        with FaultProxy(endpoint, seed=self.seed, trickle_max_s=0.3) as proxy:
            self.endpoint, self.proxy = endpoint, proxy
            self.s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
            try:
                yield
            finally:
                self.endpoint, self.proxy, self.s3 = saved

    def path(self, name: str) -> Path:
        p = self.workdir / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    # -- the command line
    def cli(self, *argv: str, proxy: bool = False, raw: bool = False) -> Done:
        """``wanrl-s3 ARGV`` in this process, against the store (or through the proxy)."""
        args = [*argv]
        if not raw and args[0] in ("publish", "pull", "inspect", "gc", "status"):
            args += ["--endpoint-url", self.proxy.url if proxy else self.endpoint]
        out, err = io.StringIO(), io.StringIO()
        handlers = list(logging.getLogger().handlers)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = self.main(args)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
        logging.getLogger().handlers[:] = handlers  # a command's basicConfig must not leak
        done = Done(code, out.getvalue(), err.getvalue())
        self.check_output(args, done)
        return done

    def check_output(self, argv: list[str], done: Done, *, worker: bool = False) -> None:
        self.stat().exits[done.code] += 1
        problem = output_problem(done.code, done.err, worker=worker or argv[0] in LOGGERS)
        if problem:
            self.fail("tracebacks", f"{problem}: wanrl-s3 {' '.join(argv)!r}: {done.err[-600:]!r}")

    def _keygen(self) -> tuple[str, str]:
        base = self.path("keys/trainer")
        if not base.with_suffix(".pem").exists():
            self.cli("keygen", "--out", str(base))
        return f"{base}.pem", f"{base}.pub.pem"

    def sign_args(self, signed: bool, *, publish: bool) -> list[str]:
        if not signed:
            return []
        return ["--signing-key", self.keys[0]] if publish else ["--verify-key", self.keys[1]]

    # -- publishing and checking
    def write_model(self, url: str, version: int, model: dict[str, np.ndarray]) -> Path:
        src = self.path(f"src/{abs(hash(url))}-{version}-{self.rng.getrandbits(32)}.safetensors")
        write_file(src, model)
        self.published.setdefault((url, version), set()).add(tensors_digest(model))
        return src

    def publish(self, url: str, version: int, src: Path, *extra: str, proxy: bool = False) -> Done:
        return self.cli("publish", str(src), "--store", url, "--version", str(version), *extra,
                        proxy=proxy)  # fmt: skip

    def check_install(self, url: str, path: Path, before: Any, done_code: int | None) -> None:
        """Is ``path`` absent, unchanged, or a whole version this run published?"""
        leftovers = list(path.parent.glob(f".{path.name}.tmp-*"))
        if leftovers and done_code is not None:
            self.fail("partial_installs", f"temporary file left: {leftovers[0].name}")
        after = file_state(path)
        if after is None:
            if before is not None:
                self.fail("partial_installs", f"{path.name} vanished")
            return
        if before is not None and after[0] == before[0]:
            return
        _, version, digest = after
        if version is None:
            self.fail("partial_installs", f"{path.name} is not a whole version ({digest})")
        elif digest not in self.published.get((url, version), set()):
            self.fail("forged_installs", f"{path.name} names v{version} of {url} with other bytes")

    def manifest_key(self, url: str, version: int) -> tuple[str, str]:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        return bucket, f"{prefix}/v/{version:012d}/manifest.json"

    def committed(self, url: str, version: int) -> bool:
        bucket, key = self.manifest_key(url, version)
        try:
            self.s3.head_object(Bucket=bucket, Key=key)
            return True
        except self.s3.exceptions.ClientError:
            return False

    def clean_pull(self, url: str, version: int | str, *extra: str) -> int | None:
        """Pull without faults; the version it installed (checked), or None if it failed."""
        out = self.path(f"clean/{self.rng.getrandbits(48):x}.safetensors")
        done = self.cli(
            "pull", "--store", url, "--version", str(version), "--out", str(out), *extra
        )
        self.check_install(url, out, None, done.code)
        state = file_state(out)
        out.unlink(missing_ok=True)
        return state[1] if done.code == 0 and state else None

    def expect_fetchable(self, url: str, version: int, why: str, *extra: str) -> None:
        if self.clean_pull(url, version, *extra) != version:
            self.fail("versions_lost", f"v{version} of {url} ({why}) cannot be pulled")

    def expect_served(self, url: str, at_least: int, *extra: str) -> int | None:
        got = self.clean_pull(url, "latest", *extra)
        if got is None or got < at_least:
            self.fail("versions_lost", f"pull latest of {url} gave {got}, expected >= v{at_least}")
        return got

    def case(self, kind: str) -> KindStats:
        self.kind = kind
        st = self.stat()
        st.count += 1
        return st

    def charge_proxy(self, proxy: FaultProxy) -> None:
        st = self.stat()
        st.retries += proxy.repeats
        st.faults += sum(proxy.counts.values())
        proxy.reset_counters()

    # -- 1. publish-and-pull cycles under faults ------------------------------------------
    def fault_cycles(self) -> None:
        puts = [r"/v/\d+/[^/]+/\d+\.bin$", r"/manifest\.json$", r"/LATEST$"]
        gets = [r"/LATEST$", r"/manifest\.json$", r"\.bin$"]
        kinds: list[tuple[str, Fault, list[str], list[str]]] = [
            (f.value, f, ["PUT", "GET"], puts + gets) for f in
            (Fault.SLOW_DOWN, Fault.INTERNAL_ERROR, Fault.RESET_BEFORE, Fault.RESET_AFTER)
        ]  # fmt: skip
        kinds += [(f.value, f, ["GET"], gets) for f in (Fault.TRUNCATE, Fault.TRICKLE)]
        kinds += [("flip_request", Fault.FLIP_REQUEST, ["PUT"], puts)]
        kinds += [("flip_response", Fault.FLIP_RESPONSE, ["GET"], gets)]
        kinds += [("lost_manifest_create", Fault.RESET_AFTER, ["PUT"], [r"/manifest\.json$"])]
        kinds += [("lost_latest_cas", Fault.RESET_AFTER, ["PUT"], [r"/LATEST$"])]
        for name, fault, methods, keys in kinds:
            self.kind = name
            url = self.new_store(f"cycles-{name}")
            model = make_model(self.nprng, 256 * 1024)
            state: dict[str, Any] = {"model": model, "served": 0, "next": 1}
            for _ in range(self.plan.cycles_per_fault):
                method = self.rng.choice(methods)
                key = self.rng.choice([k for k in keys if (method == "PUT") == (k in puts)])
                count = 1 if name.startswith("lost_") else self.rng.randint(1, 3)
                rule = Rule(fault, method=method, key=key, count=count)
                self.one_cycle(name, url, state, rule)

    def one_cycle(
        self, kind: str, url: str, state: dict[str, Any], rule: Rule, *publish_args: str
    ) -> None:
        self.case(kind)
        version = state["next"]
        state["model"] = nudge(self.nprng, state["model"])
        src = self.write_model(url, version, state["model"])
        out = self.path(f"cycles/{kind}.safetensors")
        before = file_state(out)
        self.proxy.set_rules([rule])
        pub = self.publish(url, version, src, *publish_args, proxy=True)
        have = ["--have", str(out)] if before and self.rng.random() < 0.5 else []
        pull = self.cli("pull", "--store", url, "--out", str(out), *have, proxy=True)
        self.proxy.clear()
        self.charge_proxy(self.proxy)
        self.check_install(url, out, before, pull.code)
        self.after_publish(url, version, src, pub.code, state)

    def after_publish(
        self, url: str, version: int, src: Path, code: int, state: dict[str, Any], *sign: str
    ) -> None:
        """Check what a publish (faulted, killed or racing) left, and move the run on."""
        committed = self.committed(url, version)
        if code not in (0, 1) and committed:
            self.notes.append(f"[{self.kind}] publish of v{version} exited {code}, yet committed")
        if code == 0 or committed:
            self.expect_fetchable(url, version, f"publish exited {code}", *sign)
        if code != 0 and not committed:
            again = self.publish(url, version, src, *sign)
            if again.code != 0:
                self.fail(
                    "versions_lost", f"fault-free republish of v{version} exited {again.code}"
                )
                return
            code = 0
        if code == 0:
            state["served"] = version
        self.expect_served(url, state["served"], *sign)
        state["next"] = version + 1

    # -- 1b. multipart uploads without prior MD5 evidence -----------------------------------
    def multipart_faults(self) -> None:
        """Bits flipped inside parts, by publishers whose first object is multipart.

        Every object of these versions is multipart (a 12 MiB model, 8 MB once coded, in
        5 MiB parts, no deltas), and each publish is a new command with a new store: no
        plain upload has shown it whether the service's ETags are MD5s before its first
        part goes out. Two sends of one part damaged in a row make the store take the
        service for one whose ETags are not MD5s: it then reads the object back and
        refuses it (the publish fails, nothing is committed, the campaign publishes again).
        It runs on ``unchecked_endpoint``, a service that checks no upload checksum, so
        only the store's confirmation keeps a flipped part out of a committed version
        (``versions_lost`` counts one that got in); on a service that validates the part's
        CRC32C (SeaweedFS), the service refuses the part and the store sends it again.
        """
        with self.on_store(self.unchecked_endpoint):
            self._multipart_faults()

    def _multipart_faults(self) -> None:
        self.kind = "multipart_flip"
        url = self.new_store("multipart")
        state: dict[str, Any] = {"model": make_model(self.nprng, 12 * 2**20), "served": 0,
                                 "next": 1}  # fmt: skip
        for _ in range(self.plan.multipart_cycles):
            # the first 1-3 part bodies to arrive (resends included): the very first is
            # always one, sent before this store has seen a single ETag
            rule = Rule(Fault.FLIP_REQUEST, method="PUT", key=r"\.bin$", min_body_bytes=2**16,
                        count=self.rng.randint(1, 3))  # fmt: skip
            self.one_cycle("multipart_flip", url, state, rule, "--part-mb", "5", "--delta", "never")

    # -- 2. publisher kills ------------------------------------------------------------------
    def publisher_kills(self) -> None:
        self.kind = "publisher_kill"
        url = self.new_store("kills")
        state: dict[str, Any] = {
            "model": make_model(self.nprng, 1024 * 1024),
            "served": 0,
            "next": 1,
        }
        src = self.write_model(url, 1, state["model"])
        start = time.monotonic()
        self.after_publish(url, 1, src, self.publish(url, 1, src).code, state)
        window_s = max(0.3, 2 * (time.monotonic() - start))
        for _ in range(self.plan.publisher_kills):
            self.case("publisher_kill")
            version = state["next"]
            state["model"] = nudge(self.nprng, state["model"])
            src = self.write_model(url, version, state["model"])
            argv = ["publish", str(src), "--store", url, "--version", str(version),
                    "--endpoint-url", self.endpoint]  # fmt: skip
            child = fork_cli(argv, self.logs)
            time.sleep(self.rng.uniform(0.0, window_s))
            code = child.stop(signal.SIGKILL)
            if code != 137:  # finished before the kill: its output counts
                self.check_output(argv, Done(code, "", child.stderr()))
            self.cli("gc", "--store", url, "--keep", "2", "--grace-s", "0")
            self.expect_served(url, state["served"])
            self.after_publish(url, version, src, code if code != 137 else 1, state)

    # -- 3. worker kills -------------------------------------------------------------------
    def worker_kills(self) -> None:
        self.kind = "worker_kill"
        url = self.new_store("workers")
        model = make_model(self.nprng, 4 * 1024 * 1024)
        out_dir = self.path("worker-kill/out")
        out_dir.mkdir(exist_ok=True)
        self.slow.set_rules([Rule(Fault.TRICKLE, method="GET", key=r"\.bin$")])
        worker = None
        for i in range(1, self.plan.worker_kills + 1):
            self.case("worker_kill")
            model = nudge(self.nprng, model)
            src = self.write_model(url, i, model)
            if self.publish(url, i, src, "--delta", "never").code != 0:
                self.fail("versions_lost", f"fault-free publish of v{i} failed")
                continue
            worker = worker or self.start_worker(url, out_dir, f"w{i}")
            before = file_state(out_dir / MODEL_FILE)
            time.sleep(self.rng.uniform(0.1, 2.5))
            worker.stop(signal.SIGKILL)
            self.check_install(url, out_dir / MODEL_FILE, before, None)
            worker = self.start_worker(url, out_dir, f"w{i}b")
            self.wait_installed(worker, out_dir, i)
        if worker is not None:
            self.stop_worker(worker, out_dir, url)
        self.charge_proxy(self.slow)
        leftovers = list(out_dir.glob(".*.tmp-*"))
        if leftovers:
            self.notes.append(
                f"worker_kill: {len(leftovers)} temporary files left by SIGKILLed workers "
                "stay in --out-dir after restarts (not counted: a kill cannot clean up)"
            )

    def start_worker(self, url: str, out_dir: Path, wid: str, *extra: str) -> Child:
        argv = worker_command(url, self.slow.url, str(out_dir), wid, 0.2, *extra)[3:]
        return fork_cli(argv, self.logs)

    def wait_installed(self, worker: Child, out_dir: Path, version: int) -> bool:
        deadline = time.monotonic() + STUCK_BOUND_S
        while time.monotonic() < deadline and worker.poll() is None:
            state = file_state(out_dir / MODEL_FILE)
            if state and state[1] is not None and state[1] >= version:
                return True
            time.sleep(0.1)
        tail = worker.stderr().strip().splitlines()[-2:]
        self.fail("stuck_workers", f"no v{version} within {STUCK_BOUND_S:g} s: {tail}")
        return False

    def stop_worker(self, worker: Child, out_dir: Path, url: str) -> None:
        before = file_state(out_dir / MODEL_FILE)
        code = worker.stop(signal.SIGTERM)
        code = 0 if code == 128 + signal.SIGTERM else code  # stopped before its handler was set
        self.check_output(["worker"], Done(code, "", worker.stderr()), worker=True)
        self.check_install(url, out_dir / MODEL_FILE, before, None)

    # -- 4. racing publishers ------------------------------------------------------------
    def races(self) -> None:
        self.kind = "race"
        url = self.new_store("races")
        model = make_model(self.nprng, 512 * 1024)
        for version in range(1, self.plan.races + 1):
            self.case("race")
            models = [nudge(self.nprng, model), nudge(self.nprng, model)]
            srcs = [self.write_model(url, version, m) for m in models]
            argvs = [["publish", str(s), "--store", url, "--version", str(version),
                      "--endpoint-url", self.endpoint] for s in srcs]  # fmt: skip
            children = [fork_cli(a, self.logs) for a in argvs]
            for c in children:
                c.wait(120)
            codes = [c.stop() for c in children]  # reaps; kills one that hung
            for argv, child, code in zip(argvs, children, codes, strict=True):
                self.check_output(argv, Done(code, "", child.stderr()))
            if sorted(codes) != [0, 4]:
                said = [c.stderr().strip()[-300:] for c in children]
                self.fail("versions_lost", f"v{version}: racing publishers exited {codes}: {said}")
            winners = [tensors_digest(m) for m, c in zip(models, codes, strict=True) if c == 0]
            self.published[(url, version)] = set(winners[:1])
            self.expect_fetchable(url, version, f"racers exited {codes}")
            model = models[codes.index(0)] if 0 in codes else model

    # -- 5. tampering -----------------------------------------------------------------------
    TAMPERINGS = (
        "payload_flip", "manifest_name", "manifest_dtype", "manifest_shape", "manifest_hash",
        "manifest_metadata", "latest_edited", "latest_rollback", "latest_far_ahead",
        "keyframe_deleted", "replayed_manifest", "mixed_run",
    )  # fmt: skip

    def tamperings(self) -> None:
        modes = {kind: self.rng.choice([False, True]) for kind in self.TAMPERINGS}
        for signed in (False, True):
            self.kind = "tamper-setup"
            ours = self.template(signed, "ours")
            theirs = self.template(signed, "theirs")
            for kind in self.TAMPERINGS:
                if self.plan.both_signing_modes or modes[kind] == signed:
                    for _ in range(self.plan.tamperings):
                        self.tamper_case(kind, signed, ours, theirs)
            if self.plan.both_signing_modes or signed:
                self.worker_tamperings(signed)

    def template(self, signed: bool, run: str) -> dict[str, Any]:
        """Three versions (a keyframe and two deltas) of one run, and LATEST after each."""
        url = self.new_store(f"template-{run}-{signed}")
        model = make_model(self.nprng, 256 * 1024)
        latest: dict[int, bytes] = {}
        for v in (1, 2, 3):
            model = nudge(self.nprng, model)
            src = self.write_model(url, v, model)
            self.publish(url, v, src, "--run-id", run, *self.sign_args(signed, publish=True))
            latest[v] = self.get(url, "LATEST")
        return {"url": url, "latest": latest, "signed": signed}

    def copy_run(self, template: dict[str, Any]) -> str:
        """A fresh copy of a template's run, with the same published versions."""
        src_bucket, _, src_prefix = template["url"].removeprefix("s3://").partition("/")
        url = f"{template['url']}-{self.rng.getrandbits(40):x}"
        _, _, prefix = url.removeprefix("s3://").partition("/")
        listing = self.s3.list_objects_v2(Bucket=src_bucket, Prefix=src_prefix + "/")
        for obj in listing.get("Contents", []):
            rel = obj["Key"][len(src_prefix) :]
            self.s3.copy_object(
                Bucket=src_bucket,
                Key=prefix + rel,
                CopySource={"Bucket": src_bucket, "Key": obj["Key"]},
            )
        for v in (1, 2, 3):
            self.published[(url, v)] = set(self.published[(template["url"], v)])
        return url

    def get(self, url: str, rel: str) -> bytes:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        return bytes(self.s3.get_object(Bucket=bucket, Key=f"{prefix}/{rel}")["Body"].read())

    def put(self, url: str, rel: str, data: bytes) -> None:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        self.s3.put_object(Bucket=bucket, Key=f"{prefix}/{rel}", Body=data)

    def keys_under(self, url: str, rel: str) -> list[str]:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        found = self.s3.list_objects_v2(Bucket=bucket, Prefix=f"{prefix}/{rel}")
        return [o["Key"][len(prefix) + 1 :] for o in found.get("Contents", [])]

    def tamper_case(
        self, kind: str, signed: bool, ours: dict[str, Any], theirs: dict[str, Any]
    ) -> None:
        label = f"tamper:{kind}:{'signed' if signed else 'unsigned'}"
        self.case(label)
        url = self.copy_run(ours)
        held = self.path(f"tamper/{label}.safetensors")
        verify = self.sign_args(signed, publish=False)
        if file_state(held) is None:
            done = self.cli("pull", "--store", url, "--version", "1", "--out", str(held), *verify)
            if done.code != 0:
                self.fail("versions_lost", f"v1 of an untampered copy: {done.err.strip()}")
        getattr(self, f"do_{kind}")(url, ours, theirs)
        target, version = self.rng.choice(
            [
                (held, "latest"),
                (self.path(f"tamper/{label}-3.safetensors"), "123"[self.rng.randrange(3)]),
            ]
        )  # latest over a held older version, or any version by number into a new file
        before = file_state(target)
        done = self.cli("pull", "--store", url, "--version", version, "--out", str(target), *verify)
        self.check_install(url, target, before, done.code)
        self.path(f"tamper/{label}-3.safetensors").unlink(missing_ok=True)

    def manifest(self, url: str, version: int) -> dict[str, Any]:
        return json.loads(self.get(url, f"v/{version:012d}/manifest.json"))

    def put_manifest(self, url: str, version: int, m: dict[str, Any], fix_latest: bool) -> None:
        raw = json.dumps(m, indent=1).encode()
        self.put(url, f"v/{version:012d}/manifest.json", raw)
        if fix_latest:  # an attacker also repairs the pointer's digest (unsigned, so refused)
            latest = json.loads(self.get(url, "LATEST"))
            if latest.get("version") == version:
                latest["manifest_hash"] = manifest_digest(m)
                latest.pop("signature", None)
                self.put(url, "LATEST", json.dumps(latest).encode())

    def edit_tensor(
        self, url: str, ours: dict[str, Any], edit: Callable[[dict[str, Any]], None]
    ) -> None:
        version = self.rng.choice([1, 2, 3])
        m = self.manifest(url, version)
        edit(self.rng.choice(m["tensors"]))
        self.put_manifest(url, version, m, fix_latest=ours["signed"])

    def do_payload_flip(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        rel = self.rng.choice([k for k in self.keys_under(url, "v/") if k.endswith(".bin")])
        data = bytearray(self.get(url, rel))
        data[self.rng.randrange(len(data))] ^= 1 << self.rng.randrange(8)
        self.put(url, rel, bytes(data))

    def do_manifest_name(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        self.edit_tensor(url, ours, lambda t: t.update(name=t["name"] + ".x"))

    def do_manifest_dtype(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        swap = {"F32": "I32", "I32": "F32", "F16": "BF16", "BF16": "F16"}
        self.edit_tensor(url, ours, lambda t: t.update(dtype=swap.get(t["dtype"], "U8")))

    def do_manifest_shape(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        self.edit_tensor(url, ours, lambda t: t.update(shape=[*reversed(t["shape"]), 1]))

    def do_manifest_hash(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        self.edit_tensor(url, ours, lambda t: t.update(hash="0" * 64))

    def do_manifest_metadata(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        version = self.rng.choice([1, 2, 3])
        m = self.manifest(url, version)
        m["metadata"] = {**m.get("metadata", {}), "step": str(self.rng.randrange(10**6))}
        self.put_manifest(url, version, m, fix_latest=ours["signed"])

    def do_latest_edited(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        latest = json.loads(self.get(url, "LATEST"))
        field, value = self.rng.choice(
            [("version", 2), ("run_id", "theirs"), ("kind", "full"), ("manifest_hash", "0" * 64),
             ("keyframe_version", 3), ("manifest", "v/000000000002/manifest.json")]
        )  # fmt: skip
        latest[field] = value
        self.put(url, "LATEST", json.dumps(latest).encode())

    def do_latest_rollback(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        self.put(url, "LATEST", ours["latest"][self.rng.choice([1, 2])])

    def do_latest_far_ahead(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        latest = json.loads(self.get(url, "LATEST"))
        latest.update(version=999_999_999_999, manifest="v/999999999999/manifest.json")
        self.put(url, "LATEST", json.dumps(latest).encode())

    def do_keyframe_deleted(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        doomed = self.keys_under(url, "v/000000000001/")
        if self.rng.random() < 0.5:  # only its payload, or the whole version
            doomed = [k for k in doomed if k.endswith(".bin")]
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        self.s3.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": f"{prefix}/{k}"} for k in doomed]}
        )

    def do_replayed_manifest(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        old = self.rng.choice([1, 2])
        raw = self.get(url, f"v/{old:012d}/manifest.json")
        for rel in self.keys_under(url, f"v/{old:012d}/"):
            if rel.endswith(".bin"):
                self.put(url, rel.replace(f"v/{old:012d}/", "v/000000000003/"), self.get(url, rel))
        self.put(url, "v/000000000003/manifest.json", raw)
        latest = json.loads(self.get(url, "LATEST"))
        latest["manifest_hash"] = manifest_digest(json.loads(raw))
        if not ours["signed"]:  # unsigned: a consistent pointer; signed: a replayed one
            self.put(url, "LATEST", json.dumps(latest).encode())

    def do_mixed_run(self, url: str, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        """Their v3 (a delta for their v2) and their LATEST, over ours."""
        version = self.rng.choice([2, 3])
        for rel in self.keys_under(theirs["url"], f"v/{version:012d}/"):
            self.put(url, rel, self.get(theirs["url"], rel))
        if version == 3:
            self.put(url, "LATEST", theirs["latest"][3])

    def worker_tamperings(self, signed: bool) -> None:
        """A running worker meets a tampered LATEST, then the repair and a new version."""
        kind = f"tamper:worker_latest:{'signed' if signed else 'unsigned'}"
        self.kind = kind
        url = self.new_store(f"worker-tamper-{signed}")
        out_dir = self.path(f"worker-tamper-{signed}/out")
        out_dir.mkdir(exist_ok=True)
        model = make_model(self.nprng, 256 * 1024)
        sign, verify = self.sign_args(signed, publish=True), self.sign_args(signed, publish=False)
        self.publish(url, 1, self.write_model(url, 1, model), *sign)
        self.slow.clear()
        worker = self.start_worker(url, out_dir, "tw", *verify)
        self.wait_installed(worker, out_dir, 1)
        version = 1
        edits = WORKER_EDITS[: self.plan.worker_tamper_edits]
        for _ in range(self.plan.worker_tamperings):
            for edit in edits:
                self.case(kind)
                version += 1
                model = nudge(self.nprng, model)
                self.publish(url, version, self.write_model(url, version, model), *sign)
                good = self.get(url, "LATEST")
                before = file_state(out_dir / MODEL_FILE)
                self.worker_sees(url, edit, good)
                time.sleep(1.0)
                self.check_install(url, out_dir / MODEL_FILE, before, None)
                self.put(url, "LATEST", good)
                version += 1
                model = nudge(self.nprng, model)
                self.publish(url, version, self.write_model(url, version, model), *sign)
                self.wait_installed(worker, out_dir, version)
        self.stop_worker(worker, out_dir, url)

    def worker_sees(self, url: str, edit: str, good: bytes) -> None:
        if edit == "deep_json":
            self.put(url, "LATEST", b"[" * 100_000 + b"]" * 100_000)
        elif edit == "latest_rollback":
            latest = json.loads(good)
            latest.update(version=1, manifest="v/000000000001/manifest.json")
            latest["manifest_hash"] = manifest_digest(self.manifest(url, 1))
            self.put(url, "LATEST", json.dumps(latest).encode())
        else:
            getattr(self, f"do_{edit}")(url, {"signed": False}, {})

    # -- 5b. the relay over a tampered primary ------------------------------------------
    RELAY_TAMPERINGS = ("payload_flip", "payload_replace", "payload_truncate", "manifest_edit")

    def relay_tamperings(self) -> None:
        modes = {kind: self.rng.choice([False, True]) for kind in self.RELAY_TAMPERINGS}
        for signed in (False, True):
            kinds = [k for k in self.RELAY_TAMPERINGS if self.plan.both_signing_modes or
                     modes[k] == signed] + (["cross_run"] if signed else [])  # fmt: skip
            for kind in kinds:
                for _ in range(self.plan.relay_tamperings):
                    self.relay_case(kind, signed)

    def relay_case(self, kind: str, signed: bool) -> None:
        """v1, v2 relayed; v3 tampered in the primary, relayed (refused), repaired, relayed."""
        self.case(f"relay:{kind}:{'signed' if signed else 'unsigned'}")
        primary, replica = self.new_store("relay-primary"), self.new_store("relay-replica")
        regions = self.regions_file(primary, replica)
        sign, verify = self.sign_args(signed, publish=True), self.sign_args(signed, publish=False)
        relay = ["relay", "--regions", str(regions), "--once", *verify]
        model = make_model(self.nprng, 128 * 1024)
        for v in (1, 2, 3):
            model = nudge(self.nprng, model)
            self.publish(primary, v, self.write_model(primary, v, model), "--run-id", "ours", *sign)
            self.published[(replica, v)] = self.published[(primary, v)]
            if v == 2 and self.cli(*relay).code != 0:
                self.fail("versions_lost", f"relay of an untampered v2 exited non-zero ({kind})")
        saved = {
            rel: self.get(primary, rel)
            for rel in ["LATEST", *self.keys_under(primary, "v/000000000003/")]
        }
        visible = self.tamper_primary(kind, primary)
        done = self.cli(*relay)
        served = self.clean_pull(replica, "latest", *verify)
        if served is None:
            self.fail("relayed_unverified", f"{kind}: the replica serves a LATEST a pull refuses")
        elif visible and served == 3:
            self.fail("relayed_unverified", f"{kind}: the relay committed the tampered v3")
        if visible and done.code == 0:
            self.fail("relayed_unverified", f"{kind}: relay --once exited 0 over visible damage")
        for rel in [r for r in self.keys_under(primary, "v/000000000003/") if r not in saved]:
            self.delete(primary, rel)  # a planted version's objects
        for rel, data in saved.items():
            self.put(primary, rel, data)  # the primary repaired
        healed = self.cli(*relay)
        same = all(self.get(replica, rel) == self.get(primary, rel)
                   for rel in ("v/000000000003/manifest.json",))  # fmt: skip
        if healed.code != 0 or not same or self.clean_pull(replica, "latest", *verify) != 3:
            self.fail("replicas_unhealed", f"{kind}: relay exited {healed.code} after the repair")

    def regions_file(self, primary: str, replica: str) -> Path:
        lines = ['primary = "use1"', 'mode = "copy"']
        for name, url in (("use1", primary), ("euw1", replica)):
            lines += ["", f"[regions.{name}]", f'url = "{url}"', 's3_region = "us-east-1"']
            lines += [f'endpoint_url = "{self.endpoint}"', 'profile = ""', 'price_class = ""']
        path = self.path(f"relay/{self.rng.getrandbits(48):x}.toml")
        path.write_text("\n".join(lines) + "\n")
        return path

    def tamper_primary(self, kind: str, url: str) -> bool:
        """Tamper with v3 in the primary; whether a relay can see it (unsigned edits with a
        re-pinned LATEST cannot be told from a publication)."""
        if kind == "manifest_edit":
            m = self.manifest(url, 3)
            m["metadata"] = {**m.get("metadata", {}), "step": str(self.rng.randrange(10**6))}
            self.put_manifest(url, 3, m, fix_latest=True)
            return self.template_signed(url)
        if kind == "cross_run":
            theirs = self.other_run()
            for rel in self.keys_under(theirs, "v/000000000003/"):
                self.put(url, rel, self.get(theirs, rel))
            self.put(url, "LATEST", self.get(theirs, "LATEST"))
            return True
        rel = self.rng.choice(
            [k for k in self.keys_under(url, "v/000000000003/") if k.endswith(".bin")]
        )
        data = self.get(url, rel)
        if kind == "payload_flip":
            data = bytes([data[0] ^ 1 << self.rng.randrange(8)]) + data[1:]
        elif kind == "payload_replace":
            data = self.nprng.bytes(len(data))
        else:
            data = data[: self.rng.randrange(len(data))]
        self.put(url, rel, data)
        return True

    def template_signed(self, url: str) -> bool:
        return "signature" in json.loads(self.get(url, "v/000000000001/manifest.json"))

    def other_run(self) -> str:
        """Another run signed with this campaign's key, its v3 a keyframe (made once)."""
        if self._other_run is None:
            url = self.new_store("other-run")
            model = make_model(self.nprng, 128 * 1024)
            for v in (1, 2, 3):
                model = nudge(self.nprng, model)
                self.publish(url, v, self.write_model(url, v, model), "--run-id", "theirs",
                             "--delta", "never", *self.sign_args(True, publish=True))  # fmt: skip
            self._other_run = url
        return self._other_run

    def delete(self, url: str, rel: str) -> None:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        self.s3.delete_object(Bucket=bucket, Key=f"{prefix}/{rel}")

    # -- 5c. a signing publisher over a version its readers do not trust -------------------
    def untrusted_bases(self) -> None:
        for who in ("bucket_writer", "revoked"):
            for _ in range(self.plan.untrusted_bases):
                self.untrusted_base_case(who)

    def untrusted_base_case(self, who: str) -> None:
        """v1 by the trainer's key, v2 by another (a bucket writer's, or a key the readers'
        keyring no longer holds); the trainer's v3 must not be a delta against v2."""
        self.case(f"untrusted_base:{who}")
        url = self.new_store(f"untrusted-{who}")
        other = self.other_key(who)
        keyring = (
            ["--verify-key", self.keys[1]] if who == "revoked" else []
        )  # no keyring: its own key
        model = make_model(self.nprng, 128 * 1024)
        for v, key in ((1, self.keys[0]), (2, other[0]), (3, self.keys[0])):
            model = nudge(self.nprng, model)
            extra = keyring if v == 3 else []
            done = self.publish(
                url, v, self.write_model(url, v, model), "--signing-key", key, *extra
            )
            if done.code != 0:
                self.fail("versions_lost", f"{who}: publish of v{v} exited {done.code}")
        if self.manifest(url, 3).get("base_version") == 2:
            self.fail("untrusted_bases", f"{who}: v3 is a delta against v2, signed by {who}")
        self.expect_served(url, 3, *self.sign_args(True, publish=False))

    def other_key(self, who: str) -> tuple[str, str]:
        base = self.path(f"keys/{who}")
        if not base.with_suffix(".pem").exists():
            self.cli("keygen", "--out", str(base))
        return f"{base}.pem", f"{base}.pub.pem"

    # -- 5d. another run's version planted in this run's prefix ----------------------------
    def cross_run_plants(self) -> None:
        for _ in range(self.plan.cross_run_plants):
            self.cross_run_case()

    def cross_run_case(self) -> None:
        """A verifying worker at v2; their v3 (same key, a keyframe) and LATEST planted; a
        pull told the run; the plant removed, our v3 published: installed at once."""
        self.case("cross_run")
        url, theirs = self.new_store("cross-run"), self.other_run()
        sign, verify = self.sign_args(True, publish=True), self.sign_args(True, publish=False)
        out_dir = self.path(f"cross-run/{self.rng.getrandbits(48):x}")
        out_dir.mkdir()
        model = make_model(self.nprng, 128 * 1024)
        for v in (1, 2):
            model = nudge(self.nprng, model)
            self.publish(url, v, self.write_model(url, v, model), "--run-id", "ours", *sign)
        argv = worker_command(url, self.endpoint, str(out_dir), "plant", 0.2, *verify)[3:]
        worker = fork_cli(argv, self.logs)
        self.wait_installed(worker, out_dir, 2)
        good = self.get(url, "LATEST")
        planted = self.keys_under(theirs, "v/000000000003/")
        for rel in planted:
            self.put(url, rel, self.get(theirs, rel))
        self.put(url, "LATEST", self.get(theirs, "LATEST"))
        before = file_state(out_dir / MODEL_FILE)
        pulled = self.clean_pull(url, "latest", *verify, "--run", "ours")
        time.sleep(1.5)  # several polls of the planted LATEST
        after = file_state(out_dir / MODEL_FILE)
        if pulled is not None or (after and before and after[0] != before[0]):
            self.fail("planted_installs", f"their v3 taken: pull gave {pulled}, worker {after}")
        for rel in planted:
            self.delete(url, rel)
        self.put(url, "LATEST", good)
        model = nudge(self.nprng, model)
        self.publish(url, 3, self.write_model(url, 3, model), "--run-id", "ours", *sign)
        self.wait_installed(worker, out_dir, 3)
        self.check_install(url, out_dir / MODEL_FILE, before, None)
        self.stop_worker(worker, out_dir, url)
        self.expect_served(url, 3, *verify, "--run", "ours")

    # -- 6. full disks -----------------------------------------------------------------------
    def full_disks(self) -> None:
        self.kind = "full_disk"
        url = self.new_store("disk")
        model = make_model(self.nprng, 1024 * 1024)
        for v in (1, 2):
            model = nudge(self.nprng, model)
            self.publish(url, v, self.write_model(url, v, model), "--delta", "never")
        size = self.path("disk/v1.safetensors")
        self.cli("pull", "--store", url, "--version", "1", "--out", str(size))
        file_bytes = size.stat().st_size
        for i in range(self.plan.full_disks):
            mnt = self.path(f"disk/mnt{i}")
            mnt.mkdir(exist_ok=True)
            with_old = i % 2 == 1
            limit = self.rng.randint(file_bytes + 8192, 2 * file_bytes - 8192) if with_old else (
                self.rng.randint(16 * 1024, file_bytes - 4096))  # fmt: skip
            mounted = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={limit}", "tmpfs", str(mnt)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if mounted.returncode != 0:
                self.notes.append(
                    f"full_disk: mount -t tmpfs not permitted ({mounted.stderr.strip()})"
                )
                return
            try:
                self.case("full_disk")
                if with_old:
                    (mnt / "model.safetensors").write_bytes(size.read_bytes())
                if i % 5 == 4:
                    self.full_disk_worker(url, mnt)
                else:
                    self.full_disk_pull(url, mnt / "model.safetensors")
            finally:
                subprocess.run(["umount", "-l", str(mnt)], check=False)

    def full_disk_pull(self, url: str, target: Path) -> None:
        before = file_state(target)
        argv = ["pull", "--store", url, "--version", "2", "--out", str(target),
                "--endpoint-url", self.endpoint]  # fmt: skip
        child = fork_cli(argv, self.logs)
        code = child.wait(120)
        code = child.stop() if code is None else code
        self.check_output(argv, Done(code, "", child.stderr()))
        self.check_install(url, target, before, code)

    def full_disk_worker(self, url: str, mnt: Path) -> None:
        before = file_state(mnt / MODEL_FILE)
        worker = fork_cli(worker_command(url, self.endpoint, str(mnt), "disk", 0.2)[3:], self.logs)
        time.sleep(3.0)
        code = worker.poll()
        if code is not None:  # it gave up by itself: one error line, a defined code
            self.check_output(["worker"], Done(code, "", worker.stderr()), worker=True)
        else:
            self.stop_worker(worker, mnt, url)
        self.check_install(url, mnt / MODEL_FILE, before, 0)

    # -- 7. oversized objects ------------------------------------------------------------------
    def oversized_objects(self) -> None:
        """LATEST, a manifest, a worker's status object made huge by whoever can write the bucket.

        Each reader must refuse it (``pull``: exit 3 in one line; ``status``: the object
        skipped) having read no more than its limit. Each CLI child's peak memory is
        compared with the same command's on the same store before the object grew:
        growth past the reader's limit plus 12 MiB is an ``unbounded_reads``.
        """
        for target in self.plan.oversize_targets:
            self.kind = f"oversized:{target}"
            url = self.new_store(f"oversized-{target.replace('_', '-')}")
            self.publish(url, 1, self.write_model(url, 1, make_model(self.nprng, 256 * 1024)))
            baseline = self.oversized_run(url, target)
            key = {"manifest": "v/000000000001/manifest.json",
                   "status": "workers/huge.json"}.get(target, "LATEST")  # fmt: skip
            self.put_huge(url, key, self.plan.oversize_mib * 2**20)
            self.case(self.kind)
            peak = self.oversized_run(url, target)
            self.judge_memory(target, baseline, peak)

    def oversized_run(self, url: str, target: str) -> int | None:
        """The target's command in a child (a pull, a worker's polls, status); its peak RSS."""
        if target == "worker_latest":
            out_dir = self.path(f"oversized/{self.rng.getrandbits(32):x}")
            out_dir.mkdir(exist_ok=True)
            argv = worker_command(url, self.endpoint, str(out_dir), "ow", 0.2)[3:]
            child = fork_cli(argv, self.logs)
            time.sleep(3.0)  # some fifteen polls
            code = child.stop(signal.SIGTERM)
            self.check_output(argv, Done(code, "", child.stderr()), worker=True)
            return child.peak_rss_bytes()
        if target == "status":
            argv = ["status", "--store", url, "--endpoint-url", self.endpoint]
        else:
            out = self.path(f"oversized/{self.rng.getrandbits(48):x}.safetensors")
            argv = ["pull", "--store", url, "--out", str(out), "--endpoint-url", self.endpoint]
        child = fork_cli(argv, self.logs)
        code = child.wait(300)
        code = child.stop() if code is None else code
        self.check_output(argv, Done(code, "", child.stderr()))
        return child.peak_rss_bytes()

    def put_huge(self, url: str, rel: str, size: int) -> None:
        """Replace ``rel`` with ``size`` zero bytes, streamed from a sparse file."""
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        huge = self.path("oversized/huge.bin")
        with huge.open("wb") as f:
            f.truncate(size)
        self.s3.upload_file(str(huge), bucket, f"{prefix}/{rel}")
        huge.unlink()

    def judge_memory(self, target: str, baseline: int | None, peak: int | None) -> None:
        limit = JSON_LIMITS["status" if target == "status" else
                            "manifest" if target == "manifest" else "latest"]  # fmt: skip
        size_mib = self.plan.oversize_mib
        if baseline is None or peak is None:
            self.notes.append(f"{self.kind}: a child was killed before it reported its memory")
            return
        growth = peak - baseline
        self.memory[target] = {"object_mib": size_mib, "limit_bytes": limit,
                               "baseline_peak_rss_mib": round(baseline / 2**20, 1),
                               "peak_rss_mib": round(peak / 2**20, 1),
                               "growth_mib": round(growth / 2**20, 1)}  # fmt: skip
        if growth > limit + MEMORY_SLACK_BYTES:
            self.fail("unbounded_reads", f"a {size_mib} MiB {target} grew the reader's peak "
                      f"memory by {growth / 2**20:.0f} MiB (limit {limit:,} bytes)")  # fmt: skip

    # -- 8. fuzzed arguments ------------------------------------------------------------------
    def fuzz(self) -> None:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import seed as hseed
        from hypothesis import strategies as st

        self.kind = "fuzz"
        url = self.new_store("fuzz")
        model = make_model(self.nprng, 64 * 1024)
        src = self.write_model(url, 1, model)
        self.publish(url, 1, src)
        strategy = argv_strategy(st, self.fuzz_values(url, src))

        @settings(max_examples=self.plan.fuzz_examples, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @hseed(self.seed)
        @given(strategy)
        def run_one(argv: list[str]) -> None:
            if argv[0] in ("worker", "relay"):
                return
            self.case("fuzz")
            self.cli(*argv, raw=True)

        run_one()
        self.fuzz_workers(st, strategy)

    def fuzz_workers(self, st: Any, strategy: Any) -> None:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import seed as hseed

        worker_argvs = strategy.filter(lambda a: a[0] in ("worker", "relay"))

        @settings(max_examples=self.plan.fuzz_worker_examples, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))  # fmt: skip
        @hseed(self.seed)
        @given(worker_argvs)
        def run_one(argv: list[str]) -> None:
            self.case("fuzz:worker")
            child = fork_cli(argv, self.logs)
            code = child.wait(3.0)
            code = child.stop(signal.SIGTERM) if code is None else code
            self.check_output(argv, Done(code, "", child.stderr()), worker=True)

        run_one()

    def fuzz_values(self, url: str, src: Path) -> dict[str, list[str]]:
        tmp = self.path("fuzz/x")
        tmp.parent.mkdir(exist_ok=True)
        garbage = self.path("fuzz/garbage.pem")
        garbage.write_bytes(b"-----BEGIN PUBLIC KEY-----\nnope\n")
        return {
            "store": [url, url + "/sub", "s3://Bad_Bucket!!/x", "s3://", "s3:///x", "memory://f",
                      f"file://{tmp.parent}/store", "ftp://x/y", "", "s3://" + "b" * 300],
            "path": [str(src), str(tmp.parent), str(tmp) + ".safetensors", "", "/proc/x",
                     "/nonexistent/dir/f", str(garbage), self.keys[0], self.keys[1], "-"],
            "number": ["0", "1", "2", "-1", "latest", "²", "1e30", "inf", "nan", "-0", " 3",
                       "999999999999", "1000000000000", "0x10", "1_0", "", "3.5", "١"],
            "endpoint": [self.endpoint, self.proxy.url, "not a url", "ftp://x"],
        }  # fmt: skip

    # -- 8. hostile buckets, local files and planner input ------------------------------
    def hostile(self) -> None:
        for _ in range(self.plan.hostile_rounds):
            self.expiry_held()
            self.oversized_payload()
            self.junk_manifest()
            self.host_cache_blocked()
            self.racing_next_versions()
        self.hostile_input()
        self.estimate_fuzz()
        for backend in ("s3", "gs", "az") if self.plan.clouds else ("s3",):
            self.truncated_object(backend)

    def fast_worker(self, url: str, out: Path, wid: str, *extra: str) -> Child:
        """A worker straight on the store (no trickling proxy), polling every 0.2 s."""
        argv = worker_command(url, self.endpoint, str(out), wid, 0.2, *extra)[3:]
        return fork_cli(argv, self.logs)

    def status_of(self, url: str, wid: str) -> dict[str, Any]:
        try:
            return dict(json.loads(self.get(url, f"workers/{wid}.json")))
        except (self.s3.exceptions.NoSuchKey, ValueError):
            return {}

    def last_error(self, url: str, wid: str) -> str:
        return str(self.status_of(url, wid).get("last_error") or "")

    @staticmethod
    def wait_until(done: Callable[[], object], bound_s: float = STUCK_BOUND_S) -> bool:
        deadline = time.monotonic() + bound_s
        while not done():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def expiry_held(self) -> None:
        """A signed LATEST expires while a verifying worker holds the version it names: the
        worker keeps its version and says so in its status, until the next version."""
        self.case("expiry_held")
        url = self.new_store("expiry")
        signer = Signer.from_file(self.keys[0])
        pub = Publisher(open_store(url, endpoint_url=self.endpoint),
                        PublishConfig(latest_expiry_s=EXPIRY_S), signer=signer)  # fmt: skip
        out, wid = self.path(f"expiry/{self.rng.getrandbits(32):x}"), "expiry"
        worker = self.fast_worker(url, out, wid, "--verify-key", self.keys[1])
        model = nudge(self.nprng, make_model(self.nprng, 64 * 1024))
        self.published.setdefault((url, 1), set()).add(tensors_digest(model))
        pub.publish(model, 1)
        if not self.wait_until(lambda: (file_state(out / MODEL_FILE) or (0, None))[1] == 1):
            self.notes.append("expiry_held: LATEST expired before the worker first read it")
        if not self.wait_until(lambda: "expired" in self.last_error(url, wid)):
            self.fail("freezes_unseen", f"a worker at v1 of an expired LATEST shows "
                      f"{self.last_error(url, wid)!r}")  # fmt: skip
        model = nudge(self.nprng, model)
        self.published.setdefault((url, 2), set()).add(tensors_digest(model))
        pub.publish(model, 2)
        if self.wait_installed(worker, out, 2) and not self.wait_until(
            lambda: self.status_of(url, wid).get("last_error") is None
        ):
            self.fail("freezes_unseen", "the freeze stays in the status once v2 installed")
        self.stop_worker(worker, out, url)

    def oversized_payload(self) -> None:
        """Payload objects longer than their manifest says: pull and a worker both install."""
        self.case("oversized_payload")
        url = self.new_store("oversized")
        model = nudge(self.nprng, make_model(self.nprng, 256 * 1024))
        self.publish(url, 1, self.write_model(url, 1, model), "--delta", "never")
        for rel in [k for k in self.keys_under(url, "v/") if k.endswith(".bin")]:
            extra = os.urandom(self.rng.choice([1, 100, 70_000]))
            self.put(url, rel, self.get(url, rel) + extra)
        self.expect_fetchable(url, 1, "payload objects longer than the manifest says")
        out = self.path(f"oversized/{self.rng.getrandbits(32):x}")
        worker = self.fast_worker(url, out, "oversized")
        self.wait_installed(worker, out, 1)
        self.stop_worker(worker, out, url)

    def junk_manifest(self) -> None:
        """A manifest nobody can read beside four keyframes: gc and inspect go on."""
        self.case("junk_manifest")
        url = self.new_store("junk")
        model = make_model(self.nprng, 64 * 1024)
        for v in (1, 2, 3, 4):
            model = nudge(self.nprng, model)
            self.publish(url, v, self.write_model(url, v, model), "--delta", "never")
        junk_v = self.rng.choice([0, 5, 1000, 999_999_999_999])
        junk = self.rng.choice([*JUNK_MANIFESTS, self.get(url, f"v/{4:012d}/manifest.json")])
        self.put(url, f"v/{junk_v:012d}/manifest.json", junk)
        gc = self.cli("gc", "--store", url, "--keep", "1", "--grace-s", "0", "--json")
        left = [v for v in (1, 2, 3, 4) if self.committed(url, v)]
        if gc.code != 0 or left != [4]:
            self.fail("collections_blocked", f"gc beside junk v{junk_v} exited {gc.code} and "
                      f"left {left}: {gc.err.strip()[-200:]!r}")  # fmt: skip
        listed = self.cli("inspect", "--store", url, "--json")
        rows = json.loads(listed.out)["versions"] if listed.code == 0 else []
        if [r["version"] for r in rows if r["kind"] != "unreadable"] != [4]:
            self.fail("collections_blocked", f"inspect beside junk v{junk_v} exited "
                      f"{listed.code}: {listed.err.strip()[-200:]!r}")  # fmt: skip
        self.expect_served(url, 4)

    def host_cache_blocked(self) -> None:
        """A directory where the host cache keeps a version's file or lock: no retry gets past
        it, so the worker exits 2 with its one line rather than retrying forever."""
        self.case("host_cache_blocked")
        url = self.new_store("host-cache")
        self.publish(url, 1, self.write_model(url, 1, make_model(self.nprng, 64 * 1024)))
        cache = self.path(f"host-cache/{self.rng.getrandbits(32):x}")
        (cache / self.rng.choice([f"{1:012d}.lock", f"{1:012d}.safetensors"])).mkdir(parents=True)
        worker = self.fast_worker(url, cache.with_name(cache.name + "-out"), "host-cache",
                                  "--host-cache-dir", str(cache))  # fmt: skip
        code = worker.wait(STUCK_BOUND_S)
        if code is None:
            tail = worker.stderr().strip().splitlines()[-1:]
            self.fail("stuck_workers", f"a directory in the host cache: neither installed nor "
                      f"exited: {tail}")  # fmt: skip
            worker.stop(signal.SIGTERM)
            return
        self.check_output(["worker"], Done(code, "", worker.stderr()), worker=True)
        if code != 2:
            self.fail("wrong_exits", f"a directory in the host cache: exit {code}, not 2")

    def racing_next_versions(self) -> None:
        """--delta auto publishers of v2 and v3 at once, neither given a base: v3 commits;
        v2 commits or finds LATEST past it (4), never 'pull it first' (2)."""
        self.case("race_next")
        url = self.new_store("race-next")
        model = nudge(self.nprng, make_model(self.nprng, 256 * 1024))
        self.publish(url, 1, self.write_model(url, 1, model))
        models = {2: nudge(self.nprng, model)}
        models[3] = nudge(self.nprng, models[2])
        argvs = {
            v: ["publish", str(self.write_model(url, v, m)), "--store", url,
                "--version", str(v), "--endpoint-url", self.endpoint]
            for v, m in models.items()
        }  # fmt: skip
        children = {v: fork_cli(argv, self.logs) for v, argv in argvs.items()}
        codes = {}
        for v, child in children.items():
            child.wait(120)
            codes[v] = child.stop()
            self.check_output(argvs[v], Done(codes[v], "", child.stderr()))
        if codes[3] != 0 or codes[2] not in (0, 4):
            said = {v: c.stderr().strip()[-200:] for v, c in children.items()}
            self.fail("wrong_exits", f"racers for v2 and v3 exited {codes}: {said}")
        for v in (2, 3):
            if codes[v] == 0 or self.committed(url, v):
                self.expect_fetchable(url, v, f"a racer exited {codes[v]}")
        self.expect_served(url, 3 if codes[3] == 0 else 1)

    def hostile_input(self) -> None:
        """Local files, store URLs and version numbers a user can get wrong: each exits 2
        and changes nothing; what the formats allow goes through."""
        url = self.new_store("input")
        good = self.write_model(url, 1, make_model(self.nprng, 64 * 1024))
        self.publish(url, 1, good)
        fresh = itertools.count(2)  # each case claims a new version: one taken hides none
        for name, header in BROKEN_HEADERS.items():
            self.case("hostile_input:header")
            src = self.path(f"input/{name}.safetensors")
            raw = header.encode()
            src.write_bytes(len(raw).to_bytes(8, "little") + raw + b"\0\0\x80\x3f")
            v = next(fresh)
            self.refused(url, f"a header with {name}", lambda s=src, v=v: self.publish(url, v, s))
        for tail in ("#frag", "?versionId=2", "#"):
            self.case("hostile_input:url")
            v = next(fresh)
            self.refused(url, f"URL ...{tail}", lambda t=tail, v=v: self.publish(url + t, v, good))
        for bad in (-1, 10**12):
            self.case("hostile_input:version")
            self.refused(url, f"--version {bad}", lambda b=bad: self.publish(url, b, good))
        for odd in ("²", "١", "9" * 5000, "-1"):
            self.case("hostile_input:have")
            have = self.path(f"input/have-{len(odd)}-{odd[0]}.safetensors")
            write_file(have, dict(SafetensorsFile(good).items()), {VERSION_KEY: odd})
            if self.clean_pull(url, 1, "--have", str(have)) != 1:
                self.fail("versions_lost", f"pull --have, a file whose version is {odd[:8]!r}")
        self.case("hostile_input:dotted_names")
        dotted = self.new_store("dotted")
        tensors = {"../../escape": np.ones(8, np.float32), "a..b/c": np.arange(4, dtype=np.int32)}
        self.publish(dotted, 1, self.write_model(dotted, 1, tensors))
        self.expect_fetchable(dotted, 1, "tensor names with '..' and '/' (opaque strings)")

    def refused(self, url: str, what: str, run: Callable[[], Done]) -> None:
        """``run`` (a publish into ``url`` of bad input) must exit 2 and change nothing."""
        before = self.keys_under(url, "")
        done = run()
        if done.code == 0 or self.keys_under(url, "") != before:
            self.fail("bad_input_accepted", f"{what}: exit {done.code}, the store changed")
        elif done.code != 2:
            self.fail("wrong_exits", f"{what}: exit {done.code}, not 2: {done.err.strip()!r}")

    def estimate_fuzz(self) -> None:
        """The planner on hostile fleet files and status objects: one line, never a crash."""
        plan = ["estimate", "--params", "1e9", "--t-train-s", "600", "--batch", "64"]
        texts = [*HOSTILE_FLEETS]
        texts += [self.mutate(self.rng.choice(FLEETS)) for _ in range(self.plan.estimate_fuzz)]
        for i, text in enumerate(texts):
            self.case("estimate_fuzz:fleet")
            path = self.path(f"fleet/{i}.txt")
            path.write_bytes(text.encode("utf-8", "surrogatepass"))
            self.cli(*plan, "--fleet", str(path))
        url = self.new_store("statuses")
        self.publish(url, 1, self.write_model(url, 1, make_model(self.nprng, 64 * 1024)))
        bodies = [status_object(time.time(), c) for c in HOSTILE_STATUSES] + list(RAW_STATUSES)
        for i, body in enumerate(bodies):
            self.put(url, f"workers/h{i}.json", body)
        self.case("estimate_fuzz:status")  # each object read by both commands
        self.cli(*plan, "--from-status", url, "--status-endpoint-url", self.endpoint)
        self.cli("status", "--store", url)

    def mutate(self, text: str) -> str:
        """``text`` after a few random edits: characters cut or put in, a slice repeated."""
        for _ in range(self.rng.randint(1, 6)):
            at, kind = self.rng.randrange(len(text) + 1), self.rng.randrange(3)
            if kind == 0:
                text = text[:at] + text[at + self.rng.randint(1, 8) :]
            elif kind == 1:
                noise = "".join(self.rng.choices(MUTATIONS, k=self.rng.randint(1, 8)))
                text = text[:at] + noise + text[at:]
            else:
                text = text[:at] + text[at : at + 20] * self.rng.randint(2, 50) + text[at:]
        return text

    def truncated_object(self, backend: str) -> None:
        """A truncated payload object exits 3 on s3://, gs:// and az:// alike."""
        with self.cloud(backend) as found:
            if found is None:
                return
            self.case(f"truncated:{backend}")
            url, endpoint = found
            on = ("--store", url, "--endpoint-url", endpoint)
            src = self.write_model(url, 1, make_model(self.nprng, 128 * 1024))
            self.cli("publish", str(src), *on, "--version", "1", "--delta", "never", raw=True)
            store = open_store(url, endpoint_url=endpoint)
            key = next(o.key for o in store.list("v/") if o.key.endswith(".bin"))
            store.put_bytes(key, store.get_bytes(key)[: self.rng.randrange(1, 1000)])
            out = self.path(f"truncated/{backend}.safetensors")
            done = self.cli("pull", *on, "--out", str(out), raw=True)
            self.check_install(url, out, None, done.code)
            if done.code != 3:
                self.fail("wrong_exits", f"{backend}: a truncated object exits {done.code}: "
                          f"{done.err.strip()[-200:]!r}")  # fmt: skip

    @contextlib.contextmanager
    def cloud(self, backend: str) -> Iterator[tuple[str, str] | None]:
        """(store URL, endpoint) on the S3 store, fake-gcs-server or Azurite; None, noted, when the
        emulator cannot start here."""
        if backend == "s3":
            yield self.new_store("truncated"), self.endpoint
            return
        with contextlib.ExitStack() as stack:
            try:
                address = stack.enter_context(local_gcs() if backend == "gs" else local_azure())
            except Exception as exc:  # not installed on this machine: say so, skip it
                self.notes.append(f"truncated:{backend}: no emulator ({exc})")
                yield None
                return
            if backend == "gs":
                yield f"gs://{make_gcs_bucket(address)}/truncated", address
                return
            stack.enter_context(_env("AZURE_STORAGE_CONNECTION_STRING", address))
            blob_endpoint = address.split("BlobEndpoint=")[1].split(";")[0]
            yield f"az://{make_azure_container(address)}/truncated", blob_endpoint

    # -- 9. the distributed store under faults --------------------------------------------
    def cluster_outages(self) -> None:
        """A SeaweedFS cluster's volume server, then its filer, crash mid-download."""
        cluster_campaign(self)


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


# Hostile input for part 8. Headers that break the safetensors format (each names one
# tensor "w" of 4 bytes): int() would read "1", [1.0] and [true] as shapes.
_ENTRY = '"dtype": "F32", "data_offsets": [0, 4]'
BROKEN_HEADERS = {
    "a shape string": '{"w": {' + _ENTRY + ', "shape": "1"}}',
    "a float shape": '{"w": {' + _ENTRY + ', "shape": [1.0]}}',
    "a boolean shape": '{"w": {' + _ENTRY + ', "shape": [true]}}',
    "a name twice": '{"w": {' + _ENTRY + ', "shape": [1]}, "w": {' + _ENTRY + ', "shape": [1]}}',
    "deep nesting": "[" * 100_000 + "]" * 100_000,
}
JUNK_MANIFESTS = (b"", b"not json", b"{}", b'{"format": "wanrl-s3/manifest"}', b"[" * 100_000)
FLEETS = (
    "name,downlink_mbps,uplink_mbps,rtt_ms,region\nw1,100,20,40,eu\nw2,50,10,80,us\n",
    '{"workers": [{"downlink_mbps": 100, "uplink_mbps": 20, "rtt_ms": 40, "name": "w1"}]}',
)
HOSTILE_FLEETS = (
    FLEETS[0].replace("w1", "a" * 140_000),  # past the csv module's 128 KiB field limit
    '{"workers": [{"downlink_mbps": ' + "9" * 5000 + ', "uplink_mbps": 1, "rtt_ms": 1}]}',
    '{"workers": ' + "[" * 100_000 + "]" * 100_000 + "}",
)
MUTATIONS = ',"{}[]:\n\r\x00 -+.eE0129²١∞naNInfx\ufeff\U0001f600'
HOSTILE_STATUSES: tuple[dict[str, Any], ...] = (
    {}, {"installs": "x"}, {"installs": [1]}, {"installs": [{"version": "a"}]},
    {"installed_version": "3"}, {"absences": "ab"}, {"worker_id": 7}, {"round_trip_s": "fast"},
    {"updated_at_s": float("nan")}, {"installs": [{"version": 1, "download_s": "2"}]},
)  # fmt: skip
RAW_STATUSES = (  # what json.dumps cannot write: a 5,000-digit number, nesting past limits
    b'{"format": "wanrl-s3/worker-status", "worker_id": "h", "updated_at_s": ' + b"9" * 5000 + b"}",
    b'{"format": "wanrl-s3/worker-status", "worker_id": "h", "installs": '
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}",
)


def status_object(now_s: float, change: dict[str, Any]) -> bytes:
    """A worker status object that measured one download, with ``change`` applied."""
    install = {
        "version": 1, "tensors": 5, "path": [1], "downloaded_bytes": 10**6,
        "published_at_s": now_s - 9, "seen_at_s": now_s - 8, "ready_at_s": now_s - 2,
        "installed_at_s": now_s - 1, "download_s": 2.0, "verify_s": 0.1, "apply_s": 0.1,
    }  # fmt: skip
    status = {"format": "wanrl-s3/worker-status", "worker_id": "h", "updated_at_s": now_s,
              "round_trip_s": 0.05, "installs": [install], **change}  # fmt: skip
    return json.dumps(status).encode()


def manifest_digest(m: dict[str, Any]) -> str:
    """docs/format.md: BLAKE3 of the canonical manifest (sorted keys, no whitespace, unsigned)."""
    unsigned = {k: v for k, v in m.items() if k != "signature"}
    return blake3.blake3(
        json.dumps(unsigned, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


# The flags of each subcommand and the kind of value each takes (None: a switch).
FLAGS: dict[str, dict[str, str | None]] = {
    "publish": {"SRC": "path", "--store": "store", "--version": "number", "--delta": "word",
                "--keyframe-every": "number", "--base": "path", "--run-id": "word",
                "--signing-key": "path", "--part-mb": "number", "--concurrency": "number",
                "--json": None, "--endpoint-url": "endpoint", "--regions": "path",
                "--unsigned": None, "--verify-key": "path"},
    "pull": {"--store": "store", "--version": "number", "--out": "path", "--have": "path",
             "--concurrency": "number", "--fsync": None, "--json": None, "--verify-key": "path",
             "--region": "word", "--regions": "path", "--visible-timeout-s": "number",
             "--endpoint-url": "endpoint", "--run": "word"},
    "inspect": {"--store": "store", "--version": "number", "--json": None,
                "--verify-key": "path", "--endpoint-url": "endpoint"},
    "gc": {"--store": "store", "--keep": "number", "--grace-s": "number", "--dry-run": None,
           "--json": None, "--endpoint-url": "endpoint"},
    "status": {"--store": "store", "--fraction": "number", "--json": None, "--last": "number",
               "--endpoint-url": "endpoint"},
    "estimate": {"--params": "number", "--t-train-s": "number", "--batch": "number",
                 "--staleness": "number", "--kappa": "number", "--workers": "number",
                 "--downlink-mbps": "number", "--density": "number", "--json": None,
                 "--provider": "word", "--chunk-mb": "number", "--steps": "number"},
    "keygen": {"--out": "path"},
    "worker": {"--store": "store", "--out-dir": "path", "--poll-interval-s": "number",
               "--exit-after": "number", "--worker-id": "word", "--concurrency": "number",
               "--verify-key": "path", "--max-lag-versions": "number",
               "--endpoint-url": "endpoint", "--run": "word"},
    "relay": {"--regions": "path", "--once": None, "--poll-interval-s": "number",
              "--verify-key": "path", "--run": "word"},
}  # fmt: skip
TEMPLATES = {
    "publish": ["SRC", "--store", "--version"], "pull": ["--store", "--out"],
    "inspect": ["--store"], "gc": ["--store", "--dry-run"], "status": ["--store"],
    "estimate": ["--params", "--t-train-s", "--batch", "--staleness"], "keygen": ["--out"],
    "worker": ["--store", "--out-dir", "--exit-after"], "relay": ["--regions", "--once"],
}  # fmt: skip


def argv_strategy(st: Any, values: dict[str, list[str]]) -> Any:
    """argv of every subcommand: the usual flags with hostile values, and random ones."""
    words = st.sampled_from(["auto", "never", "always", "aws", "x", "a" * 200, "r-1", "../x"])
    text = st.text(max_size=12).filter(lambda s: "\x00" not in s)
    kinds = {
        "store": st.sampled_from(values["store"]),
        "path": st.sampled_from(values["path"])
        | text.map(lambda s: str(Path(values["path"][1]) / s)),
        "number": st.sampled_from(values["number"]) | st.integers().map(str) | st.floats().map(str),
        "endpoint": st.sampled_from(values["endpoint"]),
        "word": words | text,
    }

    def flag_args(command: str, flag: str) -> Any:
        kind = FLAGS[command][flag]
        if kind is None:
            return st.just([flag])
        value = kinds[kind] if kind != "path" or command != "keygen" else kinds["path"]
        return value.map(lambda v: [v] if flag == "SRC" else [flag, v])

    def for_command(command: str) -> Any:
        flags = sorted(FLAGS[command])
        chosen = st.lists(st.sampled_from(flags), max_size=5, unique=True)
        base = st.just(TEMPLATES[command]) | chosen
        return base.flatmap(
            lambda fs: st.tuples(*(flag_args(command, f) for f in fs)).map(
                lambda parts: [command] + [x for p in parts for x in p]
            )
        )

    return st.sampled_from(sorted(FLAGS)).flatmap(for_command)


# -- 9. the distributed store under faults (benchmarks/cluster_outage.py) ----------------
OUTAGE_WORKERS = 3
OUTAGE_MODEL_BYTES = 4 * 1024 * 1024


def cluster_campaign(c: Campaign) -> None:
    """benchmarks/cluster_outage.py on a SeaweedFS cluster of its own (see ``_cluster``), whatever
    store the rest of the campaign runs on: ``worker`` processes read it through a
    trickling proxy, so that a download is in flight at each kill, and every version is
    published with the CLI (each a case of ``cluster:publish``: its exit code and output are
    checked). Each cycle counts as ``cluster:volume_kill`` or ``cluster:filer_kill``."""
    if not c.plan.cluster_cycles:
        return
    with (
        _cluster(c.plan.cluster_ns_prefix) as cluster,
        FaultProxy(cluster.endpoint_url, seed=c.seed, trickle_bytes=64 * 1024,
                   trickle_delay_s=0.02, trickle_max_s=3.0) as slow,
    ):  # fmt: skip
        slow.set_rules([Rule(Fault.TRICKLE, method="GET", key=r"\.bin$")])
        url = f"s3://{make_bucket(cluster.endpoint_url)}/outage"
        children = {
            f"outage-{i}": _outage_worker(c, url, slow.url, i) for i in range(OUTAGE_WORKERS)
        }
        scenario = ClusterOutages(
            cluster, url, [w for _, w in children.values()],
            _cli_publish(c, url, cluster.endpoint_url),
            series(lambda: make_model(c.nprng, OUTAGE_MODEL_BYTES),
                   lambda model, _: nudge(c.nprng, model)),
            outage_s=c.plan.cluster_outage_s, stuck_bound_s=120.0,
        )  # fmt: skip
        kinds = ["volume", "filer"] * c.plan.cluster_cycles
        try:
            reports = scenario.run(kinds, lambda: _stop_outage_workers(children))
        finally:
            _stop_outage_workers(children)  # stopped already, unless the scenario failed early
    for report in reports:
        c.case(f"cluster:{report.kind}")
        for counter, what in report.failed:
            c.fail(counter, what)
        c.notes.append(report.summary())
        c.notes.extend(f"cluster:{report.kind}: {note}" for note in report.notes)


@contextlib.contextmanager
def _cluster(ns_prefix: str | None) -> Iterator[SeaweedCluster]:
    """Part 9's cluster: on 127.0.0.1, or on benchmarks/wan_fleet.py's store machines
    (namespaces named ``<ns_prefix>-<pid>-store<k>`` on a bridge this namespace reaches)."""
    if ns_prefix is None:
        with local_seaweed_cluster() as cluster:
            yield cluster
        return
    with regional_store("seaweed-cluster", ns_prefix) as (_, cluster):
        if cluster is None:
            raise RuntimeError("regional_store gave no cluster for seaweed-cluster")
        yield cluster


def _outage_worker(c: Campaign, url: str, endpoint: str, i: int) -> tuple[Child, OutageWorker]:
    wid, port = f"outage-{i}", free_port()
    out_dir = c.path(f"outage/{wid}/out")
    out_dir.mkdir(exist_ok=True)
    argv = worker_command(url, endpoint, str(out_dir), wid, 0.2, "--metrics-port", str(port),
                          "--metrics-addr", "127.0.0.1")[3:]  # fmt: skip
    child = fork_cli(argv, c.logs)
    return child, OutageWorker(wid, out_dir, f"http://127.0.0.1:{port}/metrics", child.err_path)


def _stop_outage_workers(children: dict[str, tuple[Child, OutageWorker]]) -> dict[str, int | None]:
    codes: dict[str, int | None] = {}
    for wid, (child, _) in children.items():
        code = child.stop(signal.SIGTERM)
        codes[wid] = 0 if code == 128 + signal.SIGTERM else code  # before its handler was set
    return codes


def _cli_publish(c: Campaign, url: str, endpoint: str) -> Publish:
    """``wanrl-s3 publish`` of each version from a file: None once it exits 0."""

    def publish(version: int, model: dict[str, np.ndarray]) -> str | None:
        src = c.path(f"outage/src/v{version}.safetensors")
        write_file(src, model)
        c.case("cluster:publish")  # its exit code and output are checked as every command's
        done = c.cli("publish", str(src), "--store", url, "--version", str(version),
                     "--endpoint-url", endpoint, raw=True)  # fmt: skip
        return None if done.code == 0 else f"exit {done.code}: {done.err.strip()[-160:]}"

    return publish


# -- report -------------------------------------------------------------------------------
def summary(c: Campaign) -> dict[str, Any]:
    totals = {k: sum(getattr(s, k) for s in c.stats.values()) for k in COUNTERS}
    kinds = {
        kind: {"count": s.count, "retries": s.retries, "faults": s.faults,
               "exits": dict(sorted(s.exits.items())), **{k: getattr(s, k) for k in COUNTERS}}
        for kind, s in c.stats.items() if s.count
    }  # fmt: skip
    return {
        "seed": c.seed,
        **totals,
        "kinds": kinds,
        "oversized_memory": c.memory,
        "findings": c.findings,
        "notes": c.notes,
        "crashed_parts": c.crashed,
    }


# the table's column heads: COUNTERS, in order
SHORT = ("part", "forg", "lost", "stuck", "trace", "frz", "coll", "badin", "exit", "unrep",
         "relay", "heal", "base", "plant", "unbd")  # fmt: skip


def table(report: dict[str, Any]) -> str:
    head = f"{'kind':38} {'count':>5} {'retries':>7} {'faults':>6} "
    rows = [head + " ".join(f"{name:>{len(name)}}" for name in SHORT) + "  exit codes"]
    for kind, k in report["kinds"].items():
        rows.append(
            f"{kind:38} {k['count']:5d} {k['retries']:7d} {k['faults']:6d} "
            + " ".join(f"{k[c]:{len(name)}d}" for c, name in zip(COUNTERS, SHORT, strict=True))
            + "  "
            + " ".join(f"{code}:{n}" for code, n in k["exits"].items())
        )
    rows.append("totals: " + ", ".join(f"{k} {report[k]}" for k in COUNTERS))
    for target, m in report["oversized_memory"].items():
        rows.append(
            f"oversized {target}: a {m['object_mib']} MiB object; the reader's peak RSS "
            f"{m['peak_rss_mib']} MiB, {m['growth_mib']:+} MiB over the same command before"
        )
    return "\n".join(rows)


# Campaign's methods, in the order they run
PARTS = ("fault_cycles", "multipart_faults", "publisher_kills", "worker_kills", "races",
         "tamperings", "relay_tamperings", "untrusted_bases", "cross_run_plants", "full_disks",
         "oversized_objects", "fuzz", "hostile", "cluster_outages")  # fmt: skip


def run_campaign(
    endpoint: str, seed: int, plan: Plan, workdir: Path, parts: tuple[str, ...] = PARTS,
    unchecked_endpoint: str | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Every part named in ``parts`` on ``endpoint`` (see :class:`Campaign`); the summary."""
    os.environ["AWS_ENDPOINT_URL"] = endpoint  # nothing a fuzzed flag names may leave this host
    cwd = os.getcwd()
    os.chdir(workdir)  # fuzzed relative paths land in the scratch directory
    try:
        return _run(Campaign(endpoint, workdir, seed, plan, unchecked_endpoint), parts)
    finally:
        os.chdir(cwd)


def _run(c: Campaign, names: tuple[str, ...]) -> dict[str, Any]:
    parts = [getattr(c, name) for name in PARTS if name in names]
    timings: dict[str, float] = {}
    with c.proxy, c.slow:
        for part in parts:
            start = time.monotonic()
            try:
                part()
            except Exception as exc:  # a campaign bug must not hide what the other parts found
                c.crashed.append(f"{part.__name__}: {type(exc).__name__}: {exc}")
            timings[part.__name__] = round(time.monotonic() - start, 1)
            print(f"{part.__name__}: {timings[part.__name__]} s", file=sys.stderr, flush=True)
    return {**summary(c), "seconds": timings}


def _parts(text: str) -> tuple[str, ...]:
    chosen = tuple(p.strip() for p in text.split(","))
    unknown = sorted(set(chosen) - set(PARTS))
    if unknown:
        raise argparse.ArgumentTypeError(f"no part {unknown[0]!r}: they are {','.join(PARTS)}")
    return chosen


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--quick", action="store_true", help="the fast part (make test)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--parts", type=_parts, default=PARTS, metavar="P[,P...]",
                        help=f"the parts to run, of {','.join(PARTS)} (default: all)")  # fmt: skip
    parser.add_argument("--cluster-ns-prefix", default=None, metavar="NAME",
                        help="part 9's cluster on namespaces NAME-... (root)")  # fmt: skip
    parser.add_argument("--oversize-mib", type=int, help="size of the oversized objects")
    parser.add_argument(
        "--store", choices=("seaweed", "moto"), default="seaweed",
        help="the S3 server of every part (default: seaweed, a SeaweedFS `weed mini`); with "
        "seaweed, multipart_faults still runs on moto: it needs a server that stores a "
        "flipped part (moto validates no upload checksum; SeaweedFS refuses the part "
        "itself), to show that the store's own upload confirmation keeps it out",
    )  # fmt: skip
    args = parser.parse_args()
    plan = Plan.quick() if args.quick else Plan()
    plan = dataclasses.replace(plan, cluster_ns_prefix=args.cluster_ns_prefix)
    if args.oversize_mib is not None:
        plan = dataclasses.replace(plan, oversize_mib=args.oversize_mib)
    start = time.monotonic()
    os.environ.update(CREDENTIALS)  # the local servers' keys, whatever the shell holds
    os.environ.pop("AWS_PROFILE", None)
    with contextlib.ExitStack() as stack:
        endpoint = stack.enter_context(local_s3() if args.store == "seaweed" else local_moto())
        unchecked = None
        if args.store == "seaweed" and "multipart_faults" in args.parts:
            unchecked = stack.enter_context(local_moto())
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="wanrl-faults-"))
        report = run_campaign(endpoint, args.seed, plan, Path(tmp), args.parts, unchecked)
    report["store"] = args.store
    report["unchecked_store"] = "moto" if unchecked else None
    report["parts"] = list(args.parts)
    report["total_s"] = round(time.monotonic() - start, 1)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        print(
            f"seed {args.seed}, {'quick' if args.quick else 'full'} campaign, {report['total_s']} s"
        )
        print(table(report))
        for line in report["findings"] + report["notes"]:
            print(" -", line)
    for line in report["crashed_parts"]:
        print(" - campaign part crashed:", line)
    return 1 if report["crashed_parts"] or any(report[k] for k in COUNTERS) else 0


if __name__ == "__main__":
    sys.exit(main())
