"""A real caching edge on 127.0.0.1 for tests and benchmarks: nginx's proxy cache.

:func:`local_cdn_edge` starts nginx (Debian's ``nginx-light``; install it with
``scripts/install-nginx.sh``) as a caching reverse proxy in front of an HTTP
origin (a moto or SeaweedFS S3 endpoint, any local server) and yields a
:class:`CdnEdge`. It behaves like a CDN's edge for what wanrl-s3 relies on:

- it honours the origin's ``Cache-Control``: ``max-age`` caches, ``no-store``,
  ``no-cache`` and ``private`` do not; ``default_ttl_s`` applies only to
  responses that say nothing, like CloudFront's default TTL;
- ranged GETs are cached in aligned slices (nginx's slice module), so two
  readers of different ranges of one object share what the origin sent once;
- concurrent misses of one slice go to the origin once (``proxy_cache_lock``),
  as a CDN collapses requests;
- the query string is passed to the origin but is not part of the cache key, as
  with a CDN cache policy that ignores the signing parameters (S3 presigned
  URLs work through it).

Every request that leaves the edge for the origin passes a second nginx server
that only logs it, so :meth:`CdnEdge.origin_requests` counts exactly what
reached the origin. Responses carry ``X-Cache-Status`` (HIT, MISS, ...). The
cache lives in a temporary folder, removed with the edge; nginx runs with
``user root;`` when started as root, because its worker must write that folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import UsageError
from .endpoint import free_port

_NGINX_CANDIDATES = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
_INSTALL_HINT = (
    "local_cdn_edge needs nginx: run scripts/install-nginx.sh (apt-get install nginx-light)"
)
#: The edge's and its origin tap's ports inside a benchmark's own network namespace.
NETNS_PORTS = (8080, 8081)
_ARG = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CONF = """\
{user}worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    client_body_temp_path {d}/tmp/body;
    proxy_temp_path {d}/tmp/proxy;
    fastcgi_temp_path {d}/tmp/fastcgi;
    uwsgi_temp_path {d}/tmp/uwsgi;
    scgi_temp_path {d}/tmp/scgi;
    log_format edge '$request_method "$request_uri" $status $upstream_cache_status '
                    '$body_bytes_sent "$http_range"';
    log_format origin '$request_method "$request_uri" $status - $body_bytes_sent "$http_range"';
    proxy_cache_path {d}/cache levels=1:2 keys_zone=edge:16m max_size={max_cache_mb}m
                     inactive=7d use_temp_path=off;
    server {{
        listen {listen};
        access_log {d}/edge.log edge;
        location / {{
            {require_arg}
            slice {slice_bytes};
            proxy_cache edge;
            proxy_cache_key $uri$slice_range;
            proxy_set_header Range $slice_range;
            proxy_cache_lock on;
            proxy_cache_lock_timeout 60s;
            {default_ttl}
            proxy_http_version 1.1;
            proxy_pass http://{tap};
            add_header X-Cache-Status $upstream_cache_status always;
        }}
    }}
    server {{
        listen {tap};
        access_log {d}/origin.log origin;
        location / {{
            proxy_http_version 1.1;
            proxy_set_header Host {origin_host};
            proxy_pass {origin_url};
        }}
    }}
}}
"""


@dataclass(frozen=True)
class EdgeRequest:
    """One line of an edge log: what was asked and, on the edge side, how the cache answered."""

    method: str
    uri: str
    status: int
    cache_status: str  # HIT, MISS, EXPIRED, BYPASS, ... ("-" for the origin log)
    body_bytes: int  # the bytes of the response's body that were sent
    range: str  # the Range header sent ("-" if none)


class CdnEdge:
    """A running nginx edge: ``url`` to read through, logs to count what the origin served."""

    def __init__(self, url: str, folder: Path, proc: subprocess.Popen[bytes]) -> None:
        self.url, self._folder, self._proc = url, folder, proc

    def origin_requests(self) -> list[EdgeRequest]:
        """Every request that reached the origin, in order."""
        return _read_log(self._folder / "origin.log")

    def requests(self) -> list[EdgeRequest]:
        """Every request the edge answered, with its cache status. A line is written just
        after its response is sent, so a caller may see a response before its line."""
        return _read_log(self._folder / "edge.log")

    def running(self) -> bool:
        """Whether the edge's process is still running."""
        return self._proc.poll() is None

    def stop(self) -> None:
        """Stop nginx (its workers with it); safe to call twice."""
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)  # fast shutdown: master stops its workers
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)  # our own session: nginx and its workers
                self._proc.wait()


def allow_edge_reads(endpoint_url: str, bucket: str, prefix: str) -> None:
    """Let an edge that reads anonymously (this module's) GET ``prefix/v/*`` and
    ``prefix/LATEST`` of ``bucket`` at a local S3 endpoint, and nothing else: the
    bucket policy statement ``terraform/modules/cloudfront-cdn`` gives a
    distribution, with the distribution's identity left out."""
    import boto3

    prefix = prefix.strip("/")
    root = f"arn:aws:s3:::{bucket}/{prefix}/" if prefix else f"arn:aws:s3:::{bucket}/"
    statement = {
        "Sid": "EdgeReadsVersionsAndLatest",
        "Effect": "Allow",
        "Principal": "*",
        "Action": "s3:GetObject",
        "Resource": [f"{root}v/*", f"{root}LATEST"],
    }
    policy = {"Version": "2012-10-17", "Statement": [statement]}
    client = boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1")
    client.put_bucket_policy(Bucket=bucket, Policy=json.dumps(policy))


