"""Cloud CDN signed URLs, URL prefixes and cookies, against Google's published vectors.

The vectors are the expected values of Google's own sample tests, read
2026-12-05 from GoogleCloudPlatform/python-docs-samples at commit
683bf45f8f608cf0248d485d2c60de22e356b2db, cdn/snippets_test.py
(https://github.com/GoogleCloudPlatform/python-docs-samples/blob/683bf45f8f608cf0248d485d2c60de22e356b2db/cdn/snippets_test.py),
the sample that the Cloud CDN pages "Use signed URLs" and "Use signed cookies"
(https://cloud.google.com/cdn/docs/using-signed-urls,
https://cloud.google.com/cdn/docs/using-signed-cookies) point to. Only the
inputs and expected outputs are taken; the signer is our own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wanrl_s3.cdn import CdnGrant, CloudCdnSigner
from wanrl_s3.errors import SigningKeyError, UsageError

KEY_NAME, KEY, EXPIRES = "my-key", "nZtRohdNF9m3cKM24IcK4w==", 1549751401

SIGNED_URLS = [
    (
        "http://35.186.234.33/index.html",
        "http://35.186.234.33/index.html?Expires=1549751401&KeyName=my-key"
        "&Signature=CRFqQnVfFyiUyR63OQf-HRUpIwc=",
    ),
    (
        "http://www.example.com/",
        "http://www.example.com/?Expires=1549751401&KeyName=my-key"
        "&Signature=OqDUFfHpN5Vxga6r80bhsgxKves=",
    ),
    (
        "http://www.example.com/some/path?some=query&another=param",
        "http://www.example.com/some/path?some=query&another=param&Expires=1549751401"
        "&KeyName=my-key&Signature=9Q9TCxSju8-W5nUkk5CuTrun2_o=",
    ),
]
SIGNED_PREFIXES = [
    (
        "http://35.186.234.33/index.html",
        "http://35.186.234.33/",
        "http://35.186.234.33/index.html?URLPrefix=aHR0cDovLzM1LjE4Ni4yMzQuMzMv&"
        "Expires=1549751401&KeyName=my-key&Signature=j7HYgoQ8dIOVsW3Rw4cpkjWfRMA=",
    ),
    (
        "http://www.example.com/",
        "http://www.example.com/",
        "http://www.example.com/?URLPrefix=aHR0cDovL3d3dy5leGFtcGxlLmNvbS8=&"
        "Expires=1549751401&KeyName=my-key&Signature=UdT5nVks6Hh8QFMJI9kmXuXYBk0=",
    ),
    (
        "http://www.example.com/some/path?some=query&another=param",
        "http://www.example.com/some/",
        "http://www.example.com/some/path?some=query&another=param&"
        "URLPrefix=aHR0cDovL3d3dy5leGFtcGxlLmNvbS9zb21lLw==&"
        "Expires=1549751401&KeyName=my-key&Signature=3th4ThmpS95I1TAKYyYSCSq3dnQ=",
    ),
]
SIGNED_COOKIES = [
    (
        "http://35.186.234.33/index.html",
        "Cloud-CDN-Cookie=URLPrefix=aHR0cDovLzM1LjE4Ni4yMzQuMzMvaW5kZXguaHRtbA==:"
        "Expires=1549751401:KeyName=my-key:Signature=uImwlOBCPs91mlCyG9vyyZRrNWU=",
    ),
    (
        "http://www.example.com/foo/",
        "Cloud-CDN-Cookie=URLPrefix=aHR0cDovL3d3dy5leGFtcGxlLmNvbS9mb28v:"
        "Expires=1549751401:KeyName=my-key:Signature=Z9uYAu73YHioRScZDxnP-TnS274=",
    ),
]


@pytest.fixture
def signer() -> CloudCdnSigner:
    return CloudCdnSigner(KEY_NAME, KEY)


@pytest.mark.parametrize(("url", "expected"), SIGNED_URLS)
def test_signed_url_matches_googles_vector(signer: CloudCdnSigner, url: str, expected: str) -> None:
    assert signer.sign_url(url, expires_at_s=EXPIRES) == expected


@pytest.mark.parametrize(("url", "prefix", "expected"), SIGNED_PREFIXES)
def test_signed_url_prefix_matches_googles_vector(
    signer: CloudCdnSigner, url: str, prefix: str, expected: str
) -> None:
    assert signer.sign_url_prefix(url, prefix, expires_at_s=EXPIRES) == expected


@pytest.mark.parametrize(("prefix", "expected"), SIGNED_COOKIES)
def test_signed_cookie_matches_googles_vector(
    signer: CloudCdnSigner, prefix: str, expected: str
) -> None:
    assert f"Cloud-CDN-Cookie={signer.signed_cookie(prefix, expires_at_s=EXPIRES)}" == expected


def test_the_key_may_come_unpadded_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "cdn.key"
    path.write_text(KEY.rstrip("=") + "\n")  # `... | base64 | tr +/ -_` ends in a newline
    from_file = CloudCdnSigner.from_file(KEY_NAME, path)
    assert from_file.sign_url(SIGNED_URLS[0][0], expires_at_s=EXPIRES) == SIGNED_URLS[0][1]


@pytest.mark.parametrize("as_cookie", [False, True])
def test_a_grant_is_a_signed_prefix_for_the_versions_of_one_run(as_cookie: bool) -> None:
    base = "https://cdn.example.com/runs/exp-42"
    signer = CloudCdnSigner(KEY_NAME, KEY, valid_for_s=600, clock=lambda: float(EXPIRES - 600))
    grant = signer.grant(base, as_cookie=as_cookie)
    assert grant.expires_at_s == EXPIRES and grant.scope == "v/"
    if as_cookie:
        value = signer.signed_cookie(f"{base}/v/", expires_at_s=EXPIRES)
        assert grant.headers == {"Cookie": f"Cloud-CDN-Cookie={value}"}
        assert (
            grant.url_for("v/000000000003/manifest.json") == f"{base}/v/000000000003/manifest.json"
        )
    else:
        key = "v/000000000003/ab12cd/000000.bin"
        expected = signer.sign_url_prefix(f"{base}/{key}", f"{base}/v/", expires_at_s=EXPIRES)
        assert grant.url_for(key) == expected
    assert CdnGrant.from_json(grant.to_json()) == grant


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (
            "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEI\n-----END PRIVATE KEY-----\n",
            "PEM key",
        ),
        ("nZtRohdNF9m3cKM24IcK4w+/", "not base64url text"),  # standard base64 alphabet
        ("bm90IGEga2V5", "decodes to 9 bytes"),
        ("nZtRohdNF9m3cKM24IcK4wnZtRohdNF9m3cKM24IcK4w", "decodes to 33 bytes"),
        ("", "not base64url text"),
        ("a", "not valid base64url"),
    ],
)
def test_a_key_of_the_wrong_kind_is_one_line_with_the_fix(key: str, expected: str) -> None:
    with pytest.raises(SigningKeyError, match=expected) as info:
        CloudCdnSigner(KEY_NAME, key, key_label="--cdn-key")
    assert str(info.value).startswith("--cdn-key ") and "head -c 16 /dev/urandom" in str(info.value)
    assert "\n" not in str(info.value) and info.value.exit_code == 2


def test_binary_and_missing_key_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "binary.key").write_bytes(bytes(range(200, 216)))
    with pytest.raises(SigningKeyError, match=r"binary\.key is binary"):
        CloudCdnSigner.from_file(KEY_NAME, tmp_path / "binary.key")
    with pytest.raises(SigningKeyError, match="cannot read the Cloud CDN signing key"):
        CloudCdnSigner.from_file(KEY_NAME, tmp_path / "absent.key")


def test_bad_arguments_are_usage_errors(signer: CloudCdnSigner) -> None:
    with pytest.raises(UsageError, match="key_name"):
        CloudCdnSigner("my key", KEY)
    with pytest.raises(UsageError, match="already carries KeyName"):
        signer.sign_url("http://www.example.com/?KeyName=x")
    with pytest.raises(UsageError, match="lies outside"):
        signer.sign_url_prefix("http://www.example.com/a", "http://www.example.com/b/")
    with pytest.raises(UsageError, match="expires_at_s"):
        signer.sign_url("http://www.example.com/", expires_at_s=-1)
