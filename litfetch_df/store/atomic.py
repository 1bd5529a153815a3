"""Writing a file whole or not at all: a hidden ``.part`` file beside it, then a rename.

A reader (or an interrupted run) never sees half a file under its final name:
the bytes go to ``.<name>.<random>.part`` in the same directory and are moved
into place with :func:`os.replace` (atomic on one filesystem) only when all of
them were written; on any error the temporary file is removed. A run killed
mid-write leaves its ``.part`` file behind, which the output directory's next
user sweeps (:func:`litfetch_df.frame.io.outdir.remove_leftovers`); a writer holds
an advisory lock on its ``.part`` file while it writes, so a sweep by another
writer of the same directory (another thread, process or Dask partition)
leaves it alone.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

fcntl: Any
if sys.platform != "win32":
    import fcntl
else:  # no advisory locks: a sweep takes every leftover
    fcntl = None

__all__ = [
    "PART_SUFFIX",
    "DigestSink",
    "PartFile",
    "abandoned",
    "open_part",
    "part_name",
    "write_atomic",
]

PART_SUFFIX: Final = ".part"
"""The suffix of every temporary file this module writes (after a leading dot)."""


def part_name(path: Path) -> Path:
    """Return a fresh temporary name beside ``path``: ``.<name>.<8 hex>.part``."""
    return path.parent / f".{path.name}.{secrets.token_hex(4)}{PART_SUFFIX}"


def _lock(fd: int, *, wait: bool) -> bool | None:
    """Take an exclusive advisory lock on ``fd``: ``True`` held, ``False`` someone else holds
    it, ``None`` this platform or filesystem has no such locks."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


def _create_held(target: Path) -> tuple[Path, int]:
    """Create a fresh ``.part`` name beside ``target``, open and locked for as long as it is open.

    The lock tells a sweeper of leftovers (:func:`abandoned`) that a live writer
    owns the file: many writers (threads, processes, Dask partitions) share
    one output directory, and each sweeps it when it opens it.
    """
    for _ in range(5):
        tmp = part_name(target)
        # os.open with 0o666, not mkstemp (always 0600): the umask decides, as for any file.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        _lock(fd, wait=True)
        if os.fstat(fd).st_nlink > 0:
            return tmp, fd
        os.close(fd)  # a sweeper removed it between its creation and our lock: another name
    raise OSError(f"could not keep a temporary file beside {target.name!r}")


def abandoned(path: str | os.PathLike[str]) -> bool:
    """Return whether no live writer holds the ``.part`` file at ``path`` (so it may go).

    Where advisory locks are missing (some network filesystems, Windows), every
    leftover counts as abandoned, as it did before writers held locks.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return _lock(fd, wait=False) is not False
    finally:
        os.close(fd)  # closing gives the lock back


class PartFile:
    """A temporary ``.part`` file beside ``target``, moved into place only by :meth:`commit`.

    Use it as a context manager: leaving the block without :meth:`commit` (an
    error, a refused answer) closes and removes the temporary file and leaves
    ``target`` as it was. :attr:`fh` is the open file, :attr:`tmp` its name.
    """

    def __init__(self, target: Path) -> None:
        self.target = target
        target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp, fd = _create_held(target)
        self.fh: BinaryIO = os.fdopen(fd, "wb")
        self._done = False

    def rewind(self) -> None:
        """Throw away what was written so far (a retried transfer starts again)."""
        self.fh.seek(0)
        self.fh.truncate()

    def commit(self) -> Path:
        """Move the file to ``target`` (atomically) and close it; return ``target``."""
        self.fh.flush()
        if fcntl is not None:
            # Moved while still open, so still locked: closed first, its unlocked .part is
            # what another writer's sweep (a Dask partition opening the same directory)
            # takes for a killed run's leftover and removes before it could be moved.
            os.replace(self.tmp, self.target)
            self.fh.close()
        else:
            # Without advisory locks there is nothing to hold, and an open file may not be
            # replaced on every platform.
            self.fh.close()
            os.replace(self.tmp, self.target)
        self._done = True
        return self.target

    def discard(self) -> None:
        """Close and remove the temporary file, if it was not committed (idempotent)."""
        if self._done:
            return
        self._done = True
        with contextlib.suppress(OSError):
            self.fh.close()
        with contextlib.suppress(OSError):
            os.unlink(self.tmp)

    def __enter__(self) -> PartFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


@contextlib.contextmanager
def open_part(path: Path) -> Iterator[tuple[BinaryIO, Path]]:
    """Open a temporary ``.part`` file beside ``path``; on a clean exit move it to ``path``.

    Yields the open file and its temporary path. On any error (or an
    interrupt) the temporary file is removed and ``path`` is left as it was.
    The file is created with the usual ``0666`` less the umask, like any file
    the user writes.
    """
    with PartFile(path) as part:
        yield part.fh, part.tmp
        part.commit()


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and a rename.

    ``path`` holds either its old content or all of ``data``. Durability
    (fsync) is not forced: a crash may lose a file but never leaves a truncated
    one under the final name.
    """
    with open_part(path) as (fh, _tmp):
        fh.write(data)


class DigestSink:
    """Where a download goes: a ``.part`` file, its bytes counted and hashed on the way."""

    def __init__(self, part: PartFile) -> None:
        self._part = part
        self.size = 0
        self.digest = hashlib.sha256()

    def rewind(self) -> None:
        self._part.rewind()
        self.size = 0
        self.digest = hashlib.sha256()

    def write(self, data: bytes, /) -> None:
        # A plain write: it lands in the page cache in microseconds, far below a handoff
        # to a thread per chunk.
        self._part.fh.write(data)
        self.size += len(data)
        self.digest.update(data)
