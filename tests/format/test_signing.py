"""Signed manifests: with a verifier, unsigned and forged versions are never installed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from wanrl_s3.cli import main
from wanrl_s3.errors import SignatureError
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.format import layout
from wanrl_s3.format.signing import Signer, Verifier, generate_keypair
from wanrl_s3.io.safetensors_file import write_file
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store


@pytest.fixture
def keys() -> tuple[Signer, Verifier]:
    private, public = generate_keypair()
    return Signer(private), Verifier([public])


def test_signed_version_verifies_and_round_trips(tmp_path: Path, keys) -> None:
    signer, verifier = keys
    store = open_store(f"file://{tmp_path}/s")
    Publisher(store, signer=signer).publish({"w": np.arange(6, dtype=np.float32)}, 1)
    with Subscriber(store, verifier=verifier) as sub:
        assert sub.fetch(1).tensors["w"].tolist() == list(range(6))


def test_unsigned_forged_and_foreign_versions_are_refused(tmp_path: Path, keys) -> None:
    signer, verifier = keys
    store = open_store(f"file://{tmp_path}/s")
    Publisher(store, PublishConfig(delta="never")).publish({"w": np.ones(2, np.float32)}, 1)
    Publisher(store, PublishConfig(delta="never"), signer=signer).publish(
        {"w": np.ones(2, np.float32)}, 2
    )
    other = Signer(generate_keypair()[0])
    Publisher(store, PublishConfig(delta="never"), signer=other).publish(
        {"w": np.ones(2, np.float32)}, 3
    )
    raw = json.loads(store.get_bytes(layout.manifest_key(2)))
    raw["metadata"] = {"step": "999"}  # tamper with a signed manifest
    store.put_bytes(layout.manifest_key(2), json.dumps(raw).encode())
    with Subscriber(store, verifier=verifier) as sub:
        for version, needle in [(1, "not signed"), (2, "forged"), (3, "unknown key")]:
            with pytest.raises(SignatureError, match=needle):
                sub.fetch(version)


def test_cli_keygen_sign_and_verify(tmp_path: Path, capsys) -> None:
    key = tmp_path / "trainer"
    assert main(["keygen", "--out", str(key)]) == 0
    assert (tmp_path / "trainer.pem").stat().st_mode & 0o077 == 0
    src = write_file(tmp_path / "m.safetensors", {"w": np.ones(3, np.float32)})
    url = f"file://{tmp_path}/store"
    assert (
        main(
            [
                "publish",
                str(src),
                "--store",
                url,
                "--version",
                "1",
                "--signing-key",
                str(tmp_path / "trainer.pem"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    # an unsigned publication onto the signed run: refused, one line naming the flag
    assert main(["publish", str(src), "--store", url, "--version", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--signing-key" in err and "--unsigned" in err and "\n" not in err
    assert open_store(url).exists(layout.manifest_key(2)) is False  # nothing was uploaded
    assert main(["publish", str(src), "--store", url, "--version", "2", "--unsigned"]) == 0
    out = str(tmp_path / "o.safetensors")
    verify = ["--verify-key", str(tmp_path / "trainer.pub.pem")]
    assert main(["pull", "--store", url, "--version", "1", "--out", out, *verify]) == 0
    capsys.readouterr()
    assert main(["pull", "--store", url, "--version", "2", "--out", out, *verify]) == 3
    assert "not signed" in capsys.readouterr().err
    assert main(["keygen", "--out", str(key)]) == 2  # never overwrites a key
