"""The condition evaluators the GCS and Azure policy tests rely on: they must
read the operators as the services do, and refuse what they do not know
rather than guess."""

from __future__ import annotations

import pytest
from cloud_conditions import AzureRequest, GcsRequest, compile_abac, compile_cel

OBJ = "projects/_/buckets/b/objects/"


def test_cel_precedence_and_negation() -> None:
    # && binds tighter than ||: a || (b && c).
    cond = compile_cel(
        f"resource.name == '{OBJ}a' || resource.name.startsWith('{OBJ}b') "
        "&& resource.name.endsWith('.json')"
    )
    assert cond(GcsRequest("p", f"{OBJ}a"))
    assert cond(GcsRequest("p", f"{OBJ}b/x.json"))
    assert not cond(GcsRequest("p", f"{OBJ}b/x.bin"))
    assert compile_cel(f"!(resource.name == '{OBJ}a')")(GcsRequest("p", f"{OBJ}z"))


def test_cel_list_prefix_attribute_defaults_to_empty() -> None:
    cond = compile_cel(
        "api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('runs/')"
    )
    assert cond(GcsRequest("storage.objects.list", "projects/_/buckets/b", "runs/x/"))
    assert not cond(GcsRequest("storage.objects.list", "projects/_/buckets/b"))
    assert not cond(GcsRequest("storage.objects.get", f"{OBJ}runs/x"))


@pytest.mark.parametrize(
    "text",
    [
        "resource.name.matches('.*')",
        "resource.type == 'storage.googleapis.com/Object'",
        f"resource.name == '{OBJ}a' ||",
        f"(resource.name == '{OBJ}a'",
    ],
)
def test_cel_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError):
        compile_cel(text)


BLOB = "Microsoft.Storage/storageAccounts/blobServices/containers/blobs"


def test_abac_action_guard_and_missing_attribute() -> None:
    cond = compile_abac(
        f"((!(ActionMatches{{'{BLOB}/read'}} AND NOT SubOperationMatches{{'Blob.List'}})) "
        f"OR (@Resource[{BLOB}:path] StringStartsWith 'runs/'))"
    )
    read = f"{BLOB}/read"
    assert cond(AzureRequest(read, resource={f"{BLOB}:path": "runs/x"}))
    assert not cond(AzureRequest(read, resource={f"{BLOB}:path": "other/x"}))
    assert not cond(AzureRequest(read))  # no path: the comparison is false
    assert cond(AzureRequest(read, "Blob.List"))  # not guarded by this clause
    assert cond(AzureRequest(f"{BLOB}/write", resource={f"{BLOB}:path": "other/x"}))


def test_abac_string_like_wildcards() -> None:
    cond = compile_abac(f"@Resource[{BLOB}:path] StringLike 'r/workers/*.json'")
    assert cond(AzureRequest("a", resource={f"{BLOB}:path": "r/workers/w7.json"}))
    assert not cond(AzureRequest("a", resource={f"{BLOB}:path": "r/workers/w7.txt"}))
    assert not cond(AzureRequest("a", resource={f"{BLOB}:path": "r/v/w7.json"}))


@pytest.mark.parametrize(
    "text",
    [
        f"@Resource[{BLOB}:path] StringNotLike 'x'",
        f"@Resource[{BLOB}:path] ForAnyOfAnyValues:StringEquals {{'x'}}",
        "ActionMatches{'a'} AND",
        "Exists @Resource[x]",
    ],
)
def test_abac_refuses_what_it_cannot_read(text: str) -> None:
    with pytest.raises(ValueError):
        compile_abac(text)
