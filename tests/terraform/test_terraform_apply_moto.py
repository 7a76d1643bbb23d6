"""`terraform apply` of examples/multi-region against a moto server on
127.0.0.1: the three providers, the modules' wiring and their ordering
(versioning before replication, ...) really apply, and the regions file the
example outputs names the buckets it created. Slow: the AWS provider plugin
starts several times and applies about thirty resources."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tf_support import copy_terraform_tree, init_offline, load_toml, run_terraform

pytestmark = pytest.mark.slow

PROVIDER_OVERRIDE = """\
provider "aws" {{
{alias}  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
  s3_use_path_style           = true

  endpoints {{
    s3  = "{endpoint}"
    iam = "{endpoint}"
    sts = "{endpoint}"
  }}
}}
"""


@pytest.fixture(scope="module")
def applied(
    tmp_path_factory: pytest.TempPathFactory,
    aws_plugin_dir: Path,
    terraform_moto_endpoint: str,
) -> dict[str, Any]:
    """Outputs of the example applied to moto, plus the endpoint."""
    example = copy_terraform_tree(tmp_path_factory.mktemp("tf-apply")) / "examples/multi-region"
    # An override file (Terraform merges *_override.tf into the same-named
    # blocks) points all three providers at moto without touching the example.
    (example / "moto_override.tf").write_text(
        "\n".join(
            PROVIDER_OVERRIDE.format(alias=alias, endpoint=terraform_moto_endpoint)
            for alias in ("", '  alias = "replica_a"\n', '  alias = "replica_b"\n')
        )
    )
    init_offline(example, aws_plugin_dir)
    run_terraform(["apply", "-auto-approve", "-input=false"], example, timeout_s=600)
    outputs = json.loads(run_terraform(["output", "-json"], example).stdout)
    return {"outputs": {k: v["value"] for k, v in outputs.items()}}


@pytest.fixture(scope="module")
def s3(terraform_moto_endpoint: str) -> Any:
    boto3 = pytest.importorskip("boto3")
    return boto3.client(
        "s3",
        endpoint_url=terraform_moto_endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_regions_toml_names_the_created_buckets(applied: dict[str, Any]) -> None:
    outputs = applied["outputs"]
    regions = load_toml(outputs["regions_toml"])
    assert regions["primary"] == "use1"
    assert regions["mode"] == "replicate"
    assert list(regions["regions"]) == ["use1", "euw1", "apne1"]
    for label, table in regions["regions"].items():
        bucket = outputs["buckets"][label]
        assert table["url"] == f"s3://{bucket['bucket']}/runs/demo" == bucket["url"]
        assert table["s3_region"] == bucket["s3_region"]
        assert table["price_class"] == f"aws:{bucket['s3_region']}"
        assert table["endpoint_url"] == "" and table["profile"] == ""
    assert outputs["replication_role_arn"].endswith(":role/wanrl-replication")


def test_every_bucket_is_private_encrypted_and_tls_only(applied: dict[str, Any], s3: Any) -> None:
    for label, info in applied["outputs"]["buckets"].items():
        name = info["bucket"]
        pab = s3.get_public_access_block(Bucket=name)["PublicAccessBlockConfiguration"]
        assert all(pab.values()) and len(pab) == 4, label
        sse = s3.get_bucket_encryption(Bucket=name)["ServerSideEncryptionConfiguration"]
        default = sse["Rules"][0]["ApplyServerSideEncryptionByDefault"]
        assert default["SSEAlgorithm"] == "AES256", label
        controls = s3.get_bucket_ownership_controls(Bucket=name)["OwnershipControls"]
        assert controls["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}]
        assert s3.get_bucket_versioning(Bucket=name)["Status"] == "Enabled"
        policy = json.loads(s3.get_bucket_policy(Bucket=name)["Policy"])
        sids = {s["Sid"] for s in policy["Statement"]}
        assert {"DenyInsecureTransport", "DenyDeleteExceptGarbageCollector"} <= sids
        rules = s3.get_bucket_lifecycle_configuration(Bucket=name)["Rules"]
        by_id = {r["ID"]: r for r in rules}
        assert by_id["expire-snapshot-versions"]["Filter"]["Prefix"] == "runs/demo/v/"
        # The example keeps the default: age expiry off (wanrl-s3 gc keeps chains whole).
        assert by_id["expire-snapshot-versions"]["Status"] == "Disabled"
        abort = by_id["abort-incomplete-multipart-uploads"]["AbortIncompleteMultipartUpload"]
        assert abort == {"DaysAfterInitiation": 1}


def test_primary_replicates_to_both_replicas(applied: dict[str, Any], s3: Any) -> None:
    buckets = applied["outputs"]["buckets"]
    config = s3.get_bucket_replication(Bucket=buckets["use1"]["bucket"])
    config = config["ReplicationConfiguration"]
    assert config["Role"] == applied["outputs"]["replication_role_arn"]
    destinations = {r["Destination"]["Bucket"] for r in config["Rules"]}
    assert destinations == {f"arn:aws:s3:::{buckets[x]['bucket']}" for x in ("euw1", "apne1")}
