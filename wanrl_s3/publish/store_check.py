"""Before the first write to a store: does it hold conditional writes? Checked once.

A store that ignores ``If-None-Match: *`` (or ``If-Match``) answers every
request with success, and two publishers of one version then overwrite each
other's manifest without either noticing; LATEST could move backwards. No
client-side measure replaces the store's own check, so a publisher refuses
such a store before writing any payload: :func:`require_conditional_writes`
probes both writes under ``checks/scratch/`` (removed afterwards) and, when
they hold, records it in ``checks/conditional-writes.json`` so later publishes
to that store skip the probe (docs/format.md). Nothing is recorded when they
do not: the next publish checks again, after the store or endpoint is fixed.
``wanrl-s3 doctor`` probes every other property too.
"""

from __future__ import annotations

import json
import time
import uuid

from ..errors import NotFoundError, StoreGuaranteeError, VerificationError
from ..format import layout
from ..store import ObjectStore
from ..store.doctor import COMPARE_AND_SWAP, CONDITIONAL_CREATE, Finding, conditional_writes

RECORD_FORMAT = "wanrl-s3/store-check"
_MAX_RECORD_BYTES = 4096
_RECORDED = (CONDITIONAL_CREATE.name, COMPARE_AND_SWAP.name)


def require_conditional_writes(store: ObjectStore) -> None:
    """Return if ``store`` holds conditional writes (recorded, or probed now); else refuse.

    Raises :class:`StoreGuaranteeError` naming what failed and ``wanrl-s3 doctor``.
    """
    if _recorded_ok(store):
        return
    findings = conditional_writes(store, layout.scratch_dir(uuid.uuid4().hex))
    broken = [f for f in findings if f.broken]
    if broken:
        raise StoreGuaranteeError(refusal(store, broken))
    record(store, findings)


def refusal(store: ObjectStore, broken: list[Finding]) -> str:
    """The one line that refuses ``store``: what it did, and the command that says more."""
    seen = "; ".join(f"{f.name}: {f.seen}" for f in broken)
    return (
        f"{store.url} does not hold conditional writes ({seen}), so two publishers could "
        f"overwrite each other; nothing was published. Run `wanrl-s3 doctor --store "
        f"{store.url}` (with the same endpoint flags) for every property"
    )


def record(store: ObjectStore, findings: list[Finding]) -> None:
    """Write the record of a conditional-write check that held, or remove the record
    of one that did not (``findings`` may hold other properties too: they are ignored)."""
    checked = [f for f in findings if f.name in _RECORDED]
    if len(checked) != len(_RECORDED) or any(f.broken for f in checked):
        store.delete([layout.STORE_CHECK_KEY])
        return
    body = {
        "format": RECORD_FORMAT,
        "conditional_create": True,
        "compare_and_swap": True,
        "checked_at_s": round(time.time(), 3),
    }
    store.put_bytes(layout.STORE_CHECK_KEY, json.dumps(body, sort_keys=True).encode())


def _recorded_ok(store: ObjectStore) -> bool:
    """A well-formed record of a check that held; anything else means: check again."""
    info = store.head(layout.STORE_CHECK_KEY)
    if info is None or not 0 < info.size <= _MAX_RECORD_BYTES:
        return False
    buf = bytearray(info.size)  # read no more than that, whatever the key holds by now
    try:
        store.read_into(layout.STORE_CHECK_KEY, 0, memoryview(buf))
        body = json.loads(buf)
    except (NotFoundError, VerificationError, ValueError, RecursionError):
        return False
    return (
        isinstance(body, dict)
        and body.get("format") == RECORD_FORMAT
        and body.get("conditional_create") is True
        and body.get("compare_and_swap") is True
    )
