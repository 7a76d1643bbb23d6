"""Cloudflare HMAC tokens, against Cloudflare's published example and its documented validator.

Sources, read 2026-12-05:

- https://developers.cloudflare.com/waf/custom-rules/use-cases/configure-token-authentication/
  ("Protect an entire URI path prefix with a single signature"): the rule and
  three request paths with their tokens, secret ``mysecrettoken``. Two of them
  are reproduced here exactly.
- https://developers.cloudflare.com/ruleset-engine/rules-language/functions/#hmac-validation:
  ``is_timed_hmac_valid_v0``'s arguments and the MessageMAC format
  ``(.+)(.*)(\\d{10})-(.{43,})``, re-implemented below as an independent checker.

The same pages' single-object examples (``/images/cat.jpg?verify=1484063787-9JQB8...``
and ``/download/cat.jpg?verify=1484063787-IaLGS...``) do not reproduce from
the secrets and messages printed beside them (``mysecrettoken``,
``mysecretkey``), so they are illustrations, not vectors: the single-object
form is checked by the documented validator instead.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from wanrl_s3.cdn import CloudflareTokenSigner
from wanrl_s3.errors import SigningKeyError, UsageError

SECRET, TTL = "mysecrettoken", 10800
PUBLISHED = [  # (base URL, signed object path), from the prefix example
    (
        "https://downloads.example.com/case-studies/12345678-90ab-4cde-f012-3456789abcde",
        "/case-studies/12345678-90ab-4cde-f012-3456789abcde/foobar-report.pdf"
        "?1755877101-5WOroVcDINdl2%2BQZxZFHJcJ6l%2Fep4HGIrX3DtSXzWO0%3D",
    ),
    (
        "https://downloads.example.com/case-studies/768bf477-22d5-4545-857d-b155510119ff",
        "/case-studies/768bf477-22d5-4545-857d-b155510119ff/another-company-report.pdf"
        "?1755878057-jeMS5S1F3MIgxvL61UmiX4vODiWtuLfcPV6q%2B0Y3Rig%3D",
    ),
]
_MESSAGE_MAC = re.compile(r"(.+)(.*)(\d{10})-(.{43,})", re.S)


def is_timed_hmac_valid_v0(key: str, message_mac: str, ttl: int, now: int, sep_len: int) -> bool:
    """The documented semantics: MAC over message + timestamp, separator skipped, ttl enforced."""
    match = _MESSAGE_MAC.fullmatch(message_mac)
    if match is None:
        return False
    head, timestamp, mac = match.group(1) + match.group(2), match.group(3), match.group(4)
    message = head[: len(head) - sep_len]
    expected = hmac.new(key.encode(), (message + timestamp).encode(), hashlib.sha256).digest()
    try:
        given = base64.b64decode(unquote(mac), validate=True)
    except ValueError:
        return False
    return hmac.compare_digest(given, expected) and now < int(timestamp) + ttl


def prefix_rule_admits(url: str, prefix_len: int, now: int, key: str = SECRET) -> bool:
    """The prefix rule's MessageMAC for a request, as Cloudflare would build it."""
    parts = urlsplit(url)
    message_mac = f"{parts.path[:prefix_len]}?{parts.query}"
    return is_timed_hmac_valid_v0(key, message_mac, TTL, now, 1)


@pytest.mark.parametrize(("base", "signed_path"), PUBLISHED)
def test_a_grant_reproduces_cloudflares_published_prefix_example(
    base: str, signed_path: str
) -> None:
    issued = int(signed_path.rsplit("?", 1)[1].split("-")[0])
    grant = CloudflareTokenSigner(SECRET, ttl_s=TTL).grant(base, scope="", issued_at_s=issued)
    assert (
        urlsplit(grant.url_for(signed_path.split("/")[-1].split("?")[0])).path + "?" + (grant.query)
        == signed_path
    )
    assert grant.expires_at_s == issued + TTL


