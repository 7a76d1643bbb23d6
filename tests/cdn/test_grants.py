"""Where a reader's grant comes from while it runs, and what a reader does without a good one.

No edge is needed here: a grant that expired sends every read to the store
without a request to the CDN, and a CDN that stops answering (a closed port) is
given up object by object after a few failures, on a fake clock.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.cdn.keys import private_pem
from wanrl_s3.cdn import CdnGrant, CdnReadStore, CloudFrontSigner, GrantFile, MintedGrants
from wanrl_s3.cdn.read import TRANSIENT_FAILURES_BEFORE_ORIGIN
from wanrl_s3.errors import UsageError
from wanrl_s3.store import FakeClock, RetryPolicy, open_store
from wanrl_s3.testing import free_port

BASE = "https://d111111abcdef8.cloudfront.net/runs/exp-42"


def grant(expires_at_s: int, token: str = "a", base: str = BASE) -> CdnGrant:
    return CdnGrant("cloudflare", base, "v/", expires_at_s, query=f"verify={token}")


class Ticks:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


def test_a_grant_file_is_read_again_when_it_changes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path, ticks = tmp_path / "grant.json", Ticks()
    path.write_text(grant(100, "first").to_json())
    source = GrantFile(path, check_interval_s=5, monotonic=ticks)
    path.write_text(grant(200, "second-and-longer").to_json())
    assert source().query == "verify=first"  # not looked at again yet
    ticks.now_s = 5
    assert source().query == "verify=second-and-longer"
    path.write_text('{"half": ')  # a writer caught mid-write
    ticks.now_s = 10
    with caplog.at_level(logging.WARNING):
        assert source().query == "verify=second-and-longer"
        ticks.now_s = 15
        assert source().query == "verify=second-and-longer"
    assert len(caplog.records) == 1 and "still using the grant read before" in caplog.text
    path.write_text(grant(300, "third").to_json())
    ticks.now_s = 20
    assert source().expires_at_s == 300


def test_a_bad_grant_file_at_the_start_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read the CDN grant"):
        GrantFile(tmp_path / "absent.json")
    (tmp_path / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\n...")
    with pytest.raises(UsageError, match="is not a JSON object"):
        GrantFile(tmp_path / "key.pem")


def test_minted_grants_are_minted_again_before_they_end(rsa_key: rsa.RSAPrivateKey) -> None:
    clock = Ticks()
    clock.now_s = 1_000_000.0
    signer = CloudFrontSigner("K2JCJMDEHXQW5F", private_pem(rsa_key), valid_for_s=4000, clock=clock)
    source = MintedGrants(signer, BASE, now_s=clock)
    first = source()
    assert first.expires_at_s == 1_004_000 and "Policy=" in first.query
    clock.now_s += 2999  # 1001 s left: more than a quarter of 4000
    assert source() is first
    clock.now_s += 2  # 999 s left
    assert source().expires_at_s == 1_007_001


def test_an_expired_grant_sends_reads_to_the_store_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    origin = open_store("memory://expired-grant")
    origin.put_bytes("v/000000000001/a.bin", b"payload")
    clock = FakeClock(start_s=500.0)
    cdn = f"http://127.0.0.1:{free_port()}/run"  # nothing listens: no request may be made
    grants = iter([grant(1000, base=cdn), grant(400, base=cdn), grant(400, base=cdn)])
    through = CdnReadStore(origin, cdn, grant=lambda: next(grants), retry=RetryPolicy(clock=clock))
    with caplog.at_level(logging.WARNING):
        assert through.get_bytes("v/000000000001/a.bin") == b"payload"
        assert through.get_bytes("v/000000000001/a.bin") == b"payload"
    assert caplog.text.count("the CDN grant expired at 400") == 1
    assert through.fallbacks() == {}  # the object is not to blame: a fresh grant reads it


def test_a_cdn_that_stops_answering_is_given_up_object_by_object() -> None:
    origin = open_store("memory://cdn-gone")
    origin.put_bytes("v/000000000001/a.bin", bytes(range(200)))
    origin.put_bytes("LATEST", b"{}")
    clock = FakeClock()
    cdn = f"http://127.0.0.1:{free_port()}/run"
    through = CdnReadStore(origin, cdn, retry=RetryPolicy(clock=clock))
    buf = bytearray(100)
    through.read_into("v/000000000001/a.bin", 50, memoryview(buf))
    assert bytes(buf) == bytes(range(50, 150))
    assert len(clock.sleeps) == TRANSIENT_FAILURES_BEFORE_ORIGIN - 1  # retried, then the store
    assert "3 failures in a row" in through.fallbacks()["v/000000000001/a.bin"]
    assert through.get_bytes("LATEST") == b"{}"  # never through the CDN


def test_a_grant_for_another_url_or_a_cdn_store_inside_another_is_refused() -> None:
    origin = open_store("memory://refused")
    with pytest.raises(UsageError, match="the CDN grant is for"):
        CdnReadStore(origin, "https://other.example.com/run", grant=grant(2**40))
    with pytest.raises(UsageError, match="not another CdnReadStore"):
        CdnReadStore(CdnReadStore(origin, BASE), BASE)
    with pytest.raises(UsageError, match="cdn_url must be"):
        CdnReadStore(origin, "s3://bucket/run")


def test_nothing_that_changes_is_read_through_the_cdn_whatever_a_grant_covers() -> None:
    origin = open_store("memory://whole-run-grant")
    origin.put_bytes("LATEST", b"{}")
    cdn = f"http://127.0.0.1:{free_port()}/run"  # nothing listens: a request would fail
    whole_run = CdnGrant("cloudflare", cdn, "", 2**40, query="verify=x")
    through = CdnReadStore(origin, cdn, grant=whole_run, retry=RetryPolicy(clock=FakeClock()))
    assert through.get_bytes("LATEST") == b"{}"
    with pytest.raises(UsageError, match="scope must be 'v/'"):
        CdnReadStore(origin, cdn, scope="")
