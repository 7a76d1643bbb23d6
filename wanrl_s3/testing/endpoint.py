"""A local S3 endpoint for demos, benchmarks and users' own tests.

:func:`local_s3` starts a real S3 server, SeaweedFS (:mod:`.seaweed`), and
yields its endpoint URL; :func:`make_bucket` creates a bucket on it (or on any
S3 endpoint). :func:`local_moto` starts moto's ``ThreadedMotoServer`` instead,
a mock, for what a real server cannot give on one machine (it validates no
upload checksum: never rely on it for integrity). Both bind 127.0.0.1 unless
told another local address, such as one end of a test's veth pair, and come
with the ``dev`` extra (``pip install 'wanrl-s3[dev]'``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from ..errors import UsageError
from .seaweed import CREDENTIALS, RUNNING, local_seaweedfs

_SERVER = """
import logging, sys, threading
from moto.server import ThreadedMotoServer
logging.getLogger("werkzeug").setLevel(logging.ERROR)
server = ThreadedMotoServer(ip_address=sys.argv[2], port=int(sys.argv[1]), verbose=False)
server.start()
print("ready", flush=True)
sys.stdin.read()  # until the parent closes our stdin (or dies)
server.stop()
"""


def free_port(ip_address: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at ``ip_address`` right now."""
    with socket.socket() as s:
        s.bind((ip_address, 0))
        return int(s.getsockname()[1])


@contextmanager
def local_s3(
    timeout_s: float = 60.0, ip_address: str = "127.0.0.1", port: int | None = None
) -> Iterator[str]:
    """A SeaweedFS S3 server on ``ip_address`` for the duration of the block; its endpoint URL.

    ``port``: a fixed port (default: a free one; port + 10000 must be free too).
    Sets :data:`CREDENTIALS` in this process's environment if none are set: the
    server accepts only those (and :data:`~.seaweed.READ_ONLY_CREDENTIALS`).
    """
    with local_seaweedfs(timeout_s, ip_address, port) as server:
        yield server.endpoint_url


@contextmanager
def local_moto(
    timeout_s: float = 60.0, ip_address: str = "127.0.0.1", port: int | None = None
) -> Iterator[str]:
    """A moto S3 server on ``ip_address`` for the duration of the block; yields its endpoint URL.

    ``port``: a fixed port (default: a free one).
    Sets placeholder AWS credentials in this process's environment if none are set.
    """
    try:
        import moto.server  # noqa: F401
    except ImportError as exc:
        raise UsageError("local_moto needs moto: pip install 'moto[server]'") from exc
    for key, value in CREDENTIALS.items():
        os.environ.setdefault(key, value)
    port = port or free_port(ip_address)
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(port), ip_address],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        if _ready_line(proc, timeout_s) != "ready":
            raise UsageError(f"the local S3 server (moto) did not start within {timeout_s:g} s")
        yield f"http://{ip_address}:{port}"
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _ready_line(proc: subprocess.Popen[str], timeout_s: float) -> str:
    """The child's first line, or "" if none comes within ``timeout_s`` (never blocks longer)."""
    if proc.stdout is None:
        return ""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            return ""
    return proc.stdout.readline().strip()


def make_bucket(endpoint_url: str, name: str | None = None) -> str:
    """Create a bucket (a fresh random name unless ``name`` is given); returns its name.

    A bucket of that name that the caller already owns is fine (S3 in us-east-1
    answers so; SeaweedFS, like S3 elsewhere, says BucketAlreadyOwnedByYou). On
    a SeaweedFS this process started, the bucket's storage is made ready too, so
    that its first write does not wait for it (see :meth:`.SeaweedFS.grow_volume`).
    """
    import boto3

    name = name or f"wanrl-{uuid.uuid4().hex[:12]}"
    client = boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1")
    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
        client.create_bucket(Bucket=name)
    server = RUNNING.get(endpoint_url)
    if server is not None:
        server.grow_volume(name)
    return name


def worker_command(
    url: str, endpoint_url: str, out_dir: str, worker_id: str, poll_interval_s: float, *extra: str
) -> list[str]:
    """The argv of a `wanrl-s3 worker` process for a local store (tests and benchmarks)."""
    return [
        sys.executable, "-m", "wanrl_s3.cli", "worker", "--store", url,
        "--endpoint-url", endpoint_url, "--out-dir", out_dir, "--worker-id", worker_id,
        "--poll-interval-s", str(poll_interval_s), *extra,
    ]  # fmt: skip
