"""Static checks of terraform/: every file parses with python-hcl2, every
variable and output is documented, and the modules declare the resources and
policy statements issue 6 asks for. test_terraform_policies.py checks the same
policies again as terraform renders them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tf_support import (
    EXAMPLE_DIR,
    TERRAFORM_DIR,
    blocks,
    load_dir,
    load_hcl,
    locals_of,
    one_label_blocks,
    tf_files,
    walk_strings,
)

pytest.importorskip("hcl2", minversion="8.0")

MODULES = TERRAFORM_DIR / "modules"
BUCKET = MODULES / "snapshot-bucket"
REPLICATION = MODULES / "replication"
IAM = MODULES / "iam"
CLOUD_DIRS = [
    MODULES / "gcs-snapshot-bucket",
    MODULES / "gcs-iam",
    MODULES / "gcs-iam" / "policy",
    MODULES / "azure-snapshot-container",
    MODULES / "azure-iam",
    MODULES / "azure-iam" / "policy",
]
CDN_DIRS = [
    MODULES / "cloudfront-cdn",
    MODULES / "gcs-cloud-cdn",
    TERRAFORM_DIR / "examples" / "cloudfront-cdn",
]
ALL_DIRS = [BUCKET, REPLICATION, IAM, EXAMPLE_DIR, *CLOUD_DIRS, *CDN_DIRS]


def rel(path: Path) -> str:
    return str(path.relative_to(TERRAFORM_DIR))


@pytest.fixture(scope="module")
def bucket() -> dict[str, list[Any]]:
    return load_dir(BUCKET)


@pytest.fixture(scope="module")
def replication() -> dict[str, list[Any]]:
    return load_dir(REPLICATION)


@pytest.fixture(scope="module")
def iam() -> dict[str, list[Any]]:
    return load_dir(IAM)


def only(mapping: dict[str, Any]) -> Any:
    assert len(mapping) == 1, f"expected exactly one block, got {list(mapping)}"
    return next(iter(mapping.values()))


def statements(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Static and dynamic statements of an aws_iam_policy_document block."""
    found = list(doc.get("statement", []))
    for dyn in doc.get("dynamic", []):
        for content in dyn.get("statement", {}).get("content", []):
            found.append(content)
    return found


# ------------------------------------------------------------------ every file


def test_there_are_tf_files_in_every_module() -> None:
    for directory in ALL_DIRS:
        assert list(directory.glob("*.tf")), f"{rel(directory)} has no .tf file"


@pytest.mark.parametrize("path", tf_files(), ids=rel)
def test_every_tf_file_parses(path: Path) -> None:
    parsed = load_hcl(path)
    assert parsed, f"{rel(path)} parsed to nothing"


@pytest.mark.parametrize("directory", ALL_DIRS, ids=rel)
def test_every_variable_and_output_is_described(directory: Path) -> None:
    module = load_dir(directory)
    for kind in ("variable", "output"):
        for name, body in one_label_blocks(module, kind).items():
            description = body.get("description", "")
            assert isinstance(description, str) and len(description) >= 15, (
                f"{rel(directory)}: {kind} {name!r} needs a description"
            )