def nginx_binary() -> str:
    """The nginx executable (PATH, then Debian's /usr/sbin), or a UsageError naming the fix."""
    for path in (shutil.which("nginx") or "", *_NGINX_CANDIDATES):
        if path and os.access(path, os.X_OK):
            return path
    raise UsageError(_INSTALL_HINT)


@contextmanager
def local_cdn_edge(
    origin_url: str,
    *,
    default_ttl_s: int | None = None,
    slice_bytes: int = 1 << 20,
    max_cache_mb: int = 4096,
    timeout_s: float = 30.0,
    require_arg: tuple[str, str] | None = None,
    netns: tuple[str, str] | None = None,
    port: int | None = None,
) -> Iterator[CdnEdge]:
    """An nginx caching edge in front of ``origin_url`` (``http://host:port``, no path).

    ``default_ttl_s``: how long to cache a 200/206 whose origin sent no caching
    headers (None: not at all). ``slice_bytes``: the cached range unit.
    ``require_arg``: (name, value) of a query parameter without which the edge
    answers 403, as a CDN that checks a signature does. ``netns``: (a network
    namespace, its address) to run in, for a benchmark's emulated network (root
    only); the edge then serves on that address, port :data:`NETNS_PORTS`.
    ``port``: the edge's port on 127.0.0.1 (default: a free one).
    """
    origin = urlsplit(origin_url)
    if origin.scheme != "http" or not origin.netloc or origin.path not in ("", "/") or origin.query:
        raise UsageError(f"origin_url must be http://host:port without a path; got {origin_url!r}")
    if slice_bytes < 4096 or slice_bytes % 4096:
        raise UsageError(f"slice_bytes must be a multiple of 4096; got {slice_bytes}")
    if require_arg is not None and not all(_ARG.match(part) for part in require_arg):
        raise UsageError(f"require_arg must be (name, value) of [A-Za-z0-9_-]; got {require_arg!r}")
    binary = nginx_binary()
    ip, tap_ip = (netns[1], netns[1]) if netns else ("127.0.0.1", "127.0.0.1")
    port, tap_port = NETNS_PORTS if netns else (port or free_port(), free_port())
    folder = Path(tempfile.mkdtemp(prefix="wanrl-cdn-edge-"))
    try:
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (folder / "tmp" / sub).mkdir(parents=True)
        conf = _CONF.format(
            user="user root;\n" if os.geteuid() == 0 else "",
            d=folder,
            listen=f"{ip}:{port}",
            tap=f"{tap_ip}:{tap_port}",
            origin_url=f"http://{origin.netloc}",
            origin_host=origin.netloc,
            slice_bytes=slice_bytes,
            max_cache_mb=max_cache_mb,
            require_arg=_required(require_arg),
            default_ttl=(
                f"proxy_cache_valid 200 206 {int(default_ttl_s)}s;" if default_ttl_s else ""
            ),
        )
        (folder / "nginx.conf").write_text(conf)
        where = ["ip", "netns", "exec", netns[0]] if netns else []
        argv = [*where, binary, "-p", str(folder), "-c", str(folder / "nginx.conf")]
        proc = subprocess.Popen(
            [*argv, "-e", str(folder / "error.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        edge = CdnEdge(f"http://{ip}:{port}", folder, proc)
        try:
            ends = ((ip, port), (tap_ip, tap_port))
            _wait_listening(proc, ends, timeout_s, folder / "error.log")
            yield edge
        finally:
            edge.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _required(arg: tuple[str, str] | None) -> str:
    """The nginx line that answers 403 to a request without query parameter ``arg``."""
    return f'if ($arg_{arg[0]} != "{arg[1]}") {{ return 403; }}' if arg else ""


def _wait_listening(
    proc: subprocess.Popen[bytes],
    ends: tuple[tuple[str, int], ...],
    timeout_s: float,
    error_log: Path,
) -> None:
    deadline = time.monotonic() + timeout_s
    pending = list(ends)
    while pending:
        if proc.poll() is not None:
            raise UsageError(
                f"nginx exited with status {proc.returncode} on start: {_tail(error_log)}"
            )
        if time.monotonic() > deadline:
            raise UsageError(f"nginx did not listen within {timeout_s:g} s: {_tail(error_log)}")
        try:
            with socket.create_connection(pending[0], timeout=1):
                pending.pop(0)
        except OSError:
            time.sleep(0.02)


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no error log"
    return lines[-1] if lines else "no error logged"


def _read_log(path: Path) -> list[EdgeRequest]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return []
    entries = []
    for line in text.splitlines():
        method, uri, status, cache_status, sent, rng = line.split(" ", 5)
        entries.append(
            EdgeRequest(
                method, uri.strip('"'), int(status), cache_status, int(sent), rng.strip('"')
            )
        )
    return entries
