"""Bad input, damaged stores and hostile disks at the command line (issue 14, items 5 and 7).

Each case gets the exit code its class deserves (wanrl_s3/errors.py), one line
on stderr, no traceback, and nothing half-written: 2 for what the caller can
fix (flags, files, a destination that cannot take the file), 3 for a damaged
version, 5 for an infeasible plan. Full and read-only disks are real tmpfs
mounts; the cases that once ended in a signal or a hang run in a subprocess.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from tests.tmpfs import tmpfs
from wanrl_s3.cli import main
from wanrl_s3.format import layout
from wanrl_s3.io.safetensors_file import write_file
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing import worker_command

KiB = 2**10
Cli = Callable[..., tuple[int, str]]


def policy(seed: int, kib: int = 600) -> dict[str, np.ndarray]:
    """Random bf16 tensors, ``kib`` KiB in all: one copy fits a 1 MiB tmpfs, two do not."""
    rng = np.random.default_rng(seed)
    n = kib * KiB // 8
    return {
        f"layers.{i}.w": rng.integers(0, 2**16, n, np.uint16).view(ml_dtypes.bfloat16)
        for i in range(4)
    }


def one_line_error(err: str) -> bool:
    return err.count("\n") == 1 and err.startswith("wanrl-s3: error: ") and "Traceback" not in err


def cli_command(*argv: str) -> list[str]:
    return [sys.executable, "-m", "wanrl_s3.cli", *argv]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    """``wanrl-s3 ARGV`` in this process: (exit code, stderr)."""

    def run(*argv: str) -> tuple[int, str]:
        code = main(list(argv))
        return code, capsys.readouterr().err

    return run


@pytest.fixture
def published(cli: Cli, s3_url: str, s3_endpoint: str, tmp_path: Path) -> str:
    """An s3:// store holding v1 of ``policy(1)``."""
    src = write_file(tmp_path / "v1.safetensors", policy(1))
    assert cli("publish", str(src), "--store", s3_url, "--endpoint-url", s3_endpoint,
               "--version", "1")[0] == 0  # fmt: skip
    return s3_url


def payload_key(store: ObjectStore) -> str:
    return next(o.key for o in store.list("v/") if o.key.endswith(".bin"))


# -- damaged versions: 3 at once, not 6 after retries, not 2 ----------------------------
@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_damaged_payload_object_exits_3(
    cli: Cli, url: str, s3_endpoint: str, tmp_path: Path, damage: str
) -> None:
    src = write_file(tmp_path / "v1.safetensors", policy(1, kib=64))
    endpoint = ("--endpoint-url", s3_endpoint)
    assert cli("publish", str(src), "--store", url, *endpoint, "--version", "1")[0] == 0
    store = open_store(url, endpoint_url=s3_endpoint)
    key = payload_key(store)
    if damage == "truncated":
        store.put_bytes(key, store.get_bytes(key)[:1000])
    else:
        store.delete([key])
    out = tmp_path / "out.safetensors"
    code, err = cli("pull", "--store", url, *endpoint, "--out", str(out))
    assert code == 3, err
    assert one_line_error(err)
    assert ("truncated" if damage == "truncated" else "missing") in err
    assert not out.exists() and not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]


# -- destinations that cannot take the file: 2, before any download ----------------------
@pytest.mark.parametrize(
    "target, needle",
    [
        ("{tmp}", "is a directory"),
        ("", "empty"),
        ("/proc/x.safetensors", "cannot create a file in /proc"),
        ("{ro}/x.safetensors", "Read-only file system"),
    ],
    ids=["a-directory", "empty", "proc", "read-only"],
)
def test_pull_to_a_destination_that_cannot_be_written_exits_2(
    cli: Cli, published: str, s3_endpoint: str, tmp_path: Path, target: str, needle: str
) -> None:
    with tmpfs(tmp_path / "ro", read_only=True) as ro:
        out = target.format(tmp=tmp_path, ro=ro)
        code, err = cli("pull", "--store", published, "--endpoint-url", s3_endpoint, "--out", out)
        assert os.listdir(ro) == []
    assert code == 2, err
    assert one_line_error(err) and needle in err and "internal error" not in err


