"""The command line through gs:// and az:// URLs, on fake-gcs-server and Azurite.

The same round trips and exit codes as on s3:// (tests/cli/test_cli.py): publish,
pull, a worker, gc; a second publish of a version exits 4 and keeps the first;
a flipped stored byte exits 3 and writes nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_cli import model, read
from tests.cli.test_worker import model as bf16_model
from tests.cli.test_worker import nudge, stop, version_in, wait_for
from tests.cloud_emulators import az_url, azurite_connection, gcs_endpoint, gs_url
from wanrl_s3.cli import main
from wanrl_s3.fetch.subscriber import Subscriber
from wanrl_s3.io.safetensors_file import write_file
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing import worker_command

__all__ = ["az_url", "azurite_connection", "gcs_endpoint", "gs_url"]  # fixtures


@pytest.fixture(params=["gs", "az"])
def cloud(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(store URL, --endpoint-url) on the emulator; az:// also has the connection string."""
    if request.param == "gs":
        return request.getfixturevalue("gs_url"), request.getfixturevalue("gcs_endpoint")
    url = request.getfixturevalue("az_url")
    blob_endpoint = request.getfixturevalue("azurite_connection").split("BlobEndpoint=")[1]
    return url, blob_endpoint.rstrip(";")


@pytest.fixture
def cli(cloud: tuple[str, str], capsys: pytest.CaptureFixture[str]):
    url, endpoint = cloud

    def run(*argv: str) -> tuple[int, str, str]:
        code = main([*argv, "--store", url, "--endpoint-url", endpoint])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def store_of(cloud: tuple[str, str]) -> ObjectStore:
    return open_store(cloud[0], endpoint_url=cloud[1])


def test_publish_pull_and_conflict_exits_4(cli, tmp_path: Path) -> None:
    first = write_file(tmp_path / "a.safetensors", model(1))
    second = write_file(tmp_path / "b.safetensors", model(2))
    code, out, err = cli("publish", str(first), "--version", "1")
    assert code == 0 and "published v1" in out, err
    code, _, err = cli("publish", str(second), "--version", "1")
    assert code == 4 and err.count("\n") == 1 and "version 1" in err
    assert cli("pull", "--out", str(tmp_path / "o.safetensors"))[0] == 0
    assert read(tmp_path / "o.safetensors") == read(first)


def test_flipped_byte_exits_3_and_writes_nothing(cli, cloud, tmp_path: Path) -> None:
    src = write_file(tmp_path / "a.safetensors", model(1))
    assert cli("publish", str(src), "--version", "1", "--delta", "never")[0] == 0
    store = store_of(cloud)
    key = next(o.key for o in store.list("v/") if o.key.endswith(".bin"))
    data = bytearray(store.get_bytes(key))
    data[len(data) // 2] ^= 0x01
    store.put_bytes(key, bytes(data))
    out = tmp_path / "out.safetensors"
    out.write_bytes(b"previous contents")
    code, _, err = cli("pull", "--out", str(out))
    assert code == 3 and "not match" in err and err.count("\n") == 1
    assert out.read_bytes() == b"previous contents"


def test_gc_keeps_chains_and_sweeps_a_crashed_upload(cli, cloud) -> None:
    store = store_of(cloud)
    pub = Publisher(store, PublishConfig(keyframe_every=3))  # keyframes at 1, 4
    state = bf16_model(1)
    for v in range(1, 6):
        state = nudge(state, v)
        pub.publish(state, v)
    store._mpu_create("v/9/crashed/000000.bin")  # a publisher died mid-upload
    code, out, err = cli("gc", "--keep", "1", "--grace-s", "0", "--json")
    assert code == 0, err
    report = json.loads(out)[cloud[0]]
    assert report["deleted_versions"] == [1, 2, 3]
    assert store.pending_uploads() == []
    with Subscriber(store) as sub:
        assert sub.versions() == [4, 5]
        assert sub.fetch(5, have=None).version == 5


def test_worker_installs_the_newest_version(cloud, tmp_path: Path) -> None:
    url, endpoint = cloud
    pub = Publisher(store_of(cloud), PublishConfig())
    state = bf16_model(3)
    pub.publish(state, 1)
    out = tmp_path / "w"
    out.mkdir()
    proc = subprocess.Popen(
        worker_command(url, endpoint, str(out), "worker-a", 0.1), stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: version_in(out) == 1, 60)
        pub.publish(nudge(state, 2), 2)
        wait_for(lambda: version_in(out) == 2, 60)
    finally:
        stop(proc)


def test_a_truncated_payload_object_exits_3_as_on_s3(cli, cloud, tmp_path: Path) -> None:
    """GCS answers a range past the end with 416: that is a truncated object (exit 3), like
    S3's InvalidRange, not a store failure (exit 6) with the raw HTTP message."""
    src = write_file(tmp_path / "a.safetensors", model(1))
    assert cli("publish", str(src), "--version", "1", "--delta", "never")[0] == 0
    store = store_of(cloud)
    key = next(o.key for o in store.list("v/") if o.key.endswith(".bin"))
    store.put_bytes(key, store.get_bytes(key)[:100])
    out = tmp_path / "out.safetensors"
    code, _, err = cli("pull", "--out", str(out))
    assert code == 3 and "truncated" in err and err.count("\n") == 1, err
    assert not out.exists()
