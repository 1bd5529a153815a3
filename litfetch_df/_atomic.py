"""Writing a file whole or not at all: a hidden ``.part`` file beside it, then a rename.

A reader (or an interrupted run) never sees half a file under its final name:
the bytes go to ``.<name>.<random>.part`` in the same directory and are moved
into place with :func:`os.replace` (atomic on one filesystem) only when all of
them were written; on any error the temporary file is removed. A run killed
mid-write leaves its ``.part`` file behind, which the output directory's next
user sweeps (:func:`litfetch_df.frame.outdir.remove_leftovers`).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Final

__all__ = ["PART_SUFFIX", "PartFile", "open_part", "part_name", "write_atomic"]

PART_SUFFIX: Final = ".part"
"""The suffix of every temporary file this module writes (after a leading dot)."""


def part_name(path: Path) -> Path:
    """Return a fresh temporary name beside ``path``: ``.<name>.<8 hex>.part``."""
    return path.parent / f".{path.name}.{secrets.token_hex(4)}{PART_SUFFIX}"


class PartFile:
    """A temporary ``.part`` file beside ``target``, moved into place only by :meth:`commit`.

    Use it as a context manager: leaving the block without :meth:`commit` (an
    error, a refused answer) closes and removes the temporary file and leaves
    ``target`` as it was. :attr:`fh` is the open file, :attr:`tmp` its name.
    """

    def __init__(self, target: Path) -> None:
        self.target = target
        target.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = part_name(target)
        # os.open with 0o666, not mkstemp (always 0600): the umask decides, as for any file.
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        self.fh: BinaryIO = os.fdopen(fd, "wb")
        self._done = False

    def rewind(self) -> None:
        """Throw away what was written so far (a retried transfer starts again)."""
        self.fh.seek(0)
        self.fh.truncate()

    def commit(self) -> Path:
        """Close the file and move it to ``target`` (atomically); return ``target``."""
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
