"""A local SeaweedFS cluster: a master, replicated volume servers, a filer, an S3 gateway.

The store a user who outgrows one machine runs on-premises, as separate
processes that can each be killed and started again, for fault tests and
benchmarks. :func:`local_seaweed_cluster` starts ``weed master`` (the volume
map; replication ``001`` by default: every volume on two servers of the same
rack), ``volumes`` ``weed volume`` servers, ``weed filer`` (the object
metadata, in an embedded LevelDB) and ``weed s3`` (the gateway, which keeps no
state of its own), each with its data in a folder of one temporary directory,
and kills them all (and removes the directory) when the block ends.

Replication strings are ``XYZ``: X more copies in other data centers, Y in
other racks of the same data center, Z on other servers of the same rack.
``001`` suits servers that share a rack (the default here); with
``racks=True`` each volume server is its own rack, for ``010``. Either way each
volume lives on two of the three servers, so any one of them may die.

Each component runs where its :class:`Placement` says: an address and,
optionally, a network namespace (``ip netns exec``; root only) that the caller
made and that reaches the others. Ports are drawn as for :func:`~.local_seaweedfs`
(a port and port + 10000, and no other SeaweedFS's gRPC socket in /tmp named by it).

Ready means: the master leads and lists every volume server, the filer answers,
and the gateway answers a request signed with :data:`~.seaweed.CREDENTIALS`.
:meth:`SeaweedCluster.kill` and :meth:`SeaweedCluster.start` take one
component down (SIGKILL: a crash, nothing flushed) and bring it back on the same
address and data, waiting until it serves again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UsageError
from .seaweed import (
    CREDENTIALS,
    RUNNING,
    _die_with_parent,
    _free_ports,
    _identities,
    _local_socket,
    _pair_free,
    answers,
    remove_grpc_sockets,
    s3_client,
    weed_binary,
)

_GRPC_OFFSET = 10000
_START_TRIES = 3
_MAX_VOLUMES = 2000  # per server: one volume (two copies) per bucket, grown on creation
_PROBE_S = 0.2


@dataclass(frozen=True)
class Placement:
    """Where a component runs: the address it binds and announces, and the network
    namespace to run it in (None: this process's)."""

    ip: str = "127.0.0.1"
    netns: str | None = None


@dataclass
class Component:
    """One ``weed`` process of the cluster: where it runs, how to start it, its log."""

    name: str  # master, volume0, volume1, ..., filer, s3
    placement: Placement
    port: int
    argv: list[str]
    folder: Path
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    starts: int = 0
    killed: bool = False  # by :meth:`kill`: its exit is no failure

    @property
    def address(self) -> str:
        return f"{self.placement.ip}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    @property
    def log(self) -> Path:
        return self.folder / "weed.log"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def spawn(self) -> None:
        """Start the process (not waiting for it to serve); its log is appended to."""
        pre = ["ip", "netns", "exec", self.placement.netns] if self.placement.netns else []
        self.starts, self.killed = self.starts + 1, False
        with self.log.open("ab") as out:
            out.write(f"--- start {self.starts}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [*pre, *self.argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "TMPDIR": str(self.folder)},  # its glog files land there
                preexec_fn=_die_with_parent(),
            )

    def kill(self) -> None:
        """SIGKILL (a crash: nothing flushed, no goodbye to the master) and reap."""
        if self.proc is None:
            return
        self.killed = True
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()
        self.proc.wait()

    def exited(self) -> str | None:
        """Why the process is gone (its status and log tail), or None while it runs
        (or was killed on purpose)."""
        if self.proc is None or self.killed or self.proc.poll() is None:
            return None
        tail = self.log.read_text(errors="replace")[-800:].strip()
        return f"{self.name} exited with status {self.proc.returncode}: {tail}"


class SeaweedCluster:
    """A running cluster: its S3 endpoint, its components by name, kill and start."""

    def __init__(self, components: dict[str, Component], replication: str, data_dir: Path) -> None:
        self.components = components
        self.replication = replication
        self.data_dir = data_dir
        self.volume_names = tuple(n for n in components if n.startswith("volume"))
        self._s3 = s3_client(self.endpoint_url)

    @property
    def endpoint_url(self) -> str:
        """The S3 gateway's URL: what a store is opened on."""
        return self.components["s3"].url

    @property
    def master_url(self) -> str:
        """The master's HTTP URL (its ``/dir/status`` lists the volume servers)."""
        return self.components["master"].url

    @property
    def filer_url(self) -> str:
        """The filer's HTTP URL."""
        return self.components["filer"].url

    @property
    def ports(self) -> tuple[int, ...]:
        """Every component's port."""
        return tuple(c.port for c in self.components.values())

    # -- faults -------------------------------------------------------------------------
    def kill(self, name: str) -> None:
        """Crash one component (SIGKILL); the others keep running."""
        self._component(name).kill()

    def start(self, name: str, timeout_s: float = 120.0) -> None:
        """Start a component that was killed, on its address and data; return once it
        serves again (a volume server: the master lists it; the filer and the gateway:
        a signed request is answered)."""
        component = self._component(name)
        if component.running:
            raise UsageError(f"{name} is running: kill it first")
        component.spawn()
        self._wait_serves(component, timeout_s)

    def restart(self, name: str, timeout_s: float = 120.0) -> None:
        """Crash component ``name`` and start it again; returns once it serves (:meth:`start`)."""
        self.kill(name)
        self.start(name, timeout_s)

    # -- what it says about itself ------------------------------------------------------
    def volume_servers(self) -> set[str]:
        """The volume servers the master lists now, by component name."""
        status = self._get_json(f"{self.master_url}/dir/status")
        urls = {
            node["Url"]
            for dc in status["Topology"].get("DataCenters") or []
            for rack in dc.get("Racks") or []
            for node in rack.get("DataNodes") or []
        }
        return {n for n in self.volume_names if self.components[n].address in urls}

    def holders(self, bucket: str, key: str) -> set[str]:
        """The volume servers (component names) that hold a copy of an object's data, by
        its chunks in the filer and their volumes' locations in the master."""
        path = urllib.parse.quote(f"/buckets/{bucket}/{key}")
        entry = self._get_json(f"{self.filer_url}{path}?metadata=true")
        volume_ids = {
            int(str(chunk.get("file_id") or chunk["fid"]["volume_id"]).split(",")[0])
            for chunk in entry.get("chunks") or []
        }
        found: set[str] = set()
        for volume_id in volume_ids:
            lookup = self._get_json(f"{self.master_url}/dir/lookup?volumeId={volume_id}")
            urls = {loc["url"] for loc in lookup.get("locations") or []}
            found |= {n for n in self.volume_names if self.components[n].address in urls}
        return found

    def grow_volume(self, bucket: str) -> None:
        """Give ``bucket`` its volume (on two servers) now, not on its first write."""
        url = f"{self.master_url}/vol/grow?collection={bucket}&count=1"
        with urllib.request.urlopen(url, timeout=30) as resp:  # noqa: S310 - our own master
            resp.read()

    def wait_healthy(self, timeout_s: float = 120.0) -> None:
        """Return once every component serves (see the module's docstring)."""
        for component in self.components.values():
            self._wait_serves(component, timeout_s)

    # -- internals ----------------------------------------------------------------------
    def _component(self, name: str) -> Component:
        if name not in self.components:
            raise UsageError(f"no component {name!r}: the cluster has {', '.join(self.components)}")
        return self.components[name]

    def _serves(self, c: Component) -> bool:
        try:
            if c.name == "master":
                return bool(self._get_json(f"{c.url}/cluster/status").get("IsLeader"))
            if c.name.startswith("volume"):
                return c.name in self.volume_servers()
            if c.name == "filer":
                self._get_json(f"{c.url}/?limit=1")
                return answers(self._s3) if self.components["s3"].running else True
            return answers(self._s3)
        except (OSError, ValueError, KeyError):  # not up yet: refused, reset, a half answer
            return False

    def _wait_serves(self, component: Component, timeout_s: float) -> None:
        """Wait until ``component`` serves; a component that exited on its own fails it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            gone = next((e for c in self.components.values() if (e := c.exited())), None)
            if gone:
                raise UsageError(f"SeaweedFS cluster: {gone}")
            if self._serves(component):
                return
            time.sleep(_PROBE_S)
        raise UsageError(
            f"SeaweedFS cluster: {component.name} did not serve within {timeout_s:g} s"
        )

    @staticmethod
    def _get_json(url: str) -> dict[str, Any]:
        request = urllib.request.Request(url, headers={"Accept": "application/json"})  # noqa: S310
        with urllib.request.urlopen(request, timeout=5) as resp:  # noqa: S310 - our own servers
            found = json.loads(resp.read())
        if not isinstance(found, dict):
            raise ValueError(f"{url} answered {type(found).__name__}, not an object")
        return found

    def stop(self) -> None:
        """Kill every component, in reverse start order, and remove their gRPC sockets."""
        for component in reversed(self.components.values()):
            component.kill()
        remove_grpc_sockets(self.ports)


def _argvs(
    binary: str,
    placement: Mapping[str, Placement],
    ports: Mapping[str, int],
    data_dir: Path,
    replication: str,
    racks: bool,
) -> dict[str, list[str]]:
    """Each component's command line (the master and the filer by address)."""

    def where(name: str, bind: str = "ip.bind") -> list[str]:
        ip = placement[name].ip
        return [f"-ip={ip}", f"-{bind}={ip}", f"-port={ports[name]}",
                f"-port.grpc={ports[name] + _GRPC_OFFSET}"]  # fmt: skip

    master = f"{placement['master'].ip}:{ports['master']}"
    argvs = {
        "master": [binary, "master", *where("master"), f"-mdir={data_dir / 'master'}",
                   "-peers=none", f"-defaultReplication={replication}",
                   "-telemetry=false"],
    }  # fmt: skip
    volumes = [n for n in ports if n.startswith("volume")]
    for i, name in enumerate(volumes):
        argvs[name] = [binary, "volume", *where(name), f"-dir={data_dir / name}",
                       f"-master={master}", f"-max={_MAX_VOLUMES}", "-preStopSeconds=0",
                       *([f"-rack=rack{i}"] if racks else [])]  # fmt: skip
    argvs["filer"] = [binary, "filer", *where("filer"), f"-master={master}",
                      f"-defaultStoreDir={data_dir / 'filer'}",
                      f"-localSocket={_local_socket(ports['filer'], 'filer')}"]  # fmt: skip
    config = data_dir / "s3" / "s3.json"
    config.write_text(json.dumps(_identities()))
    filer = f"{placement['filer'].ip}:{ports['filer']}"
    argvs["s3"] = [binary, "s3", *where("s3"), f"-filer={filer}", f"-config={config}",
                   "-port.iceberg=0", "-port.lance=0", "-autoCreateBucket=false",
                   f"-localSocket={_local_socket(ports['s3'], 's3')}"]  # fmt: skip
    return argvs


def _names(volumes: int) -> tuple[str, ...]:
    return ("master", *(f"volume{i}" for i in range(volumes)), "filer", "s3")


def _check(volumes: int, replication: str, placement: Mapping[str, Placement]) -> None:
    if volumes < 1:
        raise UsageError(f"volumes must be at least 1, got {volumes}")
    if len(replication) != 3 or not replication.isdigit():
        raise UsageError(f"replication is three digits (XYZ, e.g. 001), got {replication!r}")
    copies = 1 + sum(int(d) for d in replication)
    if copies > volumes:
        raise UsageError(
            f"replication {replication} keeps {copies} copies: it needs at least {copies} "
            f"volume servers, got {volumes}"
        )
    unknown = set(placement) - set(_names(volumes))
    if unknown:
        raise UsageError(
            f"no component {sorted(unknown)[0]!r} to place: they are {', '.join(_names(volumes))}"
        )


@contextmanager
def local_seaweed_cluster(
    volumes: int = 3,
    replication: str = "001",
    placement: Mapping[str, Placement] | None = None,
    *,
    racks: bool = False,
    timeout_s: float = 120.0,
) -> Iterator[SeaweedCluster]:
    """A SeaweedFS cluster for the duration of the block (see the module's docstring).

    ``placement``: where each component runs, by name (``master``, ``volume0`` ...,
    ``filer``, ``s3``); a component not named runs on 127.0.0.1 in this namespace.
    Sets :data:`CREDENTIALS` in this process's environment where none are set.
    """
    _check(volumes, replication, placement or {})
    where = {n: (placement or {}).get(n, Placement()) for n in _names(volumes)}
    binary = weed_binary()
    for key, value in CREDENTIALS.items():
        os.environ.setdefault(key, value)
    data_dir = Path(tempfile.mkdtemp(prefix="wanrl-seaweed-cluster-"))
    try:
        cluster = _start(binary, where, data_dir, replication, racks, timeout_s)
        RUNNING[cluster.endpoint_url] = cluster
        try:
            yield cluster
        finally:
            RUNNING.pop(cluster.endpoint_url, None)
            cluster.stop()
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _start(
    binary: str,
    where: dict[str, Placement],
    data_dir: Path,
    replication: str,
    racks: bool,
    timeout_s: float,
) -> SeaweedCluster:
    """Start every component in order, each once the one it needs serves; ports taken
    meanwhile by another process mean fresh ports and a fresh folder."""
    last = ""
    for attempt in range(_START_TRIES):
        run_dir = data_dir / f"run{attempt}"
        ports = _free_ports("127.0.0.1", fixed_s3=None, names=tuple(where))
        if not all(_pair_free(p.ip, ports[n]) for n, p in where.items() if not p.netns):
            continue  # taken on another address of this namespace: draw again
        for name in where:
            (run_dir / name).mkdir(parents=True)
        argvs = _argvs(binary, where, ports, run_dir, replication, racks)
        components = {n: Component(n, where[n], ports[n], argvs[n], run_dir / n) for n in where}
        cluster = SeaweedCluster(components, replication, run_dir)
        try:
            for component in components.values():
                component.spawn()
                cluster._wait_serves(component, timeout_s)
        except UsageError as exc:
            cluster.stop()
            last = str(exc)
            if "address already in use" in last or "not available" in last:
                continue
            raise
        return cluster
    raise UsageError(f"the SeaweedFS cluster did not start after {_START_TRIES} tries: {last}")
