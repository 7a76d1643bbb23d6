"""A progress line on stderr for long transfers, only when stderr is a terminal."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class ProgressBar:
    """Thread-safe byte counter that redraws one line at most ten times a second."""

    def __init__(
        self,
        total_bytes: int,
        label: str,
        stream: TextIO | None = None,
        enabled: bool | None = None,
    ) -> None:
        self.total_bytes = max(1, total_bytes)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty() if enabled is None else enabled
        self.done_bytes = 0
        self._start = time.monotonic()
        self._drawn = 0.0
        self._lock = threading.Lock()

    def update(self, n_bytes: int) -> None:
        with self._lock:
            self.done_bytes += n_bytes
            now = time.monotonic()
            if self.enabled and (now - self._drawn >= 0.1 or self.done_bytes >= self.total_bytes):
                self._drawn = now
                self._draw(now)

    def _draw(self, now: float) -> None:
        frac = min(1.0, self.done_bytes / self.total_bytes)
        rate = self.done_bytes / max(now - self._start, 1e-9) / 1e6
        bar = "#" * int(frac * 30)
        self.stream.write(
            f"\r{self.label} [{bar:<30}] {frac:6.1%} "
            f"{self.done_bytes / 1e6:,.0f}/{self.total_bytes / 1e6:,.0f} MB "
            f"{rate:,.0f} MB/s"
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
