"""`pull --cdn-url` and `worker --cdn-url` through a real nginx edge, and the CDN flags' bad input.

Bad input is one line on stderr, exit status 2, and nothing written: a malformed
or unreachable URL, a CDN that answers with an HTML page and status 200, a grant
file that is no grant, expired or for another URL, a signing key of the wrong
kind, and flags that do not go together.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

from tests.cdn.edges import nginx_edge
from wanrl_s3.cdn import CdnGrant
from wanrl_s3.cli import main
from wanrl_s3.fetch.files import load_snapshot
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store
from wanrl_s3.testing import (
    CdnEdge,
    allow_edge_reads,
    free_port,
    nudge_state,
    random_bf16_state,
    worker_command,
)

PREFIX = "runs/test"


def policy(seed: int) -> dict[str, np.ndarray]:
    return random_bf16_state([(f"layer.{i}.w", (40_000,)) for i in range(3)], seed=seed)


@pytest.fixture
def edge(s3_endpoint: str) -> Iterator[CdnEdge]:
    with nginx_edge(s3_endpoint) as running:
        yield running


@pytest.fixture
def published(s3_url: str, s3_endpoint: str) -> dict[str, np.ndarray]:
    """v1 and v2 at ``s3_url``, its v/ and LATEST readable by an edge; v2's tensors."""
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    publisher = Publisher(store, PublishConfig(delta="always"))
    v1 = policy(1)
    v2 = nudge_state(v1, 0.05, seed=2)
    publisher.publish(v1, 1)
    publisher.publish(v2, 2)
    bucket = s3_url.removeprefix("s3://").split("/")[0]
    allow_edge_reads(s3_endpoint, bucket, PREFIX)
    return v2


def cdn_url_of(edge: CdnEdge, s3_url: str) -> str:
    return f"{edge.url}/{s3_url.removeprefix('s3://')}"


def same(path: Path, want: dict[str, np.ndarray]) -> bool:
    got = load_snapshot(path).tensors
    return set(got) == set(want) and all(
        np.array_equal(got[k].view(np.uint16), want[k].view(np.uint16)) for k in want
    )


def test_pull_through_the_edge(
    s3_url: str,
    s3_endpoint: str,
    edge: CdnEdge,
    published: dict[str, np.ndarray],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "m.safetensors"
    argv = ["pull", "--store", s3_url, "--endpoint-url", s3_endpoint, "--out", str(out)]
    assert main([*argv, "--cdn-url", cdn_url_of(edge, s3_url)]) == 0
    assert "every tensor verified" in capsys.readouterr().out
    assert same(out, published)
    payload = [r for r in edge.requests() if r.uri.endswith(".bin")]
    assert payload and all(r.status == 206 for r in payload)


def test_a_worker_through_the_edge_installs_and_reports_to_the_store(
    s3_url: str, s3_endpoint: str, edge: CdnEdge, published: dict[str, np.ndarray], tmp_path: Path
) -> None:
    out = tmp_path / "w"
    argv = worker_command(s3_url, s3_endpoint, str(out), "cdn-w", 0.1, "--exit-after", "1")
    done = subprocess.run(
        [*argv, "--cdn-url", cdn_url_of(edge, s3_url)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"through the CDN at {cdn_url_of(edge, s3_url)}" in done.stderr
    assert same(out / "model.safetensors", published)
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    assert store.exists("workers/cdn-w.json")  # the status object goes to the store
    assert any(r.uri.endswith(".bin") for r in edge.requests())


# -- bad input ----------------------------------------------------------------------------
class HtmlEverywhere(BaseHTTPRequestHandler):
    """A web server that answers every path with an HTML page and status 200."""

    def do_GET(self) -> None:
        body = b"<!doctype html><html><body>Welcome to our site</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def html_site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HtmlEverywhere)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def write_grant(path: Path, base_url: str, expires_at_s: int = 2**40) -> str:
    path.write_text(CdnGrant("cloudfront", base_url, "v/", expires_at_s, query="k=v").to_json())
    return str(path)


def bad_inputs(tmp_path: Path, html_site: str, wrong_key: Path) -> dict[str, tuple[list[str], str]]:
    """Flags -> (argv, a phrase of the one-line error)."""
    unreachable = f"http://127.0.0.1:{free_port()}/run"
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not a grant")
    return {
        "malformed URL": (["--cdn-url", "ftp://cdn.example.com/run"], "--cdn-url must be"),
        "trailing slash": (["--cdn-url", "https://cdn.example.com/run/"], "--cdn-url must be"),
        "unreachable": (["--cdn-url", unreachable], "cannot be reached"),
        "HTML with 200": (["--cdn-url", f"{html_site}/run"], "an HTML page"),
        "garbage grant": (["--cdn-grant", str(garbage)], "is not a JSON object"),
        "missing grant": (
            ["--cdn-grant", str(tmp_path / "none.json")],
            "cannot read the CDN grant",
        ),
        "expired grant": (
            ["--cdn-grant", write_grant(tmp_path / "old.json", f"{html_site}/run", 1000)],
            "expired",
        ),
        "grant for another URL": (
            [
                "--cdn-url",
                f"{html_site}/run",
                "--cdn-grant",
                write_grant(tmp_path / "g.json", "https://other.example.com/run"),
            ],
            "is for https://other.example.com/run",
        ),
        "wrong kind of key": (
            [
                "--cdn-url",
                f"{html_site}/run",
                "--cloudfront-key",
                str(wrong_key),
                "--cloudfront-key-pair-id",
                "K2JCJMDEHXQW5F",
            ],
            "Ed25519",
        ),
        "key without its id": (["--cloudfront-key", str(wrong_key)], "--cloudfront-key-pair-id"),
        "grant and key": (
            ["--cdn-grant", str(garbage), "--cloudfront-key", str(wrong_key)],
            "not both",
        ),
    }


CASES = [
    "malformed URL",
    "trailing slash",
    "unreachable",
    "HTML with 200",
    "garbage grant",
    "missing grant",
    "expired grant",
    "grant for another URL",
    "wrong kind of key",
    "key without its id",
    "grant and key",
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("command", ["pull", "worker"])
def test_bad_cdn_input_is_one_line_exit_2_and_nothing_written(
    case: str,
    command: str,
    s3_url: str,
    s3_endpoint: str,
    published: dict[str, np.ndarray],
    html_site: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    wrong_key = tmp_path / "ed25519.pem"
    wrong_key.write_bytes(
        ed25519.Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    flags, phrase = bad_inputs(tmp_path, html_site, wrong_key)[case]
    out = tmp_path / "out"
    target = ["--out", str(out / "m.safetensors")] if command == "pull" else ["--out-dir", str(out)]
    argv = [command, "--store", s3_url, "--endpoint-url", s3_endpoint, *target, *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("wanrl-s3: error: "), err
    assert phrase in err, err
    assert not (out / "m.safetensors").exists() and not (out / "model.safetensors").exists()
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    assert store.list("workers") == []  # a worker wrote no status object either


def test_cdn_url_and_regions_exclude_each_other(tmp_path: Path) -> None:
    regions = tmp_path / "regions.toml"
    regions.write_text('primary = "a"\n[regions.a]\nurl = "file:///nonexistent/a"\n')
    done = subprocess.run(
        [sys.executable, "-m", "wanrl_s3.cli", "pull", "--regions", str(regions), "--out",
         str(tmp_path / "m.safetensors"), "--cdn-url", "https://cdn.example.com/run"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert "instead of --regions" in done.stderr and done.stderr.count("\n") == 1
