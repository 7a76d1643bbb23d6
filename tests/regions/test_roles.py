"""Store roles: one module decides where to publish, read, collect and report."""

from __future__ import annotations

import pytest

from tests.regions.support import three_regions
from wanrl_s3.errors import UsageError
from wanrl_s3.regions.roles import StoreRoles, store_roles


def _urls(stores: object) -> list[str]:
    items = stores.values() if isinstance(stores, dict) else stores  # type: ignore[attr-defined]
    return [s.url for s in items]


@pytest.mark.parametrize(
    ("mode", "publish", "collect"),
    [
        ("fanout", ["use1", "euw1", "apne1"], ["use1", "euw1", "apne1"]),
        ("copy", ["use1"], ["use1", "euw1", "apne1"]),
        ("replicate", ["use1"], ["use1"]),
    ],
)
def test_roles_by_mode(s3_endpoint: str, mode: str, publish: list[str], collect: list[str]) -> None:
    regions = three_regions(s3_endpoint, mode)
    roles = store_roles(regions=regions)
    url = {r.name: r.url for r in regions.regions}
    assert _urls(roles.publish()) == [url[n] for n in publish]
    assert list(roles.collect()) == collect
    assert _urls(roles.collect()) == [url[n] for n in collect]
    assert _urls(roles.report()) == [url[n] for n in ("use1", "euw1", "apne1")]
    store, choice = roles.read("euw1")
    assert store.url == url["euw1"] and choice is not None and choice.region == "euw1"


def test_one_url_plays_every_role() -> None:
    roles = store_roles("memory://roles-one")
    assert _urls(roles.publish()) == ["memory://roles-one"]
    assert list(roles.collect()) == ["memory://roles-one"]
    store, choice = roles.read("auto")
    assert store.url == "memory://roles-one" and choice is None


def test_exactly_one_of_url_and_regions(s3_endpoint: str) -> None:
    with pytest.raises(UsageError, match="not both and not neither"):
        StoreRoles()
    with pytest.raises(UsageError, match="not both"):
        store_roles("memory://x", regions=three_regions(s3_endpoint, "fanout"))
