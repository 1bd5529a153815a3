"""Output directories named by an fsspec URL (``memory://``, ``s3://bucket/prefix``, ...).

``out_dir`` may be a URL: the bodies and files go to that filesystem, under the
same names :class:`~litfetch_df.frame.io.outdir.OutDir` gives on a local disk, and
the ``body_path`` / ``path`` cells hold their URLs. ``file://`` URLs are the local
disk and never come here (:func:`litfetch_df.frame.io.outdir.open_out`).

A file appears under its final name whole or not at all:

* on an object store (S3, GCS, Azure, the in-memory filesystem) an object
  appears only when its upload completes, so the finished bytes go in one put
  (a download is streamed to a local temporary file first, then put);
* on any other filesystem (SFTP, HDFS, ...) the bytes go to a hidden
  ``.<name>.<random>.part`` beside the final name, which is then moved into place
  (what such a filesystem calls a rename). A run killed mid-write may leave
  such a hidden file: unlike on a local disk, where a writer's lock tells its
  files from leftovers, they are not swept (the partitions of a Dask run
  write into one directory at once).

fsspec is imported only here, only when a URL is given; without it the call
fails at once, saying what to install. Paths are built from the same safe,
single-component names as on disk, so nothing can leave the URL's prefix.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from ...store.atomic import PART_SUFFIX
from .outdir import Names

__all__ = [
    "OBJECT_STORES",
    "Staged",
    "UrlOutDir",
    "filesystem",
    "is_url",
    "read_location",
    "size_of",
]

OBJECT_STORES: Final = frozenset(
    {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oci", "memory"}
)
"""Protocols whose objects appear only when their upload completes: one put is atomic."""


def is_url(location: object) -> bool:
    """Return whether ``location`` is a URL with a scheme other than ``file`` (a filesystem's).

    A Windows drive letter (``C:\\data``) is a path, not a scheme.
    """
    if not isinstance(location, str) or "://" not in location:
        return False
    scheme = location.split("://", 1)[0]
    return len(scheme) > 1 and scheme.isascii() and scheme.lower() != "file"


def filesystem(url: str) -> tuple[Any, str]:
    """Return the fsspec filesystem for ``url`` and the path on it.

    Raises :class:`ImportError` naming the package to install when fsspec
    (or the filesystem's own package, e.g. s3fs) is missing.
    """
    try:
        import fsspec.core
    except ImportError:
        raise ImportError(
            f"out_dir {url.split('://', 1)[0]}:// needs fsspec: pip install fsspec "
            "(it comes with 'litfetch_df[dask]'), plus the filesystem's own package "
            "(s3fs for s3://, gcsfs for gs://)"
        ) from None
    fs, path = fsspec.core.url_to_fs(url)
    return fs, str(path)


def _protocols(fs: Any) -> set[str]:
    given = fs.protocol
    return {given} if isinstance(given, str) else set(given)


def read_location(location: str) -> bytes:
    """Return the bytes of the file at ``location`` (a local path or a URL)."""
    if is_url(location):
        fs, path = filesystem(location)
        data: bytes = fs.cat_file(path)
        return data
    return Path(location).read_bytes()


def size_of(location: str) -> int:
    """Return the size in bytes of the file at ``location`` (a local path or a URL)."""
    if is_url(location):
        fs, path = filesystem(location)
        return int(fs.size(path))
    return Path(location).stat().st_size


class Staged:
    """Where one download to a URL goes first: a local temporary file, put on :meth:`commit`.

    :attr:`path` is the local file to write (whole, e.g. by
    ``Session.fetch_file_to``); :meth:`commit` sends it to ``location`` and
    returns ``location``. The local file is removed when the block ends.
    """

    def __init__(self, out: UrlOutDir, location: str) -> None:
        self._out = out
        self.location = location
        self._dir = Path(tempfile.mkdtemp(prefix="litfetch-stage-"))
        self.path = self._dir / "file"

    def commit(self) -> str:
        """Send the finished local file to its URL (atomically, as the filesystem allows)."""
        self._out.put_file(self.path, self.location)
        return self.location

    def close(self) -> None:
        """Remove the local temporary file and its directory (idempotent)."""
        shutil.rmtree(self._dir, ignore_errors=True)


class UrlOutDir(Names):
    """An output directory on an fsspec filesystem: the names of a local one, written there.

    ``url`` is the directory's URL (``memory://run-1``, ``s3://bucket/bodies``);
    every location it hands out is that URL plus a safe relative name.
    """

    def __init__(self, url: str) -> None:
        super().__init__()
        self.root = url.rstrip("/")
        self._fs, self._base = filesystem(self.root)
        self._base = self._base.rstrip("/")
        self._one_put = bool(_protocols(self._fs) & OBJECT_STORES)
        with contextlib.suppress(Exception):  # object stores have no directories to make
            self._fs.makedirs(self._base, exist_ok=True)

    def __repr__(self) -> str:
        return f"UrlOutDir({self.root!r})"

    def _locate(self, parts: list[str]) -> str:
        return "/".join([self.root, *parts])

    def _fs_path(self, location: str) -> str:
        if not location.startswith(self.root + "/"):
            raise ValueError(f"refusing to write outside the output directory: {location!r}")
        return self._base + location[len(self.root) :]

    def _temp_beside(self, path: str) -> str:
        folder, _, name = path.rpartition("/")
        return f"{folder}/.{name}.{secrets.token_hex(4)}{PART_SUFFIX}"

    def write_to(self, location: str, data: bytes) -> str:
        """Write ``data`` at ``location`` (from this object), whole or not at all; return it."""
        path = self._fs_path(location)
        if self._one_put:
            self._fs.pipe_file(path, data)
            return location
        temp = self._temp_beside(path)
        try:
            self._fs.pipe_file(temp, data)
            self._fs.mv(temp, path)
        except BaseException:
            with contextlib.suppress(Exception):
                self._fs.rm_file(temp)
            raise
        return location

    def put_file(self, local: Path, location: str) -> None:
        """Send the local file ``local`` to ``location``, whole or not at all."""
        path = self._fs_path(location)
        if self._one_put:
            self._fs.put_file(str(local), path)
            return
        temp = self._temp_beside(path)
        try:
            self._fs.put_file(str(local), temp)
            self._fs.mv(temp, path)
        except BaseException:
            with contextlib.suppress(Exception):
                self._fs.rm_file(temp)
            raise

    def remove(self, location: str) -> None:
        """Remove the file at ``location`` if it lies in this directory (quietly if absent)."""
        with contextlib.suppress(Exception):
            self._fs.rm_file(self._fs_path(location))

    @contextlib.contextmanager
    def staged(self, location: str) -> Iterator[Staged]:
        """Yield a local file to download into; :meth:`Staged.commit` sends it to ``location``."""
        stage = Staged(self, location)
        try:
            yield stage
        finally:
            stage.close()
