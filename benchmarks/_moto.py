"""A moto S3 server in its own process, for benchmarks (so it does not share our GIL)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import boto3

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
               "AWS_DEFAULT_REGION": "us-east-1"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def moto_server() -> Iterator[str]:
    """Start ``moto_server`` on 127.0.0.1 in a child process; yield its endpoint URL."""
    os.environ.update(CREDENTIALS)
    port = _free_port()
    exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("moto_server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


def make_bucket(endpoint: str, name: str) -> str:
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=name)
    return name
