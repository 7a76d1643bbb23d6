"""CdnGrant: what a worker holds. It builds only URLs inside its scope and parses strictly."""

from __future__ import annotations

import json

import pytest

from wanrl_s3.cdn import CdnGrant
from wanrl_s3.errors import UsageError

BASE = "https://d111111abcdef8.cloudfront.net/runs/exp-42"


def grant(**overrides: object) -> CdnGrant:
    fields: dict[str, object] = {
        "provider": "cloudfront",
        "base_url": BASE,
        "scope": "v/",
        "expires_at_s": 1767290400,
        "query": "Policy=abc&Signature=def&Key-Pair-Id=K2JCJMDEHXQW5F",
    }
    return CdnGrant(**{**fields, **overrides})  # type: ignore[arg-type]


def test_url_for_appends_the_query_to_keys_inside_the_scope() -> None:
    g = grant()
    assert g.url_for("v/000000000001/manifest.json") == (
        f"{BASE}/v/000000000001/manifest.json?Policy=abc&Signature=def&Key-Pair-Id=K2JCJMDEHXQW5F"
    )
    assert grant(query="").url_for("v/1/a.bin") == f"{BASE}/v/1/a.bin"
    assert grant(scope="").url_for("LATEST").startswith(f"{BASE}/LATEST?")


@pytest.mark.parametrize(
    "key",
    ["LATEST", "workers/w1.json", "v/../LATEST", "v//x", "/v/1/a", "v/1/../../x", "", "v/a b"],
)
def test_keys_outside_the_scope_or_not_plain_are_refused(key: str) -> None:
    g = grant()
    assert not g.covers(key)
    with pytest.raises(UsageError, match="outside the CDN grant's scope"):
        g.url_for(key)


def test_expiry_is_exclusive() -> None:
    g = grant()
    assert not g.expired(1767290399.9) and g.expired(1767290400)


def test_json_round_trip_keeps_headers_and_refuses_anything_else() -> None:
    g = grant(query="", headers={"Cookie": "CloudFront-Policy=abc"})
    assert CdnGrant.from_json(g.to_json()) == g
    assert json.loads(g.to_json())["headers"] == {"Cookie": "CloudFront-Policy=abc"}
    raw = json.loads(g.to_json())
    bad = [
        "[]",
        "{",
        "[" * 100_000,
        json.dumps({**raw, "extra": 1}),
        json.dumps({k: v for k, v in raw.items() if k != "scope"}),
        json.dumps({**raw, "provider": "akamai"}),
        json.dumps({**raw, "headers": ["Cookie"]}),
        json.dumps({**raw, "headers": {"Cookie": "a\r\nX-Injected: 1"}}),
        json.dumps({**raw, "expires_at_s": "soon"}),
        json.dumps({**raw, "base_url": BASE + "/"}),
        json.dumps({**raw, "base_url": "ftp://x/run"}),
        json.dumps({**raw, "scope": "v"}),
        json.dumps({**raw, "query": "?a=1"}),
        "x" * 70_000,
    ]
    for text in bad:
        with pytest.raises(UsageError):
            CdnGrant.from_json(text)
