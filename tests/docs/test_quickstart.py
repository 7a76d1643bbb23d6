"""docs/quickstart.md's "Try it on this machine" block runs as written, on this machine."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from wanrl_s3.testing import free_port_pair

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "docs" / "quickstart.md"


def _block() -> str:
    section = QUICKSTART.read_text().split("## 0. Try it on this machine", 1)[1]
    return re.findall(r"```bash\n(.*?)```", section, flags=re.S)[0]


def test_try_it_on_this_machine(tmp_path: Path) -> None:
    script = _block()
    assert script.startswith(". .venv/bin/activate")
    port = str(free_port_pair())  # the doc's port 9000 (and 19000) may be taken here
    script = script.replace("9000", port).replace('"$(mktemp -d)"', str(tmp_path))
    # the suite's venv is this interpreter's; run the block as a user would, from the root
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
    logs = "".join(p.read_text() for p in tmp_path.glob("*.log"))
    assert proc.returncode == 0, (out + logs)[-3000:]
    assert "published v1 (full)" in out and "published v2 (delta against v1)" in out
    for w in ("w1", "w2"):
        assert (tmp_path / w / "model.safetensors").exists(), out[-2000:]
    assert re.search(r"\bw1\b", out) and re.search(r"\bw2\b", out), out[-2000:]


@pytest.mark.parametrize("command", ["serve-s3", "wait-s3", "make-policy"])
def test_helper_commands_have_help(command: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wanrl_s3.testing", command, "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0 and command in done.stdout
