"""The command line: round trips, exit codes, one-line errors, nothing written on failure."""

from __future__ import annotations

import json
import os
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.cli import main
from wanrl_s3.format import layout
from wanrl_s3.io.safetensors_file import SafetensorsFile, write_file
from wanrl_s3.store import open_store


def model(seed: int, n: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {
        f"model.layers.{i}.mlp.up_proj.weight": rng.integers(0, 2**16, (64, 32), np.uint16).view(
            ml_dtypes.bfloat16
        )
        for i in range(n)
    }
    out["model.norm.weight"] = np.ones(32, np.float32)
    return out


@pytest.fixture
def cli(s3_endpoint: str, capsys: pytest.CaptureFixture[str]):
    def run(*argv: str) -> tuple[int, str, str]:
        code = main(
            [*argv, "--endpoint-url", s3_endpoint]
            if argv[0] in ("publish", "pull", "inspect")
            else list(argv)
        )
        out, err = capsys.readouterr()
        return code, out, err

    return run


def read(path: Path) -> dict[str, bytes]:
    return {n: a.tobytes() for n, a in SafetensorsFile(path).items()}


def test_publish_pull_inspect_round_trip(cli, url: str, tmp_path: Path) -> None:
    src = write_file(tmp_path / "v1.safetensors", model(1))
    code, out, err = cli("publish", str(src), "--store", url, "--version", "1")
    assert code == 0, err
    assert "published v1 (full)" in out
    code, out, err = cli("pull", "--store", url, "--out", str(tmp_path / "got.safetensors"))
    assert code == 0, err
    assert read(tmp_path / "got.safetensors") == read(src)
    code, out, _ = cli("inspect", "--store", url, "--json")
    listing = json.loads(out)
    assert listing["latest"] == 1 and listing["versions"][0]["kind"] == "full"
    assert listing["versions"][0]["tensors"] == 5


def test_one_tensor_is_counted_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"file://{tmp_path}/store"
    src = write_file(tmp_path / "v1.safetensors", {"w": np.ones(8, np.float32)})
    for argv, says in (
        (["publish", str(src), "--store", url, "--version", "1"], ": 1 tensor, 32 B raw"),
        (["pull", "--store", url, "--out", str(tmp_path / "got.safetensors")], ": 1 tensor, "),
        (["inspect", "--store", url, "--version", "1"], ", 1 tensor, 32 B raw"),
    ):
        assert main(argv) == 0
        assert says in capsys.readouterr().out


def test_folder_of_shards(cli, url: str, tmp_path: Path) -> None:
    shards = tmp_path / "ckpt"
    shards.mkdir()
    tensors = model(2, n=6)
    names = sorted(tensors)
    write_file(shards / "model-00001-of-00002.safetensors", {n: tensors[n] for n in names[:3]})
    write_file(shards / "model-00002-of-00002.safetensors", {n: tensors[n] for n in names[3:]})
    assert cli("publish", str(shards), "--store", url, "--version", "3")[0] == 0
    out = tmp_path / "all.safetensors"
    assert cli("pull", "--store", url, "--version", "3", "--out", str(out))[0] == 0
    assert read(out) == {n: a.tobytes() for n, a in tensors.items()}


def test_second_publish_exits_4_and_keeps_the_first(cli, url: str, tmp_path: Path) -> None:
    first = write_file(tmp_path / "a.safetensors", model(1))
    second = write_file(tmp_path / "b.safetensors", model(2))
    assert cli("publish", str(first), "--store", url, "--version", "1")[0] == 0
    code, _, err = cli("publish", str(second), "--store", url, "--version", "1")
    assert code == 4
    assert err.count("\n") == 1 and "version 1" in err
    assert cli("pull", "--store", url, "--out", str(tmp_path / "o.safetensors"))[0] == 0
    assert read(tmp_path / "o.safetensors") == read(first)


def test_flipped_byte_exits_3_and_writes_nothing(
    cli, url: str, tmp_path: Path, s3_endpoint: str
) -> None:
    src = write_file(tmp_path / "a.safetensors", model(1))
    assert cli("publish", str(src), "--store", url, "--version", "1", "--delta", "never")[0] == 0
    store = open_store(url, endpoint_url=s3_endpoint)
    key = next(o.key for o in store.list("v/") if o.key.endswith(".bin"))
    data = bytearray(store.get_bytes(key))
    data[len(data) // 2] ^= 0x01
    store.put_bytes(key, bytes(data))
    out = tmp_path / "out.safetensors"
    out.write_bytes(b"previous contents")
    code, _, err = cli("pull", "--store", url, "--out", str(out))
    assert code == 3
    assert "not match" in err and err.count("\n") == 1
    assert out.read_bytes() == b"previous contents"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_malformed_manifest_exits_3(cli, url: str, tmp_path: Path, s3_endpoint: str) -> None:
    src = write_file(tmp_path / "a.safetensors", model(1))
    assert cli("publish", str(src), "--store", url, "--version", "1")[0] == 0
    store = open_store(url, endpoint_url=s3_endpoint)
    m = json.loads(store.get_bytes(layout.manifest_key(1)))
    m["tensors"][0]["shape"] = [10**6, 10**6]
    store.put_bytes(layout.manifest_key(1), json.dumps(m).encode())
    code, _, err = cli("pull", "--store", url, "--out", str(tmp_path / "x.safetensors"))
    assert code == 3 and "shape" in err
    assert not (tmp_path / "x.safetensors").exists()


@pytest.mark.parametrize(
    "argv, needle",
    [
        (
            ["publish", "/nonexistent.safetensors", "--store", "memory://x", "--version", "1"],
            "does not exist",
        ),
        (["publish", "{src}", "--store", "memory://x", "--version", "-1"], "version number (0 to"),
        (["publish", "{src}", "--store", "ftp://host/x", "--version", "1"], "unknown store"),
        (
            [
                "publish",
                "{src}",
                "--store",
                "memory://x",
                "--version",
                "1",
                "--keyframe-every",
                "0",
            ],
            "keyframe_every",
        ),
        (["publish", "{garbage}", "--store", "memory://x", "--version", "1"], "header"),
        (
            ["pull", "--store", "memory://empty", "--out", "{tmp}/o.safetensors"],
            "nothing is published",
        ),
        (["pull", "--store", "memory://x", "--version", "abc", "--out", "{tmp}/o"], "version"),
        (["publish"], "required"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_exits_2_with_one_line(cli, tmp_path: Path, argv: list[str], needle: str) -> None:
    src = write_file(tmp_path / "a.safetensors", model(1))
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
    argv = [a.format(src=src, garbage=garbage, tmp=tmp_path) for a in argv]
    code, _, err = cli(*argv)
    assert code == 2, err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_pull_into_a_missing_directory_exits_2(cli, url: str, tmp_path: Path) -> None:
    src = write_file(tmp_path / "a.safetensors", model(1))
    assert cli("publish", str(src), "--store", url, "--version", "1")[0] == 0
    code, _, err = cli("pull", "--store", url, "--out", str(tmp_path / "no" / "such.safetensors"))
    assert code == 2 and "not a directory" in err


def test_unreachable_endpoint_exits_6(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    code = main(["inspect", "--store", "s3://bucket/x", "--endpoint-url", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 6 and err.count("\n") == 1


def test_a_version_number_out_of_range_exits_2_on_a_store_that_has_versions(
    cli, url: str, tmp_path: Path
) -> None:
    """A bad number is bad usage (2), not a conflict with the store's newest version (4)."""
    src = write_file(tmp_path / "a.safetensors", model(1))
    assert cli("publish", str(src), "--store", url, "--version", "1")[0] == 0
    for bad in ("-1", "1000000000000"):
        code, _, err = cli("publish", str(src), "--store", url, "--version", bad)
        assert code == 2 and "version number (0 to" in err and err.count("\n") == 1, err


def test_have_whose_version_metadata_is_no_ascii_number_is_identified_by_its_hashes(
    cli, url: str, tmp_path: Path
) -> None:
    """'²'.isdigit() is True and int('²') fails: such metadata records no version."""
    src = write_file(tmp_path / "a.safetensors", model(1))
    assert cli("publish", str(src), "--store", url, "--version", "1")[0] == 0
    for i, odd in enumerate(("²", "١", "9" * 5000)):
        have = write_file(tmp_path / f"have{i}.safetensors", model(1), {"wanrl_s3.version": odd})
        out = tmp_path / f"out{i}.safetensors"
        code, _, err = cli("pull", "--store", url, "--out", str(out), "--have", str(have))
        assert code == 0, err
        assert read(out) == read(src)


@pytest.mark.parametrize("tail", ["#frag", "?versionId=3", "#"])
def test_a_store_url_with_a_fragment_or_query_exits_2_and_writes_nowhere(
    cli, tmp_path: Path, tail: str
) -> None:
    """urlsplit drops them: publishing to file:///d/store#frag would write file:///d/store."""
    src = write_file(tmp_path / "a.safetensors", model(1))
    code, _, err = cli("publish", str(src), "--store", f"file://{tmp_path}/store{tail}",
                       "--version", "1")  # fmt: skip
    assert code == 2 and "query or fragment" in err and err.count("\n") == 1, err
    assert not (tmp_path / "store").exists()


def test_a_publisher_that_raced_another_for_the_next_version_deltas_on_its_version(
    cli, url: str, s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v2 lands between publish v3's read of the newest version (v1) and its adoption: v3
    goes out as a delta on v2. It was given no base, so "pull it first" (exit 2) is wrong."""
    from wanrl_s3.cli import publish as publish_cli
    from wanrl_s3.publish.publisher import PublishConfig, Publisher

    states = {1: model(1)}
    for v in (2, 3):  # each a few values away from the one before: a delta pays
        states[v] = {k: a.copy() for k, a in states[v - 1].items()}
        states[v]["model.norm.weight"][v] = v
    for v in (1, 3):
        write_file(tmp_path / f"v{v}.safetensors", states[v])
    assert (
        cli("publish", str(tmp_path / "v1.safetensors"), "--store", url, "--version", "1")[0] == 0
    )
    real_adopt = publish_cli.adopt_newest

    def raced(publisher, **kwargs):  # type: ignore[no-untyped-def]
        if not raced.done:
            raced.done = True
            other = Publisher(open_store(url, endpoint_url=s3_endpoint), PublishConfig())
            other.publish(states[2], 2)
        return real_adopt(publisher, **kwargs)

    raced.done = False  # type: ignore[attr-defined]
    monkeypatch.setattr(publish_cli, "adopt_newest", raced)
    code, out, err = cli("publish", str(tmp_path / "v3.safetensors"), "--store", url,
                         "--version", "3", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["base_version"] == 2
    code, _, err = cli("pull", "--store", url, "--out", str(tmp_path / "got.safetensors"))
    assert code == 0 and read(tmp_path / "got.safetensors") == read(tmp_path / "v3.safetensors")
