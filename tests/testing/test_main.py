"""``python -m wanrl_s3.testing``: the helpers the docs' local recipes run.

A recipe starts ``serve-s3 --url-file FILE &`` and waits with ``wait-s3 --url-file FILE
--pid $!``: it must talk to the server it started and no other (a stale file, another
server on a port it hoped for), and learn at once, not after a minute, that its server
could not start.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from wanrl_s3.testing import CREDENTIALS

HELPERS = [sys.executable, "-m", "wanrl_s3.testing"]
CALL_TIMEOUT_S = 120  # bounds a failing test; no assertion depends on it


def _env() -> dict[str, str]:
    return {**os.environ, **CREDENTIALS}


def _wait(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HELPERS, "wait-s3", *args],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=CALL_TIMEOUT_S,
        check=False,
    )


@pytest.mark.parametrize("command", ["serve-s3", "wait-s3", "make-policy"])
def test_helper_commands_have_help(command: str) -> None:
    done = subprocess.run([*HELPERS, command, "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and command in done.stdout


def test_serve_announces_its_endpoint_once_ready_and_takes_it_back(tmp_path: Path) -> None:
    url_file = tmp_path / "s3.url"
    url_file.write_text("http://127.0.0.1:1\n1\n")  # a stale file, removed at start
    server = subprocess.Popen(
        [*HELPERS, "serve-s3", "--bucket", "demo", "--url-file", str(url_file)],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        done = _wait("--url-file", str(url_file), "--pid", str(server.pid), "--bucket", "demo")
        assert done.returncode == 0, done.stderr
        url = done.stdout.strip()
        assert url_file.read_text() == f"{url}\n{server.pid}\n"
        client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", **_keys())
        assert [b["Name"] for b in client.list_buckets()["Buckets"]] == ["demo"]
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(CALL_TIMEOUT_S) == 0
    assert not url_file.exists()


def test_wait_gives_up_at_once_when_its_server_exits(s3_endpoint: str, tmp_path: Path) -> None:
    """A taken port: the server fails, and wait-s3 says so without waiting out its timeout."""
    port = s3_endpoint.rsplit(":", 1)[1]
    url_file = tmp_path / "s3.url"
    server = subprocess.Popen(
        [*HELPERS, "serve-s3", "--port", port, "--url-file", str(url_file)],
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    done = _wait("--url-file", str(url_file), "--pid", str(server.pid), "--timeout-s", "3600")
    _, server_err = server.communicate(timeout=CALL_TIMEOUT_S)
    assert server.returncode == 2 and f"port {port}" in server_err
    assert done.returncode == 2
    assert f"the server (pid {server.pid}) exited before it was ready" in done.stderr
    assert not url_file.exists()


def test_wait_takes_no_endpoint_that_another_process_wrote(
    s3_endpoint: str, tmp_path: Path
) -> None:
    """A file left by another server (or a stale one) names a live endpoint: not ours."""
    url_file = tmp_path / "s3.url"
    url_file.write_text(f"{s3_endpoint}\n{os.getpid()}\n")
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        done = _wait("--url-file", str(url_file), "--pid", str(ours.pid), "--timeout-s", "1")
        assert done.returncode == 2 and "did not answer within 1 s" in done.stderr
        url_file.write_text(f"{s3_endpoint}\n{ours.pid}\n")
        done = _wait("--url-file", str(url_file), "--pid", str(ours.pid))
        assert (done.returncode, done.stdout.strip()) == (0, s3_endpoint)
    finally:
        ours.kill()
        ours.wait()


def test_wait_takes_a_url_or_a_url_file(tmp_path: Path) -> None:
    for args in ((), ("http://127.0.0.1:1", "--url-file", str(tmp_path / "f"))):
        done = _wait(*args)
        assert done.returncode == 2 and "an endpoint URL or --url-file FILE" in done.stderr


def test_wait_for_a_url_times_out_with_exit_2() -> None:
    done = _wait("http://127.0.0.1:1", "--timeout-s", "0.5")
    assert done.returncode == 2 and "did not answer within 0.5 s" in done.stderr


def _keys() -> dict[str, str]:
    return {
        "aws_access_key_id": CREDENTIALS["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
    }
