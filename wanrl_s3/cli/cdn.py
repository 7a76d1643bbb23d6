"""``--cdn-url`` and its grant: the flags ``pull`` and ``worker`` share to read through a CDN.

The store named by ``--store`` is wrapped in a :class:`~wanrl_s3.cdn.CdnReadStore`
and checked before anything is read or written: a malformed or unreachable URL,
an expired or unreadable grant, a signing key of the wrong kind, or a CDN that
answers the newest manifest with an error status or an HTML page is one line and
exit status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ..cdn import CdnReadStore, CloudFrontSigner, GrantFile, MintedGrants
from ..cdn.grant import check_base_url
from ..cdn.grants import GrantSource
from ..errors import UsageError
from ..format import latest, layout
from ..store import ObjectStore

#: How long a grant signed with ``--cloudfront-key`` lasts (minted again before it ends).
CLOUDFRONT_GRANT_S = 6 * 3600


def add_cdn_args(parser: argparse.ArgumentParser) -> None:
    """``--cdn-url`` and what the CDN asks of a reader: a grant, or CloudFront's key."""
    g = parser.add_argument_group("reading through a CDN (docs/cdn.md)")
    g.add_argument(
        "--cdn-url",
        metavar="URL",
        default=None,
        help="read manifests and payload through the CDN that serves the store's prefix "
        "at URL (key K is read at URL/K; CloudFront in front of s3://bucket/run: "
        "https://dXXXX.cloudfront.net/run); LATEST, listings and the status object stay "
        "on --store, and an object the CDN answers wrongly is read from --store "
        "(default: none, everything from --store)",
    )
    g.add_argument(
        "--cdn-grant",
        metavar="FILE",
        default=None,
        help="the CdnGrant JSON the signing key's holder minted for this run "
        "(CdnGrant.to_json), read again whenever the file changes; it names the CDN "
        "URL, so --cdn-url may be left out (default: none, for a CDN that asks nothing)",
    )
    g.add_argument(
        "--cloudfront-key",
        metavar="PRIVATE.pem",
        default=None,
        help="instead of --cdn-grant, CloudFront only: sign this reader's own grants "
        f"({CLOUDFRONT_GRANT_S // 3600} h each) with the RSA 2048 or ECDSA P-256 private "
        "key of a key group that trusts only this run's distribution; a grant file is "
        "safer (docs/cdn.md) (default: none)",
    )
    g.add_argument(
        "--cloudfront-key-pair-id",
        metavar="ID",
        default=None,
        help="with --cloudfront-key: the id CloudFront gave its public key, like "
        "K2JCJMDEHXQW5F (default: none)",
    )


def cdn_reader(args: argparse.Namespace) -> Callable[[ObjectStore], ObjectStore]:
    """The CDN flags, checked before any request (the grant or key read, the URL parsed);
    returns what turns the store to read into one read through the CDN, checked against
    it (the identity without ``--cdn-url`` and ``--cdn-grant``)."""
    grants = _grants(args)
    url = args.cdn_url or (grants().base_url if grants is not None else None)
    if url is None:
        return lambda store: store
    check_base_url(url, "--cdn-url")
    if getattr(args, "regions", None):
        raise UsageError(
            "--cdn-url reads one store: give --store (the bucket the CDN fronts, usually the "
            "primary region's) instead of --regions; a CDN is near every worker already"
        )

    def through_cdn(store: ObjectStore) -> ObjectStore:
        through = CdnReadStore(store, url, grant=grants)
        _check(through)
        return through

    return through_cdn


def _grants(args: argparse.Namespace) -> GrantSource | None:
    if args.cloudfront_key_pair_id and not args.cloudfront_key:
        raise UsageError("--cloudfront-key-pair-id goes with --cloudfront-key")
    if args.cloudfront_key and args.cdn_grant:
        raise UsageError("give --cdn-grant or --cloudfront-key, not both")
    if args.cdn_grant:
        return GrantFile(args.cdn_grant)
    if not args.cloudfront_key:
        return None
    if not args.cloudfront_key_pair_id:
        raise UsageError("--cloudfront-key needs --cloudfront-key-pair-id (its public key's id)")
    if not args.cdn_url:
        raise UsageError("--cloudfront-key needs --cdn-url (the distribution's URL of the run)")
    signer = CloudFrontSigner.from_file(
        args.cloudfront_key_pair_id,
        args.cloudfront_key,
        valid_for_s=CLOUDFRONT_GRANT_S,
        key_name="--cloudfront-key",
    )
    return MintedGrants(signer, args.cdn_url)


def _check(through: CdnReadStore) -> None:
    """The CDN answers, and answers the newest version's manifest with an object (not an
    error status, not an HTML page). Its bytes are the manifest owner's to judge: a stale
    copy of a version published again is refused there and read from the store. A store
    with nothing published yet has only the CDN's reachability checked."""
    pointer = latest.read(through.origin)
    through.check(None if pointer is None else layout.manifest_key(pointer.version))
