"""The subscriber's manifest prefetch asks for an unpublished version number once.

A trainer that publishes every kappa-th step leaves gaps in the version numbers;
the prefetch before a delta asks for every number between the keyframe and the
target, and the gaps must not cost a request again before every later delta.
"""

from __future__ import annotations

import uuid
from collections import Counter

import numpy as np
import pytest

from wanrl_s3 import PublishConfig, Publisher, Subscriber, open_store
from wanrl_s3.format import layout


def test_unpublished_version_numbers_are_asked_for_once(monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(f"memory://{uuid.uuid4().hex}")
    publisher = Publisher(store, PublishConfig(delta="always", keyframe_every=100))
    weights = {"w": np.arange(1024, dtype=np.float32)}
    published = [0, 2, 4, 6, 8]
    gets: Counter[str] = Counter()
    real_get = store._get

    def counting_get(key: str, **kwargs: object) -> object:
        gets[key] += 1
        return real_get(key, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(store, "_get", counting_get)
    with Subscriber(store) as sub:
        for v in published:
            weights["w"][v] += 1.0
            publisher.publish(weights, version=v)
            got = sub.fetch(v)
            assert got.tensors["w"].tobytes() == weights["w"].tobytes()
    for gap in (1, 3, 5, 7):
        assert gets[layout.manifest_key(gap)] <= 1, (gap, gets[layout.manifest_key(gap)])
    assert sum(gets[layout.manifest_key(g)] for g in (1, 3, 5)) >= 1  # the prefetch did ask
