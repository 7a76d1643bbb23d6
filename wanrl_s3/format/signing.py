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
import logging
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..errors import SignatureError, UsageError
from . import hashing
from .manifest import Manifest

ALG = "ed25519"
log = logging.getLogger(__name__)


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


def key_id_of_pem(public_pem: bytes) -> str:
    """The id of the public key in ``public_pem`` (what ``keygen`` prints)."""
    return next(iter(_load_keys([public_pem], None)))


def key_id_of(public_key: Any) -> str:
    """A key's id: the first 16 hex digits of BLAKE3 over its raw public bytes."""
    serialization, _ = _crypto()
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashing.digest(raw)[:16]


class Signer:
    """The publisher's Ed25519 private key: signs each manifest it commits, so that a reader
    holding the public key (a :class:`Verifier`) installs only versions it signed."""

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
        """The signer of the PEM private key at ``path``; raises UsageError when it cannot be read
        or is not an Ed25519 key."""
        return cls(_read(path, "signing key"))

    def verifier(self) -> Verifier:
        """A verifier that trusts this key alone (a publisher given no keyring)."""
        serialization, _ = _crypto()
        return Verifier(
            [
                self._key.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
            ]
        )

    def sign(self, data: bytes) -> dict[str, str]:
        """An Ed25519 signature of ``data``, as the manifest's ``signature`` field: the algorithm,
        this key's id (which a verifier looks up), and the value in base64."""
        return {
            "alg": ALG,
            "key_id": self.key_id,
            "value": base64.b64encode(self._key.sign(data)).decode(),
        }


class Verifier:
    """Accepts manifests (and LATEST) signed by any of the given keys; refuses all others.

    Made :meth:`from_file`, it follows its keyring file: each check first looks
    at the file's identity (inode, size, modification time; one ``stat``) and
    reloads the keys when it changed, so rotating a key in or revoking one takes
    effect at a running worker's next poll, without a restart. A keyring that
    cannot be read or holds no key refuses everything until it is fixed (a
    half-written file must not keep trusting a key that was just revoked).
    """

    def __init__(self, public_pems: Iterable[bytes], *, path: str | None = None) -> None:
        self._keys = _load_keys(public_pems, path)
        self._path = path
        self._stamp = None if path is None else _stamp(path)
        self._broken: str | None = None  # why the keyring file cannot be used, while it cannot
        self._lock = threading.Lock()
        self.generation = 0  # bumped on each reload: verdicts from before it are stale

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Verifier:
        """One public key, or a keyring: several PEM public keys in one file.

        Several keys are how a key is rotated: trust old and new while versions
        signed by both are retained; revoking a key is removing it from the file.
        Text outside the PEM blocks (a comment naming each key) is ignored.
        """
        return cls(_pems(_read(path, "public key"), str(path)), path=str(path))

    def verify(self, manifest: Manifest) -> None:
        """Refuse ``manifest`` unless one of the trusted keys signed it."""
        self.verify_bytes(
            manifest.signing_bytes(), manifest.signature, f"version {manifest.version}"
        )

    def verify_bytes(self, data: bytes, sig: Mapping[str, str] | None, where: str) -> None:
        """Refuse ``data`` unless ``sig`` is a valid signature of it by a trusted key."""
        keys = self._current()
        if not sig:
            raise SignatureError(f"{where} is not signed, and signatures are required")
        if sig.get("alg") != ALG:
            raise SignatureError(f"{where} is signed with {sig.get('alg')!r}, expected {ALG}")
        key = keys.get(sig.get("key_id", ""))
        if key is None:
            raise SignatureError(f"{where} is signed by unknown key {sig.get('key_id')!r}")
        try:
            key.verify(base64.b64decode(sig.get("value", ""), validate=True), data)
        except Exception as exc:  # InvalidSignature, or undecodable base64
            raise SignatureError(f"{where} has a forged or corrupt signature") from exc

    def refresh(self) -> int:
        """Reload the keyring if its file changed; the generation of the keys now in force.

        A verdict reached under an older generation is stale: a caller that keeps
        verified manifests checks them again (a key may have been revoked since).
        """
        if self._path is not None:
            with self._lock:
                stamp = _stamp(self._path)
                if stamp != self._stamp:
                    self._stamp = stamp
                    self._reload(self._path)
        return self.generation

    def _current(self) -> dict[str, Any]:
        """The trusted keys, reloaded first when the keyring file changed."""
        self.refresh()
        with self._lock:
            if self._broken is not None:
                raise SignatureError(
                    f"the keyring {self._path} cannot be used ({self._broken}): every version "
                    "is refused until it holds the trusted public keys again"
                )
            return self._keys

    def _reload(self, path: str) -> None:
        """Read the changed keyring (lock held); a bad one refuses everything until fixed."""
        try:
            keys = _load_keys(_pems(_read(path, "public key"), path), path)
        except UsageError as exc:
            self._broken, self._keys = str(exc), {}
            log.error("keyring %s changed and cannot be used: %s", path, exc)
        else:
            was = set(self._keys)
            self._broken, self._keys = None, keys
            log.info(
                "keyring %s reloaded: %d keys (added %s, removed %s)",
                path,
                len(keys),
                ", ".join(sorted(set(keys) - was)) or "none",
                ", ".join(sorted(was - set(keys))) or "none",
            )
        self.generation += 1


def _stamp(path: str) -> tuple[int, int, int] | None:
    """What tells a changed file: inode, size, modification time (None: unreadable)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def _pems(data: bytes, path: str) -> list[bytes]:
    pems = [b"-----BEGIN" + part for part in data.split(b"-----BEGIN")[1:]]
    if not pems:
        raise UsageError(f"{path} holds no PEM public key (wanrl-s3 keygen makes one)")
    return pems


def _load_keys(public_pems: Iterable[bytes], path: str | None) -> dict[str, Any]:
    serialization, ed25519 = _crypto()
    keys = {}
    where = "" if path is None else f" in {path}"
    for i, pem in enumerate(public_pems):
        try:
            key = serialization.load_pem_public_key(pem)
        except ValueError as exc:
            raise UsageError(f"public key #{i + 1}{where} is not a PEM public key") from exc
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise UsageError(f"public key #{i + 1}{where} is not an Ed25519 key")
        keys[key_id_of(key)] = key
    return keys
