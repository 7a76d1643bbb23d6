"""The nginx caching edge: it caches what the origin allows, and only that, in range slices.

The origin here is a plain local HTTP server that counts the requests it gets,
so every count below is the origin's own; the edge's log of origin requests
must agree with it. The last test puts the edge in front of an S3 endpoint
(SeaweedFS) read with presigned URLs, the way a worker reads through a CDN.
"""

from __future__ import annotations

import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3.testing import CdnEdge, cdn_edge, local_cdn_edge

MiB = 1 << 20
IMMUTABLE = "public, max-age=31536000, immutable"
OBJECTS = {
    "/run/v/000000000001/manifest.json": (b'{"version": 1}', IMMUTABLE),
    "/run/LATEST": (b'{"version": 1}', "no-store"),
    "/run/v/000000000001/ab12/000000.bin": (bytes(range(256)) * (3 * MiB // 256 + 7), IMMUTABLE),
    "/run/silent": (b"no caching headers", None),
}
OriginFixture = tuple[str, Counter[tuple[str, str]]]


class Origin(BaseHTTPRequestHandler):
    """Serves OBJECTS with their Cache-Control, honours one Range, counts every request."""

    counts: Counter[tuple[str, str]]

    def do_GET(self) -> None:
        self.counts[(self.path.split("?")[0], self.headers.get("Range", "-"))] += 1
        found = OBJECTS.get(self.path.split("?")[0])
        if found is None:
            self.send_error(404)
            return
        body, cache_control = found
        status, rng = 200, self.headers.get("Range")
        if rng:
            first, last = (int(x) for x in rng.removeprefix("bytes=").split("-"))
            last = min(last, len(body) - 1)
            status, part = 206, body[first : last + 1]
        else:
            part = body
        self.send_response(status)
        if rng:
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(body)}")
        if cache_control:
            self.send_header("Cache-Control", cache_control)
        self.send_header("Content-Length", str(len(part)))
        self.end_headers()
        self.wfile.write(part)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def origin() -> Iterator[OriginFixture]:
    counts: Counter[tuple[str, str]] = Counter()
    handler = type("CountingOrigin", (Origin,), {"counts": counts})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", counts
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def edge(origin: OriginFixture) -> Iterator[CdnEdge]:
    try:
        cdn_edge.nginx_binary()
    except UsageError as exc:
        pytest.skip(str(exc))
    with local_cdn_edge(origin[0]) as running:
        yield running


def get(url: str, rng: str | None = None) -> tuple[bytes, str]:
    request = urllib.request.Request(url, headers={"Range": rng} if rng else {})
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.read(), response.headers["X-Cache-Status"]


def origin_gets(counts: Counter[tuple[str, str]], path: str) -> int:
    return sum(n for (p, _), n in counts.items() if p == path)


def test_an_immutable_object_reaches_the_origin_once(edge: CdnEdge, origin: OriginFixture) -> None:
    path = "/run/v/000000000001/manifest.json"
    first, status_1 = get(edge.url + path)
    second, status_2 = get(edge.url + path + "?Signature=another-signature")
    assert first == second == OBJECTS[path][0]
    assert (status_1, status_2) == ("MISS", "HIT")
    assert origin_gets(origin[1], path) == 1
    assert [(r.method, r.uri) for r in edge.origin_requests()] == [("GET", path)]


def test_a_no_store_object_reaches_the_origin_every_time(
    edge: CdnEdge, origin: OriginFixture
) -> None:
    path = "/run/LATEST"
    statuses = [get(edge.url + path)[1] for _ in range(3)]
    assert "HIT" not in statuses
    assert origin_gets(origin[1], path) == 3 == len(edge.origin_requests())


def test_an_object_without_caching_headers_is_not_cached_by_default(
    edge: CdnEdge, origin: OriginFixture
) -> None:
    for _ in range(2):
        assert get(edge.url + "/run/silent")[0] == b"no caching headers"
    assert origin_gets(origin[1], "/run/silent") == 2


def test_ranges_are_cached_in_slices(edge: CdnEdge, origin: OriginFixture) -> None:
    path = "/run/v/000000000001/ab12/000000.bin"
    body = OBJECTS[path][0]
    assert get(edge.url + path, "bytes=100-200")[0] == body[100:201]
    across = get(edge.url + path, f"bytes={MiB - 10}-{MiB + 10}")[0]  # slices 0 and 1
    assert across == body[MiB - 10 : MiB + 11]
    assert set(origin[1]) == {(path, f"bytes=0-{MiB - 1}"), (path, f"bytes={MiB}-{2 * MiB - 1}")}
    whole, _ = get(edge.url + path)
    assert whole == body
    assert origin_gets(origin[1], path) == 4  # slices 2 and 3 were new; 0 and 1 came from cache
    assert max(origin[1].values()) == 1
    assert len(edge.origin_requests()) == 4


def test_default_ttl_caches_silent_responses_only_when_asked(origin: OriginFixture) -> None:
    try:
        cdn_edge.nginx_binary()
    except UsageError as exc:
        pytest.skip(str(exc))
    with local_cdn_edge(origin[0], default_ttl_s=3600) as running:
        assert [get(running.url + "/run/silent")[1] for _ in range(2)] == ["MISS", "HIT"]
        assert [get(running.url + "/run/LATEST")[1] for _ in range(2)] == ["MISS", "MISS"]
    assert not running.running()


def test_bad_arguments_and_a_missing_nginx_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    for url in ("https://127.0.0.1:9", "http://127.0.0.1:9/bucket"):
        with pytest.raises(UsageError, match="origin_url"), local_cdn_edge(url):
            pass
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(cdn_edge, "_NGINX_CANDIDATES", ())
    with (
        pytest.raises(UsageError, match=r"scripts/install-nginx\.sh"),
        local_cdn_edge("http://127.0.0.1:9"),
    ):
        pass


def test_an_s3_origin_read_with_presigned_urls(s3_endpoint: str) -> None:
    import boto3

    from wanrl_s3.testing import make_bucket

    try:
        cdn_edge.nginx_binary()
    except UsageError as exc:
        pytest.skip(str(exc))
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    bucket, key = make_bucket(s3_endpoint), "run/v/000000000002/manifest.json"
    s3.put_object(Bucket=bucket, Key=key, Body=b"immutable bytes", CacheControl=IMMUTABLE)
    with local_cdn_edge(s3_endpoint) as running:
        bodies = []
        for expires_in in (600, 900):  # two different signatures for one object
            url = s3.generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=expires_in
            )
            bodies.append(get(url.replace(s3_endpoint, running.url))[0])
        assert bodies == [b"immutable bytes"] * 2
        reached = [r.uri.split("?")[0] for r in running.origin_requests()]
        assert reached == [f"/{bucket}/{key}"]
