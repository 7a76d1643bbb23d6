"""CloudFront signed URLs and signed cookies, for behaviours that trust a key group.

The algorithm, as the Amazon CloudFront Developer Guide documents it ("Create a
signed URL using a canned policy", "... using a custom policy", "Set signed
cookies using a custom policy", "Linux commands and OpenSSL for base64 encoding
and encryption"):

1. A policy statement, JSON without whitespace. Canned (one URL):
   ``{"Statement":[{"Resource":URL,"Condition":{"DateLessThan":{"AWS:EpochTime":N}}}]}``,
   keys in exactly that order. Custom: the same shape, ``Resource`` may hold
   ``*`` wildcards, ``DateGreaterThan`` and ``IpAddress`` are optional.
2. The policy's bytes hashed with SHA-1 (the default) or SHA-256 and signed with
   the private key whose public half is in the key group: RSA 2048 (PKCS#1 v1.5)
   or ECDSA P-256 (a DER signature, what ``openssl sha1 -sign`` writes).
3. Base64 with ``+`` -> ``-``, ``=`` -> ``_``, ``/`` -> ``~``: the signature, and a
   custom policy itself.
4. Query parameters ``Expires`` (canned) or ``Policy`` (custom), then
   ``Signature`` and ``Key-Pair-Id`` (the public key's id), and
   ``Hash-Algorithm=SHA256`` with SHA-256. Signed cookies carry the same values
   as ``CloudFront-Policy``, ``CloudFront-Signature``, ``CloudFront-Key-Pair-Id``
   (and ``CloudFront-Hash-Algorithm``).

A worker's grant is one custom policy for ``https://dXXXX.cloudfront.net/run/v/*``:
the same three parameters (or cookies) then open every object of the run's
versions, so the worker never holds the private key.

Needs the ``cryptography`` package (``pip install 'wanrl-s3[sign]'``).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import re
from typing import Any

from ..errors import SigningKeyError, UsageError
from .base import CdnSigner, Clock, check_object_url, join_query, read_key_file, system_clock
from .grant import CdnGrant

HASH_ALGORITHMS = ("SHA1", "SHA256")
URL_PARAMS = ("Expires", "Policy", "Signature", "Key-Pair-Id", "Hash-Algorithm")
_KEY_PAIR_ID = re.compile(r"^[A-Z0-9]{1,128}$")
_MAKE_KEY = (
    "make one with `openssl genrsa -out private_key.pem 2048` (or `openssl ecparam -name "
    "prime256v1 -genkey -noout -out private_key.pem`) and put its public half in the key group"
)


def cloudfront_b64(data: bytes) -> str:
    """Base64 with CloudFront's substitutions for characters a query string cannot carry."""
    return base64.b64encode(data).decode().translate(str.maketrans("+=/", "-_~"))


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
    except ImportError as exc:
        raise UsageError(
            "CloudFront signing needs the cryptography package: pip install 'wanrl-s3[sign]'"
        ) from exc
    return hashes, serialization, ec, padding, rsa


def load_private_key(pem: bytes, label: str) -> Any:
    """An RSA 2048 or ECDSA P-256 private key from PEM; a SigningKeyError naming ``label`` else."""
    _, serialization, ec, _, rsa = _crypto()
    if b"PRIVATE KEY-----" not in pem:
        kind = "a public key" if b"PUBLIC KEY-----" in pem else "not a PEM private key"
        raise SigningKeyError(
            f"{label} is {kind}: CloudFront signing needs the private key; {_MAKE_KEY}"
        )
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except TypeError as exc:  # encrypted, and we were given no password
        raise SigningKeyError(
            f"{label} is encrypted: write it unencrypted for the signer "
            "(openssl pkey -in KEY -out plain.pem) and keep that file private"
        ) from exc
    except Exception as exc:  # ValueError, UnsupportedAlgorithm: not a key we can read
        raise SigningKeyError(f"{label} is not a readable PEM private key: {_MAKE_KEY}") from exc
    if isinstance(key, rsa.RSAPrivateKey):
        if key.key_size != 2048:
            raise SigningKeyError(
                f"{label} is an RSA {key.key_size}-bit key; CloudFront takes RSA 2048 only: "
                f"{_MAKE_KEY}"
            )
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        if not isinstance(key.curve, ec.SECP256R1):
            raise SigningKeyError(
                f"{label} is an ECDSA key on {key.curve.name}; CloudFront takes P-256 only: "
                f"{_MAKE_KEY}"
            )
    else:
        kind = type(key).__name__.lstrip("_").removesuffix("PrivateKey") or "unknown"
        raise SigningKeyError(
            f"{label} is an {kind} key; CloudFront signs with RSA 2048 or ECDSA P-256: {_MAKE_KEY}"
        )
    return key


