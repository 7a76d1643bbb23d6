"""docs/cdn.md runs as written: its Python blocks, and keys made by its openssl commands."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from wanrl_s3.cdn import CloudFrontSigner
from wanrl_s3.errors import UsageError
from wanrl_s3.testing import cdn_edge

ROOT = Path(__file__).resolve().parents[2]
CDN_MD = ROOT / "docs" / "cdn.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", CDN_MD.read_text(), flags=re.S)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not on PATH")
def test_the_signing_example_runs_with_keys_made_by_the_documented_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bash = re.findall(r"```bash\n(.*?)```", CDN_MD.read_text(), flags=re.S)[0]
    commands = [line for line in bash.splitlines() if line.startswith("openssl ")]
    assert len(commands) == 2  # make the private key, write its public half
    for command in commands:
        subprocess.run(["bash", "-c", command.replace("~/wanrl-keys", str(tmp_path))], check=True)
    assert (tmp_path / "public_key.pem").read_text().startswith("-----BEGIN PUBLIC KEY-----")
    (tmp_path / "cdn.key").write_text("nZtRohdNF9m3cKM24IcK4w==\n")
    (tmp_path / "cf.secret").write_text("0123456789abcdef0123456789abcdef\n")
    monkeypatch.chdir(tmp_path)
    exec(compile(python_blocks()[0], str(CDN_MD), "exec"), {})
    out = capsys.readouterr().out
    assert "v/000000000042/manifest.json?Policy=" in out
    assert "is_timed_hmac_valid_v0(" in out
    assert (tmp_path / "grant.json").read_text().startswith("{")
    ec = tmp_path / "ec.pem"
    subprocess.run(
        ["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(ec)],
        check=True,
    )
    assert CloudFrontSigner.from_file("K2JCJMDEHXQW5F", ec).sign_url("https://d.example/x")


def test_the_local_edge_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("moto.server")
    try:
        cdn_edge.nginx_binary()
    except UsageError as exc:
        pytest.skip(str(exc))
    exec(compile(python_blocks()[1], str(CDN_MD), "exec"), {})
    assert re.match(r"http://127\.0\.0\.1:\d+ 0", capsys.readouterr().out)
