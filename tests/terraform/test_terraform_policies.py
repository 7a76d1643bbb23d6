"""The policies and bucket settings as terraform renders them.

tests/terraform/harness calls the three modules with literal inputs; `terraform
plan` against a moto server (STS only: the caller's account id) renders every
aws_iam_policy_document and plans every bucket setting, with no AWS account.
The IAM checks evaluate the rendered JSON: what each role can and cannot do
on concrete keys of the bucket layout."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tf_support import (
    HARNESS_DIR,
    action_patterns,
    allows,
    copy_terraform_tree,
    covers_action,
    init_offline,
    plan_resources,
    policy,
    run_terraform,
)

PREFIX = "runs/exp-1"
BUCKETS = ["snap-use1", "snap-euw1", "snap-apne1"]
ACCOUNT = "123456789012"  # moto's account id: what data.aws_caller_identity returns there
TAGS = {"aws:PrincipalTag/worker_id": "w7"}


def obj(key: str, bucket: str = BUCKETS[0]) -> str:
    return f"arn:aws:s3:::{bucket}/{key}"


VERSION_KEYS = [f"{PREFIX}/v/00000042/manifest.json", f"{PREFIX}/v/00000042/chunk-0003.bin"]
LATEST = f"{PREFIX}/LATEST"
OWN_STATUS = f"{PREFIX}/workers/w7.json"
OTHER_STATUS = f"{PREFIX}/workers/w8.json"
OUTSIDE = ["runs/exp-2/v/00000001/manifest.json", "runs/exp-1-evil/v/x", "LATEST"]
DELETES = ["s3:DeleteObject", "s3:DeleteObjectVersion", "s3:DeleteObjects"]


@pytest.fixture(scope="module")
def rendered(
    tmp_path_factory: pytest.TempPathFactory,
    aws_plugin_dir: Path,
    terraform_moto_endpoint: str,
) -> dict[str, dict[str, Any]]:
    """address -> values of the harness plan."""
    root = tmp_path_factory.mktemp("tf-harness")
    copy_terraform_tree(root)
    harness = root / "harness"
    shutil.copytree(HARNESS_DIR, harness, ignore=shutil.ignore_patterns(".terraform*"))
    init_offline(harness, aws_plugin_dir)
    run_terraform(
        ["plan", "-input=false", "-out=tfplan", f"-var=endpoint={terraform_moto_endpoint}"],
        harness,
    )
    plan = json.loads(run_terraform(["show", "-json", "tfplan"], harness).stdout)
    return plan_resources(plan)


def doc(rendered: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    return policy(rendered[f"module.iam.data.aws_iam_policy_document.{name}"])


# ------------------------------------------------------------------ publisher


def test_publisher_writes_versions_latest_and_multipart(rendered: dict) -> None:
    publisher = doc(rendered, "publisher")
    for bucket in BUCKETS:
        for key in [*VERSION_KEYS, LATEST]:
            assert allows(publisher, "s3:PutObject", obj(key, bucket)), key
            assert allows(publisher, "s3:GetObject", obj(key, bucket)), key
        for action in ("s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"):
            assert allows(publisher, action, obj(VERSION_KEYS[1], bucket))
        assert allows(publisher, "s3:ListBucket", f"arn:aws:s3:::{bucket}")


def test_publisher_cannot_delete_or_write_elsewhere(rendered: dict) -> None:
    publisher = doc(rendered, "publisher")
    for key in [*VERSION_KEYS, LATEST, OWN_STATUS]:
        for action in DELETES:
            assert not allows(publisher, action, obj(key)), (action, key)
    for key in [OWN_STATUS, *OUTSIDE]:
        assert not allows(publisher, "s3:PutObject", obj(key)), key
    assert not allows(publisher, "s3:PutObject", obj(VERSION_KEYS[0], "someone-elses-bucket"))


# ------------------------------------------------------------------ worker


def test_worker_reads_and_lists_the_prefix(rendered: dict) -> None:
    worker = doc(rendered, "worker")
    for bucket in BUCKETS:
        for key in [*VERSION_KEYS, LATEST, OTHER_STATUS]:
            assert allows(worker, "s3:GetObject", obj(key, bucket), TAGS), key
        assert allows(worker, "s3:ListBucket", f"arn:aws:s3:::{bucket}", TAGS)
    for key in OUTSIDE:
        assert not allows(worker, "s3:GetObject", obj(key), TAGS), key


def test_worker_writes_only_its_own_status_object(rendered: dict) -> None:
    worker = doc(rendered, "worker")
    for bucket in BUCKETS:
        assert allows(worker, "s3:PutObject", obj(OWN_STATUS, bucket), TAGS)
        # Keys that end like its own status object but sit elsewhere.
        lookalikes = [f"{PREFIX}/v/w7.json", f"{PREFIX}/v/00000042/w7.json", f"{PREFIX}/w7.json"]
        for key in [*VERSION_KEYS, LATEST, OTHER_STATUS, *OUTSIDE, *lookalikes]:
            assert not allows(worker, "s3:PutObject", obj(key, bucket), TAGS), key
            for action in [*DELETES, "s3:AbortMultipartUpload", "s3:PutObjectAcl"]:
                assert not allows(worker, action, obj(key, bucket), TAGS), (action, key)
    # Without the session tag the variable has no value and nothing is writable.
    assert not allows(worker, "s3:PutObject", obj(OWN_STATUS), {})


def test_worker_trust_requires_the_worker_id_tag(rendered: dict) -> None:
    trust = doc(rendered, "worker_trust")
    (stmt,) = trust["Statement"]
    assert sorted(stmt["Action"]) == ["sts:AssumeRole", "sts:TagSession"]
    assert stmt["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"}
    cond = stmt["Condition"]
    assert cond["StringLike"] == {"aws:RequestTag/worker_id": "?*"}
    assert cond["StringNotLike"] == {"aws:RequestTag/worker_id": "*/*"}


# ------------------------------------------------------------------ garbage collector


def test_only_the_gc_role_can_delete(rendered: dict) -> None:
    names = {
        "publisher": doc(rendered, "publisher"),
        "worker": doc(rendered, "worker"),
        "replication": policy(
            rendered["module.replication.data.aws_iam_policy_document.replication"]
        ),
    }
    for name, document in names.items():
        for pattern in action_patterns(document):
            for action in DELETES:
                assert not covers_action(pattern, action), f"{name}: {pattern} covers {action}"
    gc = doc(rendered, "gc")
    for bucket in BUCKETS:
        for key in VERSION_KEYS:
            assert allows(gc, "s3:DeleteObject", obj(key, bucket))
        for key in [LATEST, OWN_STATUS, *OUTSIDE]:
            assert not allows(gc, "s3:DeleteObject", obj(key, bucket)), key
        assert not allows(gc, "s3:PutObject", obj(VERSION_KEYS[0], bucket))
        assert not allows(gc, "s3:DeleteObjectVersion", obj(VERSION_KEYS[0], bucket))
        assert allows(gc, "s3:ListBucketMultipartUploads", f"arn:aws:s3:::{bucket}")
        assert allows(gc, "s3:AbortMultipartUpload", obj(VERSION_KEYS[1], bucket))


def test_role_policies_are_the_rendered_documents(rendered: dict) -> None:
    for name in ("publisher", "worker", "gc"):
        attached = rendered[f'module.iam.aws_iam_role_policy.this["{name}"]']["policy"]
        assert json.loads(attached) == doc(rendered, name)
    for document in (doc(rendered, n) for n in ("publisher", "worker", "gc")):
        for stmt in document["Statement"]:
            resources = stmt["Resource"]
            assert "*" not in ([resources] if isinstance(resources, str) else resources)


def test_list_bucket_is_limited_to_the_prefix(rendered: dict) -> None:
    for name in ("publisher", "worker", "gc"):
        listing = [s for s in doc(rendered, name)["Statement"] if s["Action"] == "s3:ListBucket"]
        assert len(listing) == 1, name
        prefixes = listing[0]["Condition"]["StringLike"]["s3:prefix"]
        assert sorted(prefixes) == [PREFIX, f"{PREFIX}/*"]


# ------------------------------------------------------------------ bucket


def test_bucket_policy_is_tls_only_and_guards_deletes(rendered: dict) -> None:
    bucket_policy = policy(rendered["module.bucket.aws_s3_bucket_policy.this"], "policy")
    by_sid = {s["Sid"]: s for s in bucket_policy["Statement"]}
    tls = by_sid["DenyInsecureTransport"]
    assert tls["Effect"] == "Deny" and tls["Action"] == "s3:*" and tls["Principal"] == "*"
    assert sorted(tls["Resource"]) == ["arn:aws:s3:::snap-use1", "arn:aws:s3:::snap-use1/*"]
    assert tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    assert by_sid["DenyTlsOlderThan12"]["Condition"] == {
        "NumericLessThan": {"s3:TlsVersion": "1.2"}
    }
    guard = by_sid["DenyDeleteExceptGarbageCollector"]
    assert guard["Effect"] == "Deny"
    assert sorted(guard["Action"]) == ["s3:DeleteObject", "s3:DeleteObjectVersion"]
    assert guard["Condition"] == {
        "ArnNotEquals": {"aws:PrincipalArn": f"arn:aws:iam::{ACCOUNT}:role/harness-gc"}
    }


def test_bucket_encryption_public_access_ownership_versioning(rendered: dict) -> None:
    sse = rendered["module.bucket.aws_s3_bucket_server_side_encryption_configuration.this"]
    rule = sse["rule"][0]
    assert rule["apply_server_side_encryption_by_default"][0]["sse_algorithm"] == "AES256"
    assert rule["bucket_key_enabled"] is False
    pab = rendered["module.bucket.aws_s3_bucket_public_access_block.this"]
    assert all(
        pab[k]
        for k in (
            "block_public_acls",
            "block_public_policy",
            "ignore_public_acls",
            "restrict_public_buckets",
        )
    )
    ownership = rendered["module.bucket.aws_s3_bucket_ownership_controls.this"]
    assert ownership["rule"][0]["object_ownership"] == "BucketOwnerEnforced"
    versioning = rendered["module.bucket.aws_s3_bucket_versioning.this[0]"]
    assert versioning["versioning_configuration"][0]["status"] == "Enabled"


def test_lifecycle_rules(rendered: dict) -> None:
    lifecycle = rendered["module.bucket.aws_s3_bucket_lifecycle_configuration.this"]
    rules = {r["id"]: r for r in lifecycle["rule"]}
    expire = rules["expire-snapshot-versions"]
    assert expire["status"] == "Enabled"
    assert expire["filter"][0]["prefix"] == f"{PREFIX}/v/"
    assert expire["expiration"][0]["days"] == 14  # the harness's version_expiration_days
    abort = rules["abort-incomplete-multipart-uploads"]
    assert abort["status"] == "Enabled"
    assert abort["filter"][0]["prefix"] == ""
    assert abort["abort_incomplete_multipart_upload"][0]["days_after_initiation"] == 1
    noncurrent = rules["expire-noncurrent-versions"]
    assert noncurrent["noncurrent_version_expiration"][0]["noncurrent_days"] == 1
    assert noncurrent["expiration"][0]["expired_object_delete_marker"] is True


# ------------------------------------------------------------------ replication


def test_replication_rules_cover_versions_and_latest_per_destination(rendered: dict) -> None:
    config = rendered["module.replication.aws_s3_bucket_replication_configuration.this"]
    assert config["bucket"] == "snap-use1"
    rules = config["rule"]
    pairs = {(r["destination"][0]["bucket"], r["filter"][0]["prefix"]) for r in rules}
    assert pairs == {
        (f"arn:aws:s3:::{b}", f"{PREFIX}/{sub}")
        for b in ("snap-euw1", "snap-apne1")
        for sub in ("v/", "LATEST")
    }
    assert len({r["priority"] for r in rules}) == len(rules)
    for rule in rules:
        assert rule["status"] == "Enabled"
        assert rule["delete_marker_replication"][0]["status"] == "Enabled"
        destination = rule["destination"][0]
        rtc = destination["replication_time"][0]
        assert rtc["status"] == "Enabled" and rtc["time"][0]["minutes"] == 15
        metrics = destination["metrics"][0]
        assert metrics["status"] == "Enabled" and metrics["event_threshold"][0]["minutes"] == 15


def test_replication_role(rendered: dict) -> None:
    trust = policy(rendered["module.replication.data.aws_iam_policy_document.assume"])
    (stmt,) = trust["Statement"]
    assert stmt["Principal"] == {"Service": "s3.amazonaws.com"}
    assert stmt["Condition"]["StringEquals"] == {"aws:SourceAccount": ACCOUNT}
    perms = policy(rendered["module.replication.data.aws_iam_policy_document.replication"])
    for dest in ("snap-euw1", "snap-apne1"):
        assert allows(perms, "s3:ReplicateObject", obj(VERSION_KEYS[0], dest))
        assert allows(perms, "s3:ReplicateObject", obj(LATEST, dest))
        assert not allows(perms, "s3:ReplicateObject", obj(OWN_STATUS, dest))
    assert allows(perms, "s3:GetObjectVersionForReplication", obj(VERSION_KEYS[0]))
    assert not allows(perms, "s3:ReplicateObject", obj(VERSION_KEYS[0], "snap-use1"))
