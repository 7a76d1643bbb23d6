"""file:// : a store in a local (or network-mounted) directory.

The same guarantees as S3's conditional writes, from the file system: a create
that must not overwrite is written to a temporary file and hard-linked into
place (``link`` fails if the name exists, atomically); a compare-and-swap takes
an exclusive ``flock`` on the directory, checks the current ETag and renames a
temporary file over the target. Readers never see a half-written object.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

from ..errors import NotFoundError, PreconditionFailedError, StoreError, UsageError
from ..units import MiB
from .retry import RetryPolicy
from .spec import Blob, ObjectInfo, ObjectStore, PendingUpload

_UPLOADS_DIR = ".uploads"
_TMP_PREFIX = ".tmp-"


def _etag_of(st: os.stat_result) -> str:
    return f'"{st.st_mtime_ns:x}-{st.st_size:x}-{st.st_ino:x}"'


class LocalStore(ObjectStore):
    protocol = "file"
    supports_multipart = True
    takes_part_buffers = True
    supports_server_side_copy = True

    def __init__(self, root: str | os.PathLike[str], *, retry: RetryPolicy | None = None) -> None:
        super().__init__(retry)
        self.root = Path(root).resolve()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot use {self.root} as a store: {exc.strerror}") from exc

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """``file:///ABSOLUTE/PATH`` (``localhost`` as the host is fine), or a plain path."""
        if "://" not in url:
            return cls(url, **options)
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost"):
            raise UsageError(f"file:// URLs take an absolute path, e.g. file:///data; got {url}")
        return cls(parts.path, **options)

    @property
    def url(self) -> str:
        return f"file://{self.root}"

    def _path(self, key: str) -> Path:
        return self.root / key

    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                etag = _etag_of(os.fstat(f.fileno()))
                if if_none_match == etag:
                    return None
                return Blob(f.read() if max_read_bytes is None else f.read(max_read_bytes), etag)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise NotFoundError(f"{self.url}/{key} does not exist") from None
        except OSError as exc:
            raise StoreError(f"cannot read {path}: {exc.strerror}") from exc

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        try:
            with open(self._path(key), "rb", buffering=0) as f:
                f.seek(offset)
                return f.readinto(buf) or 0
        except FileNotFoundError:
            raise NotFoundError(f"{self.url}/{key} does not exist") from None

    def _write_tmp(self, directory: Path, data: bytes | bytearray | memoryview) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=directory)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            os.unlink(name)
            raise
        return Path(name)

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        path = self._path(key)
        tmp = self._write_tmp(path.parent, data)
        try:
            if if_none_match:
                return self._link_new(tmp, path, key)
            with self._dir_lock(path.parent):
                if if_match is not None:
                    current = self._head(key)
                    if current is None or current.etag != if_match:
                        raise PreconditionFailedError(f"{self.url}/{key} changed (ETag mismatch)")
                os.replace(tmp, path)
                return _etag_of(path.stat())
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _link_new(self, tmp: Path, path: Path, key: str) -> str:
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise PreconditionFailedError(f"{self.url}/{key} already exists") from None
        return _etag_of(path.stat())

    @contextlib.contextmanager
    def _dir_lock(self, directory: Path) -> Iterator[None]:
        fd = os.open(directory, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _head(self, key: str) -> ObjectInfo | None:
        try:
            st = self._path(key).stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not os.path.isfile(self._path(key)):
            return None
        return ObjectInfo(key, st.st_size, _etag_of(st), st.st_mtime)

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        base = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not base.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                if name.startswith("."):
                    continue
                key = os.path.relpath(os.path.join(dirpath, name), self.root).replace(os.sep, "/")
                if key.startswith(prefix):
                    st = os.stat(os.path.join(dirpath, name))
                    yield ObjectInfo(key, st.st_size, _etag_of(st), st.st_mtime)

    def _delete(self, keys: list[str]) -> None:
        for key in keys:
            with contextlib.suppress(FileNotFoundError):
                self._path(key).unlink()

    # Multipart: parts are files in <root>/.uploads/<id>/, joined on complete.
    def _upload_dir(self, upload_id: str) -> Path:
        return self.root / _UPLOADS_DIR / upload_id

    def _mpu_create(self, key: str) -> str:
        upload_id = uuid.uuid4().hex
        directory = self._upload_dir(upload_id)
        directory.mkdir(parents=True)
        (directory / "key").write_text(key)
        return upload_id

    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes | bytearray) -> str:
        directory = self._checked_upload(key, upload_id)
        part = self._write_tmp(directory, data)
        os.replace(part, directory / f"{part_number:05d}.part")
        return f'"{part_number}-{len(data)}"'

    def _mpu_complete(self, key: str, upload_id: str, parts: list[tuple[int, str]]) -> str:
        directory = self._checked_upload(key, upload_id)
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                for number, _ in sorted(parts):
                    with open(directory / f"{number:05d}.part", "rb") as part:
                        shutil.copyfileobj(part, out, 16 * MiB)
                out.flush()
                os.fsync(out.fileno())
            os.replace(name, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name)
            raise
        shutil.rmtree(directory, ignore_errors=True)
        return _etag_of(path.stat())

    def _mpu_abort(self, key: str, upload_id: str) -> None:
        shutil.rmtree(self._upload_dir(upload_id), ignore_errors=True)

    def _mpu_list(self, prefix: str) -> Iterator[PendingUpload]:
        uploads = self.root / _UPLOADS_DIR
        if not uploads.is_dir():
            return
        for directory in uploads.iterdir():
            try:
                key = (directory / "key").read_text()
                started = directory.stat().st_mtime
            except OSError:
                continue
            if key.startswith(prefix):
                yield PendingUpload(key, directory.name, started)

    def _checked_upload(self, key: str, upload_id: str) -> Path:
        directory = self._upload_dir(upload_id)
        try:
            if (directory / "key").read_text() == key:
                return directory
        except OSError:
            pass
        raise NotFoundError(f"no multipart upload {upload_id} for {key}")

    def _copy(self, src_key: str, dst_key: str) -> None:
        src = self._path(src_key)
        if not src.is_file():
            raise NotFoundError(f"{self.url}/{src_key} does not exist")
        dst = self._path(dst_key)
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.parent / f"{_TMP_PREFIX}{uuid.uuid4().hex}"
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
