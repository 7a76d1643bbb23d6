"""modules/cloudfront-cdn and modules/gcs-cloud-cdn: a CDN in front of a bucket that stays private.

Read from the HCL: origin access control, LATEST never cached, the key group
trusted by every behaviour, the bucket readable only by the distribution (and
only the run's versions and LATEST), Cloud CDN's signed URL key and its
cache-fill agent limited to <prefix>/v/ (its IAM condition evaluated on the
product's own keys). Then terraform itself: a `plan` of the example (bucket
and CDN wired through the bucket's one policy) against a moto server standing
in for STS, offline.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from cloud_conditions import GcsRequest, compile_cel
from run_layout import LATEST, OTHER_STATUS, OUTSIDE, OWN_STATUS, PREFIX, VERSION_KEYS
from tf_support import (
    TERRAFORM_DIR,
    blocks,
    check_provider_pins,
    copy_terraform_tree,
    init_offline,
    load_dir,
    locals_of,
    run_terraform,
    walk_strings,
)

pytest.importorskip("hcl2", minversion="8.0")

CLOUDFRONT = TERRAFORM_DIR / "modules" / "cloudfront-cdn"
CLOUD_CDN = TERRAFORM_DIR / "modules" / "gcs-cloud-cdn"
BUCKET = TERRAFORM_DIR / "modules" / "snapshot-bucket"
EXAMPLE = TERRAFORM_DIR / "examples" / "cloudfront-cdn"


@pytest.fixture(scope="module")
def cf() -> dict[str, list[Any]]:
    return load_dir(CLOUDFRONT)


@pytest.fixture(scope="module")
def gcdn() -> dict[str, list[Any]]:
    return load_dir(CLOUD_CDN)


def distribution(cf: dict[str, list[Any]]) -> dict[str, Any]:
    return blocks(cf, "resource", "aws_cloudfront_distribution")["this"]


def behaviours(cf: dict[str, list[Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """path pattern (or "default") -> (its cache policy's name, its settings), locals resolved."""
    local = locals_of(cf)
    dist = distribution(cf)
    default = dist["default_cache_behavior"][0]
    policy = re.fullmatch(
        r'\$\{aws_cloudfront_cache_policy\.this\["(\w+)"\]\.id\}', default["cache_policy_id"]
    )
    assert policy, default["cache_policy_id"]
    found = {"default": (policy.group(1), default)}
    (dynamic,) = [
        d["ordered_cache_behavior"] for d in dist["dynamic"] if "ordered_cache_behavior" in d
    ]
    assert dynamic["for_each"] == "${local.ordered_behaviours}"
    (content,) = dynamic["content"]
    assert content["path_pattern"] == "${ordered_cache_behavior.value.path}"
    assert content["cache_policy_id"] == (
        "${aws_cloudfront_cache_policy.this[ordered_cache_behavior.value.cache].id}"
    )
    for item in local["ordered_behaviours"]:
        path = local[item["path"].removeprefix("${local.").removesuffix("}")]
        found[path] = (item["cache"], content)
    return found


# ------------------------------------------------------------------ CloudFront


def test_modules_pin_their_provider() -> None:
    check_provider_pins(CLOUDFRONT, "aws", "5")
    check_provider_pins(CLOUD_CDN, "google", "5")


def test_cloudfront_reads_the_bucket_with_origin_access_control(cf: dict[str, list[Any]]) -> None:
    oac = blocks(cf, "resource", "aws_cloudfront_origin_access_control")["this"]
    assert oac["origin_access_control_origin_type"] == "s3"
    assert (oac["signing_behavior"], oac["signing_protocol"]) == ("always", "sigv4")
    (origin,) = distribution(cf)["origin"]
    assert origin["origin_access_control_id"] == "${aws_cloudfront_origin_access_control.this.id}"
    assert "s3_origin_config" not in origin  # no legacy origin access identity
    assert "custom_origin_config" not in origin  # not the public website endpoint


def test_every_behaviour_trusts_the_key_group_over_https_for_reads_only(
    cf: dict[str, list[Any]],
) -> None:
    found = behaviours(cf)
    assert set(found) == {"default", "/${var.prefix}/v/*", "/${var.prefix}/LATEST"}
    for _, behaviour in found.values():
        assert behaviour["trusted_key_groups"] == ["${aws_cloudfront_key_group.this.id}"]
        assert behaviour["viewer_protocol_policy"] == "https-only"
        assert behaviour["allowed_methods"] == ["GET", "HEAD"]
        assert "trusted_signers" not in behaviour  # legacy account key pairs
    key_group = blocks(cf, "resource", "aws_cloudfront_key_group")["this"]
    assert key_group["items"] == "${local.key_group_items}"
    assert (
        locals_of(cf)["key_group_items"]
        == "${[for key in aws_cloudfront_public_key.this : key.id]}"
    )


def test_versions_are_cached_long_and_latest_never(cf: dict[str, list[Any]]) -> None:
    found = behaviours(cf)
    assert found["/${var.prefix}/v/*"][0] == "immutable"
    assert found["/${var.prefix}/LATEST"][0] == found["default"][0] == "uncached"
    ttls = locals_of(cf)["cache_policies"]
    assert (ttls["uncached"]["default_ttl"], ttls["uncached"]["max_ttl"]) == (0, 0)
    assert ttls["immutable"]["default_ttl"] == "${var.immutable_default_ttl_s}"
    variables = {k: v for item in cf["variable"] for k, v in item.items()}
    assert variables["immutable_default_ttl_s"]["default"] >= 86400 * 365
    policy = blocks(cf, "resource", "aws_cloudfront_cache_policy")["this"]
    assert policy["for_each"] == "${local.cache_policies}" and policy["min_ttl"] == 0
    (key,) = policy["parameters_in_cache_key_and_forwarded_to_origin"]
    # Signing parameters (query or cookies) must neither split the cache nor reach S3.
    assert key["query_strings_config"] == [{"query_string_behavior": "none"}]
    assert key["cookies_config"] == [{"cookie_behavior": "none"}]
    assert key["headers_config"] == [{"header_behavior": "none"}]


def test_only_the_distribution_may_read_and_only_versions_and_latest(
    cf: dict[str, list[Any]],
) -> None:
    (statement,) = blocks(cf, "data", "aws_iam_policy_document")["bucket"]["statement"]
    assert (statement["effect"], statement["actions"]) == ("Allow", ["s3:GetObject"])
    assert statement["principals"] == [
        {"type": "Service", "identifiers": ["cloudfront.amazonaws.com"]}
    ]
    assert statement["condition"] == [
        {
            "test": "StringEquals",
            "variable": "AWS:SourceArn",
            "values": ["${aws_cloudfront_distribution.this.arn}"],
        }
    ]
    assert statement["resources"] == "${local.readable_keys}"
    assert locals_of(cf)["readable_keys"] == [
        "${var.bucket_arn}/${var.prefix}/v/*",
        "${var.bucket_arn}/${var.prefix}/LATEST",
    ]


def test_the_bucket_takes_the_cdn_statement_into_its_one_policy() -> None:
    bucket = load_dir(BUCKET)
    document = blocks(bucket, "data", "aws_iam_policy_document")["bucket"]
    assert document["source_policy_documents"] == "${var.source_policy_documents}"
    assert len(blocks(bucket, "resource", "aws_s3_bucket_policy")) == 1
    example = load_dir(EXAMPLE)
    modules = {k: v for item in example["module"] for k, v in item.items()}
    assert modules["bucket"]["source_policy_documents"] == ["${module.cdn.bucket_policy_json}"]
    assert "aws_s3_bucket_policy" not in json.dumps(load_dir(CLOUDFRONT))  # never a second policy


def test_public_keys_refuse_a_private_key(cf: dict[str, list[Any]]) -> None:
    variables = {k: v for item in cf["variable"] for k, v in item.items()}
    conditions = [v["condition"] for v in variables["public_keys"]["validation"]]
    assert any("-----BEGIN PUBLIC KEY-----" in c for c in conditions)


# ------------------------------------------------------------------ Cloud CDN


def test_cloud_cdn_backend_bucket_honours_the_origin_and_has_a_signed_url_key(
    gcdn: dict[str, list[Any]],
) -> None:
    backend = blocks(gcdn, "resource", "google_compute_backend_bucket")["this"]
    assert backend["enable_cdn"] is True
    (policy,) = backend["cdn_policy"]
    assert policy["cache_mode"] == "USE_ORIGIN_HEADERS"
    assert policy["request_coalescing"] is True
    key = blocks(gcdn, "resource", "google_compute_backend_bucket_signed_url_key")["this"]
    assert key["backend_bucket"] == "${google_compute_backend_bucket.this.name}"
    assert key["for_each"] == "${toset(var.signed_url_key_names)}"
    variables = {k: v for item in gcdn["variable"] for k, v in item.items()}
    assert variables["signed_url_key_values"]["sensitive"] is True


def test_cloud_cdn_fills_only_from_the_runs_versions_and_the_bucket_stays_private(
    gcdn: dict[str, list[Any]],
) -> None:
    members = blocks(gcdn, "resource", "google_storage_bucket_iam_member")
    assert set(members) == {"cache_fill"}
    member = members["cache_fill"]
    assert member["role"] == "roles/storage.objectViewer"
    assert "@cloud-cdn-fill.iam.gserviceaccount.com" in locals_of(gcdn)["fill_agent"]
    assert member["depends_on"] == ["${google_compute_backend_bucket_signed_url_key.this}"]
    text = json.dumps(gcdn)
    assert "allUsers" not in text and "allAuthenticatedUsers" not in text
    assert not blocks(gcdn, "resource", "google_storage_bucket_iam_binding")
    expression = member["condition"][0]["expression"]
    rendered = expression.replace("${var.bucket_name}", "snap-usc1").replace(
        "${local.versions_prefix}",
        locals_of(gcdn)["versions_prefix"].replace("${var.prefix}", PREFIX),
    )
    allows = compile_cel(rendered)

    def readable(key: str, bucket: str = "snap-usc1") -> bool:
        return allows(
            GcsRequest("storage.objects.get", f"projects/_/buckets/{bucket}/objects/{key}")
        )

    assert all(readable(key) for key in VERSION_KEYS)
    for key in (LATEST, OWN_STATUS, OTHER_STATUS, *OUTSIDE):
        assert not readable(key), key
    assert not readable(VERSION_KEYS[0], bucket="other-bucket")


def test_cloud_cdn_serves_https_only_with_tls_1_2(gcdn: dict[str, list[Any]]) -> None:
    ssl = blocks(gcdn, "resource", "google_compute_ssl_policy")["this"]
    assert ssl["min_tls_version"] == "TLS_1_2"
    proxies = blocks(gcdn, "resource", "google_compute_target_https_proxy")
    assert proxies["this"]["ssl_policy"] == "${google_compute_ssl_policy.this.id}"
    assert not blocks(gcdn, "resource", "google_compute_target_http_proxy")
    rule = blocks(gcdn, "resource", "google_compute_global_forwarding_rule")["this"]
    assert rule["port_range"] == "443"


def test_no_signing_secret_is_written_into_the_modules() -> None:
    for directory in (CLOUDFRONT, CLOUD_CDN, EXAMPLE):
        for text in walk_strings(load_dir(directory)):
            assert "PRIVATE KEY-----" not in text or "never pass" in text
            assert not re.fullmatch(r"[A-Za-z0-9_-]{22}==", text)


# ------------------------------------------------------------------ terraform itself


MOTO_PROVIDER = """
provider "aws" {{
  access_key                  = "testing"
  secret_key                  = "testing"
  skip_credentials_validation = true
  skip_metadata_api_check     = true
  skip_region_validation      = true
  endpoints {{
    s3         = "{endpoint}"
    sts        = "{endpoint}"
    iam        = "{endpoint}"
    cloudfront = "{endpoint}"
  }}
}}
"""


@pytest.fixture(scope="module")
def example_plan(
    tmp_path_factory: pytest.TempPathFactory, aws_plugin_dir: Path, terraform_moto_endpoint: str
) -> dict[str, dict[str, Any]]:
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    root = tmp_path_factory.mktemp("tf-cdn")
    example = copy_terraform_tree(root) / "examples" / "cloudfront-cdn"
    (example / "moto_override.tf").write_text(
        MOTO_PROVIDER.format(endpoint=terraform_moto_endpoint)
    )
    public = ec.generate_private_key(ec.SECP256R1()).public_key()
    (example / "public_key.pem").write_bytes(
        public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    init_offline(example, aws_plugin_dir)
    run_terraform(
        [
            "plan", "-input=false", "-out=tfplan", "-var=bucket_name=snap-cdn-test",
            f"-var=run_prefix={PREFIX}", "-var=public_key_pem=public_key.pem",
        ],
        example,
    )  # fmt: skip
    shown = run_terraform(["show", "-json", "tfplan"], example).stdout
    shutil.rmtree(example / ".terraform", ignore_errors=True)
    return planned(json.loads(shown)["planned_values"]["root_module"])


def planned(module: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """address -> planned values; a data source read only at apply has none yet."""
    found = {r["address"]: r.get("values", {}) for r in module.get("resources", [])}
    for child in module.get("child_modules", []):
        found.update(planned(child))
    return found


def test_the_example_plans_with_the_bucket_and_the_cdn_wired(
    example_plan: dict[str, dict[str, Any]],
) -> None:
    dist = example_plan["module.cdn.aws_cloudfront_distribution.this"]
    patterns = [b["path_pattern"] for b in dist["ordered_cache_behavior"]]
    assert patterns == [f"/{PREFIX}/v/*", f"/{PREFIX}/LATEST"]
    immutable = example_plan['module.cdn.aws_cloudfront_cache_policy.this["immutable"]']
    uncached = example_plan['module.cdn.aws_cloudfront_cache_policy.this["uncached"]']
    assert immutable["default_ttl"] == immutable["max_ttl"] == 31536000
    assert uncached["max_ttl"] == 0
    key = example_plan['module.cdn.aws_cloudfront_public_key.this["primary"]']
    assert key["encoded_key"].startswith("-----BEGIN PUBLIC KEY-----")
    assert "module.bucket.aws_s3_bucket_policy.this" in example_plan
    assert "module.bucket.aws_s3_bucket_public_access_block.this" in example_plan
