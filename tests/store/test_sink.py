"""A ranged GET's answer is used only when it holds the bytes asked for."""

from __future__ import annotations

import pytest

from wanrl_s3.errors import StoreError
from wanrl_s3.store.sink import ranged_response


class Answer:
    """The parts of a requests or azure-core response that ranged_response reads."""

    def __init__(self, status_code: int, content_range: str = "", length: int = 0) -> None:
        self.status_code = status_code
        self.headers = {"content-range": content_range, "content-length": str(length)}
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Refused(Exception):
    pass


def _refuse(response: Answer) -> Exception:
    return Refused(response.status_code)


def test_the_range_asked_for_is_used() -> None:
    answer = Answer(206, "bytes 100-199/1000", 100)
    assert ranged_response(answer, 100, 100, "s://b", _refuse) is answer
    assert not answer.closed


def test_a_range_cut_short_by_the_end_of_the_object_is_used() -> None:
    answer = Answer(206, "bytes 900-999/1000", 100)  # asked for 200: the caller checks the size
    assert ranged_response(answer, 900, 200, "s://b", _refuse) is answer


def test_past_the_end_is_none() -> None:
    answer = Answer(416)
    assert ranged_response(answer, 5000, 100, "s://b", _refuse) is None
    assert answer.closed


@pytest.mark.parametrize(
    ("content_range", "length"),
    [("bytes 0-99/1000", 100), ("bytes 100-299/1000", 200), ("", 100)],
    ids=["another start", "more than asked", "no range at all"],
)
def test_another_range_is_refused(content_range: str, length: int) -> None:
    answer = Answer(206, content_range, length)
    with pytest.raises(StoreError, match="asked for 100 bytes from 100"):
        ranged_response(answer, 100, 100, "s://b", _refuse)
    assert answer.closed  # never back in the pool with a body unread


@pytest.mark.parametrize("status", [200, 403, 404, 503])
def test_any_other_status_is_the_sdks_error(status: int) -> None:
    with pytest.raises(Refused):
        ranged_response(Answer(status), 0, 100, "s://b", _refuse)
