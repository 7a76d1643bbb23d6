"""The CDN topology of benchmarks/wan_fleet.py: nginx edges in their own namespaces.

Each edge is a real caching proxy (``wanrl_s3.testing.local_cdn_edge``: nginx's
proxy cache, 1 MiB slices, concurrent misses collapsed) in a network namespace
``cdnread-<pid>-e<k>`` of its own, on the workers' side of the emulated links:
a worker reaches its edge over its own shaped link (its downlink, its uplink,
its round trip, as it reaches the bucket), and the edge reaches the bucket over
a delay line of ``--edge-rtt-ms``. Workers are dealt to edges in turn (host i to
edge i mod K). The bucket lets the edges read the run's ``v/`` and LATEST, as
the CDN's bucket policy does (``allow_edge_reads``); workers read LATEST and
list versions from the bucket, the manifests and payload from their edge.

    root namespace: moto S3 on 127.0.0.1, delay lines
       | 10.2xx.<k>.1 ==veth== 10.2xx.<k>.2   namespace cdnread-<pid>-e<k>: nginx edge k
       | (edge k -> bucket: a delay line of --edge-rtt-ms)
       | worker i -> its link -> a delay line of its rtt -> edge (i mod K)

Each edge's logs say what it fetched from the bucket (its fill) and what it
served the workers, per object and range, in bytes.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from wan_fleet_net import Children, Host, _sh, delay_line

from wanrl_s3.testing import CdnEdge, local_cdn_edge


@dataclass(frozen=True)
class EdgeHost:
    """One edge: its namespace, its address and the running nginx."""

    ns: str
    here: str  # the root end of its veth pair
    ip: str
    edge: CdnEdge


@contextlib.contextmanager
def edges(count: int, endpoint: str, edge_rtt_s: float, kids: Children) -> Iterator[list[EdgeHost]]:
    """``count`` edges in front of the bucket at ``endpoint``; all removed on the way out."""
    pid, bucket = os.getpid(), urllib.parse.urlsplit(endpoint)
    made: list[tuple[str, str]] = []
    with contextlib.ExitStack() as running:
        try:
            found = []
            for k in range(count):
                ns, here, there = f"cdnread-{pid}-e{k}", f"cre{k}h{pid}"[:15], f"cre{k}f{pid}"[:15]
                net = f"10.{200 + pid % 50}.{k + 1}"
                _sh("ip", "netns", "add", ns)
                made.append((ns, here))
                _sh("ip", "link", "add", here, "type", "veth", "peer", "name", there)
                _sh("ip", "link", "set", there, "netns", ns)
                _sh("ip", "addr", "add", f"{net}.1/30", "dev", here)
                _sh("ip", "link", "set", here, "up")
                for cmd in (
                    ("ip", "addr", "add", f"{net}.2/30", "dev", there),
                    ("ip", "link", "set", there, "up"),
                    ("ip", "link", "set", "lo", "up"),
                ):
                    _sh("ip", "netns", "exec", ns, *cmd)  # fmt: skip
                origin = delay_line(kids, f"{net}.1", (bucket.hostname or "", bucket.port or 80),
                                    edge_rtt_s / 2)  # fmt: skip
                edge = running.enter_context(local_cdn_edge(origin, netns=(ns, f"{net}.2")))
                found.append(EdgeHost(ns, here, f"{net}.2", edge))
            yield found
        finally:
            running.close()  # nginx stops before its namespace goes
            for ns, here in made:
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
                subprocess.run(["ip", "link", "del", here], capture_output=True)


def cdn_urls(kids: Children, hosts: list[Host], rtts_s: list[float], found: list[EdgeHost],
             bucket_prefix: str) -> list[str]:  # fmt: skip
    """Each host's ``--cdn-url``: its edge (host i: edge i mod K) across a delay line of its
    round trip, listening on the host's side of its shaped link."""
    urls = []
    for host, rtt_s in zip(hosts, rtts_s, strict=True):
        edge = found[host.index % len(found)]
        port = int(edge.edge.url.rsplit(":", 1)[1])
        far = delay_line(kids, host.host_ip, (edge.ip, port), rtt_s / 2)
        urls.append(f"{far}/{bucket_prefix}")
    return urls


@dataclass(frozen=True)
class EdgeLogs:
    """What one edge fetched from the bucket and served the workers (its nginx logs)."""

    fills: list  # EdgeRequest: edge -> bucket
    served: list  # EdgeRequest: edge -> workers


def read_logs(found: list[EdgeHost]) -> list[EdgeLogs]:
    return [EdgeLogs(e.edge.origin_requests(), e.edge.requests()) for e in found]


def egress(logs: list[EdgeLogs], prefix: str, version: int) -> dict:
    """Bytes of ``version``'s payload the bucket sent the edges (the fill, each edge's and
    in all) and the edges sent the workers, and the most times one edge fetched one slice."""
    folder = f"/{prefix}/v/{version:012d}/"

    def payload(requests: list) -> list:
        return [r for r in requests if folder in r.uri and r.uri.split("?")[0].endswith(".bin")]

    per_edge = [sum(r.body_bytes for r in payload(log.fills)) for log in logs]
    repeats = [Counter((r.uri, r.range) for r in payload(log.fills)) for log in logs]
    return {
        "fill_bytes": sum(per_edge),
        "fill_bytes_per_edge": per_edge,
        "served_bytes": sum(r.body_bytes for log in logs for r in payload(log.served)),
        "max_fetches_of_a_slice_per_edge": max(max(c.values(), default=0) for c in repeats),
    }
