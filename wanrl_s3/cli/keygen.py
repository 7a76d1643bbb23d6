"""``wanrl-s3 keygen``: make an Ed25519 key pair for signing manifests.

It prints the new key's id: signatures, ``inspect`` and every refusal name keys
by it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..errors import LocalIOError, UsageError
from ..format.signing import generate_keypair, key_id_of_pem


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "keygen", help="make a manifest signing key pair", description=__doc__
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="NAME",
        help="writes NAME.pem (private, mode 600: --signing-key of publish) and "
        "NAME.pub.pem (public: --verify-key of the readers)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    private_path, public_path = Path(f"{args.out}.pem"), Path(f"{args.out}.pub.pem")
    for path in (private_path, public_path):
        if path.exists():
            raise UsageError(f"{path} exists; refusing to overwrite a key")
    private, public = generate_keypair()
    written: list[Path] = []
    try:
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        written.append(private_path)
        with os.fdopen(fd, "wb") as f:
            f.write(private)
        written.append(public_path)
        public_path.write_bytes(public)
    except OSError as exc:
        for path in written:  # half a key pair is worse than none
            path.unlink(missing_ok=True)
        raise LocalIOError.wrap(f"cannot write the key pair {args.out}", exc) from exc
    print(
        f"wrote {private_path} (keep it with the publisher) and {public_path} "
        f"(give it to workers: --verify-key); key id {key_id_of_pem(public)}"
    )
    return 0
