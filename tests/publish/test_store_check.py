"""publish's check before its first write: a store that ignores conditional writes is
refused with nothing written; one that holds them is probed once, then recorded."""

from __future__ import annotations

import json
import uuid

import pytest

from wanrl_s3.errors import StoreGuaranteeError
from wanrl_s3.format import layout
from wanrl_s3.publish.store_check import require_conditional_writes
from wanrl_s3.store.memory import MemoryStore

from ..store.broken_stores import IgnoresConditions


class CountsConditionalPuts(MemoryStore):
    conditional_puts = 0

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        if if_none_match or if_match is not None:
            type(self).conditional_puts += 1
        return super()._put(key, data, if_none_match=if_none_match, if_match=if_match)


def _name() -> str:
    return f"check-{uuid.uuid4().hex}"


def test_a_store_that_ignores_conditions_is_refused_and_left_as_it_was() -> None:
    store = IgnoresConditions(_name())
    with pytest.raises(StoreGuaranteeError) as info:
        require_conditional_writes(store)
    message = str(info.value)
    assert info.value.exit_code == 8 and "\n" not in message
    assert "wanrl-s3 doctor --store memory://" in message
    assert "a second create of one key was accepted" in message
    assert store.list() == []  # no probe left behind, and no record of a check that failed


def test_a_sound_store_is_probed_once_then_recorded() -> None:
    store = CountsConditionalPuts(_name())
    CountsConditionalPuts.conditional_puts = 0
    require_conditional_writes(store)
    probed = CountsConditionalPuts.conditional_puts
    assert probed >= 4  # create twice, swap at the current and at a stale ETag
    assert [o.key for o in store.list()] == [layout.STORE_CHECK_KEY]
    record = json.loads(store.get_bytes(layout.STORE_CHECK_KEY))
    assert record["format"] == "wanrl-s3/store-check" and record["conditional_create"] is True
    require_conditional_writes(store)
    assert CountsConditionalPuts.conditional_puts == probed  # the record spared the probe


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"[" * 3000, b"x" * 5000, b'{"format": "wanrl-s3/store-check"}', b""],
    ids=["garbage", "deep", "oversized", "incomplete", "empty"],
)
def test_a_record_that_is_not_a_sound_one_means_probing_again(body: bytes) -> None:
    store = CountsConditionalPuts(_name())
    store.put_bytes(layout.STORE_CHECK_KEY, body)
    CountsConditionalPuts.conditional_puts = 0
    require_conditional_writes(store)
    assert CountsConditionalPuts.conditional_puts >= 4
    assert json.loads(store.get_bytes(layout.STORE_CHECK_KEY))["compare_and_swap"] is True


def test_lost_responses_to_the_probes_do_not_refuse_a_sound_store(s3_endpoint: str) -> None:
    """The responses to the first create and to the swap at the current ETag are lost
    after the server acted: each retry is refused by the probe's own earlier write,
    which a read-back recognises, so the store is not refused."""
    from wanrl_s3.store import open_store
    from wanrl_s3.testing import Fault, FaultProxy, Rule, make_bucket

    url = f"s3://{make_bucket(s3_endpoint)}/run"
    scratch = r"/checks/scratch/[^/]+/"
    rules = [
        Rule(Fault.RESET_AFTER, method="PUT", key=scratch + "create$", count=1),
        Rule(Fault.TRICKLE, method="PUT", key=scratch + "cas$", count=1),  # its create: let be
        Rule(Fault.RESET_AFTER, method="PUT", key=scratch + "cas$", count=1),  # the swap
    ]
    with FaultProxy(s3_endpoint, rules=rules) as proxy:
        require_conditional_writes(open_store(url, endpoint_url=proxy.url))
        assert proxy.counts[Fault.RESET_AFTER] == 2
    store = open_store(url, endpoint_url=s3_endpoint)
    assert [o.key for o in store.list()] == [layout.STORE_CHECK_KEY]
