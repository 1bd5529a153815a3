"""Which output directory an ``out_dir`` names: the local disk, or an fsspec filesystem.

:func:`open_out` is what the steps call: a path or a ``file://`` URL gives an
:class:`~litfetch_df.frame.io.outdir.OutDir` (atomic renames, no fsspec needed),
any other URL (``memory://``, ``s3://``) a
:class:`~litfetch_df.frame.io.urlout.UrlOutDir`. Both hand out the same names and
answer the :class:`Out` protocol the steps use.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

from ...files import File
from ...ids import ArticleIds
from .outdir import OutDir
from .urlout import UrlOutDir, is_url

__all__ = ["Out", "Stage", "open_out"]


class Stage(Protocol):
    """A download's way into the output: a local file to write, then :meth:`commit`."""

    @property
    def path(self) -> Path:
        """The local file the download writes (whole, renamed into place by the download)."""
        ...

    def commit(self) -> str:
        """Publish the written file; return its location (what the ``path`` cell holds)."""
        ...


class Out(Protocol):
    """What the bodies and downloads steps need of an output directory."""

    def locate(self, name: str) -> str:
        """Return the location of the file ``name`` directly under the directory."""
        ...

    def reserve_bodies(
        self, bundles: Iterable[ArticleIds], provisional: Collection[int] = ()
    ) -> None:
        """Decide every bundle's body name in row order (``provisional``: half resolved)."""
        ...

    def hold_body(self, ids: ArticleIds, location: str) -> None:
        """Keep any other article's body from being written at ``location`` (kept from before)."""
        ...

    def body_location(self, ids: ArticleIds, media_type: str | None) -> str:
        """Return where an article's body goes."""
        ...

    def file_location(self, ids: ArticleIds, file: File) -> str:
        """Return where a file-set member goes."""
        ...

    def write_to(self, location: str, data: bytes) -> str:
        """Write ``data`` at ``location`` whole or not at all; return the location written."""
        ...

    def remove(self, location: str) -> None:
        """Remove an earlier file at ``location`` (quietly if absent)."""
        ...

    def staged(self, location: str) -> AbstractContextManager[Stage]:
        """Return a context giving the local file a download into ``location`` writes."""
        ...


def open_out(out_dir: str | os.PathLike[str]) -> Out:
    """Return the output directory ``out_dir`` names (made if missing).

    A path or ``file://`` URL is the local disk; any other URL needs fsspec
    (:class:`ImportError` saying so otherwise).
    """
    if is_url(out_dir):
        return UrlOutDir(os.fspath(out_dir))
    return OutDir(out_dir)
