"""Cloud CDN signed URLs, signed URL prefixes and signed cookies (an HMAC key on the backend).

The algorithm, as Google documents it ("Use signed URLs", "Use signed cookies"
in the Cloud CDN docs, and the ``cdn/snippets.py`` sample they point to):

- the key is 16 random bytes, written as base64url (RFC 4648 section 5), added
  to the backend bucket under a key name;
- signed URL: append ``Expires=<UNIX s>&KeyName=<name>`` to the URL (after ``?``,
  or ``&`` when it has a query), HMAC-SHA1 the whole result with the decoded
  key, and append ``&Signature=<base64url of the MAC>``;
- signed URL prefix: the signed string is
  ``URLPrefix=<base64url of the prefix>&Expires=...&KeyName=...``; it and its
  ``&Signature=`` go onto any URL under the prefix;
- signed cookie: ``Cloud-CDN-Cookie=URLPrefix=...:Expires=...:KeyName=...:Signature=...``,
  the MAC over everything before ``:Signature=``.

A worker's grant is a signed URL prefix for ``https://cdn.example/run/v/`` (or
the cookie): it opens every object of the run's versions, and the HMAC key stays
with whoever mints grants.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from typing import Any

from ..errors import SigningKeyError, UsageError
from .base import (
    CdnSigner,
    Clock,
    check_object_url,
    decode_b64url,
    join_query,
    read_key_file,
    system_clock,
)
from .grant import CdnGrant

COOKIE_NAME = "Cloud-CDN-Cookie"
URL_PARAMS = ("Expires", "KeyName", "Signature", "URLPrefix")
KEY_BYTES = 16  # Cloud CDN signing keys are 128-bit
_KEY_NAME = re.compile(r"^[A-Za-z0-9_-]{1,63}$")
_MAKE_KEY = "make one with `head -c 16 /dev/urandom | base64 | tr +/ -_`"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


class CloudCdnSigner(CdnSigner):
    """Signs Cloud CDN URLs, URL prefixes and cookies with one of a backend's named keys."""

    provider = "cloud-cdn"

    def __init__(
        self,
        key_name: str,
        key_b64url: str,
        *,
        valid_for_s: float = 3600,
        clock: Clock = system_clock,
        key_label: str = "the Cloud CDN signing key",
    ) -> None:
        super().__init__(valid_for_s, clock)
        if not (isinstance(key_name, str) and _KEY_NAME.match(key_name)):
            raise UsageError(
                f"key_name must be the key's name on the backend bucket (1-63 of A-Z a-z 0-9 _ -); "
                f"got {key_name!r}"
            )
        if not isinstance(key_b64url, str) or "-----BEGIN" in key_b64url:
            raise SigningKeyError(
                f"{key_label} is a PEM key, not a Cloud CDN key (16 random bytes, base64url): "
                f"{_MAKE_KEY}"
            )
        key = decode_b64url(key_b64url, key_label, _MAKE_KEY)
        if len(key) != KEY_BYTES:
            raise SigningKeyError(
                f"{key_label} decodes to {len(key)} bytes; Cloud CDN keys are {KEY_BYTES}: "
                f"{_MAKE_KEY}"
            )
        self.key_name, self._key = key_name, key

    @classmethod
    def from_file(
        cls, key_name: str, path: str | os.PathLike[str], **kwargs: Any
    ) -> CloudCdnSigner:
        """A signer for the key in ``path`` (the file ``add-signed-url-key --key-file`` took)."""
        label = f"{kwargs.pop('key_label', 'the Cloud CDN signing key')} {path}"
        data = read_key_file(path, label)
        try:
            text = data.decode("ascii")
        except UnicodeDecodeError as exc:
            raise SigningKeyError(f"{label} is binary, not base64url text: {_MAKE_KEY}") from exc
        return cls(key_name, text, key_label=label, **kwargs)

    def mac(self, message: str) -> str:
        """base64url(HMAC-SHA1(key, message)), the ``Signature`` of every Cloud CDN form."""
        return _b64url(hmac.new(self._key, message.encode(), hashlib.sha1).digest())

    def sign_url(self, url: str, *, expires_at_s: int | None = None) -> str:
        """``url`` signed for one request, expiring at ``expires_at_s`` (or ``valid_for_s`` on)."""
        check_object_url(url, URL_PARAMS)
        expires = self._expiry(expires_at_s)
        to_sign = join_query(url, f"Expires={expires}&KeyName={self.key_name}")
        return f"{to_sign}&Signature={self.mac(to_sign)}"

    def prefix_params(self, url_prefix: str, *, expires_at_s: int | None = None) -> str:
        """The signed-URL-prefix parameters that open every URL starting with ``url_prefix``."""
        return self._prefix_policy(url_prefix, self._expiry(expires_at_s), "&")

    def sign_url_prefix(self, url: str, url_prefix: str, *, expires_at_s: int | None = None) -> str:
        """``url`` (which must start with ``url_prefix``) carrying the prefix's signature."""
        check_object_url(url, URL_PARAMS)
        if not url.startswith(url_prefix):
            raise UsageError(f"cannot sign {url!r} with the prefix {url_prefix!r}: it lies outside")
        return join_query(url, self.prefix_params(url_prefix, expires_at_s=expires_at_s))

    def signed_cookie(self, url_prefix: str, *, expires_at_s: int | None = None) -> str:
        """The value of the ``Cloud-CDN-Cookie`` cookie for every URL under ``url_prefix``."""
        return self._prefix_policy(url_prefix, self._expiry(expires_at_s), ":")

    def grant(self, base_url: str, scope: str = "v/", *, as_cookie: bool = False) -> CdnGrant:
        """A signed URL prefix (or cookie) for ``base_url/scope``."""
        prefix, expires = self._prefix_url(base_url, scope), self._expiry(None)
        if as_cookie:
            cookie = f"{COOKIE_NAME}={self._prefix_policy(prefix, expires, ':')}"
            return CdnGrant(self.provider, base_url, scope, expires, headers={"Cookie": cookie})
        query = self._prefix_policy(prefix, expires, "&")
        return CdnGrant(self.provider, base_url, scope, expires, query=query)

    def _prefix_policy(self, url_prefix: str, expires: int, sep: str) -> str:
        """``URLPrefix=.{sep}Expires=.{sep}KeyName=.{sep}Signature=.``; sep: '&' URL, ':' cookie."""
        check_object_url(url_prefix, URL_PARAMS)
        encoded = _b64url(url_prefix.encode())
        policy = f"URLPrefix={encoded}{sep}Expires={expires}{sep}KeyName={self.key_name}"
        return f"{policy}{sep}Signature={self.mac(policy)}"
