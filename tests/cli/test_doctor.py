"""`wanrl-s3 doctor` against real servers, a store that ignores conditional writes, and bad input.

SeaweedFS, fake-gcs-server and Azurite keep every guarantee. The same SeaweedFS
behind a proxy that drops ``If-None-Match`` and ``If-Match`` (FaultProxy's
IGNORE_CONDITIONS, which signs each request again) plays a store that ignores
conditional writes: the doctor reports it (exit 8) and `publish` refuses it
before writing anything. Everything that is not a usable store is one line
and the exit code the doctor's docstring gives.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Callable, Iterator

import boto3
import pytest

from tests.cloud_emulators import az_url, azurite_connection, gcs_endpoint, gs_url
from wanrl_s3.cli import main
from wanrl_s3.format import layout
from wanrl_s3.io.safetensors_file import write_file
from wanrl_s3.store import open_store
from wanrl_s3.testing import (
    READ_ONLY_CREDENTIALS,
    Fault,
    FaultProxy,
    Rule,
    free_port,
    make_bucket,
    random_bf16_state,
)

__all__ = ["az_url", "azurite_connection", "gcs_endpoint", "gs_url"]  # fixtures

PROPERTIES = 9
Doctor = Callable[..., tuple[int, str, str]]


@pytest.fixture
def doctor(capsys: pytest.CaptureFixture[str]) -> Doctor:
    """``wanrl-s3 doctor ARGV`` in this process: (exit code, stdout, stderr)."""

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(["doctor", *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def rows(out: str) -> dict[str, str]:
    """property -> result, from the doctor's table."""
    lines = out.splitlines()[2:]  # the store, the header
    found = {}
    for line in lines:
        name, _, rest = line.partition("  ")
        found[name.strip()] = rest.strip()
    return found


@pytest.mark.parametrize(
    "url_fixture, endpoint_fixture",
    [("s3_url", None), ("gs_url", "gcs_endpoint"), ("az_url", None)],
    ids=["seaweedfs", "fake-gcs-server", "azurite"],
)
def test_every_guarantee_holds_on_real_servers(
    url_fixture: str,
    endpoint_fixture: str | None,
    request: pytest.FixtureRequest,
    doctor: Doctor,
    s3_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = request.getfixturevalue(url_fixture)
    endpoint = request.getfixturevalue(endpoint_fixture) if endpoint_fixture else None
    # $AWS_ENDPOINT_URL names where s3:// goes, and nothing else (gs:// and az:// ignore it)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    code, out, err = doctor("--store", url, *(["--endpoint-url", endpoint] if endpoint else []))
    assert (code, err) == (0, ""), out
    table = rows(out)
    assert len(table) == PROPERTIES
    for name in (
        "conditional create (PUT If-None-Match: *)", "compare-and-swap (PUT If-Match)",
        "read-after-write", "list-after-write", "range reads", "ETag form", "delete",
    ):  # fmt: skip
        assert table[name].startswith("held: "), (name, table[name])
    store = open_store(url, endpoint_url=endpoint or (s3_endpoint if url[:2] == "s3" else None))
    assert [o.key for o in store.list()] == [layout.STORE_CHECK_KEY]  # probes removed
    assert store.pending_uploads() == []


def _bucket_keys(endpoint: str, bucket: str) -> list[str]:
    listed = boto3.client("s3", endpoint_url=endpoint).list_objects_v2(Bucket=bucket)
    return [o["Key"] for o in listed.get("Contents", [])]


def test_a_store_that_ignores_conditional_writes_is_reported_and_refused(
    s3_endpoint: str, doctor: Doctor, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    bucket = make_bucket(s3_endpoint)
    url = f"s3://{bucket}/run"
    assert doctor("--store", url, "--endpoint-url", s3_endpoint)[0] == 0  # direct: sound
    assert _bucket_keys(s3_endpoint, bucket) == [f"run/{layout.STORE_CHECK_KEY}"]
    src = f"{tmp_path}/v1.safetensors"
    write_file(src, random_bf16_state([("w", (64, 64))], seed=1))
    with FaultProxy(s3_endpoint, rules=[Rule(Fault.IGNORE_CONDITIONS)]) as proxy:
        code, out, err = doctor("--store", url, "--endpoint-url", proxy.url)
        assert code == 8 and err.count("\n") == 1 and "`wanrl-s3 publish` refuses it" in err
        table = rows(out)
        assert table["conditional create (PUT If-None-Match: *)"].startswith("NOT HELD: ")
        assert table["compare-and-swap (PUT If-Match)"].startswith("NOT HELD: ")
        assert table["range reads"].startswith("held: ")  # the rest of the store is sound
        assert _bucket_keys(s3_endpoint, bucket) == []  # the earlier record went with it

        code = main(["publish", src, "--store", url, "--endpoint-url", proxy.url, "--version", "1"])
        err = capsys.readouterr().err
        assert proxy.counts[Fault.IGNORE_CONDITIONS] > 0
    assert code == 8
    assert err.count("\n") == 1 and err.startswith("wanrl-s3: error: ")
    assert f"wanrl-s3 doctor --store {url}" in err and "nothing was published" in err
    assert _bucket_keys(s3_endpoint, bucket) == []  # no payload, no manifest, no LATEST


@pytest.fixture(scope="module")
def plain_http() -> Iterator[dict[str, str]]:
    """Two web servers that are not object stores: one answers 404, one 200 HTML."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_error(404)

        do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

        def log_message(self, *_: object) -> None:
            pass

    class Html(NotFound):
        def do_GET(self) -> None:
            body = b"<html><body>a web page</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_PUT(self) -> None:  # as http.server's own file server answers
            self.send_error(501)

    servers = {
        name: http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        for name, handler in (("404", NotFound), ("html", Html))
    }
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {name: f"http://127.0.0.1:{s.server_address[1]}" for name, s in servers.items()}
    for server in servers.values():
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "case, code, says",
    [
        ("a web server answering 404", 6, "not an object store"),
        ("a web server answering HTML", 6, "cannot write to"),
        ("a closed port", 6, "Could not connect"),
        ("TLS to a plain port", 6, "TLS failed"),
        ("a bucket that does not exist", 6, "does not exist"),
        ("credentials without write access", 6, "AccessDenied"),
        ("a wrong secret key", 2, "refused the credentials"),
    ],
)
def test_what_is_not_a_usable_store_is_one_line(
    case: str,
    code: int,
    says: str,
    s3_endpoint: str,
    plain_http: dict[str, str],
    doctor: Doctor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bucket, endpoint = make_bucket(s3_endpoint), s3_endpoint
    if case.startswith("a web server"):
        endpoint = plain_http["404" if "404" in case else "html"]
    elif case == "a closed port":
        endpoint = f"http://127.0.0.1:{free_port()}"
    elif case == "TLS to a plain port":
        endpoint = s3_endpoint.replace("http://", "https://")
    elif case == "a bucket that does not exist":
        bucket = "wanrl-no-such-bucket"
    elif case == "credentials without write access":
        for key, value in READ_ONLY_CREDENTIALS.items():
            monkeypatch.setenv(key, value)
    else:
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    got, out, err = doctor("--store", f"s3://{bucket}/run", "--endpoint-url", endpoint)
    assert (got, out) == (code, ""), err
    assert err.count("\n") == 1 and err.startswith("wanrl-s3: error: "), err
    assert says in err and "Traceback" not in err
