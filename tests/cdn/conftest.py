"""Keys for the CDN signer tests, made once per session (RSA generation is the slow part)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("cryptography")

from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

from tests.cdn.keys import private_pem


@pytest.fixture(scope="session")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="session")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="session")
def wrong_keys() -> dict[str, bytes]:
    """PEM private keys CloudFront does not take, by what is wrong with them."""
    return {
        "Ed25519": private_pem(ed25519.Ed25519PrivateKey.generate()),
        "RSA 1024-bit": private_pem(rsa.generate_private_key(public_exponent=65537, key_size=1024)),
        "secp384r1": private_pem(ec.generate_private_key(ec.SECP384R1())),
    }


@pytest.fixture
def key_file(tmp_path: Path, rsa_key: rsa.RSAPrivateKey) -> Path:
    path = tmp_path / "private_key.pem"
    path.write_bytes(private_pem(rsa_key))
    return path
