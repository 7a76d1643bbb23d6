"""terraform fmt and validate, and the regions.toml template of the example,
rendered by terraform itself (`terraform console` needs no provider)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tf_support import (
    EXAMPLE_DIR,
    HARNESS_DIR,
    REPO_ROOT,
    TERRAFORM_DIR,
    copy_terraform_tree,
    init_offline,
    load_toml,
    provider_plugin_dir,
    run_terraform,
)

TEMPLATE = EXAMPLE_DIR / "regions.toml.tftpl"

# The regions file format the CLI reads, verbatim from issue 6's hand-off.
DOCUMENTED_REGIONS_TOML = """\
# regions.toml, written by terraform output -raw regions_toml
primary = "use1"
mode = "replicate"            # fanout | replicate | copy

[regions.use1]
url = "s3://BUCKET/PREFIX"
s3_region = "us-east-1"
endpoint_url = ""             # empty: the provider's default endpoint
profile = ""                  # AWS profile name, empty: default credential chain
price_class = "aws:us-east-1"
"""


def test_fmt_check_recursive_is_clean(terraform_path: str) -> None:
    for tree in (TERRAFORM_DIR, HARNESS_DIR):
        proc = run_terraform(["fmt", "-check", "-recursive", "-diff", str(tree)], REPO_ROOT)
        assert proc.returncode == 0, (
            f"`terraform fmt -recursive {tree.relative_to(REPO_ROOT)}` would change:\n"
            f"{proc.stdout}{proc.stderr}"
        )


def test_validate_example_offline(tmp_path: Path, aws_plugin_dir: Path) -> None:
    example = copy_terraform_tree(tmp_path) / "examples" / "multi-region"
    init_offline(example, aws_plugin_dir)
    proc = run_terraform(["validate", "-json"], example)
    result = json.loads(proc.stdout)
    assert result["valid"], result["diagnostics"]
    assert result["error_count"] == 0, result["diagnostics"]
    assert result["warning_count"] == 0, result["diagnostics"]


def render_regions(tmp_path: Path, variables: dict[str, object]) -> str:
    """Render the example's template with `variables` through terraform."""
    literal = json.dumps(variables)  # a JSON object is also an HCL object literal
    assert "${" not in literal and "%{" not in literal, "would be read as HCL templates"
    expr = f"jsonencode(templatefile({json.dumps(str(TEMPLATE))}, {literal}))\n"
    out = run_terraform(["console"], tmp_path, stdin=expr).stdout.strip()
    # console prints the jsonencode()d text as a quoted string.
    return json.loads(json.loads(out))


def _region(label: str, url: str, s3_region: str, endpoint: str = "", profile: str = "") -> dict:
    return {
        "label": label,
        "url": url,
        "s3_region": s3_region,
        "endpoint_url": endpoint,
        "profile": profile,
        "price_class": f"aws:{s3_region}",
    }


def test_regions_template_matches_documented_format(terraform_path: str, tmp_path: Path) -> None:
    text = render_regions(
        tmp_path,
        {
            "primary": "use1",
            "mode": "replicate",
            "regions": [_region("use1", "s3://BUCKET/PREFIX", "us-east-1")],
        },
    )
    assert text == DOCUMENTED_REGIONS_TOML


@pytest.mark.parametrize("mode", ["fanout", "replicate", "copy"])
def test_regions_template_parses_as_toml_with_awkward_values(
    terraform_path: str, tmp_path: Path, mode: str
) -> None:
    regions = [
        _region("use1", "s3://wanrl-use1-1/runs/a", "us-east-1"),
        _region("euw1", "s3://wanrl-euw1-1/runs/a", "eu-west-1", "https://s3.example:9000"),
        _region("apne1", "s3://wanrl-apne1-1/runs/a", "ap-northeast-1", "", 'team "rl" \\ x'),
    ]
    text = render_regions(tmp_path, {"primary": "use1", "mode": mode, "regions": regions})
    parsed = load_toml(text)
    assert parsed["primary"] == "use1"
    assert parsed["mode"] == mode
    assert list(parsed["regions"]) == ["use1", "euw1", "apne1"]
    for region in regions:
        table = parsed["regions"][region["label"]]
        assert table == {k: v for k, v in region.items() if k != "label"}
    assert text.endswith('price_class = "aws:ap-northeast-1"\n')


# The GCS and Azure modules, each validated on its own against a local copy of
# its provider; providers cannot be downloaded here, so without one the test
# skips and says so.
CLOUD_MODULES = [
    ("gcs-snapshot-bucket", "google", ("5", "6", "7")),
    ("gcs-iam", "google", ("5", "6", "7")),
    ("azure-snapshot-container", "azurerm", ("4",)),
    ("azure-iam", "azurerm", ("4",)),
]


@pytest.mark.parametrize(
    ("module", "provider", "majors"), CLOUD_MODULES, ids=[m[0] for m in CLOUD_MODULES]
)
def test_validate_gcs_and_azure_modules_offline(
    terraform_path: str, tmp_path: Path, module: str, provider: str, majors: tuple[str, ...]
) -> None:
    plugins = provider_plugin_dir(provider, majors)
    if plugins is None:
        pytest.skip(
            f"no local hashicorp/{provider} {'/'.join(majors)}.x provider plugin "
            "(set WANRL_TF_PLUGIN_DIR): "
            f"terraform validate of modules/{module} skipped, the registry is unreachable offline"
        )
    target = copy_terraform_tree(tmp_path) / "modules" / module
    init_offline(target, plugins)
    result = json.loads(run_terraform(["validate", "-json"], target).stdout)
    assert result["valid"], result["diagnostics"]
    assert result["error_count"] == 0, result["diagnostics"]


@pytest.mark.parametrize("module", ["gcs-iam", "azure-iam"])
def test_validate_the_provider_free_policy_modules(
    terraform_path: str, tmp_path: Path, module: str
) -> None:
    # The policy submodules need no provider, so they validate offline everywhere.
    target = copy_terraform_tree(tmp_path) / "modules" / module / "policy"
    result = json.loads(run_terraform(["validate", "-json"], target).stdout)
    assert result["valid"], result["diagnostics"]
    assert result["warning_count"] == 0, result["diagnostics"]
