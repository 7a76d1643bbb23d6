"""Progress lines: drawn on a terminal, silent otherwise, and fed by publish."""

from __future__ import annotations

import io

import numpy as np

from wanrl_s3.cli.progress import ProgressBar
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_draws_only_on_a_terminal() -> None:
    quiet, loud = io.StringIO(), Tty()
    for stream in (quiet, loud):
        bar = ProgressBar(1000, "pull v1", stream=stream)
        bar.update(400)
        bar.update(600)
        bar.close()
    assert quiet.getvalue() == ""
    assert "100.0%" in loud.getvalue() and loud.getvalue().endswith("\n")


def test_publish_reports_every_tensor_byte() -> None:
    seen: list[int] = []
    tensors = {"a": np.zeros(10, np.float32), "b": np.zeros((3, 3), np.int64)}
    Publisher(open_store("memory://progress"), PublishConfig(delta="never")).publish(
        tensors, 1, progress=seen.append
    )
    assert sorted(seen) == [40, 72]
