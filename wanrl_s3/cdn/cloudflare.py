"""An HMAC token that Cloudflare's edge checks, for R2 or B2 served through a Cloudflare zone.

Cloudflare's WAF custom rules validate tokens with ``is_timed_hmac_valid_v0(Key,
MessageMAC, ttl, currentTimeStamp, lengthOfSeparator)`` (Cloudflare Ruleset
Engine docs, "Functions: HMAC validation"; WAF docs, "Configure token
authentication"). ``MessageMAC`` is ``message``, a separator, a 10-digit UNIX
``timestamp``, ``-`` and ``mac``, where ``mac`` is the base64 of
HMAC-SHA256(Key, message + timestamp), URL-encoded (the function's default,
without the ``'s'`` flag). The rule refuses a token older than ``ttl`` seconds.

Two forms, each with the rule a user adds (action: Block):

- one object (:meth:`CloudflareTokenSigner.sign_url`): ``message`` is the
  request URI before ``?verify=``; the rule checks ``http.request.uri`` with a
  separator of ``len("?verify=")`` (:meth:`CloudflareTokenSigner.object_rule`);
- a path prefix (:meth:`CloudflareTokenSigner.grant`, what a worker holds):
  ``message`` is the first N bytes of the path (``/run/v/``), the request's
  whole query string is ``<timestamp>-<mac>``, and the rule rebuilds the
  MessageMAC as ``concat(substring(http.request.uri.path, 0, N), "?",
  http.request.uri.query)`` with a separator of 1
  (:meth:`CloudflareTokenSigner.prefix_rule`).

The secret sits in the rule and with whoever mints tokens, never with a worker.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Any
from urllib.parse import quote, urlsplit

from ..errors import SigningKeyError, UsageError
from ..units import require_int
from .base import CdnSigner, Clock, check_object_url, join_query, read_key_file, system_clock
from .grant import CdnGrant

MIN_TIMESTAMP, MAX_TIMESTAMP = 10**9, 10**10 - 1  # the function takes exactly 10 digits
_MAKE_SECRET = "make one with `openssl rand -hex 32` and put the same text in the rule"  # noqa: S105


class CloudflareTokenSigner(CdnSigner):
    """Mints ``is_timed_hmac_valid_v0`` tokens; ``ttl_s`` must equal the rule's ttl."""

    provider = "cloudflare"

    def __init__(
        self,
        secret: str,
        *,
        ttl_s: int,
        param: str = "verify",
        clock: Clock = system_clock,
        key_label: str = "the Cloudflare token secret",
    ) -> None:
        super().__init__(require_int("ttl_s", ttl_s), clock)
        if (
            not isinstance(secret, str)
            or not secret
            or not secret.isascii()
            or not secret.isprintable()
            or any(c in secret for c in '"\\')
        ):
            raise SigningKeyError(
                f"{key_label} must be printable ASCII text without quotes or backslashes "
                f"(it is written into the rule as a string literal): {_MAKE_SECRET}"
            )
        if not (isinstance(param, str) and param.isascii() and param.isalnum()):
            raise UsageError(f"param must be a plain query parameter name; got {param!r}")
        self.ttl_s, self.param, self._secret = ttl_s, param, secret

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, ttl_s: int, **kwargs: Any
    ) -> CloudflareTokenSigner:
        """A signer for the secret in ``path`` (one line of text; the newline is not part of it)."""
        label = f"{kwargs.pop('key_label', 'the Cloudflare token secret')} {path}"
        try:
            text = read_key_file(path, label).decode("ascii")
        except UnicodeDecodeError as exc:
            raise SigningKeyError(f"{label} is not ASCII text: {_MAKE_SECRET}") from exc
        return cls(text.rstrip("\r\n"), ttl_s=ttl_s, key_label=label, **kwargs)

    def token(self, message: str, issued_at_s: int) -> str:
        """``<timestamp>-<mac>``: what follows the separator in a MessageMAC."""
        if (
            isinstance(issued_at_s, bool)
            or not isinstance(issued_at_s, int)
            or not (MIN_TIMESTAMP <= issued_at_s <= MAX_TIMESTAMP)
        ):
            raise UsageError(f"issued_at_s must be 10-digit UNIX seconds; got {issued_at_s!r}")
        digest = hmac.new(
            self._secret.encode(), f"{message}{issued_at_s}".encode(), hashlib.sha256
        ).digest()
        return f"{issued_at_s}-{quote(base64.b64encode(digest).decode(), safe='')}"

    def sign_url(self, url: str, *, issued_at_s: int | None = None) -> str:
        """``url`` with ``?verify=<token>`` (or ``&verify=``) last, for :meth:`object_rule`."""
        check_object_url(url, (self.param,))
        parts = urlsplit(url)
        message = f"{parts.path or '/'}?{parts.query}" if parts.query else parts.path or "/"
        token = self.token(message, self._issued(issued_at_s))
        return join_query(url, f"{self.param}={token}")

    def grant(
        self, base_url: str, scope: str = "v/", *, issued_at_s: int | None = None
    ) -> CdnGrant:
        """A token for every path under ``base_url/scope``, checked by :meth:`prefix_rule`."""
        issued = self._issued(issued_at_s)
        token = self.token(self._prefix_path(base_url, scope), issued)
        return CdnGrant(self.provider, base_url, scope, issued + self.ttl_s, query=token)

    def object_rule(self, host: str) -> str:
        """The custom rule expression (action Block) that :meth:`sign_url` passes."""
        return (
            f'(http.host eq "{_literal(host)}" and not is_timed_hmac_valid_v0('
            f'"{self._secret}", http.request.uri, {self.ttl_s}, http.request.timestamp.sec, '
            f"{len(self.param) + 2}))"
        )

    def prefix_rule(self, base_url: str, scope: str = "v/") -> str:
        """The custom rule expression (action Block) for :meth:`grant`'s tokens.

        It blocks every request to the host except reads under the prefix that
        carry a valid token, so LATEST and the rest of the bucket stay closed.
        """
        host = urlsplit(base_url).hostname or ""
        prefix = self._prefix_path(base_url, scope)
        path_part = f"substring(http.request.uri.path, 0, {len(prefix)})"
        message = f'concat({path_part}, "?", http.request.uri.query)'
        return (
            f'(http.host eq "{_literal(host)}" and not (starts_with(http.request.uri.path, '
            f'"{_literal(prefix)}") and is_timed_hmac_valid_v0("{self._secret}", {message}, '
            f"{self.ttl_s}, http.request.timestamp.sec, 1)))"
        )

    def _prefix_path(self, base_url: str, scope: str) -> str:
        return urlsplit(self._prefix_url(base_url, scope)).path

    def _issued(self, issued_at_s: int | None) -> int:
        return int(self._clock()) if issued_at_s is None else issued_at_s


def _literal(text: str) -> str:
    """``text`` for a rule's string literal; refuses what would end or escape it."""
    if any(c in text for c in '"\\') or not text.isascii() or not text.isprintable():
        raise UsageError(f"{text!r} cannot go into a Cloudflare rule's string literal")
    return text
