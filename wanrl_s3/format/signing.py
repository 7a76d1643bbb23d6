"""Manifest signatures (Ed25519): a worker can refuse versions it cannot trust.

Hashes prove the payload matches its manifest; a signature proves the manifest
came from the holder of the publisher's private key, so write access to the
bucket alone cannot push a policy to the fleet. The signature covers the
canonical JSON of the manifest without its ``signature`` field
(:meth:`Manifest.signing_bytes`), so the payload hashes are covered too.

Needs the ``cryptography`` package (``pip install 'wanrl-s3[sign]'``).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import SignatureError, UsageError
from . import hashing
from .manifest import Manifest

ALG = "ed25519"


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:
        raise UsageError(
            "manifest signing needs the cryptography package: pip install 'wanrl-s3[sign]'"
        ) from exc
    return serialization, ed25519


def generate_keypair() -> tuple[bytes, bytes]:
    """A new (private PEM, public PEM) pair."""
    serialization, ed25519 = _crypto()
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public


def _read(path: str | os.PathLike[str], what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}") from exc


def key_id_of(public_key: Any) -> str:
    """A key's id: the first 16 hex digits of BLAKE3 over its raw public bytes."""
    serialization, _ = _crypto()
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashing.digest(raw)[:16]


class Signer:
    def __init__(self, private_pem: bytes) -> None:
        serialization, ed25519 = _crypto()
        try:
            key = serialization.load_pem_private_key(private_pem, password=None)
        except ValueError as exc:
            raise UsageError(f"not a PEM private key: {exc}") from exc
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise UsageError("the signing key must be an Ed25519 key (wanrl-s3 keygen makes one)")
        self._key, self.key_id = key, key_id_of(key.public_key())

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Signer:
        return cls(_read(path, "signing key"))

    def sign(self, data: bytes) -> dict[str, str]:
        return {
            "alg": ALG,
            "key_id": self.key_id,
            "value": base64.b64encode(self._key.sign(data)).decode(),
        }


class Verifier:
    """Accepts manifests (and LATEST) signed by any of the given keys; refuses all others."""

    def __init__(self, public_pems: Iterable[bytes]) -> None:
        serialization, ed25519 = _crypto()
        self._keys = {}
        for i, pem in enumerate(public_pems):
            try:
                key = serialization.load_pem_public_key(pem)
            except ValueError as exc:
                raise UsageError(f"public key #{i + 1} is not a PEM public key") from exc
            if not isinstance(key, ed25519.Ed25519PublicKey):
                raise UsageError(f"public key #{i + 1} is not an Ed25519 key")
            self._keys[key_id_of(key)] = key

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Verifier:
        """One public key, or a keyring: several PEM public keys in one file.

        Several keys are how a key is rotated: trust old and new while versions
        signed by both are retained; revoking a key is removing it from the file.
        """
        data = _read(path, "public key")
        pems = [b"-----BEGIN" + part for part in data.split(b"-----BEGIN")[1:]]
        if not pems:
            raise UsageError(f"{path} holds no PEM public key (wanrl-s3 keygen makes one)")
        return cls(pems)

    def verify(self, manifest: Manifest) -> None:
        """Refuse ``manifest`` unless one of the trusted keys signed it."""
        self.verify_bytes(
            manifest.signing_bytes(), manifest.signature, f"version {manifest.version}"
        )

    def verify_bytes(self, data: bytes, sig: Mapping[str, str] | None, where: str) -> None:
        """Refuse ``data`` unless ``sig`` is a valid signature of it by a trusted key."""
        if not sig:
            raise SignatureError(f"{where} is not signed, and signatures are required")
        if sig.get("alg") != ALG:
            raise SignatureError(f"{where} is signed with {sig.get('alg')!r}, expected {ALG}")
        key = self._keys.get(sig.get("key_id", ""))
        if key is None:
            raise SignatureError(f"{where} is signed by unknown key {sig.get('key_id')!r}")
        try:
            key.verify(base64.b64decode(sig.get("value", ""), validate=True), data)
        except Exception as exc:  # InvalidSignature, or undecodable base64
            raise SignatureError(f"{where} has a forged or corrupt signature") from exc
