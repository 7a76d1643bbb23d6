"""``wanrl-s3 publish --payload-prefixes K``: the payload dealt over K prefixes, pulled whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_cli import cli, model, read  # noqa: F401 - cli is a fixture
from wanrl_s3.cli import main
from wanrl_s3.io.safetensors_file import write_file
from wanrl_s3.store import open_store


def test_publish_deals_the_payload_over_the_prefixes_and_pull_reads_it(
    cli,  # noqa: F811 - the fixture
    url: str,
    tmp_path: Path,
    s3_endpoint: str,
) -> None:
    store = open_store(url, endpoint_url=s3_endpoint)
    for version in (1, 2):  # object n of version v under prefix (v + n) mod 3
        src = write_file(tmp_path / f"v{version}.safetensors", model(version))
        argv = ["--store", url, "--version", str(version), "--payload-prefixes", "3"]
        code, _, err = cli("publish", str(src), *argv)
        assert code == 0, err
        payload = [o.key for o in store.list("v/") if o.key.endswith(".bin")]
        assert any(key.startswith(f"v/p{version}/{version:012d}/") for key in payload)
        code, _, err = cli("pull", "--store", url, "--out", str(tmp_path / "got.safetensors"))
        assert code == 0, err
        assert read(tmp_path / "got.safetensors") == read(src)
    assert all(key.startswith(("v/p1/", "v/p2/")) for key in payload)


@pytest.mark.parametrize("bad", ["0", "257", "two"])
def test_a_prefix_count_out_of_range_exits_2_and_writes_nothing(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_file(tmp_path / "v1.safetensors", model(1))
    url = f"file://{tmp_path}/store"
    code = main(["publish", str(src), "--store", url, "--version", "1", "--payload-prefixes", bad])
    err = capsys.readouterr().err
    assert code == 2 and "payload" in err and err.count("\n") == 1
    assert not (tmp_path / "store" / "v").exists()