class CloudFrontSigner(CdnSigner):
    """Signs CloudFront URLs and cookies with the private key of a key group's public key.

    ``key_pair_id`` is the id CloudFront gave the public key (``K2JCJMDEHXQW5F``).
    """

    provider = "cloudfront"

    def __init__(
        self,
        key_pair_id: str,
        private_key_pem: bytes,
        *,
        hash_algorithm: str = "SHA1",
        valid_for_s: float = 3600,
        clock: Clock = system_clock,
        key_name: str = "the CloudFront private key",
    ) -> None:
        super().__init__(valid_for_s, clock)
        if not (isinstance(key_pair_id, str) and _KEY_PAIR_ID.match(key_pair_id)):
            raise UsageError(
                f"key_pair_id must be the CloudFront public key's id (like K2JCJMDEHXQW5F); "
                f"got {key_pair_id!r}"
            )
        if hash_algorithm not in HASH_ALGORITHMS:
            raise UsageError(f"hash_algorithm must be SHA1 or SHA256; got {hash_algorithm!r}")
        self.key_pair_id, self.hash_algorithm = key_pair_id, hash_algorithm
        self._key = load_private_key(private_key_pem, key_name)

    @classmethod
    def from_file(
        cls, key_pair_id: str, path: str | os.PathLike[str], **kwargs: Any
    ) -> CloudFrontSigner:
        """A signer for the PEM private key in ``path``."""
        label = f"{kwargs.pop('key_name', 'the CloudFront private key')} {path}"
        return cls(key_pair_id, read_key_file(path, label), key_name=label, **kwargs)

    # -- policies ---------------------------------------------------------------
    @staticmethod
    def canned_policy(url: str, expires_at_s: int) -> str:
        """The canned policy statement CloudFront rebuilds from a URL and its ``Expires``."""
        condition = {"DateLessThan": {"AWS:EpochTime": _epoch(expires_at_s, "expires_at_s")}}
        return _compact({"Statement": [{"Resource": _resource(url), "Condition": condition}]})

    @staticmethod
    def custom_policy(
        resource: str,
        expires_at_s: int,
        *,
        starts_at_s: int | None = None,
        source_ip: str | None = None,
    ) -> str:
        """A custom policy: ``resource`` may end in ``*`` to cover a whole prefix."""
        condition: dict[str, Any] = {
            "DateLessThan": {"AWS:EpochTime": _epoch(expires_at_s, "expires_at_s")}
        }
        if starts_at_s is not None:
            condition["DateGreaterThan"] = {"AWS:EpochTime": _epoch(starts_at_s, "starts_at_s")}
        if source_ip is not None:
            try:
                network = ipaddress.ip_network(source_ip, strict=False)
            except ValueError as exc:
                raise UsageError(
                    f"source_ip must be an address or CIDR; got {source_ip!r}"
                ) from exc
            condition["IpAddress"] = {"AWS:SourceIp": str(network)}
        return _compact({"Statement": [{"Resource": _resource(resource), "Condition": condition}]})

    # -- signing ----------------------------------------------------------------
    def signature(self, policy: str) -> str:
        """The policy signed with this key and hash, in CloudFront's base64."""
        hashes, _, ec, padding, rsa = _crypto()
        algorithm = (
            hashes.SHA1() if self.hash_algorithm == "SHA1" else hashes.SHA256()
        )  # CloudFront's default
        data = policy.encode()
        if isinstance(self._key, rsa.RSAPrivateKey):
            return cloudfront_b64(self._key.sign(data, padding.PKCS1v15(), algorithm))
        return cloudfront_b64(self._key.sign(data, ec.ECDSA(algorithm)))

    def sign_url(self, url: str, *, expires_at_s: int | None = None) -> str:
        """``url`` signed with a canned policy (expiring ``valid_for_s`` from now by default)."""
        check_object_url(url, URL_PARAMS)
        expires = self._expiry(expires_at_s)
        signature = self.signature(self.canned_policy(url, expires))
        return join_query(url, self._params({"Expires": str(expires), "Signature": signature}))

    def sign_url_with_policy(self, url: str, policy: str) -> str:
        """``url`` carrying a custom ``policy`` (whose resource must match it) and its signature."""
        check_object_url(url, URL_PARAMS)
        return join_query(url, self._params(self._policy_values(policy)))

    def signed_cookies(self, policy: str) -> dict[str, str]:
        """The signed cookies for a custom ``policy``: name -> value."""
        return {
            f"CloudFront-{k}": v for k, v in self._with_hash(self._policy_values(policy)).items()
        }

    def grant(self, base_url: str, scope: str = "v/", *, as_cookies: bool = False) -> CdnGrant:
        """One custom policy for ``base_url/scope*``, as query parameters or as a Cookie header."""
        expires = self._expiry(None)
        policy = self.custom_policy(self._prefix_url(base_url, scope) + "*", expires)
        if as_cookies:
            cookie = "; ".join(f"{k}={v}" for k, v in self.signed_cookies(policy).items())
            return CdnGrant(self.provider, base_url, scope, expires, headers={"Cookie": cookie})
        query = self._params(self._policy_values(policy))
        return CdnGrant(self.provider, base_url, scope, expires, query=query)

    def _policy_values(self, policy: str) -> dict[str, str]:
        return {"Policy": cloudfront_b64(policy.encode()), "Signature": self.signature(policy)}

    def _with_hash(self, values: dict[str, str]) -> dict[str, str]:
        values = {**values, "Key-Pair-Id": self.key_pair_id}
        if self.hash_algorithm != "SHA1":
            values["Hash-Algorithm"] = self.hash_algorithm
        return values

    def _params(self, values: dict[str, str]) -> str:
        return "&".join(f"{k}={v}" for k, v in self._with_hash(values).items())


def _compact(policy: dict[str, Any]) -> str:
    return json.dumps(policy, separators=(",", ":"))


def _resource(url: str) -> str:
    if not (isinstance(url, str) and url.isascii() and url) or any(
        c.isspace() or c in '"\\' for c in url
    ):
        raise UsageError(f"a policy resource must be a percent-encoded URL; got {url!r}")
    return url


def _epoch(value: int, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{name} must be UNIX seconds (an integer >= 0); got {value!r}")
    return value
