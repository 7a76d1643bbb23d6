"""The publication thread: finishing waits for the thread itself, not only its future.

The thread resolves its future, then drops the job (a trainer's host copy: torch
tensors, which free their memory with the GIL released). Finishing, as the
interpreter's exit does, must wait for that too, or the interpreter finalizes
under the thread and CPython ends it mid-free (``pthread_exit`` through torch's C++
frames: SIGABRT). What runs when is decided by events here, never by timing.
"""

from __future__ import annotations

import threading
from functools import partial

from wanrl_s3.trainer.background import Background


class Held:
    """What a job holds; dropping it waits for the test's go."""

    def __init__(self) -> None:
        self.dropping = threading.Event()
        self.go = threading.Event()

    def __del__(self) -> None:
        self.dropping.set()
        self.go.wait(30)


def publish(started: threading.Event, held: Held) -> str:
    """A publication that starts once the test holds no reference to ``held``."""
    assert started.wait(10)
    return "published"


def test_finish_returns_only_once_the_thread_has_dropped_its_job() -> None:
    held, started = Held(), threading.Event()
    dropping, go = held.dropping, held.go
    background = Background(close_wait_s=60)
    future = background.start(1, partial(publish, started, held))
    del held  # the job holds the last reference: the thread drops it after the future
    started.set()
    assert future.result(10) == "published"
    assert dropping.wait(10), "the thread never dropped its job"
    finished: list[bool] = []
    closer = threading.Thread(target=lambda: finished.append(background.finish()))
    closer.start()
    closer.join(0.5)  # without the wait on the thread, finish is long done by now
    blocked = closer.is_alive()
    go.set()
    closer.join(10)
    assert blocked, "finish returned while the publication thread was still dropping its job"
    assert finished == [True]


def test_finish_from_the_publication_thread_itself_does_not_wait_for_itself() -> None:
    background = Background(close_wait_s=60)
    gate, done = threading.Event(), threading.Event()
    called: list[tuple[str, bool]] = []
    future = background.start(1, partial(gate.wait, 10))

    def close_in_callback(_: object) -> None:  # run by the publication thread
        called.append((threading.current_thread().name, background.finish()))
        done.set()

    future.add_done_callback(close_in_callback)
    gate.set()
    assert done.wait(10)
    assert called == [("wanrl-publish-v1", True)]
