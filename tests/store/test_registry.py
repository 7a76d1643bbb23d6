"""open_store: a scheme is a registry lookup, and the class parses its own URL.

Options a backend does not take are dropped, for a third-party scheme as for
ours, so one set of CLI flags serves every store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from wanrl_s3.errors import UsageError
from wanrl_s3.store import RetryPolicy, accepted_options, open_store, register_implementation
from wanrl_s3.store import registry as registry_module
from wanrl_s3.store.local import LocalStore

from .minimal import DictStore

CLI_OPTIONS: dict[str, Any] = {
    "endpoint_url": "http://127.0.0.1:9",
    "profile": None,
    "region": None,
}


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registrations made by a test are forgotten after it."""
    monkeypatch.setattr(registry_module, "_registry", dict(registry_module._registry))
    monkeypatch.setattr(
        registry_module, "known_implementations", dict(registry_module.known_implementations)
    )


@pytest.mark.usefixtures("registry")
def test_a_third_party_scheme_gets_only_the_options_its_signature_takes() -> None:
    register_implementation("dict", DictStore)
    retry = RetryPolicy(max_attempts=2)
    store = open_store("dict://bucket", **CLI_OPTIONS, retry=retry, color="red")
    assert isinstance(store, DictStore)
    assert (store.name, store.color, store.retry) == ("bucket", "red", retry)
    assert accepted_options(DictStore) == {"retry", "color"}


@pytest.mark.usefixtures("registry")
def test_declared_option_names_win_over_the_signature() -> None:
    class OnlyColor(DictStore):
        open_options = frozenset({"color"})

    register_implementation("color", OnlyColor)
    store = open_store("color://b", retry=RetryPolicy(max_attempts=2), color="blue")
    assert isinstance(store, OnlyColor)
    assert store.color == "blue" and store.retry == RetryPolicy()  # retry was not declared


@pytest.mark.usefixtures("registry")
def test_a_constructor_that_takes_any_option_gets_every_one_given() -> None:
    class TakesAll(DictStore):
        def __init__(self, url: str, **options: Any) -> None:
            super().__init__(url)
            self.options = options

    register_implementation("all", TakesAll)
    store = open_store("all://b", **CLI_OPTIONS)
    assert isinstance(store, TakesAll)
    assert store.options == {"endpoint_url": "http://127.0.0.1:9"}  # None means "not given"


@pytest.mark.usefixtures("registry")
def test_registering_twice_or_a_non_store_is_refused() -> None:
    with pytest.raises(UsageError, match="already registered"):
        register_implementation("s3", DictStore)
    with pytest.raises(UsageError, match="not an ObjectStore subclass"):
        register_implementation("bad", dict)  # type: ignore[arg-type]
    register_implementation("late", "tests.store.minimal.Missing", "pip install late-store")
    with pytest.raises(AttributeError):
        open_store("late://b")
    register_implementation("gone", "no_such_module.Store", "gone:// needs gone: pip install gone")
    with pytest.raises(UsageError, match="pip install gone"):
        open_store("gone://b")


@pytest.mark.parametrize(
    "scheme, expected",
    [
        ("s3", {"endpoint_url", "profile", "region", "retry", "max_connections", "read_timeout_s"}),
        ("gs", {"endpoint_url", "retry", "max_connections", "read_timeout_s"}),
        ("az", {"endpoint_url", "retry", "max_connections", "read_timeout_s"}),
        ("file", {"retry"}),
        ("memory", {"retry"}),
    ],
)
def test_our_backends_take_the_cli_options_that_concern_them(
    scheme: str, expected: set[str]
) -> None:
    from wanrl_s3.store import get_store_class

    assert expected <= (accepted_options(get_store_class(scheme)) or set())


def test_a_plain_path_is_a_file_store(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "runs"), **CLI_OPTIONS)
    assert isinstance(store, LocalStore) and store.root == tmp_path / "runs"


@pytest.mark.parametrize(
    "url, needle",
    [
        ("", "a store URL is required"),
        ("ftp://host/x", "unknown store protocol 'ftp'"),
        ("file://host/data", "file:// URLs take an absolute path"),
        ("s3:///prefix", "needs a bucket"),
        ("gs:///prefix", "needs a bucket or container"),
    ],
)
def test_a_bad_url_is_one_line_naming_the_fix(url: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle) as caught:
        open_store(url, **CLI_OPTIONS)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("alias, scheme", [("s3a", "s3"), ("local", "file"), ("gcs", "gs")])
def test_aliases_name_the_same_class(alias: str, scheme: str) -> None:
    from wanrl_s3.store import get_store_class

    assert get_store_class(alias) is get_store_class(scheme)


@pytest.mark.parametrize("bucket", ["Bad_Bucket!!", "a b", "x" * 256, "ü"])
def test_a_bucket_name_botocore_would_refuse_is_a_usage_error_before_any_io(bucket: str) -> None:
    with pytest.raises(UsageError, match="not a bucket name") as caught:
        open_store(f"s3://{bucket}/x", endpoint_url="http://127.0.0.1:9")  # nothing listens
    assert "\n" not in str(caught.value)
