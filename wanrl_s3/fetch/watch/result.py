"""What one install reports: the times that make up dissemination as a worker saw it."""

from __future__ import annotations

from dataclasses import dataclass

from ...units import binary_bytes
from .state import Ready


def describe_source(path: tuple[int, ...], downloaded_bytes: int) -> str:
    """Where a ready version's bytes came from, for a person reading the log."""
    if not path:
        return "nothing downloaded (a verified copy already on this host)"
    versions = ", ".join(f"v{v}" for v in path)
    payload = "the payload" if len(path) == 1 else "the payloads"
    return f"downloaded {binary_bytes(downloaded_bytes)} ({payload} of {versions})"


@dataclass(frozen=True, kw_only=True)
class InstallResult:
    """What one install did, with the times that make up dissemination as this worker saw it."""

    version: int
    tensors: int
    path: tuple[int, ...]  # versions whose payload was downloaded
    downloaded_bytes: int
    published_at_s: float  # the manifest's commit time (the publisher's clock)
    seen_at_s: float  # when this worker first saw the version in LATEST
    ready_at_s: float  # downloaded, verified, decoded in host memory
    installed_at_s: float
    download_s: float
    verify_s: float
    apply_s: float

    @classmethod
    def of(cls, ready: Ready, started_s: float, done_s: float) -> InstallResult:
        """The result of applying ``ready`` from ``started_s`` to ``done_s``."""
        snap = ready.snapshot
        return cls(
            version=snap.version,
            tensors=len(snap.tensors),
            path=snap.path,
            downloaded_bytes=snap.downloaded_bytes,
            published_at_s=snap.manifest.created_at_s if snap.manifest else ready.seen_at_s,
            seen_at_s=ready.seen_at_s,
            ready_at_s=ready.ready_at_s,
            installed_at_s=done_s,
            download_s=snap.download_s,
            verify_s=snap.verify_s,
            apply_s=done_s - started_s,
        )

    @property
    def total_s(self) -> float:
        """Seconds from the version's publication to its install here (across two clocks:
        the publisher's and this host's)."""
        return self.installed_at_s - self.published_at_s

    @property
    def source(self) -> str:
        """Where its bytes came from, in words (see :func:`describe_source`)."""
        return describe_source(self.path, self.downloaded_bytes)

    def to_dict(self) -> dict[str, float | int | list[int]]:
        """The figures by name, as the worker's status object records each install."""
        return {
            "version": self.version,
            "tensors": self.tensors,
            "path": list(self.path),
            "downloaded_bytes": self.downloaded_bytes,
            "published_at_s": self.published_at_s,
            "seen_at_s": self.seen_at_s,
            "ready_at_s": self.ready_at_s,
            "installed_at_s": self.installed_at_s,
            "download_s": self.download_s,
            "verify_s": self.verify_s,
            "apply_s": self.apply_s,
        }
