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


def test_keygen_and_inspect_say_who_signed_what(tmp_path: Path, capsys) -> None:
    """keygen prints the key id that inspect shows for each version and for LATEST, and
    that refusals name."""
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    out = capsys.readouterr().out
    key_id = out.strip().rsplit("key id ", 1)[1]
    assert len(key_id) == 16
    url = f"file://{tmp_path}/s"
    store = open_store(url)
    Publisher(store, PublishConfig(delta="never"), run_id="run-a").publish(
        {"w": np.ones(2, np.float32)}, 1
    )
    src = write_file(tmp_path / "m.safetensors", {"w": np.ones(2, np.float32)})
    sign = ["--signing-key", str(tmp_path / "k.pem")]
    assert main(["publish", str(src), "--store", url, "--version", "2", *sign]) == 0
    capsys.readouterr()
    assert main(["inspect", "--store", url, "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert [r["signed_by"] for r in listing["versions"]] == [None, key_id]
    assert [r["run"] for r in listing["versions"]] == ["run-a", "run-a"]  # one run throughout
    assert listing["latest_pointer"]["signed_by"] == key_id
    assert listing["latest_pointer"]["expires_at"] is not None
    assert main(["inspect", "--store", url]) == 0
    table = capsys.readouterr().out
    assert f"{key_id}" in table and "unsigned" in table and f"signed by {key_id}" in table
    assert main(["inspect", "--store", url, "--version", "2"]) == 0
    assert f"signed by key {key_id}" in capsys.readouterr().out
    other = tmp_path / "other"
    assert main(["keygen", "--out", str(other)]) == 0
    capsys.readouterr()
    verify = ["--verify-key", f"{other}.pub.pem"]
    assert (
        main(["pull", "--store", url, "--version", "2", "--out", str(tmp_path / "o"), *verify]) == 3
    )
    assert key_id in capsys.readouterr().err  # the refusal names the same id


def _signed_versions(tmp_path: Path) -> tuple[str, list[bytes]]:
    """Two versions, v1 signed by key a, v2 by key b; their public PEMs."""
    url = f"file://{tmp_path}/s"
    store = open_store(url)
    publics = []
    for v in (1, 2):
        private, public = generate_keypair()
        publics.append(public)
        Publisher(store, PublishConfig(delta="never"), signer=Signer(private)).publish(
            {"w": np.full(4, v, np.float32)}, v
        )
    return url, publics


def test_a_keyring_file_is_reloaded_when_it_changes(tmp_path: Path) -> None:
    """Rotation and revocation reach a running reader without a restart; a keyring that
    cannot be read refuses everything until it is fixed."""
    url, (a, b) = _signed_versions(tmp_path)
    keyring = tmp_path / "keyring.pem"
    keyring.write_bytes(b"# a, the old key\n" + a)
    verifier = Verifier.from_file(keyring)
    with Subscriber(open_store(url), verifier=verifier) as sub:
        assert sub.fetch(1).version == 1
        with pytest.raises(SignatureError, match="unknown key"):
            sub.fetch(2)
        keyring.write_bytes(a + b"# b, the new key\n" + b)  # rotation: b trusted too
        assert sub.fetch(2).version == 2
        keyring.write_bytes(b)  # a revoked: its version, though cached, is refused
        with pytest.raises(SignatureError, match="unknown key"):
            sub.fetch(1)
        assert sub.fetch(2).version == 2
        keyring.write_bytes(b"-----BEGIN PUBLIC KEY-----\nhalf a fi")  # a bad write
        with pytest.raises(SignatureError, match="cannot be used"):
            sub.fetch(2)
        keyring.unlink()
        with pytest.raises(SignatureError, match="cannot be used"):
            sub.fetch(2)
        keyring.write_bytes(b)
        assert sub.fetch(2).version == 2
    assert verifier.generation == 5


def test_pull_with_run_refuses_another_runs_planted_version(tmp_path: Path, capsys) -> None:
    assert main(["keygen", "--out", str(tmp_path / "k")]) == 0
    signer, verify = Signer.from_file(tmp_path / "k.pem"), ["--verify-key", f"{tmp_path}/k.pub.pem"]
    ours, theirs = open_store(f"file://{tmp_path}/ours"), open_store(f"file://{tmp_path}/theirs")
    Publisher(ours, run_id="exp-1", signer=signer).publish({"w": np.ones(4, np.float32)}, 1)
    Publisher(theirs, run_id="exp-2", signer=signer).publish({"w": np.zeros(4, np.float32)}, 2)
    for info in theirs.list(""):  # their keyframe and their LATEST, copied into our prefix
        ours.put_bytes(info.key, theirs.get_bytes(info.key))
    out = str(tmp_path / "o.safetensors")
    capsys.readouterr()
    argv = ["pull", "--store", f"file://{tmp_path}/ours", "--out", out, *verify]
    assert main([*argv, "--run", "exp-1"]) == 3
    err = capsys.readouterr().err.strip()
    assert "belongs to run 'exp-2'" in err and "\n" not in err and not Path(out).exists()
    assert main([*argv, "--run", "exp-1", "--version", "1"]) == 0  # its own version still pulls
    assert main([*argv, "--run", "../x"]) == 2
