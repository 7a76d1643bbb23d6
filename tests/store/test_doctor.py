"""Each probe of the store doctor finds the fault it is there for, and only that one.

memory:// stores with one deliberate fault each (a store that ignores
conditions, serves stale reads or listings, ignores ranges, keeps deleted
objects, hands out one ETag for every write): the probe for that property says
NOT HELD, and a guarantee among them makes the store broken. Real servers are
probed in tests/cli/test_doctor.py.
"""

from __future__ import annotations

import uuid

import pytest

from wanrl_s3.store.doctor import HELD, NOT_HELD, NOT_PROBED, Finding, diagnose
from wanrl_s3.store.memory import MemoryStore

from .broken_stores import (
    IgnoresConditions,
    IgnoresRanges,
    KeepsDeleted,
    OneEtag,
    ShortReads,
    StaleListing,
    StaleReads,
    StoresBadChecksums,
    UnconditionalCompletion,
)

SCRATCH = "checks/scratch/test"


def _findings(store: MemoryStore) -> dict[str, Finding]:
    return {f.name: f for f in diagnose(store, SCRATCH)}


def _new(cls: type[MemoryStore]) -> MemoryStore:
    return cls(f"doctor-{uuid.uuid4().hex}")


def test_a_sound_store_holds_every_guarantee_and_leaves_nothing_behind() -> None:
    store = _new(MemoryStore)
    findings = _findings(store)
    assert len(findings) == 9
    assert all(f.status == HELD for f in findings.values() if f.guarantee), findings
    assert not any(f.broken for f in findings.values())
    assert findings["conditional create on multipart completion"].status == NOT_PROBED
    assert findings["upload with a wrong checksum refused"].status == NOT_PROBED
    assert "MD5" in findings["ETag form"].seen
    assert store.list() == [] and store.pending_uploads() == []


@pytest.mark.parametrize(
    "cls, broken",
    [
        (IgnoresConditions, {"conditional create (PUT If-None-Match: *)",
                             "compare-and-swap (PUT If-Match)"}),
        (StaleReads, {"read-after-write"}),
        (StaleListing, {"list-after-write"}),
        (IgnoresRanges, {"range reads"}),
        (ShortReads, {"range reads"}),
        (KeepsDeleted, {"delete", "list-after-write"}),
        (OneEtag, {"compare-and-swap (PUT If-Match)", "ETag form"}),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else "",
)  # fmt: skip
def test_each_fault_is_found_by_its_probe(cls: type[MemoryStore], broken: set[str]) -> None:
    findings = _findings(_new(cls))
    assert {n for n, f in findings.items() if f.broken} == broken
    for name in broken:
        assert findings[name].status == NOT_HELD
        assert findings[name].action != findings[name].seen


def test_a_truncated_object_is_a_finding_not_a_crash() -> None:
    found = _findings(_new(ShortReads))["range reads"]
    assert found.status == NOT_HELD and "came back short" in found.seen


def test_an_upload_stored_despite_a_wrong_checksum_is_reported_not_fatal() -> None:
    found = _findings(_new(StoresBadChecksums))["upload with a wrong checksum refused"]
    assert found.status == NOT_HELD and not found.broken
    assert found.action == "something else catches it"  # the backend's own answer


def test_an_unconditional_multipart_completion_is_reported_not_fatal() -> None:
    found = _findings(_new(UnconditionalCompletion))["conditional create on multipart completion"]
    assert found.status == NOT_HELD and not found.broken
    assert "replaced" in found.seen
