"""Helpers for the multi-region tests: small models, regions files, a fake replicator.

Kept free of fixtures so that each test module imports what it needs.
"""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import boto3
import ml_dtypes
import numpy as np

from wanrl_s3.format import layout
from wanrl_s3.publish.publisher import PublishConfig
from wanrl_s3.regions.config import Region, RegionsConfig
from wanrl_s3.store import ObjectStore
from wanrl_s3.testing.synthetic import nudge_state

KiB = 2**10
# Small objects, so that a version spans several payload objects to replicate out of order.
SMALL = PublishConfig(keyframe_every=100, object_bytes=48 * KiB, concurrency=4)


def model(seed: int, kib: int = 32, n: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        f"layers.{i}.w": rng.integers(0, 2**16, kib * KiB // 2, np.uint16).view(ml_dtypes.bfloat16)
        for i in range(n)
    }


def nudge(state: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    """The next policy: 2% of the values moved by one ulp (a sparse delta)."""
    return nudge_state(state, 0.02, seed=seed)


def one_pass(state: dict[str, np.ndarray], seen: list[str]) -> Iterator[tuple[str, np.ndarray]]:
    """A generator over the tensors that can be read once only (records what it yielded)."""
    for name, arr in state.items():
        seen.append(name)
        yield name, arr


def same(got: Mapping[str, np.ndarray], want: Mapping[str, np.ndarray]) -> bool:
    """Bit for bit the same tensors."""
    return set(got) == set(want) and all(got[k].tobytes() == want[k].tobytes() for k in want)


def new_bucket_url(endpoint: str) -> str:
    name = f"wanrl-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=name)
    return f"s3://{name}/runs/r1"


def three_regions(
    endpoint: str, mode: str, *, endpoints: dict[str, str] | None = None
) -> RegionsConfig:
    """use1 (primary), euw1, apne1: a bucket each, on ``endpoint`` unless ``endpoints`` says."""
    endpoints = endpoints or {}
    regions = []
    for name, s3_region in (
        ("use1", "us-east-1"),
        ("euw1", "eu-west-1"),
        ("apne1", "ap-northeast-1"),
    ):
        url_endpoint = endpoints.get(name, endpoint)
        regions.append(
            Region(
                name, new_bucket_url(url_endpoint), s3_region, url_endpoint, "", f"aws:{s3_region}"
            )
        )
    return RegionsConfig("use1", mode, tuple(regions))


def write_regions(path: Path, config: RegionsConfig) -> Path:
    """The regions file as `terraform output -raw regions_toml` writes it."""
    lines = [
        f'primary = "{config.primary}"',
        f'mode = "{config.mode}"            # fanout | replicate | copy',
    ]
    for r in config.regions:
        lines += [
            "",
            f"[regions.{r.name}]",
            f'url = "{r.url}"',
            f's3_region = "{r.s3_region}"',
            f'endpoint_url = "{r.endpoint_url}"',
            f'profile = "{r.profile}"',
            f'price_class = "{r.price_class}"',
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def wait_for(predicate: Callable[[], object], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


class FakeReplicator:
    """Bucket replication as S3 does it: object by object, in no particular order.

    Each call copies what the source has and the replica lacks (payload,
    manifests and LATEST alike) in a random order, through real requests.
    ``adversarial`` puts LATEST and the manifests first, before any payload.
    """

    def __init__(
        self,
        source: ObjectStore,
        replica: ObjectStore,
        rng: random.Random,
        *,
        adversarial: bool = False,
    ) -> None:
        self.source, self.replica, self.rng = source, replica, rng
        self.adversarial = adversarial

    def pending(self) -> list[str]:
        have = {o.key: o.etag for o in self.replica.list("")}
        keys = [
            o.key
            for o in self.source.list("")
            if o.key == layout.LATEST_KEY or o.key.startswith(layout.VERSIONS_DIR + "/")
        ]
        keys = [k for k in keys if k not in have or k == layout.LATEST_KEY]
        self.rng.shuffle(keys)
        if self.adversarial:
            keys.sort(
                key=lambda k: (
                    0 if k == layout.LATEST_KEY else 1 if k.endswith(layout.MANIFEST_NAME) else 2
                )
            )
        return keys

    def copy(self, key: str) -> None:
        self.replica.put_bytes(key, self.source.get_bytes(key))

    def steps(self) -> Iterator[str]:
        """Copy one object per step; yields its key after it landed."""
        for key in self.pending():
            self.copy(key)
            yield key

    def run(self) -> None:
        for _ in self.steps():
            pass


class SlowProxy:
    """A TCP proxy to 127.0.0.1:``port`` that holds every chunk back ``delay_s``: a far region."""

    def __init__(self, port: int, delay_s: float) -> None:
        self.target, self.delay_s = port, delay_s
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client, socket.create_connection(("127.0.0.1", self.target)) as upstream:
            back = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
            back.start()
            self._pump(client, upstream)
            back.join()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := src.recv(1 << 16):
                time.sleep(self.delay_s)
                dst.sendall(chunk)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed.set()
        self._server.close()


def closed_port() -> int:
    """A local port nothing listens on: connections are refused (an unreachable region)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
