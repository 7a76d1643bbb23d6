"""The regions file and its Python twin: parsing, validation, opening each region's store."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.regions.support import model
from wanrl_s3.cli import main
from wanrl_s3.errors import UsageError
from wanrl_s3.io.safetensors_file import write_file
from wanrl_s3.regions.config import Region, RegionsConfig, load_regions
from wanrl_s3.store.s3 import S3Store

# As `terraform output -raw regions_toml` renders it for examples/multi-region.
EXAMPLE = """\
# regions.toml, written by terraform output -raw regions_toml
primary = "use1"
mode = "replicate"            # fanout | replicate | copy

[regions.use1]
url = "s3://wanrl-use1-123456789012/runs/demo"
s3_region = "us-east-1"
endpoint_url = ""             # empty: the provider's default endpoint
profile = ""                  # AWS profile name, empty: default credential chain
price_class = "aws:us-east-1"

[regions.euw1]
url = "s3://wanrl-euw1-123456789012/runs/demo"
s3_region = "eu-west-1"
endpoint_url = "https://s3.dualstack.eu-west-1.amazonaws.com"
profile = "eu-workers"
price_class = "aws:eu-west-1"

[regions.apne1]
url = "s3://wanrl-apne1-123456789012/runs/demo"
s3_region = "ap-northeast-1"
endpoint_url = ""
profile = ""
price_class = "aws:ap-northeast-1"
"""


def test_the_terraform_rendering_loads_and_equals_the_python_config(tmp_path: Path) -> None:
    config = load_regions(_write(tmp_path, EXAMPLE))
    assert config == RegionsConfig(
        "use1",
        "replicate",
        (
            Region(
                "use1",
                "s3://wanrl-use1-123456789012/runs/demo",
                "us-east-1",
                "",
                "",
                "aws:us-east-1",
            ),
            Region(
                "euw1",
                "s3://wanrl-euw1-123456789012/runs/demo",
                "eu-west-1",
                "https://s3.dualstack.eu-west-1.amazonaws.com",
                "eu-workers",
                "aws:eu-west-1",
            ),
            Region(
                "apne1",
                "s3://wanrl-apne1-123456789012/runs/demo",
                "ap-northeast-1",
                "",
                "",
                "aws:ap-northeast-1",
            ),
        ),
    )
    assert config.names == ("use1", "euw1", "apne1")
    assert [r.name for r in config.replicas] == ["euw1", "apne1"]
    assert [r.name for r in config.publish_regions] == ["use1"]  # replicate: the primary only


def test_fanout_publishes_to_every_region_primary_first() -> None:
    config = RegionsConfig("b", "fanout", [Region("a", "memory://a"), Region("b", "memory://b")])
    assert [r.name for r in config.publish_regions] == ["b", "a"]
    assert isinstance(config.regions, tuple)


def test_store_opens_the_region_with_its_endpoint_and_signing_region(
    tmp_path: Path, s3_endpoint: str
) -> None:
    config = RegionsConfig(
        "use1",
        "fanout",
        (
            Region("use1", "s3://bucket-a/runs/x", "eu-west-1", s3_endpoint),
            Region("local", f"file://{tmp_path}/local"),
        ),
    )
    store = config.store("use1")
    assert isinstance(store, S3Store)
    assert (store.url, store.endpoint_url) == ("s3://bucket-a/runs/x", s3_endpoint)
    assert store._client.meta.region_name == "eu-west-1"
    assert config.store("local").url == f"file://{tmp_path}/local"
    with pytest.raises(UsageError, match="no region 'nope'; the regions are use1, local"):
        config.store("nope")


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('mode = "fanout"\n[regions.a]\nurl = "memory://a"\n', "primary: missing; add primary"),
        ('primary = "a"\n[regions.a]\nurl = "memory://a"\n', "mode: missing; add mode = "),
        (
            'primary = "a"\nmode = "mirror"\n[regions.a]\nurl = "memory://a"\n',
            "mode must be one of fanout, replicate, copy, got 'mirror'",
        ),
        (
            'primary = "z"\nmode = "copy"\n[regions.a]\nurl = "memory://a"\n',
            "primary 'z' is not one of the regions (a)",
        ),
        ('primary = "a"\nmode = "copy"\n', "regions: none given"),
        (
            'primary = "a"\nmode = "copy"\n[regions.a]\ns3_region = "us-east-1"\n',
            'regions.a.url: missing; add url = "s3://BUCKET/PREFIX"',
        ),
        (
            'primary = "a"\nmode = "copy"\n[regions.a]\nurl = "memory://a"\nendpoint = "x"\n',
            "unknown key 'endpoint' in [regions.a]; the keys are url, s3_region, endpoint_url",
        ),
        (
            'primary = "a"\nmode = "copy"\nprimay = "a"\n[regions.a]\nurl = "memory://a"\n',
            "unknown key 'primay' in the top level",
        ),
        (
            'primary = "a"\nmode = "copy"\n[regions.a]\nurl = "s3:///runs"\n',
            "regions.a.url 's3:///runs' names no bucket",
        ),
        (
            'primary = "a"\nmode = "copy"\n[regions.a]\nurl = "bucket/runs"\n',
            "regions.a.url must be a store URL such as s3://BUCKET/PREFIX",
        ),
        (
            'primary = "a"\nmode = "copy"\n[regions.a]\nurl = "memory://a"\n'
            'endpoint_url = "minio:9000"\n',
            "regions.a.endpoint_url must start with http:// or https://",
        ),
        (
            'primary = "a"\nmode = "copy"\n[regions.a]\nurl = "memory://a"\nprice_class = "a b"\n',
            "regions.a.price_class must look like 'aws:us-east-1'",
        ),
        (
            'primary = "a"\nmode = "copy"\n[regions.a]\nurl = "memory://a"\ns3_region = 3\n',
            "regions.a.s3_region must be a string, got 3",
        ),
        (
            'primary = "a"\nmode = "copy"\n[regions.a]\nurl = "memory://a"\n'
            '[regions.b]\nurl = "memory://a/"\n',
            "regions.b.url is the same store as regions.a",
        ),
        ('primary = "a"\nmode = "copy"\nregions = 1\n', "regions: none given"),
        ('primary = "a"\nmode = "copy\n', "not valid TOML"),
    ],
)
def test_each_mistake_is_one_usage_error_naming_the_key(
    tmp_path: Path, text: str, names: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(UsageError) as info:
        load_regions(path)
    assert str(info.value).startswith(f"{path}: ")
    assert names in str(info.value)
    assert info.value.__cause__ is not None  # raised from the cause


def test_python_config_is_validated_the_same_way() -> None:
    with pytest.raises(UsageError, match="region name 'a b'"):
        Region("a b", "memory://a")
    with pytest.raises(UsageError, match="is given twice"):
        RegionsConfig("a", "copy", (Region("a", "memory://a"), Region("a", "memory://b")))


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read the regions file"):
        load_regions(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    "argv",
    [
        ["relay", "--regions", "{bad}"],
        ["publish", "{src}", "--regions", "{bad}", "--version", "1"],
        ["pull", "--regions", "{bad}", "--out", "{out}"],
        ["worker", "--regions", "{bad}", "--out-dir", "{dir}"],
    ],
)
def test_cli_exits_2_with_one_line_naming_the_key(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _write(
        tmp_path, 'primary = "a"\nmode = "fanout"\n[regions.a]\nurl = "memory://a"\nprofle = "x"\n'
    )
    src = write_file(tmp_path / "m.safetensors", model(1, kib=1))
    values = {"bad": bad, "src": src, "out": tmp_path / "o.safetensors", "dir": tmp_path}
    code = main([a.format(**values) for a in argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "unknown key 'profle' in [regions.a]" in err


def test_cli_refuses_store_and_regions_together(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _write(tmp_path, 'primary = "a"\nmode = "fanout"\n[regions.a]\nurl = "memory://a"\n')
    code = main(
        [
            "pull",
            "--store",
            "memory://a",
            "--regions",
            str(good),
            "--out",
            str(tmp_path / "o.safetensors"),
        ]
    )
    assert code == 2 and "--store and --regions exclude each other" in capsys.readouterr().err
    code = main(["pull", "--out", str(tmp_path / "o.safetensors")])
    assert code == 2 and "give --store URL, or --regions FILE" in capsys.readouterr().err


def test_relay_refuses_a_file_whose_mode_is_not_copy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(
        tmp_path,
        'primary = "a"\nmode = "replicate"\n[regions.a]\nurl = "memory://a"'
        '\n[regions.b]\nurl = "memory://b"\n',
    )
    assert main(["relay", "--regions", str(path), "--once"]) == 2
    assert "mode is 'replicate'; the relay serves mode = \"copy\"" in capsys.readouterr().err


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "regions.toml"
    path.write_text(text)
    return path
