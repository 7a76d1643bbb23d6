"""The fault campaign (issue 14): the CLI against moto under injected faults, kills,
races, tampering, full disks and fuzzed arguments, with every outcome checked.

```
.venv/bin/python benchmarks/faults.py --seed 14            # the whole campaign
.venv/bin/python benchmarks/faults.py --seed 14 --quick    # its fast part (make test runs it)
.venv/bin/python benchmarks/faults.py --seed 14 --json     # the summary as JSON
```

Everything goes through the real command line: in this process through the
``wanrl-s3`` console script's entry point (``main(argv)``, its output captured),
or, where a process must be killed, in a child forked from this one that runs
the same ``main`` (a fork starts in milliseconds; ``python -m wanrl_s3.cli``
spends seconds importing here). Faults come from :class:`wanrl_s3.testing.FaultProxy`
in front of moto; tampering edits the bucket directly.

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
  ``pull latest --verify-key --run``.

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
import json
import logging
import multiprocessing
import os
import random
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

from wanrl_s3 import SafetensorsFile, write_file
from wanrl_s3.testing import Fault, FaultProxy, Rule, local_moto, make_bucket, worker_command

COUNTERS = (
    "partial_installs", "forged_installs", "versions_lost", "stuck_workers", "tracebacks",
    "relayed_unverified", "replicas_unhealed", "untrusted_bases", "planted_installs",
)  # fmt: skip
VERSION_KEY = "wanrl_s3.version"  # docs/format.md, "Files written by pull"
MODEL_FILE = "model.safetensors"  # what `wanrl-s3 worker` keeps in --out-dir
STUCK_BOUND_S = 30.0
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
    relay_tamperings: int = 4  # per kind and signing mode
    untrusted_bases: int = 4  # per kind of untrusted key
    cross_run_plants: int = 4

    @classmethod
    def quick(cls) -> Plan:
        return cls(
            cycles_per_fault=1, publisher_kills=2, worker_kills=1, races=2, tamperings=1,
            worker_tamperings=1, worker_tamper_edits=2, both_signing_modes=False,
            full_disks=2, fuzz_examples=40, fuzz_worker_examples=3, relay_tamperings=1,
            untrusted_bases=1, cross_run_plants=1,
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
    relayed_unverified: int = 0
    replicas_unhealed: int = 0
    untrusted_bases: int = 0
    planted_installs: int = 0


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
    def __init__(self, endpoint: str, workdir: Path, seed: int, plan: Plan) -> None:
        self.endpoint, self.workdir, self.seed, self.plan = endpoint, workdir, seed, plan
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

    def path(self, name: str) -> Path:
        p = self.workdir / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    # -- the command line
    def cli(self, *argv: str, proxy: bool = False, raw: bool = False) -> Done:
        """``wanrl-s3 ARGV`` in this process, against moto (or through the proxy)."""
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

    def one_cycle(self, kind: str, url: str, state: dict[str, Any], rule: Rule) -> None:
        self.case(kind)
        version = state["next"]
        state["model"] = nudge(self.nprng, state["model"])
        src = self.write_model(url, version, state["model"])
        out = self.path(f"cycles/{kind}.safetensors")
        before = file_state(out)
        self.proxy.set_rules([rule])
        pub = self.publish(url, version, src, proxy=True)
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

    # -- 7. fuzzed arguments ------------------------------------------------------------------
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
        "findings": c.findings,
        "notes": c.notes,
        "crashed_parts": c.crashed,
    }


SHORT = ("part", "forg", "lost", "stuck", "trace", "relay", "heal", "base", "plant")  # COUNTERS


def table(report: dict[str, Any]) -> str:
    head = f"{'kind':34} {'count':>5} {'retries':>7} {'faults':>6} "
    rows = [head + " ".join(f"{name:>{len(name)}}" for name in SHORT) + "  exit codes"]
    for kind, k in report["kinds"].items():
        rows.append(
            f"{kind:34} {k['count']:5d} {k['retries']:7d} {k['faults']:6d} "
            + " ".join(f"{k[c]:{len(name)}d}" for c, name in zip(COUNTERS, SHORT, strict=True))
            + "  "
            + " ".join(f"{code}:{n}" for code, n in k["exits"].items())
        )
    rows.append("totals: " + ", ".join(f"{k} {report[k]}" for k in COUNTERS))
    return "\n".join(rows)


def run_campaign(endpoint: str, seed: int, plan: Plan, workdir: Path) -> dict[str, Any]:
    os.environ["AWS_ENDPOINT_URL"] = endpoint  # nothing a fuzzed flag names may leave this host
    cwd = os.getcwd()
    os.chdir(workdir)  # fuzzed relative paths land in the scratch directory
    try:
        return _run(Campaign(endpoint, workdir, seed, plan))
    finally:
        os.chdir(cwd)


def _run(c: Campaign) -> dict[str, Any]:
    parts = (c.fault_cycles, c.publisher_kills, c.worker_kills, c.races, c.tamperings,
             c.relay_tamperings, c.untrusted_bases, c.cross_run_plants, c.full_disks,
             c.fuzz)  # fmt: skip
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--quick", action="store_true", help="the fast part (make test)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args()
    plan = Plan.quick() if args.quick else Plan()
    start = time.monotonic()
    with local_moto() as endpoint, tempfile.TemporaryDirectory(prefix="wanrl-faults-") as tmp:
        report = run_campaign(endpoint, args.seed, plan, Path(tmp))
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
