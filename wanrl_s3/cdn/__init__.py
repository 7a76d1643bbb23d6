"""Reading snapshots through a CDN without a public bucket (public API).

The bucket stays private; the CDN reads it with its own identity (CloudFront's
origin access control, Cloud CDN's cache-fill service account, an R2 custom
domain) and serves only requests the provider's signing scheme admits. One
signer per provider, each in its own module, all on one small base class
(:class:`CdnSigner`):

- :class:`CloudFrontSigner`: signed URLs (canned or custom policy) and signed
  cookies with the RSA 2048 or ECDSA P-256 private key of a key group;
- :class:`CloudCdnSigner`: Cloud CDN signed URLs, signed URL prefixes and signed
  cookies with a backend's 128-bit HMAC key;
- :class:`CloudflareTokenSigner`: ``is_timed_hmac_valid_v0`` tokens for R2 or B2
  behind a Cloudflare zone, and the WAF rule expression that checks them.

A signer lives with whoever mints access (the trainer); its
:meth:`CdnSigner.grant` gives a :class:`CdnGrant` for one run's ``v/`` prefix,
which is all a worker holds. Keys of the wrong kind, unreadable or malformed
raise :class:`~wanrl_s3.errors.SigningKeyError` (exit code 2) where they are
loaded.

A reader wraps its store in a :class:`CdnReadStore` (manifests and payload
through the CDN, LATEST and the rest from the store, every byte verified, an
object the CDN gets wrong read from the store) and hands it to a
``Subscriber``; its grant comes from a :class:`GrantFile` kept fresh by whoever
mints them, or from a :class:`MintedGrants` around a signer. See docs/cdn.md.
"""

from __future__ import annotations

from .base import CdnSigner
from .cloudcdn import CloudCdnSigner
from .cloudflare import CloudflareTokenSigner
from .cloudfront import CloudFrontSigner
from .grant import CdnGrant
from .grants import GrantFile, MintedGrants
from .read import CdnReadStore

__all__ = [
    "CdnGrant",
    "CdnReadStore",
    "CdnSigner",
    "CloudCdnSigner",
    "CloudFrontSigner",
    "CloudflareTokenSigner",
    "GrantFile",
    "MintedGrants",
]


def __dir__() -> list[str]:
    return sorted(__all__)  # the public names only, not the submodules
