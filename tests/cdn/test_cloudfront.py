"""CloudFront signed URLs and cookies, against what AWS documents and two independent signers.

CloudFront publishes no verifiable vector: the signatures in its examples are
redacted ("...EXAMPLE..."). So each form is checked against

- the documented statement and URL layout, written out here from the
  Developer Guide (read 2026-12-05):
  https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/private-content-creating-signed-url-canned-policy.html
  https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/private-content-creating-signed-url-custom-policy.html
  https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/private-content-setting-signed-cookie-custom-policy.html
- the documented OpenSSL pipeline, run as documented (RSA PKCS#1 v1.5 is
  deterministic, so its output must equal ours byte for byte; ECDSA is
  randomised, so OpenSSL verifies our signature instead):
  https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/private-content-linux-openssl.html
- botocore's ``CloudFrontSigner`` (a third-party implementation; RSA-SHA1 only).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa

from tests.cdn.keys import private_pem, public_pem
from wanrl_s3.cdn import CdnGrant, CloudFrontSigner
from wanrl_s3.errors import SigningKeyError, UsageError

KEY_ID = "K2JCJMDEHXQW5F"  # the key id of the Developer Guide's examples
URL = "https://d111111abcdef8.cloudfront.net/image.jpg?color=red&size=medium"
EXPIRES = 1767290400  # the Developer Guide's example expiry
openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not on PATH")


def undo_b64(text: str) -> bytes:
    return base64.b64decode(text.translate(str.maketrans("-_~", "+=/")))


def params(url: str) -> dict[str, str]:
    return dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))


def signer(key: Any, **kwargs: Any) -> CloudFrontSigner:
    return CloudFrontSigner(KEY_ID, private_pem(key), **kwargs)


def test_canned_policy_is_the_documented_statement() -> None:
    assert CloudFrontSigner.canned_policy(URL, EXPIRES) == (
        '{"Statement":[{"Resource":"https://d111111abcdef8.cloudfront.net/image.jpg?color=red'
        '&size=medium","Condition":{"DateLessThan":{"AWS:EpochTime":1767290400}}}]}'
    )


def test_canned_url_has_the_documented_parameters_in_order(rsa_key: rsa.RSAPrivateKey) -> None:
    for algorithm, extra in (("SHA1", []), ("SHA256", ["Hash-Algorithm"])):
        signed = signer(rsa_key, hash_algorithm=algorithm).sign_url(URL, expires_at_s=EXPIRES)
        assert signed.startswith(URL + "&Expires=1767290400&Signature=")
        names = [name for name, _ in parse_qsl(urlsplit(signed).query)]
        assert names == ["color", "size", "Expires", "Signature", "Key-Pair-Id", *extra]
        assert params(signed)["Key-Pair-Id"] == KEY_ID
        assert not set(params(signed)["Signature"]) & set("+=/")
    assert params(signer(rsa_key, hash_algorithm="SHA256").sign_url(URL))["Hash-Algorithm"] == (
        "SHA256"
    )


def test_canned_url_equals_botocores_cloudfront_signer(rsa_key: rsa.RSAPrivateKey) -> None:
    from datetime import UTC, datetime

    from botocore.signers import CloudFrontSigner as BotocoreSigner

    def rsa_sha1(message: bytes) -> bytes:
        return rsa_key.sign(message, padding.PKCS1v15(), hashes.SHA1())

    boto = BotocoreSigner(KEY_ID, rsa_sha1)
    for url in (
        URL,
        "https://d111111abcdef8.cloudfront.net/runs/exp-42/v/000000000007/manifest.json",
    ):
        expected = boto.generate_presigned_url(
            url, date_less_than=datetime.fromtimestamp(EXPIRES, UTC)
        )
        assert signer(rsa_key).sign_url(url, expires_at_s=EXPIRES) == expected


def test_custom_policy_url_equals_botocores(rsa_key: rsa.RSAPrivateKey) -> None:
    from datetime import UTC, datetime

    from botocore.signers import CloudFrontSigner as BotocoreSigner

    boto = BotocoreSigner(KEY_ID, lambda m: rsa_key.sign(m, padding.PKCS1v15(), hashes.SHA1()))
    resource = "https://d111111abcdef8.cloudfront.net/runs/exp-42/v/*"
    ours = CloudFrontSigner.custom_policy(resource, EXPIRES, source_ip="192.0.2.7")
    theirs = boto.build_policy(
        resource, datetime.fromtimestamp(EXPIRES, UTC), ip_address="192.0.2.7"
    )
    assert ours == theirs
    url = "https://d111111abcdef8.cloudfront.net/runs/exp-42/v/000000000007/manifest.json"
    assert signer(rsa_key).sign_url_with_policy(url, ours) == boto.generate_presigned_url(
        url, policy=ours
    )


def test_custom_policy_carries_every_documented_condition() -> None:
    policy = json.loads(
        CloudFrontSigner.custom_policy(
            "https://d111111abcdef8.cloudfront.net/*",
            EXPIRES,
            starts_at_s=1767200000,
            source_ip="2001:db8::/32",
        )
    )
    assert policy == {
        "Statement": [
            {
                "Resource": "https://d111111abcdef8.cloudfront.net/*",
                "Condition": {
                    "DateLessThan": {"AWS:EpochTime": EXPIRES},
                    "DateGreaterThan": {"AWS:EpochTime": 1767200000},
                    "IpAddress": {"AWS:SourceIp": "2001:db8::/32"},
                },
            }
        ]
    }


def openssl_pipeline(policy: str, key_path: Path, algorithm: str) -> str:
    """The Developer Guide's command, verbatim but for the policy and key file."""
    command = (
        'tr -d "\\n" | tr -d " \\t\\n\\r" | '
        f"openssl {algorithm.lower()} -sign {key_path} | openssl base64 -A | tr -- '+=/' '-_~'"
    )
    return subprocess.run(
        ["bash", "-c", command], input=policy.encode(), capture_output=True, check=True
    ).stdout.decode()


