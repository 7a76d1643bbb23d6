"""fetch/stored.py: a store holds a version's payload as its manifest says, wherever it lies.

The relay checks a copy this way before it relays a version; with the payload dealt over
payload prefixes the objects lie in ``v/p<k>/<version>/``, not the version's directory,
and each of those directories must be listed.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from wanrl_s3 import PublishConfig, Publisher, Subscriber, open_store
from wanrl_s3.errors import VerificationError
from wanrl_s3.fetch.stored import check_stored
from wanrl_s3.format import layout
from wanrl_s3.store import ObjectStore
from wanrl_s3.testing import random_bf16_state


def spread_store(prefixes: int) -> ObjectStore:
    store = open_store(f"memory://stored-{uuid.uuid4().hex}")
    state = random_bf16_state([(f"layer.{i}.w", (3000,)) for i in range(6)], seed=4)
    config = PublishConfig(object_bytes=4096, full_coding="raw", payload_prefixes=prefixes)
    Publisher(store, config).publish(state, 1)
    return store


def check(store: ObjectStore) -> None:
    with Subscriber(store) as sub:
        manifest = sub.manifest(1)
    with ThreadPoolExecutor(2) as pool:
        check_stored(store, manifest, pool, chunk_bytes=8192)


@pytest.mark.parametrize("prefixes", [1, 3])
def test_a_whole_copy_passes_wherever_its_objects_lie(prefixes: int) -> None:
    check(spread_store(prefixes))


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_an_object_under_a_payload_prefix_missing_or_short_is_refused_by_name(
    damage: str,
) -> None:
    store = spread_store(3)
    key = next(o.key for o in store.list("v/p2/"))
    if damage == "missing":
        store.delete([key])
    else:
        store.put_bytes(key, store.get_bytes(key)[:-1])
    name = key.removeprefix(layout.payload_dir(1, 2) + "/")
    with pytest.raises(
        VerificationError, match=f"payload object {name} of v1 .* (is missing|holds)"
    ):
        check(store)