@pytest.mark.parametrize("path", tf_files(), ids=rel)
def test_no_hard_coded_account_id(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not re.search(r"(?<![0-9])[0-9]{12}(?![0-9])", text), (
        f"{rel(path)} contains a 12-digit number; take account ids from "
        "data.aws_caller_identity or a variable"
    )


@pytest.mark.parametrize("directory", [BUCKET, REPLICATION, IAM], ids=rel)
def test_modules_pin_terraform_and_aws_provider(directory: Path) -> None:
    terraform = load_dir(directory)["terraform"][0]
    assert terraform["required_version"].startswith(">= 1.")
    aws = terraform["required_providers"][0]["aws"]
    assert aws["source"] == "hashicorp/aws"
    assert aws["version"].startswith(">= 5")
    # A reusable module never configures its own provider: the caller picks the region.
    assert "provider" not in load_dir(directory)


# ------------------------------------------------------------------ snapshot-bucket


def test_bucket_blocks_public_access_and_enforces_owner(bucket: dict[str, list[Any]]) -> None:
    pab = only(blocks(bucket, "resource", "aws_s3_bucket_public_access_block"))
    for flag in (
        "block_public_acls",
        "block_public_policy",
        "ignore_public_acls",
        "restrict_public_buckets",
    ):
        assert pab[flag] is True, flag
    ownership = only(blocks(bucket, "resource", "aws_s3_bucket_ownership_controls"))
    assert ownership["rule"][0]["object_ownership"] == "BucketOwnerEnforced"


def test_bucket_encrypts_sse_s3_by_default_kms_optional(bucket: dict[str, list[Any]]) -> None:
    sse = only(blocks(bucket, "resource", "aws_s3_bucket_server_side_encryption_configuration"))
    default = sse["rule"][0]["apply_server_side_encryption_by_default"][0]
    assert "AES256" in default["sse_algorithm"] and "aws:kms" in default["sse_algorithm"]
    assert default["kms_master_key_id"] == "${var.kms_key_arn}"
    variables = one_label_blocks(bucket, "variable")
    assert variables["kms_key_arn"]["default"] is None
    assert locals_of(bucket)["use_kms"] == "${var.kms_key_arn != null}"


def test_bucket_versioning_is_a_variable(bucket: dict[str, list[Any]]) -> None:
    variables = one_label_blocks(bucket, "variable")
    assert variables["versioning_enabled"]["type"] == "bool"
    versioning = only(blocks(bucket, "resource", "aws_s3_bucket_versioning"))
    assert versioning["count"] == "${var.versioning_enabled ? 1 : 0}"
    assert versioning["versioning_configuration"][0]["status"] == "Enabled"


def test_bucket_lifecycle_expires_versions_and_aborts_uploads(
    bucket: dict[str, list[Any]],
) -> None:
    lifecycle = only(blocks(bucket, "resource", "aws_s3_bucket_lifecycle_configuration"))
    rules = {r["id"]: r for r in lifecycle["rule"]}
    variables = one_label_blocks(bucket, "variable")

    expire = rules["expire-snapshot-versions"]
    assert expire["filter"][0]["prefix"] == "${local.versions_prefix}"
    assert locals_of(bucket)["versions_prefix"] == "${var.prefix}/v/"
    assert "var.version_expiration_days" in expire["expiration"][0]["days"]
    assert variables["version_expiration_days"]["type"] == "number"
    # Off by default: `wanrl-s3 gc` is the collector that keeps delta chains whole;
    # the harness turns the rule on to check it.
    assert variables["version_expiration_days"]["default"] is None

    abort = rules["abort-incomplete-multipart-uploads"]
    assert abort["status"] == "Enabled"
    assert abort["filter"][0]["prefix"] == ""  # the whole bucket
    days = abort["abort_incomplete_multipart_upload"][0]["days_after_initiation"]
    assert days == "${var.abort_incomplete_multipart_days}"
    assert variables["abort_incomplete_multipart_days"]["default"] == 1


def test_bucket_policy_denies_plain_http(bucket: dict[str, list[Any]]) -> None:
    policy = only(blocks(bucket, "resource", "aws_s3_bucket_policy"))
    assert policy["policy"] == "${data.aws_iam_policy_document.bucket.json}"
    doc = blocks(bucket, "data", "aws_iam_policy_document")["bucket"]
    by_sid = {s["sid"]: s for s in statements(doc)}
    tls = by_sid["DenyInsecureTransport"]
    assert tls["effect"] == "Deny"
    assert tls["actions"] == ["s3:*"]
    assert tls["principals"] == [{"type": "*", "identifiers": ["*"]}]
    assert tls["condition"] == [
        {"test": "Bool", "variable": "aws:SecureTransport", "values": ["false"]}
    ]
    assert set(tls["resources"]) == {"${local.bucket_arn}", "${local.bucket_arn}/*"}


# ------------------------------------------------------------------ replication


def test_replication_rules_and_optional_rtc(replication: dict[str, list[Any]]) -> None:
    config = only(blocks(replication, "resource", "aws_s3_bucket_replication_configuration"))
    assert config["role"] == "${aws_iam_role.this.arn}"
    rule = config["dynamic"][0]["rule"]
    assert rule["for_each"] == "${local.rules}"
    content = rule["content"][0]
    assert content["status"] == "Enabled"
    assert content["filter"][0]["prefix"] == "${rule.value.prefix}"
    destination = content["destination"][0]
    dynamics = {next(iter(d)): next(iter(d.values())) for d in destination["dynamic"]}
    rtc = dynamics["replication_time"]
    assert rtc["for_each"] == "${var.replication_time_control ? [true] : []}"
    assert rtc["content"][0]["time"][0]["minutes"] == 15
    assert dynamics["metrics"]["content"][0]["status"] == "Enabled"
    variables = one_label_blocks(replication, "variable")
    assert variables["replication_time_control"]["default"] is False


def test_replication_role_is_assumed_by_s3_for_this_account_only(
    replication: dict[str, list[Any]],
) -> None:
    assume = blocks(replication, "data", "aws_iam_policy_document")["assume"]
    assert len(statements(assume)) == 1
    stmt = statements(assume)[0]
    assert stmt["principals"][0] == {"type": "Service", "identifiers": ["s3.amazonaws.com"]}
    variables = {c["variable"] for c in stmt["condition"]}
    assert variables == {"aws:SourceAccount", "aws:SourceArn"}


# ------------------------------------------------------------------ iam


def iam_docs(iam: dict[str, list[Any]]) -> dict[str, dict[str, Any]]:
    return blocks(iam, "data", "aws_iam_policy_document")


def test_iam_declares_three_roles(iam: dict[str, list[Any]]) -> None:
    role = only(blocks(iam, "resource", "aws_iam_role"))
    role_policy = only(blocks(iam, "resource", "aws_iam_role_policy"))
    assert role["for_each"] == role_policy["for_each"] == "${local.roles}"
    assert role["assume_role_policy"] == "${each.value.trust}"
    assert role_policy["policy"] == "${each.value.policy}"
    assert role_policy["role"] == "${aws_iam_role.this[each.key].id}"
    roles = locals_of(iam)["roles"]
    assert set(roles) == {"publisher", "worker", "gc"}
    for name, spec in roles.items():
        assert spec["trust"] == f"${{data.aws_iam_policy_document.{name}_trust.json}}"
        assert spec["policy"] == f"${{data.aws_iam_policy_document.{name}.json}}"


def test_only_the_gc_policy_mentions_delete(iam: dict[str, list[Any]]) -> None:
    for name, doc in iam_docs(iam).items():
        for stmt in statements(doc):
            actions = stmt.get("actions", [])
            deletes = [a for a in actions if "delete" in a.lower() or a in {"*", "s3:*"}]
            if name == "gc":
                assert deletes in ([], ["s3:DeleteObject"]), deletes
            else:
                assert deletes == [], f"{name} grants {deletes}"
    gc_deletes = [s for s in statements(iam_docs(iam)["gc"]) if "s3:DeleteObject" in s["actions"]]
    assert len(gc_deletes) == 1
    assert gc_deletes[0]["resources"] == "${local.version_objects}"
    assert locals_of(iam)["version_objects"] == (
        '${[for b in var.bucket_arns : "${b}/${var.prefix}/v/*"]}'
    )


def test_worker_writes_only_its_own_status_object(iam: dict[str, list[Any]]) -> None:
    writes = [
        s
        for s in statements(iam_docs(iam)["worker"])
        if any(a.startswith("s3:Put") or a.startswith("s3:Delete") for a in s["actions"])
    ]
    assert len(writes) == 1
    assert writes[0]["actions"] == ["s3:PutObject"]
    assert writes[0]["resources"] == "${local.worker_status_objects}"
    expr = locals_of(iam)["worker_status_objects"]
    # $${...} is a literal ${...} for IAM to substitute from the session tag.
    assert "/${var.prefix}/workers/$${aws:PrincipalTag/${var.worker_id_tag_key}}.json" in expr


def test_worker_trust_requires_a_worker_id_session_tag(iam: dict[str, list[Any]]) -> None:
    stmt = statements(iam_docs(iam)["worker_trust"])[0]
    assert set(stmt["actions"]) == {"sts:AssumeRole", "sts:TagSession"}
    conditions = {(c["test"], c["variable"]): c["values"] for c in stmt["condition"]}
    tag = "aws:RequestTag/${var.worker_id_tag_key}"
    assert conditions[("StringLike", tag)] == ["?*"]
    assert conditions[("StringNotLike", tag)] == ["*/*"]


def test_shared_read_statements_stay_inside_the_prefix(iam: dict[str, list[Any]]) -> None:
    read = {s["sid"]: s for s in statements(iam_docs(iam)["read"])}
    assert read["ReadRunObjects"]["actions"] == ["s3:GetObject"]
    assert read["ReadRunObjects"]["resources"] == "${local.prefix_objects}"
    listing = read["ListRunPrefix"]
    assert listing["actions"] == ["s3:ListBucket"]
    condition = listing["dynamic"][0]["condition"]["content"][0]
    assert condition["variable"] == "s3:prefix"
    assert condition["values"] == "${local.list_prefixes}"
    for name in ("publisher", "worker", "gc"):
        sources = iam_docs(iam)[name]["source_policy_documents"]
        assert sources == ["${data.aws_iam_policy_document.read.json}"]


def test_listing_defaults_to_the_bucket_so_missing_keys_are_404(
    iam: dict[str, list[Any]],
) -> None:
    # A replica reader must tell "not replicated yet" (404) from "forbidden" (403);
    # prefix-scoped ListBucket turns every missing key into a 403.
    assert one_label_blocks(iam, "variable")["list_bucket_scope"]["default"] == "bucket"


def test_no_allow_on_every_resource(iam: dict[str, list[Any]]) -> None:
    for name, doc in iam_docs(iam).items():
        for stmt in statements(doc):
            assert "*" not in list(walk_strings(stmt.get("resources", []))), name


# ------------------------------------------------------------------ example


def test_example_has_a_primary_and_two_replica_providers() -> None:
    example = load_dir(EXAMPLE_DIR)
    providers = [next(iter(p.values())) for p in example["provider"]]
    assert sorted(p.get("alias", "") for p in providers) == ["", "replica_a", "replica_b"]
    modules = one_label_blocks(example, "module")
    assert modules["replica_a"]["providers"] == {"aws": "${aws.replica_a}"}
    assert modules["replica_b"]["providers"] == {"aws": "${aws.replica_b}"}
    assert modules["replication"]["count"] == "${local.replicate ? 1 : 0}"
    for name in ("primary", "replica_a", "replica_b"):
        assert modules[name]["source"] == "../../modules/snapshot-bucket"
        assert modules[name]["versioning_enabled"] == "${local.replicate}"


def test_example_outputs_the_regions_file() -> None:
    example = load_dir(EXAMPLE_DIR)
    output = one_label_blocks(example, "output")["regions_toml"]
    assert "regions.toml.tftpl" in output["value"]
    keys = set(re.findall(r"(\w+)\s*=", locals_of(example)["toml_regions"]))
    assert {"label", "url", "s3_region", "endpoint_url", "profile", "price_class"} <= keys