@openssl
@pytest.mark.parametrize("algorithm", ["SHA1", "SHA256"])
def test_rsa_signature_equals_the_documented_openssl_pipeline(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey, algorithm: str
) -> None:
    key_path = tmp_path / "private_key.pem"
    key_path.write_bytes(private_pem(rsa_key))
    ours = signer(rsa_key, hash_algorithm=algorithm)
    for policy in (
        CloudFrontSigner.canned_policy(URL, EXPIRES),
        CloudFrontSigner.custom_policy("https://d111111abcdef8.cloudfront.net/run/v/*", EXPIRES),
    ):
        assert ours.signature(policy) == openssl_pipeline(policy, key_path, algorithm)


@openssl
@pytest.mark.parametrize("algorithm", ["SHA1", "SHA256"])
def test_ecdsa_signature_verifies_with_openssl(
    tmp_path: Path, ec_key: ec.EllipticCurvePrivateKey, algorithm: str
) -> None:
    (tmp_path / "public.pem").write_bytes(public_pem(ec_key))
    policy = CloudFrontSigner.custom_policy("https://d111111abcdef8.cloudfront.net/r/v/*", EXPIRES)
    (tmp_path / "policy").write_text(policy)
    (tmp_path / "sig.der").write_bytes(
        undo_b64(signer(ec_key, hash_algorithm=algorithm).signature(policy))
    )
    verify = [
        "openssl", "dgst", f"-{algorithm.lower()}", "-verify", "public.pem",
        "-signature", "sig.der", "policy",
    ]  # fmt: skip
    ok = subprocess.run(verify, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and "Verified OK" in ok.stdout, ok.stdout + ok.stderr
    (tmp_path / "policy").write_text(policy.replace(str(EXPIRES), str(EXPIRES + 1)))
    forged = subprocess.run(verify, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert forged.returncode != 0


def test_signed_cookies_carry_the_policy_and_its_signature(
    ec_key: ec.EllipticCurvePrivateKey,
) -> None:
    policy = CloudFrontSigner.custom_policy("https://d111111abcdef8.cloudfront.net/r/v/*", EXPIRES)
    cookies = signer(ec_key, hash_algorithm="SHA256").signed_cookies(policy)
    assert list(cookies) == [
        "CloudFront-Policy",
        "CloudFront-Signature",
        "CloudFront-Key-Pair-Id",
        "CloudFront-Hash-Algorithm",
    ]
    assert undo_b64(cookies["CloudFront-Policy"]).decode() == policy
    ec_key.public_key().verify(
        undo_b64(cookies["CloudFront-Signature"]), policy.encode(), ec.ECDSA(hashes.SHA256())
    )
    assert cookies["CloudFront-Key-Pair-Id"] == KEY_ID
    assert "CloudFront-Hash-Algorithm" not in signer(ec_key).signed_cookies(policy)


@pytest.mark.parametrize("as_cookies", [False, True])
def test_a_grant_opens_the_versions_prefix_only(
    rsa_key: rsa.RSAPrivateKey, as_cookies: bool
) -> None:
    base = "https://d111111abcdef8.cloudfront.net/runs/exp-42"
    cf = signer(rsa_key, valid_for_s=7200, clock=lambda: 1767280000.5)
    grant = cf.grant(base, as_cookies=as_cookies)
    assert grant.expires_at_s == 1767287200 and grant.provider == "cloudfront"
    values = (
        dict(part.split("=", 1) for part in grant.headers["Cookie"].split("; "))
        if as_cookies
        else params(grant.url_for("v/000000000007/manifest.json"))
    )
    prefix = "CloudFront-" if as_cookies else ""
    policy = undo_b64(values[f"{prefix}Policy"]).decode()
    assert json.loads(policy)["Statement"][0]["Resource"] == f"{base}/v/*"
    assert json.loads(policy)["Statement"][0]["Condition"] == {
        "DateLessThan": {"AWS:EpochTime": 1767287200}
    }
    rsa_key.public_key().verify(
        undo_b64(values[f"{prefix}Signature"]), policy.encode(), padding.PKCS1v15(), hashes.SHA1()
    )
    with pytest.raises(UsageError, match="outside the CDN grant's scope"):
        grant.url_for("LATEST")
    assert CdnGrant.from_json(grant.to_json()) == grant


@pytest.mark.parametrize("kind", ["Ed25519", "RSA 1024-bit", "secp384r1"])
def test_a_key_of_the_wrong_kind_is_one_line_naming_the_key_and_the_fix(
    tmp_path: Path, wrong_keys: dict[str, bytes], kind: str
) -> None:
    path = tmp_path / "key.pem"
    path.write_bytes(wrong_keys[kind])
    with pytest.raises(SigningKeyError) as info:
        CloudFrontSigner.from_file(KEY_ID, path)
    message = str(info.value)
    assert kind.split()[0] in message and str(path) in message and "openssl genrsa" in message
    assert "\n" not in message and info.value.exit_code == 2
    assert isinstance(info.value, UsageError)


def test_a_public_key_garbage_an_encrypted_key_and_a_missing_file_are_refused(
    tmp_path: Path, rsa_key: rsa.RSAPrivateKey
) -> None:
    from cryptography.hazmat.primitives import serialization

    encrypted = rsa_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    cases = {
        "public.pem": (public_pem(rsa_key), "is a public key"),
        "noise.pem": (b"not a key at all\n", "not a PEM private key"),
        "truncated.pem": (private_pem(rsa_key)[:300], "not a readable PEM private key"),
        "encrypted.pem": (encrypted, "is encrypted"),
    }
    for name, (data, expected) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(SigningKeyError, match=expected) as info:
            CloudFrontSigner.from_file(KEY_ID, tmp_path / name)
        assert name in str(info.value) and "\n" not in str(info.value)
    for path in (tmp_path / "missing.pem", tmp_path):
        with pytest.raises(SigningKeyError, match=f"cannot read the CloudFront private key {path}"):
            CloudFrontSigner.from_file(KEY_ID, path)


def test_bad_arguments_are_usage_errors(rsa_key: rsa.RSAPrivateKey, key_file: Path) -> None:
    with pytest.raises(UsageError, match="key_pair_id"):
        CloudFrontSigner.from_file("k2jc jm", key_file)
    with pytest.raises(UsageError, match="hash_algorithm"):
        CloudFrontSigner.from_file(KEY_ID, key_file, hash_algorithm="MD5")
    cf = signer(rsa_key)
    for url in (
        f"{URL}&Expires=1",
        "/relative/path",
        "https://d.example/a b",
        "https://d.example/x#f",
    ):
        with pytest.raises(UsageError, match="cannot sign"):
            cf.sign_url(url)
    with pytest.raises(UsageError, match="policy resource"):
        CloudFrontSigner.custom_policy('https://d.example/"x', EXPIRES)
    with pytest.raises(UsageError, match="source_ip"):
        CloudFrontSigner.custom_policy("https://d.example/*", EXPIRES, source_ip="10.0.0.300")
