"""Payload dealt over payload prefixes reads through a real caching edge like any v/ key.

The prefixes lie under ``v/`` (``v/p<k>/<version>/...``), so the edge caches them
(``Cache-Control`` immutable), a grant for the run's ``v/`` covers them and the reader
asks the edge, not the bucket, for every one of them.
"""

from __future__ import annotations

from collections import Counter

from tests.cdn.test_read import Counting, Run, policy, run, same, settled  # noqa: F401 - run
from wanrl_s3 import PublishConfig, Publisher, Subscriber
from wanrl_s3.cdn import CdnReadStore
from wanrl_s3.format import layout

MiB = 1 << 20


def test_spread_payload_is_read_through_the_edge_and_cached_there(run: Run) -> None:
    state = policy(11)
    store = run.store()
    Publisher(store, PublishConfig(object_bytes=MiB // 2, full_coding="raw", payload_prefixes=3)).publish(state, 1)
    spread = [o.key for o in store.list("v/") if o.key.startswith("v/p")]
    assert {key.split("/")[1] for key in spread} == {"p0", "p1", "p2"}
    head = run.s3().head_object(Bucket=run.bucket, Key=f"{run_prefix(run)}/{spread[0]}")
    assert head["CacheControl"] == layout.IMMUTABLE_CACHE_CONTROL
    for _ in range(2):
        origin = Counting(run.store())
        with Subscriber(CdnReadStore(origin, run.cdn_url)) as sub:
            assert same(sub.fetch().tensors, state)
            assert sub.store.fallbacks() == {}  # type: ignore[attr-defined]
        assert [k for k in origin.reads if k.startswith("v/")] == []  # all from the edge
    filled = Counter(r.uri.split("/v/")[1].split("/")[0] for r in run.fills())
    assert {"p0", "p1", "p2"} <= set(filled)  # each prefix filled from the bucket ...
    stored = sum(o.size for o in store.list("v/"))
    assert sum(r.body_bytes for r in run.fills()) == stored  # ... once, for both readers
    served = [r for r in settled(run.edge.requests) if "/v/p" in r.uri]
    assert sum(r.body_bytes for r in served) >= 2 * sum(o.size for o in store.list("v/p"))


def run_prefix(run: Run) -> str:
    return run.url.split("/", 3)[3]