def test_the_prefix_rule_admits_the_runs_versions_and_nothing_else() -> None:
    signer = CloudflareTokenSigner(SECRET, ttl_s=TTL, clock=lambda: 1767290400.9)
    base = "https://snapshots.example.com/runs/exp-42"
    rule = signer.prefix_rule(base)
    prefix = "/runs/exp-42/v/"
    assert rule == (
        '(http.host eq "snapshots.example.com" and not (starts_with(http.request.uri.path, '
        f'"{prefix}") and is_timed_hmac_valid_v0("{SECRET}", concat(substring('
        f'http.request.uri.path, 0, {len(prefix)}), "?", http.request.uri.query), {TTL}, '
        "http.request.timestamp.sec, 1)))"
    )
    grant = signer.grant(base)
    url = grant.url_for("v/000000000042/3f9a/000000.bin")
    assert prefix_rule_admits(url, len(prefix), now=1767290400 + TTL - 1)
    assert not prefix_rule_admits(url, len(prefix), now=1767290400 + TTL)  # expired
    assert not prefix_rule_admits(url, len(prefix), now=1767290401, key="another-secret")
    other_run = url.replace("exp-42", "exp-43")
    assert not prefix_rule_admits(other_run, len(prefix), now=1767290401)
    assert grant.expires_at_s == 1767290400 + TTL


@pytest.mark.parametrize(
    "url",
    [
        "https://downloads.example.com/images/cat.jpg",
        "https://downloads.example.com/runs/a/v/000000000001/manifest.json?x-id=GetObject",
    ],
)
def test_a_signed_object_url_passes_the_documented_validator(url: str) -> None:
    signer = CloudflareTokenSigner(SECRET, ttl_s=TTL)
    signed = signer.sign_url(url, issued_at_s=1484063787)
    uri = signed.split("downloads.example.com", 1)[1]  # http.request.uri: path and query
    assert "verify=1484063787-" in uri and uri.endswith("%3D")
    assert is_timed_hmac_valid_v0(SECRET, uri, TTL, 1484063787 + 60, len("?verify="))
    tampered = "/x" + uri  # another object, same token
    assert not is_timed_hmac_valid_v0(SECRET, tampered, TTL, 1484063847, 8)
    assert signer.object_rule("downloads.example.com") == (
        '(http.host eq "downloads.example.com" and not is_timed_hmac_valid_v0('
        f'"{SECRET}", http.request.uri, {TTL}, http.request.timestamp.sec, 8))'
    )


@pytest.mark.parametrize(
    "secret", ["", 'my"secret', "back\\slash", "new\nline", "caf\u00e9", "tab\there"]
)
def test_a_secret_that_cannot_sit_in_the_rule_is_refused(secret: str) -> None:
    with pytest.raises(SigningKeyError, match="openssl rand -hex 32") as info:
        CloudflareTokenSigner(secret, ttl_s=TTL)
    assert "\n" not in str(info.value) and info.value.exit_code == 2


def test_the_secret_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "cf.secret"
    path.write_text(SECRET + "\n")
    base, signed_path = PUBLISHED[0]
    grant = CloudflareTokenSigner.from_file(path, ttl_s=TTL).grant(
        base, scope="", issued_at_s=1755877101
    )
    assert signed_path.endswith(grant.query)
    path.write_bytes(b"\xff\xfe secret")
    with pytest.raises(SigningKeyError, match=r"cf\.secret is not ASCII"):
        CloudflareTokenSigner.from_file(path, ttl_s=TTL)


def test_bad_arguments_are_usage_errors() -> None:
    signer = CloudflareTokenSigner(SECRET, ttl_s=TTL)
    for issued in (999_999_999, 10**10, True):
        with pytest.raises(UsageError, match="10-digit"):
            signer.token("/x", issued)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="ttl_s"):
        CloudflareTokenSigner(SECRET, ttl_s=0)
    with pytest.raises(UsageError, match="param"):
        CloudflareTokenSigner(SECRET, ttl_s=TTL, param="a=b")
    with pytest.raises(UsageError, match="already carries verify"):
        signer.sign_url("https://d.example/x?verify=1")