def test_pull_to_a_full_disk_exits_2_and_keeps_the_old_file(
    published: str, s3_endpoint: str, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "tiny") as tiny:
        out = tiny / "model.safetensors"
        out.write_bytes(b"the previous file " * (600 * KiB // 18))
        before = out.read_bytes()
        done = subprocess.run(  # before the fix: SIGBUS, exit 135, nothing printed
            cli_command("pull", "--store", published, "--endpoint-url", s3_endpoint,
                        "--out", str(out)),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert one_line_error(done.stderr) and "No space left on device" in done.stderr
        assert out.read_bytes() == before
        assert sorted(os.listdir(tiny)) == ["model.safetensors"]


def test_a_worker_on_a_full_disk_exits_2_and_keeps_its_version(
    cli: Cli, published: str, s3_endpoint: str, tmp_path: Path
) -> None:
    endpoint = ("--endpoint-url", s3_endpoint)
    src = write_file(tmp_path / "v2.safetensors", policy(2))
    with tmpfs(tmp_path / "tiny") as tiny:
        held = tiny / "model.safetensors"
        assert cli("pull", "--store", published, *endpoint, "--out", str(held))[0] == 0
        assert cli("publish", str(src), "--store", published, *endpoint, "--version", "2",
                   "--delta", "never")[0] == 0  # fmt: skip
        before = held.read_bytes()
        done = subprocess.run(
            worker_command(published, s3_endpoint, str(tiny), "w1", 0.1, "--exit-after", "1"),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        last = done.stderr.strip().splitlines()[-1]
        assert last.startswith("wanrl-s3: error: ") and "No space left on device" in last
        assert "Traceback" not in done.stderr
        assert held.read_bytes() == before
        assert sorted(os.listdir(tiny)) == ["model.safetensors"]


# -- flags: refused by argparse, before any I/O ------------------------------------------
@pytest.mark.parametrize(
    "argv, needle",
    [
        (["pull", "--store", "s3://Bad_Bucket!!/x", "--out", "{tmp}/o"], "not a bucket name"),
        (["pull", "--store", "memory://x", "--version", "²", "--out", "{tmp}/o"], "version"),
        (["inspect", "--store", "memory://x", "--version", "²"], "version"),
        (["pull", "--store", "memory://x", "--concurrency", "0", "--out", "{tmp}/o"], ">= 1"),
        (["worker", "--store", "memory://x", "--out-dir", "{tmp}", "--poll-interval-s", "inf"],
         "finite"),
        (["worker", "--store", "memory://x", "--out-dir", "{tmp}", "--poll-interval-s", "nan"],
         "finite"),
        (["worker", "--store", "memory://x", "--out-dir", "{tmp}", "--exit-after", "-1"], ">= 1"),
        (["pull", "--store", "memory://x", "--verify-key", "a.pem", "--verify-key", "b.pem",
          "--out", "{tmp}/o"], "given twice"),
    ],
    ids=["bucket-name", "pull-version-superscript", "inspect-version-superscript",
         "concurrency-0", "poll-inf", "poll-nan", "exit-after-negative", "verify-key-twice"],
)  # fmt: skip
def test_bad_flags_exit_2_with_one_line(
    cli: Cli, tmp_path: Path, argv: list[str], needle: str
) -> None:
    code, err = cli(*(a.format(tmp=tmp_path) for a in argv))
    assert code == 2, err
    assert one_line_error(err) and needle in err


# -- publishing what no manifest may describe: 2, nothing uploaded ------------------------
def safetensors_with(path: Path, name: str, shape: object) -> Path:
    """A .safetensors file written by hand (numpy cannot make every shape we need)."""
    header = json.dumps({name: {"dtype": "F32", "shape": shape, "data_offsets": [0, 4]}}).encode()
    path.write_bytes(len(header).to_bytes(8, "little") + header + b"\0\0\x80\x3f")
    return path


@pytest.mark.parametrize(
    "name, shape, needle",
    [
        ("w" * 1025, [1], "1025 characters"),
        ("", [1], "tensor name ''"),
        ("w", [1] * 33, "33 dimensions"),
        ("w", "1", "shape must be a list of integers"),  # int() would read it as [1]
        ("w", [True], "shape must be a list of integers"),
    ],
    ids=["name-over-1024", "empty-name", "33-dimensions", "shape-string", "shape-bool"],
)
def test_publishing_a_tensor_no_manifest_may_hold_exits_2_and_uploads_nothing(
    cli: Cli, s3_url: str, s3_endpoint: str, tmp_path: Path, name: str, shape: object,
    needle: str,
) -> None:  # fmt: skip
    src = safetensors_with(tmp_path / "bad.safetensors", name, shape)
    code, err = cli("publish", str(src), "--store", s3_url, "--endpoint-url", s3_endpoint,
                    "--version", "1")  # fmt: skip
    assert code == 2, err
    assert one_line_error(err) and needle in err
    assert open_store(s3_url, endpoint_url=s3_endpoint).list("") == []


def test_the_publisher_api_refuses_them_too_and_leaves_nothing(
    s3_url: str, s3_endpoint: str
) -> None:
    from wanrl_s3 import PublishConfig, Publisher, UsageError

    store = open_store(s3_url, endpoint_url=s3_endpoint)
    good = policy(3, kib=64)
    with pytest.raises(UsageError, match="33 dimensions"):
        Publisher(store, PublishConfig(delta="never")).publish(
            iter([*good.items(), ("deep", np.zeros((1,) * 33, np.float32))]), 1
        )
    assert store.list("") == []


# -- stray lines and damaged signatures ---------------------------------------------------
def test_a_worker_prints_only_its_own_lines(
    published: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """botocore's "Found credentials in environment variables." stays out of the log."""
    done = subprocess.run(
        worker_command(published, s3_endpoint, str(tmp_path / "out"), "w1", 0.1,
                       "--exit-after", "1"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "installed v1" in done.stderr  # the worker's own lines are there ...
    assert "credentials" not in done.stderr.lower()  # ... and botocore's are not


def test_a_failure_after_a_warning_prints_only_its_error(
    cli: Cli, published: str, s3_endpoint: str, tmp_path: Path
) -> None:
    """What a command says on the way (its own notes, the library's warnings) is held until
    it succeeds; a failure's stderr is its one error line."""
    endpoint = ("--endpoint-url", s3_endpoint)
    stranger = write_file(tmp_path / "stranger.safetensors", policy(9, kib=16))
    # the command's own note ("holds no published version"), then a destination refused
    code, err = cli("pull", "--store", published, *endpoint, "--have", str(stranger),
                    "--out", str(tmp_path))  # fmt: skip
    assert code == 2 and one_line_error(err) and "is a directory" in err, err
    # the library's warning (a corrupt LATEST, which the next commit would repair), then
    # a version that exists already
    store = open_store(published, endpoint_url=s3_endpoint)
    store.put_bytes(layout.LATEST_KEY, b"{not a pointer")
    code, err = cli("publish", str(stranger), "--store", published, *endpoint, "--version", "1",
                    "--delta", "never")  # fmt: skip
    assert code == 4 and one_line_error(err) and "already exists" in err, err
    # after a success the same lines are printed, below the result
    out = tmp_path / "out.safetensors"
    code, err = cli("pull", "--store", published, *endpoint, "--version", "1",
                    "--have", str(stranger), "--out", str(out))  # fmt: skip
    assert code == 0 and err == f"{stranger} holds no published version: pulled in full\n"


def test_a_signature_with_an_unknown_field_exits_3(
    cli: Cli, s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    endpoint = ("--endpoint-url", s3_endpoint)
    assert cli("keygen", "--out", str(tmp_path / "k"))[0] == 0
    src = write_file(tmp_path / "v1.safetensors", policy(1, kib=64))
    assert cli("publish", str(src), "--store", s3_url, *endpoint, "--version", "1",
               "--signing-key", str(tmp_path / "k.pem"))[0] == 0  # fmt: skip
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    manifest = json.loads(store.get_bytes(layout.manifest_key(1)))
    manifest["signature"]["note"] = "trust me"
    store.put_bytes(layout.manifest_key(1), json.dumps(manifest).encode())
    code, err = cli("inspect", "--store", s3_url, *endpoint, "--version", "1",
                    "--verify-key", str(tmp_path / "k.pub.pem"))  # fmt: skip
    assert code == 3, err
    assert one_line_error(err) and "signature" in err and "unknown field 'note'" in err


def test_keygen_into_a_read_only_directory_exits_2_and_writes_no_half_pair(
    cli: Cli, tmp_path: Path
) -> None:
    with tmpfs(tmp_path / "ro", read_only=True) as ro:
        code, err = cli("keygen", "--out", str(ro / "k"))
        assert os.listdir(ro) == []
    assert code == 2 and one_line_error(err) and "Read-only file system" in err


# -- the planner at absurd magnitudes: an answer, not a crash or a hang ------------------
@pytest.mark.parametrize(
    "flags",
    [
        ["--params", "1e30", "--t-train-s", "60"],  # once ZeroDivisionError, exit 1
        ["--params", "8B", "--t-train-s", "1e-300"],  # once an endless loop
        ["--params", "8B", "--t-train-s", "60", "--downlink-mbps", "1e-300"],
    ],
    ids=["params-1e30", "t-train-1e-300", "downlink-1e-300"],
)
def test_estimate_at_absurd_magnitudes_is_infeasible_exit_5(flags: list[str]) -> None:
    done = subprocess.run(
        cli_command("estimate", "--batch", "256", *flags),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 5, done.stderr
    assert one_line_error(done.stderr) and "infeasible" in done.stderr
