"""modules/gcs-snapshot-bucket and modules/gcs-iam: the bucket settings and the
least-privilege split, read from the HCL and from the bindings terraform itself
renders (modules/gcs-iam/policy needs no provider, so `terraform console`
renders it offline). Each binding's IAM condition is evaluated on the object
names the product really writes (wanrl_s3.format.layout, the store's staging
keys): publisher writes, workers read and replace only status objects, only
the gc deletes snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cloud_conditions import GcsRequest, compile_cel, gcs_allows
from run_layout import (
    LATEST,
    LIST_INSIDE,
    LIST_OUTSIDE,
    LOOKALIKES,
    MANIFEST,
    MARKER,
    OTHER_STATUS,
    OUTSIDE,
    OWN_STATUS,
    PART,
    PREFIX,
    UPLOADS,
    VERSION_KEYS,
)
from tf_support import (
    TERRAFORM_DIR,
    blocks,
    check_provider_free,
    check_provider_pins,
    console_eval,
    load_dir,
    locals_of,
    one_label_blocks,
    walk_strings,
)

pytest.importorskip("hcl2", minversion="8.0")

BUCKET_DIR = TERRAFORM_DIR / "modules" / "gcs-snapshot-bucket"
IAM_DIR = TERRAFORM_DIR / "modules" / "gcs-iam"
POLICY_DIR = IAM_DIR / "policy"

BUCKETS = ["snap-usc1", "snap-euw4"]
STAGING = [MARKER, PART]
GET, LIST, CREATE, DELETE = (
    "storage.objects.get",
    "storage.objects.list",
    "storage.objects.create",
    "storage.objects.delete",
)


def obj(key: str, bucket: str = BUCKETS[0]) -> str:
    return f"projects/_/buckets/{bucket}/objects/{key}"


def bucket_resource(bucket: str = BUCKETS[0]) -> str:
    return f"projects/_/buckets/{bucket}"


# ------------------------------------------------------------------ rendered policy


def render(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    variables: dict[str, Any] = {
        "bucket_names": BUCKETS,
        "prefix": PREFIX,
        "list_scope": "prefix",
        "members": {
            "publisher": {"service_account": "serviceAccount:pub@p.iam.gserviceaccount.com"},
            "worker": {"service_account": "serviceAccount:wrk@p.iam.gserviceaccount.com"},
            "gc": {"service_account": "serviceAccount:gc@p.iam.gserviceaccount.com"},
        },
        "worker_status_members": {"w7": "principal://iam.googleapis.com/pool/subject/w7"},
        **overrides,
    }
    expr = "{bindings = merge(local.shared, local.pinned), roles = local.role_permissions}"
    return console_eval(POLICY_DIR, variables, expr, tmp_path / "gcs-policy")


@pytest.fixture(scope="module")
def policy(terraform_path: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return render(tmp_path_factory.mktemp("gcs"))


def may(policy: dict[str, Any], principal: str, permission: str, key: str, bucket: str) -> bool:
    request = GcsRequest(permission, obj(key, bucket))
    return gcs_allows(policy["bindings"], policy["roles"], principal, request)


def may_list(policy: dict[str, Any], principal: str, prefix: str, bucket: str) -> bool:
    request = GcsRequest(LIST, bucket_resource(bucket), list_prefix=prefix)
    return gcs_allows(policy["bindings"], policy["roles"], principal, request)


def test_roles_hold_exactly_their_permissions(policy: dict[str, Any]) -> None:
    assert policy["roles"] == {"reader": [GET, LIST], "creator": [CREATE], "deleter": [DELETE]}


def test_every_principal_reads_and_lists_only_the_run(policy: dict[str, Any]) -> None:
    everything = [*VERSION_KEYS, LATEST, OWN_STATUS, OTHER_STATUS, *STAGING]
    for principal in ("publisher", "worker", "gc", "worker:w7"):
        for bucket in BUCKETS:
            for key in everything:
                assert may(policy, principal, GET, key, bucket), (principal, key)
            for key in OUTSIDE:
                assert not may(policy, principal, GET, key, bucket), (principal, key)
            for prefix in LIST_INSIDE:
                assert may_list(policy, principal, prefix, bucket), (principal, prefix)
            for prefix in LIST_OUTSIDE:
                assert not may_list(policy, principal, prefix, bucket), (principal, prefix)


def test_publisher_creates_versions_latest_and_staged_parts(policy: dict[str, Any]) -> None:
    for bucket in BUCKETS:
        for key in [*VERSION_KEYS, LATEST, *STAGING]:
            assert may(policy, "publisher", CREATE, key, bucket), key
        # Replacing LATEST (compare-and-swap) needs create and delete on GCS;
        # removing staged parts after compose needs delete.
        for key in [LATEST, *STAGING]:
            assert may(policy, "publisher", DELETE, key, bucket), key


def test_publisher_cannot_delete_snapshots_or_write_elsewhere(policy: dict[str, Any]) -> None:
    for bucket in BUCKETS:
        for key in [*VERSION_KEYS, OWN_STATUS, *OUTSIDE]:
            assert not may(policy, "publisher", DELETE, key, bucket), key
        for key in [OWN_STATUS, OTHER_STATUS, *OUTSIDE, *LOOKALIKES[1:]]:
            assert not may(policy, "publisher", CREATE, key, bucket), key


def test_worker_replaces_status_objects_only(policy: dict[str, Any]) -> None:
    for bucket in BUCKETS:
        for key in (OWN_STATUS, OTHER_STATUS):  # a shared identity cannot tell workers apart
            assert may(policy, "worker", CREATE, key, bucket), key
            assert may(policy, "worker", DELETE, key, bucket), key
        for key in [*VERSION_KEYS, LATEST, *STAGING, *OUTSIDE, *LOOKALIKES]:
            for permission in (CREATE, DELETE):
                assert not may(policy, "worker", permission, key, bucket), (permission, key)


def test_pinned_worker_replaces_only_its_own_status(policy: dict[str, Any]) -> None:
    for bucket in BUCKETS:
        assert may(policy, "worker:w7", CREATE, OWN_STATUS, bucket)
        assert may(policy, "worker:w7", DELETE, OWN_STATUS, bucket)
        for key in [OTHER_STATUS, *VERSION_KEYS, LATEST, *STAGING, *OUTSIDE, *LOOKALIKES]:
            for permission in (CREATE, DELETE):
                assert not may(policy, "worker:w7", permission, key, bucket), (permission, key)


def test_only_the_gc_deletes_snapshots(policy: dict[str, Any]) -> None:
    for bucket in BUCKETS:
        for key in [*VERSION_KEYS, *STAGING]:
            assert may(policy, "gc", DELETE, key, bucket), key
        for key in [LATEST, OWN_STATUS, *OUTSIDE]:
            assert not may(policy, "gc", DELETE, key, bucket), key
        for key in [*VERSION_KEYS, LATEST, OWN_STATUS, *STAGING]:
            assert not may(policy, "gc", CREATE, key, bucket), key
        for principal in ("publisher", "worker", "worker:w7"):
            for key in VERSION_KEYS:
                assert not may(policy, principal, DELETE, key, bucket), (principal, key)


def test_each_binding_names_its_own_bucket_only(policy: dict[str, Any]) -> None:
    for binding in policy["bindings"].values():
        condition = compile_cel(binding["expression"])
        others = [b for b in BUCKETS if b != binding["bucket"]]
        for bucket in others:
            for key in [*VERSION_KEYS, LATEST, OWN_STATUS, *STAGING]:
                for permission in (GET, CREATE, DELETE):
                    assert not condition(GcsRequest(permission, obj(key, bucket))), binding


def test_bucket_list_scope_lists_the_bucket_but_reads_only_the_run(
    terraform_path: str, tmp_path: Path
) -> None:
    policy = render(tmp_path, list_scope="bucket")
    for principal in ("publisher", "worker", "gc"):
        assert may_list(policy, principal, "", BUCKETS[1])
        assert not may(policy, principal, GET, OUTSIDE[0], BUCKETS[1])
        assert may(policy, principal, GET, MANIFEST, BUCKETS[1])
    other = "projects/_/buckets/someone-elses"
    assert not gcs_allows(policy["bindings"], policy["roles"], "gc", GcsRequest(LIST, other))


# ------------------------------------------------------------------ HCL


@pytest.fixture(scope="module")
def bucket_hcl() -> dict[str, list[Any]]:
    return load_dir(BUCKET_DIR)


@pytest.fixture(scope="module")
def iam_hcl() -> dict[str, list[Any]]:
    return load_dir(IAM_DIR)


def test_modules_pin_terraform_and_the_google_provider() -> None:
    for directory in (BUCKET_DIR, IAM_DIR):
        check_provider_pins(directory, "google", "5")
    check_provider_free(POLICY_DIR)


def test_bucket_is_private_uniform_and_never_blocks_deletes(
    bucket_hcl: dict[str, list[Any]],
) -> None:
    (bucket,) = blocks(bucket_hcl, "resource", "google_storage_bucket").values()
    assert bucket["uniform_bucket_level_access"] is True  # IAM conditions need it
    assert bucket["public_access_prevention"] == "enforced"
    # Nothing that could refuse the gc's deletes: no bucket lock, no holds.
    for blocker in ("retention_policy", "default_event_based_hold", "object_retention"):
        assert blocker not in bucket, blocker
    soft = bucket["soft_delete_policy"][0]["retention_duration_seconds"]
    assert soft == "${var.soft_delete_retention_days * 86400}"
    assert bucket["versioning"][0]["enabled"] == "${var.versioning_enabled}"
    variables = one_label_blocks(bucket_hcl, "variable")
    assert variables["versioning_enabled"]["default"] is False
    assert variables["version_expiration_days"]["default"] is None


def test_bucket_lifecycle_rules(bucket_hcl: dict[str, list[Any]]) -> None:
    (bucket,) = blocks(bucket_hcl, "resource", "google_storage_bucket").values()
    static = bucket["lifecycle_rule"]
    assert len(static) == 1
    assert static[0]["condition"][0]["matches_prefix"] == ["${local.uploads_prefix}"]
    assert static[0]["action"][0]["type"] == "Delete"
    local = locals_of(bucket_hcl)
    assert local["uploads_prefix"] == UPLOADS.replace(PREFIX, "${var.prefix}", 1)
    assert local["versions_prefix"] == LIST_INSIDE[1].replace(PREFIX, "${var.prefix}", 1)
    dynamic = [(next(iter(d)), next(iter(d.values()))) for d in bucket["dynamic"]]
    rules = {
        body["for_each"]: body["content"][0] for name, body in dynamic if name == "lifecycle_rule"
    }
    expire = rules["${local.expire_versions ? [var.version_expiration_days] : []}"]
    assert expire["condition"][0]["matches_prefix"] == ["${local.versions_prefix}"]
    noncurrent = rules["${var.versioning_enabled ? [var.noncurrent_version_expiration_days] : []}"]
    assert noncurrent["condition"][0]["with_state"] == "ARCHIVED"
    assert noncurrent["action"][0]["type"] == "Delete"


def test_bucket_outputs_a_url_the_store_reads(
    bucket_hcl: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = one_label_blocks(bucket_hcl, "output")
    template = outputs["url"]["value"]
    assert template == "gs://${google_storage_bucket.this.name}/${var.prefix}"
    assert outputs["endpoint_url"]["value"] == ""
    assert outputs["price_class"]["value"] == "gcs:${lower(var.location)}"
    pytest.importorskip("google.cloud.storage")
    from wanrl_s3.store import open_store

    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    url = template.replace("${google_storage_bucket.this.name}", "snap-usc1").replace(
        "${var.prefix}", PREFIX
    )
    # A loopback endpoint gives anonymous credentials; nothing is contacted.
    store = open_store(url, endpoint_url="http://127.0.0.1:9")
    assert (store.bucket_name, store.prefix, store.url) == ("snap-usc1", PREFIX, url)


def test_iam_binds_the_rendered_policy_with_custom_roles(iam_hcl: dict[str, list[Any]]) -> None:
    (binding,) = blocks(iam_hcl, "resource", "google_storage_bucket_iam_member").values()
    assert binding["for_each"] == "${module.policy.bindings}"
    assert binding["role"] == "${google_project_iam_custom_role.this[each.value.role].name}"
    assert binding["condition"][0]["expression"] == "${each.value.expression}"
    (role,) = blocks(iam_hcl, "resource", "google_project_iam_custom_role").values()
    assert role["for_each"] == "${module.policy.role_permissions}"
    assert role["permissions"] == "${each.value}"
    module = one_label_blocks(iam_hcl, "module")["policy"]
    assert module["source"] == "./policy"
    assert module["members"] == "${local.members}"


def test_no_predefined_storage_role_and_no_public_member() -> None:
    for directory in (BUCKET_DIR, IAM_DIR, POLICY_DIR):
        strings = list(walk_strings(load_dir(directory)))
        roles = {s for s in strings if s.startswith("roles/")}
        assert roles <= {"roles/iam.serviceAccountTokenCreator"}, roles
        assert not any("allUsers" in s or "allAuthenticatedUsers" in s for s in strings)
