"""The one base class of the CDN signers, and what they share: reading keys, checking URLs.

A signer holds a provider's signing secret and makes two things: a signed URL
for one object (:meth:`CdnSigner.sign_url`), and a :class:`~.grant.CdnGrant`
for every object under a run's key prefix (:meth:`CdnSigner.grant`), which is
what a worker should hold. Time comes from an injectable clock, so expiry is
testable without waiting.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from ..errors import SigningKeyError, UsageError
from ..units import require_int, require_positive
from .grant import CdnGrant, check_base_url, check_scope, plain_http_url

Clock = Callable[[], float]
MAX_KEY_FILE_BYTES = 64 * 1024  # PEM keys and base64 secrets are a few KiB at most
_B64URL = re.compile(r"[A-Za-z0-9_-]+={0,2}")


class CdnSigner(ABC):
    """Makes signed URLs and grants for one provider's edge; holds the signing secret."""

    provider: str

    def __init__(self, valid_for_s: float, clock: Clock) -> None:
        self.valid_for_s = require_positive("valid_for_s", valid_for_s)
        self._clock = clock

    @abstractmethod
    def sign_url(self, url: str) -> str:
        """``url`` (one object) with the provider's signature added, valid from now on."""

    @abstractmethod
    def grant(self, base_url: str, scope: str = "v/") -> CdnGrant:
        """Read access to every key under ``scope`` of the run served at ``base_url``."""

    def _expiry(self, expires_at_s: int | None) -> int:
        """``expires_at_s`` checked, or ``valid_for_s`` from the clock's now."""
        if expires_at_s is None:
            return int(self._clock() + self.valid_for_s)
        return require_int("expires_at_s", expires_at_s, minimum=0)

    def _prefix_url(self, base_url: str, scope: str) -> str:
        """The URL prefix a grant signs: ``base_url/scope`` ('/'-terminated)."""
        return f"{check_base_url(base_url)}/{check_scope(scope)}"


def check_object_url(url: str, reserved: tuple[str, ...]) -> str:
    """An absolute http(s) ASCII URL without a fragment and without the signer's own parameters."""
    if not plain_http_url(url) or url.endswith("?"):
        raise UsageError(
            f"cannot sign {url!r}: it must be an absolute http(s) URL, percent-encoded, "
            "without a fragment"
        )
    taken = sorted({name for name, _ in parse_qsl(urlsplit(url).query)} & set(reserved))
    if taken:
        raise UsageError(f"cannot sign {url!r}: it already carries {', '.join(taken)}")
    return url


def join_query(url: str, params: str) -> str:
    """``url`` with ``params`` appended to its query string."""
    return f"{url}{'&' if urlsplit(url).query else '?'}{params}"


def read_key_file(path: str | os.PathLike[str], what: str) -> bytes:
    """The bytes of a key file; a SigningKeyError naming ``what`` and the file if unreadable."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_KEY_FILE_BYTES + 1)
    except OSError as exc:
        raise SigningKeyError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    if len(data) > MAX_KEY_FILE_BYTES:
        raise SigningKeyError(f"{what} {path} is over {MAX_KEY_FILE_BYTES} bytes: not a key file")
    return data


def decode_b64url(text: str, what: str, fix: str) -> bytes:
    """Strict base64url (RFC 4648 section 5), padded or not; a SigningKeyError otherwise."""
    stripped = text.strip()
    if not _B64URL.fullmatch(stripped):
        raise SigningKeyError(f"{what} is not base64url text (A-Z a-z 0-9 - _): {fix}")
    try:
        return base64.urlsafe_b64decode(stripped + "=" * (-len(stripped) % 4))
    except (binascii.Error, ValueError) as exc:
        raise SigningKeyError(f"{what} is not valid base64url: {fix}") from exc


def key_label(path: str | os.PathLike[str] | None, what: str) -> str:
    """How an error names a key: its role and, when it came from a file, the file."""
    return f"{what} {Path(path)}" if path is not None else what


def system_clock() -> float:
    return time.time()
