"""docs/quickstart.md's "Try it on this machine" blocks run as written, on this machine."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3.testing import free_port, free_port_pair
from wanrl_s3.testing.cdn_edge import nginx_binary

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"


def _block(index: int = 0) -> str:
    section = QUICKSTART.read_text().split("## 0. Try it on this machine", 1)[1]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)[index]


def _run(script: str, tmp_path: Path, ports: tuple[str, ...] = ("9000",)) -> tuple[int, str]:
    """The block as a user runs it, from the checkout's root, on free ports; (status, output)."""
    assert script.startswith(". .venv/bin/activate")
    for port in ports:  # the doc's ports may be taken on a test machine
        # SeaweedFS's S3 port takes port + 10000 too (gRPC): the pair must be free
        free = free_port_pair() if port == "9000" else free_port()
        script = script.replace(port, str(free))
    script = script.replace('"$(mktemp -d)"', str(tmp_path))
    # the suite's venv is this interpreter's
    venv = Path(sys.executable).parent.parent
    script = script.replace(". .venv/bin/activate", f". {venv}/bin/activate")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # so that a hung run can be stopped whole
    )
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out


def test_try_it_on_this_machine(tmp_path: Path) -> None:
    code, out = _run(_block(), tmp_path)
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
    assert code == 0, (out + logs)[-3000:]
    assert "published v1 (full)" in out and "published v2 (delta against v1)" in out
    for w in ("w1", "w2"):
        assert (tmp_path / w / "model.safetensors").exists(), out[-2000:]
    assert re.search(r"\bw1\b", out) and re.search(r"\bw2\b", out), out[-2000:]


def test_through_a_cdn_edge_on_this_machine(tmp_path: Path) -> None:
    try:
        nginx_binary()
    except UsageError as exc:
        pytest.skip(str(exc))
    code, out = _run(_block(1), tmp_path, ("9000", "9080"))
    assert code == 0, out[-3000:]
    assert out.count("every tensor verified") == 2
    assert "X-Cache-Status: HIT" in out
    assert "the worker installed v1 through the edge" in out
    # the block cleans up after itself: its edge (nginx) stops listening
    found = re.search(r"CDN edge at http://127\.0\.0\.1:(\d+) ", out)
    assert found, out[-2000:]
    deadline = time.monotonic() + 20
    while _listening(int(found[1])):
        assert time.monotonic() < deadline, "the block left its edge running"
        time.sleep(0.2)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("command", ["serve-s3", "serve-cdn", "wait-s3", "make-policy"])
def test_helper_commands_have_help(command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wanrl_s3.testing", command, "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and command in done.stdout
