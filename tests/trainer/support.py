"""Helpers the trainer core's tests share with the verl adapter's: a reader, a child process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

from wanrl_s3 import Subscriber
from wanrl_s3.store import open_store

ROOT = Path(__file__).resolve().parents[2]


def delete_bucket(where: dict[str, Any]) -> None:
    """The store goes away (an outage): the bucket of ``where["store_url"]`` and all in it."""
    import boto3

    bucket = boto3.resource("s3", endpoint_url=where["endpoint_url"]).Bucket(
        where["store_url"].split("/")[2]
    )
    bucket.objects.all().delete()
    bucket.delete()


def reader(store_url: str, endpoint_url: str) -> Subscriber:
    """A reader of the store straight from the S3 server (no fault proxy in between)."""
    return Subscriber(open_store(store_url, endpoint_url=endpoint_url))


def latest_version(sub: Subscriber) -> int | None:
    """The version LATEST names, None before the first commit."""
    pointer = sub.latest()
    return None if pointer is None else pointer.version


class ChildProcess:
    """A test's helper process (``python -m module``): JSON commands in, JSON replies out."""

    def __init__(self, module: str, arg: dict[str, Any], stderr: IO[str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, json.dumps(arg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=ROOT,
        )

    def ask(self, **cmd: Any) -> Any:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, "the child process died"
        return json.loads(line)

    def read(self) -> Any:
        assert self.proc.stdout
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.poll() is None:
            self.ask(cmd="quit")
        self.proc.wait(30)
