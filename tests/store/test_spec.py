"""ObjectStore is an ABC: a backend missing a primitive is refused where it is made.

A capability flag and its optional primitives go together, checked when the
class is defined, so a backend never promises what it lacks nor hides what it has.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from wanrl_s3.store import ObjectStore, PendingUpload

from .minimal import DictStore

PRIMITIVES = ["url", "_get", "_read_into", "_put", "_head", "_list", "_delete"]


def _subclass(name: str, namespace: dict[str, Any], base: type = ObjectStore) -> type:
    return type(name, (base,), namespace)


def test_the_primitives_are_exactly_the_abstract_methods() -> None:
    assert sorted(ObjectStore.__abstractmethods__) == sorted(PRIMITIVES)


@pytest.mark.parametrize("missing", PRIMITIVES)
def test_a_subclass_missing_a_primitive_cannot_be_instantiated(missing: str) -> None:
    primitives = {name: vars(DictStore)[name] for name in PRIMITIVES}
    partial = _subclass(f"Without{missing}", {k: v for k, v in primitives.items() if k != missing})
    with pytest.raises(TypeError, match=missing):
        partial()
    assert isinstance(_subclass("Complete", primitives)(), ObjectStore)


def test_a_declared_capability_without_its_primitives_is_refused_at_definition() -> None:
    with pytest.raises(TypeError, match=r"supports_multipart.*_mpu_create"):
        _subclass("Promises", {"supports_multipart": True}, DictStore)


def test_an_optional_primitive_without_its_flag_is_refused_at_definition() -> None:
    def _copy_from(self: ObjectStore, source: ObjectStore, src_key: str, dst_key: str) -> bool:
        return True

    with pytest.raises(TypeError, match=r"_copy_from.*supports_copy_from"):
        _subclass("Hides", {"_copy_from": _copy_from}, DictStore)

    def _mpu_list(self: ObjectStore, prefix: str) -> Iterator[PendingUpload]:
        return iter(())

    with pytest.raises(TypeError, match=r"_mpu_list.*supports_multipart"):
        _subclass("HalfMultipart", {"_mpu_list": _mpu_list}, DictStore)


@pytest.mark.parametrize("scheme", ["memory", "file", "s3", "gs", "az"])
def test_our_backends_declare_what_they_implement(scheme: str) -> None:
    from wanrl_s3.store import get_store_class

    cls = get_store_class(scheme)
    assert not cls.__abstractmethods__
    assert cls.supports_multipart  # every one of ours uploads parts in parallel
    assert cls.supports_copy_from == (scheme in ("s3", "gs", "az"))
