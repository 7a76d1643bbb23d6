"""modules/azure-snapshot-container and modules/azure-iam: the account and
container settings and the least-privilege split, read from the HCL and from
the role assignments terraform itself renders (modules/azure-iam/policy needs
no provider, so `terraform console` renders it offline). Each assignment's
condition is evaluated on the blob paths the product really writes
(wanrl_s3.format.layout, the store's upload markers): publisher writes,
workers read and write only status blobs, only the gc deletes snapshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cloud_conditions import AzureRequest, azure_allows, compile_abac
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
    PREFIX,
    VERSION_KEYS,
)
from tf_support import (
    TERRAFORM_DIR,
    blocks,
    check_provider_free,
    check_provider_pins,
    console_eval,
    load_dir,
    one_label_blocks,
    walk_strings,
)

pytest.importorskip("hcl2", minversion="8.0")

CONTAINER_DIR = TERRAFORM_DIR / "modules" / "azure-snapshot-container"
IAM_DIR = TERRAFORM_DIR / "modules" / "azure-iam"
POLICY_DIR = IAM_DIR / "policy"

ACCOUNTS = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts"
SCOPES = {
    "weu": f"{ACCOUNTS}/snapweu/blobServices/default/containers/wanrl",
    "eus": f"{ACCOUNTS}/snapeus/blobServices/default/containers/wanrl",
}
BLOB = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"
READ, WRITE, ADD, DELETE = f"{BLOB}/read", f"{BLOB}/write", f"{BLOB}/add/action", f"{BLOB}/delete"
WRITES = (WRITE, ADD)
# Data actions no principal may hold: they would delete or hide data past the gc.
NEVER = [
    f"{BLOB}/deleteBlobVersion/action",
    f"{BLOB}/permanentDelete/action",
    f"{BLOB}/move/action",
    f"{BLOB}/immutableStorage/runAsSuperUser/action",
    f"{BLOB}/tags/write",
]


def on_blob(action: str, path: str) -> AzureRequest:
    return AzureRequest(action, resource={f"{BLOB}:path": path})


def list_blobs(prefix: str | None) -> AzureRequest:
    request = {} if prefix is None else {f"{BLOB}:prefix": prefix}
    return AzureRequest(READ, "Blob.List", request=request)


# ------------------------------------------------------------------ rendered policy


def render(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    variables: dict[str, Any] = {
        "container_scopes": SCOPES,
        "prefix": PREFIX,
        "list_scope": "prefix",
        "principals": {
            "publisher": {"identity": "00000000-0000-0000-0000-0000000000a1"},
            "worker": {"identity": "00000000-0000-0000-0000-0000000000b2"},
            "gc": {"identity": "00000000-0000-0000-0000-0000000000c3"},
        },
        "worker_status_principals": {"w7": "00000000-0000-0000-0000-0000000000d4"},
        **overrides,
    }
    expr = "{assignments = merge(local.shared, local.pinned), roles = local.role_data_actions}"
    return console_eval(POLICY_DIR, variables, expr, tmp_path / "azure-policy")


@pytest.fixture(scope="module")
def policy(terraform_path: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return render(tmp_path_factory.mktemp("azure"))


def may(policy: dict[str, Any], principal: str, request: AzureRequest, label: str) -> bool:
    return azure_allows(policy["assignments"], policy["roles"], principal, SCOPES[label], request)


def test_roles_hold_exactly_their_data_actions(policy: dict[str, Any]) -> None:
    assert policy["roles"] == {"reader": [READ], "writer": [WRITE, ADD], "deleter": [DELETE]}
    granted = {a for actions in policy["roles"].values() for a in actions}
    assert not granted & set(NEVER)


def test_every_principal_reads_and_lists_only_the_run(policy: dict[str, Any]) -> None:
    everything = [*VERSION_KEYS, LATEST, OWN_STATUS, OTHER_STATUS, MARKER]
    for principal in ("publisher", "worker", "gc", "worker:w7"):
        for label in SCOPES:
            for key in everything:
                assert may(policy, principal, on_blob(READ, key), label), (principal, key)
            for key in OUTSIDE:
                assert not may(policy, principal, on_blob(READ, key), label), (principal, key)
            for prefix in LIST_INSIDE:
                assert may(policy, principal, list_blobs(prefix), label), (principal, prefix)
            for prefix in [None, *LIST_OUTSIDE]:
                assert not may(policy, principal, list_blobs(prefix), label), (principal, prefix)


def test_publisher_writes_versions_latest_and_markers(policy: dict[str, Any]) -> None:
    for label in SCOPES:
        for key in [*VERSION_KEYS, LATEST, MARKER]:
            for action in WRITES:
                assert may(policy, "publisher", on_blob(action, key), label), (action, key)
        # A completed upload's marker is the publisher's to remove.
        assert may(policy, "publisher", on_blob(DELETE, MARKER), label)


def test_publisher_cannot_delete_snapshots_or_write_elsewhere(policy: dict[str, Any]) -> None:
    for label in SCOPES:
        # Replacing LATEST by If-Match needs write only: no delete on it.
        for key in [*VERSION_KEYS, LATEST, OWN_STATUS, *OUTSIDE]:
            assert not may(policy, "publisher", on_blob(DELETE, key), label), key
        for key in [OWN_STATUS, OTHER_STATUS, *OUTSIDE, *LOOKALIKES[1:]]:
            for action in WRITES:
                assert not may(policy, "publisher", on_blob(action, key), label), (action, key)


def test_worker_writes_status_blobs_only(policy: dict[str, Any]) -> None:
    for label in SCOPES:
        for key in (OWN_STATUS, OTHER_STATUS):  # a shared identity cannot tell workers apart
            assert may(policy, "worker", on_blob(WRITE, key), label), key
        for key in [*VERSION_KEYS, LATEST, MARKER, *OUTSIDE, *LOOKALIKES]:
            for action in WRITES:
                assert not may(policy, "worker", on_blob(action, key), label), (action, key)
        for key in [*VERSION_KEYS, LATEST, MARKER, OWN_STATUS]:
            assert not may(policy, "worker", on_blob(DELETE, key), label), key


def test_pinned_worker_writes_only_its_own_status(policy: dict[str, Any]) -> None:
    for label in SCOPES:
        assert may(policy, "worker:w7", on_blob(WRITE, OWN_STATUS), label)
        for key in [OTHER_STATUS, *VERSION_KEYS, LATEST, MARKER, *OUTSIDE, *LOOKALIKES]:
            for action in (*WRITES, DELETE):
                assert not may(policy, "worker:w7", on_blob(action, key), label), (action, key)


def test_only_the_gc_deletes_snapshots(policy: dict[str, Any]) -> None:
    for label in SCOPES:
        for key in [*VERSION_KEYS, MARKER]:
            assert may(policy, "gc", on_blob(DELETE, key), label), key
        for key in [LATEST, OWN_STATUS, *OUTSIDE]:
            assert not may(policy, "gc", on_blob(DELETE, key), label), key
        for key in [*VERSION_KEYS, LATEST, OWN_STATUS, MARKER]:
            for action in WRITES:
                assert not may(policy, "gc", on_blob(action, key), label), (action, key)
        for principal in ("publisher", "worker", "worker:w7"):
            for key in VERSION_KEYS:
                assert not may(policy, principal, on_blob(DELETE, key), label), (principal, key)


def test_assignments_are_scoped_to_one_container_each(policy: dict[str, Any]) -> None:
    for key, assignment in policy["assignments"].items():
        label = key.split("/", 1)[0]
        assert assignment["scope"] == SCOPES[label]
        other = next(s for s in SCOPES.values() if s != assignment["scope"])
        request = on_blob(READ, MANIFEST)
        assert not azure_allows(
            {key: assignment}, policy["roles"], assignment["principal"], other, request
        )


def test_container_list_scope_lists_everything_but_reads_only_the_run(
    terraform_path: str, tmp_path: Path
) -> None:
    policy = render(tmp_path, list_scope="container")
    for principal in ("publisher", "worker", "gc"):
        assert may(policy, principal, list_blobs(None), "eus")
        assert not may(policy, principal, on_blob(READ, OUTSIDE[0]), "eus")
        assert may(policy, principal, on_blob(READ, MANIFEST), "eus")


def test_conditions_constrain_every_data_action_of_their_role(policy: dict[str, Any]) -> None:
    # A condition only restricts the actions it names; one that forgot an action
    # of its role would leave that action unconditioned. Outside the run, every
    # action of every assigned role must be refused.
    for assignment in policy["assignments"].values():
        condition = compile_abac(assignment["condition"])
        for action in policy["roles"][assignment["role"]]:
            assert not condition(on_blob(action, OUTSIDE[1])), (assignment["principal"], action)


# ------------------------------------------------------------------ HCL


@pytest.fixture(scope="module")
def container_hcl() -> dict[str, list[Any]]:
    return load_dir(CONTAINER_DIR)


@pytest.fixture(scope="module")
def iam_hcl() -> dict[str, list[Any]]:
    return load_dir(IAM_DIR)


def test_modules_pin_terraform_and_the_azurerm_provider() -> None:
    for directory in (CONTAINER_DIR, IAM_DIR):
        check_provider_pins(directory, "azurerm", "4")
    check_provider_free(POLICY_DIR)


def test_account_is_private_tls12_and_keyless(container_hcl: dict[str, list[Any]]) -> None:
    (account,) = blocks(container_hcl, "resource", "azurerm_storage_account").values()
    assert account["min_tls_version"] == "TLS1_2"
    assert account["https_traffic_only_enabled"] is True
    assert account["shared_access_key_enabled"] is False
    assert account["default_to_oauth_authentication"] is True
    assert account["allow_nested_items_to_be_public"] is False
    assert account["local_user_enabled"] is False
    assert account["sftp_enabled"] is False
    assert account["cross_tenant_replication_enabled"] is False
    rules = account["network_rules"][0]
    assert rules["default_action"] == "${var.network_default_action}"
    variables = one_label_blocks(container_hcl, "variable")
    assert variables["network_default_action"]["default"] == "Deny"
    (container,) = blocks(container_hcl, "resource", "azurerm_storage_container").values()
    assert container["container_access_type"] == "private"
    assert container["storage_account_id"] == "${azurerm_storage_account.this.id}"


def test_soft_delete_and_versioning_never_block_deletes(
    container_hcl: dict[str, list[Any]],
) -> None:
    (account,) = blocks(container_hcl, "resource", "azurerm_storage_account").values()
    props = account["blob_properties"][0]
    assert props["versioning_enabled"] == "${var.versioning_enabled}"
    retention = props["delete_retention_policy"][0]
    assert retention == {"days": "${var.blob_soft_delete_retention_days}"}
    # No immutability policy, legal hold or version-level WORM anywhere.
    strings = " ".join(walk_strings(container_hcl))
    for blocker in ("immutability", "legal_hold", "permanent_delete_enabled"):
        assert blocker not in strings and blocker not in props, blocker
    variables = one_label_blocks(container_hcl, "variable")
    assert variables["versioning_enabled"]["default"] is False


def test_lifecycle_rules(container_hcl: dict[str, list[Any]]) -> None:
    (mgmt,) = blocks(container_hcl, "resource", "azurerm_storage_management_policy").values()
    (static,) = mgmt["rule"]
    assert static["filters"][0]["prefix_match"] == ["${local.run_path}/.uploads/"]
    dynamic = {body["content"][0]["name"]: body for d in mgmt["dynamic"] for body in d.values()}
    expire = dynamic["expire-snapshot-versions"]["content"][0]
    assert expire["filters"][0]["prefix_match"] == ["${local.run_path}/v/"]
    previous = dynamic["expire-previous-versions"]
    assert previous["for_each"].startswith("${var.versioning_enabled ?")


def test_container_outputs_a_url_the_store_reads(
    container_hcl: dict[str, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = one_label_blocks(container_hcl, "output")
    template = outputs["url"]["value"]
    names = {
        "${azurerm_storage_container.this.name}": "wanrl",
        "${azurerm_storage_account.this.name}": "snapweu",
        "${var.prefix}": PREFIX,
    }
    url = template
    for expr, value in names.items():
        url = url.replace(expr, value)
    assert url == f"az://wanrl@snapweu/{PREFIX}"
    assert "primary_blob_endpoint" in outputs["endpoint_url"]["value"]
    pytest.importorskip("azure.storage.blob")
    from wanrl_s3.store import open_store

    # A dummy key keeps the client from looking for Entra credentials; nothing is contacted.
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    monkeypatch.setenv("AZURE_STORAGE_KEY", "ZHVtbXk=")
    store = open_store(url, endpoint_url="http://127.0.0.1:9/snapweu")
    assert (store.container, store.account, store.prefix, store.url) == (
        "wanrl",
        "snapweu",
        PREFIX,
        url,
    )


def test_iam_assigns_the_rendered_policy_with_custom_roles(iam_hcl: dict[str, list[Any]]) -> None:
    (assignment,) = blocks(iam_hcl, "resource", "azurerm_role_assignment").values()
    assert assignment["for_each"] == "${module.policy.assignments}"
    assert assignment["condition"] == "${each.value.condition}"
    assert assignment["condition_version"] == "2.0"
    assert assignment["scope"] == "${each.value.scope}"
    role_id = "${azurerm_role_definition.this[each.value.role].role_definition_resource_id}"
    assert assignment["role_definition_id"] == role_id
    (role,) = blocks(iam_hcl, "resource", "azurerm_role_definition").values()
    assert role["for_each"] == "${module.policy.role_data_actions}"
    assert role["permissions"][0] == {"actions": [], "data_actions": "${each.value}"}


def test_no_builtin_role_and_no_key_based_access() -> None:
    for directory in (CONTAINER_DIR, IAM_DIR, POLICY_DIR):
        module = load_dir(directory)
        strings = list(walk_strings(module))
        assert not any("Storage Blob Data" in s or "Owner" in s for s in strings)
        # No SAS tokens or account keys handed out by Terraform.
        data_types = {t for item in module.get("data", []) for t in item}
        assert not {t for t in data_types if t.endswith("_sas")}, data_types
        assert not any("primary_access_key" in s or "connection_string" in s for s in strings)
