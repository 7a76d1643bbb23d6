"""``python -m wanrl_s3.testing``: a local S3 endpoint and synthetic policies, for trying
wanrl-s3 on one machine with nothing else (docs/quickstart.md, "Try it on this machine").

    python -m wanrl_s3.testing serve-s3 --bucket demo --url-file s3.url &   # until stopped
    python -m wanrl_s3.testing wait-s3 --url-file s3.url --pid $!   # prints its URL when ready
    python -m wanrl_s3.testing serve-cdn --origin URL --open demo/run --url-file cdn.url &
    python -m wanrl_s3.testing wait-s3 --url-file cdn.url --pid $!  # the nginx edge's URL
    python -m wanrl_s3.testing make-policy v1.safetensors --params 2e6
    python -m wanrl_s3.testing make-policy v2.safetensors --next-of v1.safetensors
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from ..cli.help import HelpFormatter
from ..errors import LocalIOError, UsageError, WanrlError
from .cdn_edge import allow_edge_reads, local_cdn_edge
from .endpoint import local_s3, make_bucket
from .synthetic import dims_for_params, llama_like_layout, nudge_state, random_bf16_state


def _stop_event(url_file: Path | None) -> threading.Event:
    """An event that SIGINT or SIGTERM sets, so that the server stops and cleans up
    rather than dies; and no stale ``url_file`` left, which could be taken for this one."""
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    if url_file:
        url_file.unlink(missing_ok=True)
    return stop


def _serve(args: argparse.Namespace) -> int:
    stop = _stop_event(args.url_file)
    with local_s3(port=args.port) as endpoint:
        for bucket in args.bucket:
            make_bucket(endpoint, bucket)
        print(f"local S3 at {endpoint} (buckets: {', '.join(args.bucket) or 'none'})", flush=True)
        with _announced(args.url_file, endpoint):
            stop.wait()
    return 0


def _serve_cdn(args: argparse.Namespace) -> int:
    stop = _stop_event(args.url_file)
    for run in args.open:
        bucket, _, prefix = run.partition("/")
        allow_edge_reads(args.origin, bucket, prefix)
    with local_cdn_edge(args.origin, port=args.port) as edge:
        runs = ", ".join(args.open) or "nothing opened to it"
        print(f"CDN edge at {edge.url} in front of {args.origin} ({runs})", flush=True)
        with _announced(args.url_file, edge.url):
            stop.wait()
    return 0  # the edge and its cache are gone


def _add_url_file_arg(parser: argparse.ArgumentParser, when: str) -> None:
    """``--url-file`` of a server command: ``when`` says what it writes and when."""
    parser.add_argument(
        "--url-file",
        type=Path,
        default=None,
        metavar="FILE",
        help=f"{when} and this process's id to FILE (for wait-s3 --url-file); removed on "
        "exit (default: none)",
    )


@contextlib.contextmanager
def _announced(url_file: Path | None, endpoint: str) -> Iterator[None]:
    """``url_file`` holds the endpoint and this process's id while the server runs.

    Written whole (a rename) and only once the server answers with its buckets made,
    so whoever reads it talks to this server, ready; removed when it stops.
    """
    if url_file is None:
        yield
        return
    text = f"{endpoint}\n{os.getpid()}\n"
    partial = url_file.with_name(f".{url_file.name}.{os.getpid()}")
    try:
        partial.write_text(text)
        partial.replace(url_file)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise LocalIOError(f"cannot write --url-file {url_file}: {exc}") from exc
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            if url_file.read_text() == text:
                url_file.unlink()


def _wait(args: argparse.Namespace) -> int:
    if (args.endpoint is None) == (args.url_file is None):
        raise UsageError("wait-s3 takes an endpoint URL or --url-file FILE (one of them)")
    deadline = time.monotonic() + args.timeout_s
    while True:
        url = args.endpoint or _served_url(args.url_file, args.pid)
        if url and _answers(url, args.bucket):
            print(url, flush=True)
            return 0
        if args.pid is not None and not _alive(args.pid):
            raise UsageError(
                f"the server (pid {args.pid}) exited before it was ready (its error is above)"
            )
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    what = args.endpoint or f"the server of {args.url_file}"
    if args.bucket:
        what = f"bucket {args.bucket!r} at {what}"
    raise UsageError(f"{what} did not answer within {args.timeout_s:g} s")


def _served_url(url_file: Path, pid: int | None) -> str | None:
    """The endpoint that ``serve-s3 --url-file`` wrote, if the server ``pid`` wrote it."""
    try:
        url, owner = url_file.read_text().split()
    except (OSError, ValueError):
        return None  # not written yet (it is renamed into place whole)
    return url if pid is None or owner == str(pid) else None


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, exited but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc here: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


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
        default=None,
        metavar="PORT",
        help="its S3 port; port + 10000 is taken too (gRPC); a port already taken is an "
        "error at once (default: a free pair)",
    )
    s.add_argument(
        "--bucket",
        action="append",
        default=[],
        metavar="NAME",
        help="create this bucket (repeatable)",
    )
    _add_url_file_arg(s, "once ready, write the endpoint URL")
    s.set_defaults(func=_serve)
    c = sub.add_parser(
        "serve-cdn",
        help="nginx as a caching CDN edge in front of a local S3 endpoint",
        formatter_class=HelpFormatter,
    )
    c.add_argument(
        "--origin", required=True, metavar="URL", help="the endpoint, http://127.0.0.1:PORT"
    )
    c.add_argument(
        "--port",
        type=int,
        default=None,
        metavar="PORT",
        help="the edge's port; a port already taken is an error at once (default: a free one)",
    )
    c.add_argument(
        "--open",
        action="append",
        default=[],
        metavar="BUCKET/PREFIX",
        help="let the edge read this run's v/ and LATEST, as a CDN's bucket policy does "
        "(repeatable)",
    )
    _add_url_file_arg(c, "once it listens, write the edge's URL")
    c.set_defaults(func=_serve_cdn)
    w = sub.add_parser(
        "wait-s3",
        help="wait until an endpoint answers, then print its URL",
        formatter_class=HelpFormatter,
    )
    w.add_argument(
        "endpoint",
        nargs="?",
        default=None,
        metavar="URL",
        help="e.g. http://127.0.0.1:9000; or --url-file (default: none)",
    )
    w.add_argument(
        "--url-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="the URL that `serve-s3 --url-file FILE` (or serve-cdn's) writes once ready "
        "(default: none)",
    )
    w.add_argument(
        "--pid",
        type=int,
        default=None,
        metavar="PID",
        help="the server's process: give up as soon as it exits, and with --url-file, take "
        "only the endpoint that this process wrote (default: none)",
    )
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
