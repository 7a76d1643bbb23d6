"""``python -m wanrl_s3.testing``: a local S3 endpoint and synthetic policies, for trying
wanrl-s3 on one machine with nothing else (docs/quickstart.md, "Try it on this machine").

    python -m wanrl_s3.testing serve-s3 --port 9000 --bucket demo   # SeaweedFS, until Ctrl-C
    python -m wanrl_s3.testing wait-s3 http://127.0.0.1:9000          # until it answers
    python -m wanrl_s3.testing serve-cdn --origin http://127.0.0.1:9000 --port 9080 \
        --open demo/run                                              # an nginx edge, until Ctrl-C
    python -m wanrl_s3.testing make-policy v1.safetensors --params 2e6
    python -m wanrl_s3.testing make-policy v2.safetensors --next-of v1.safetensors
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
import urllib.error
import urllib.request

from ..cli.help import HelpFormatter
from ..errors import UsageError, WanrlError
from .cdn_edge import allow_edge_reads, local_cdn_edge
from .endpoint import local_s3, make_bucket
from .synthetic import dims_for_params, llama_like_layout, nudge_state, random_bf16_state


def _serve(args: argparse.Namespace) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    with local_s3(port=args.port) as endpoint:
        for bucket in args.bucket:
            make_bucket(endpoint, bucket)
        print(f"local S3 at {endpoint} (buckets: {', '.join(args.bucket) or 'none'})", flush=True)
        stop.wait()
    return 0


def _serve_cdn(args: argparse.Namespace) -> int:
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    for run in args.open:
        bucket, _, prefix = run.partition("/")
        allow_edge_reads(args.origin, bucket, prefix)
    with local_cdn_edge(args.origin, port=args.port) as edge:
        runs = ", ".join(args.open) or "nothing opened to it"
        print(f"CDN edge at {edge.url} in front of {args.origin} ({runs})", flush=True)
        stop.wait()
    return 0  # the edge and its cache are gone


def _wait(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.timeout_s
    while time.monotonic() < deadline:
        if _answers(args.endpoint, args.bucket):
            return 0
        time.sleep(0.2)
    what = f"bucket {args.bucket!r} at {args.endpoint}" if args.bucket else args.endpoint
    raise UsageError(f"{what} did not answer within {args.timeout_s:g} s")


def _answers(endpoint: str, bucket: str | None) -> bool:
    """The endpoint answers at all; with ``bucket``, that bucket exists (a signed HEAD)."""
    if bucket is None:
        try:
            with urllib.request.urlopen(endpoint, timeout=2):  # noqa: S310 (a local URL)
                return True
        except urllib.error.HTTPError:
            return True  # it answered
        except OSError:
            return False
    import boto3
    import botocore.exceptions

    try:
        boto3.client("s3", endpoint_url=endpoint).head_bucket(Bucket=bucket)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
        return False
    return True


def _policy(args: argparse.Namespace) -> int:
    from ..io.safetensors_file import SafetensorsFile, write_file

    if args.next_of:
        state = {n: a.copy() for n, a in SafetensorsFile(args.next_of).items()}
        state = nudge_state(state, args.fraction, seed=args.seed)
    else:
        target = int(args.params)
        dims = dims_for_params(target, vocab=32000 if target >= 10**8 else 1024)
        state = random_bf16_state(llama_like_layout(dims), seed=args.seed)
    write_file(args.out, state)
    print(f"wrote {args.out}: {sum(a.size for a in state.values()):,} bf16 weights")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m wanrl_s3.testing", description=__doc__, formatter_class=HelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser(
        "serve-s3",
        help="a SeaweedFS S3 server on 127.0.0.1 until interrupted (data in a temporary "
        "folder, removed on exit; keys: AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing)",
        formatter_class=HelpFormatter,
    )
    s.add_argument(
        "--port",
        type=int,
        default=9000,
        metavar="PORT",
        help="its S3 port; port + 10000 is taken too (gRPC)",
    )
    s.add_argument(
        "--bucket",
        action="append",
        default=[],
        metavar="NAME",
        help="create this bucket (repeatable)",
    )
    s.set_defaults(func=_serve)
    c = sub.add_parser(
        "serve-cdn",
        help="nginx as a caching CDN edge in front of a local S3 endpoint",
        formatter_class=HelpFormatter,
    )
    c.add_argument(
        "--origin", required=True, metavar="URL", help="the endpoint, http://127.0.0.1:PORT"
    )
    c.add_argument("--port", type=int, default=9080, metavar="PORT", help="the edge's port")
    c.add_argument(
        "--open",
        action="append",
        default=[],
        metavar="BUCKET/PREFIX",
        help="let the edge read this run's v/ and LATEST, as a CDN's bucket policy does "
        "(repeatable)",
    )
    c.set_defaults(func=_serve_cdn)
    w = sub.add_parser(
        "wait-s3", help="wait until an endpoint answers", formatter_class=HelpFormatter
    )
    w.add_argument("endpoint", metavar="URL", help="e.g. http://127.0.0.1:9000")
    w.add_argument(
        "--bucket", default=None, metavar="NAME", help="wait until this bucket exists too"
    )
    w.add_argument(
        "--timeout-s",
        type=float,
        default=60.0,
        metavar="S",
        help="give up after S seconds (exit 2)",
    )
    w.set_defaults(func=_wait)
    m = sub.add_parser(
        "make-policy",
        help="a LLaMA-shaped bf16 policy as .safetensors",
        formatter_class=HelpFormatter,
    )
    m.add_argument("out", metavar="OUT.safetensors", help="the file to write")
    m.add_argument(
        "--params",
        type=float,
        default=2e6,
        metavar="N",
        help="about this many parameters, e.g. 2e6",
    )
    m.add_argument("--next-of", metavar="FILE", help="the next version of FILE instead")
    m.add_argument(
        "--fraction",
        type=float,
        default=0.01,
        metavar="F",
        help="with --next-of: the fraction of weights moved",
    )
    m.add_argument("--seed", type=int, default=0, metavar="N", help="random seed")
    m.set_defaults(func=_policy)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except WanrlError as exc:
        print(f"python -m wanrl_s3.testing: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
