"""The tuples the steps put in ``files`` and ``related`` cells, readable in a table.

A cell holding several values is a :class:`FileSet` or a :class:`Relations`:
a plain tuple in every way (it compares equal to the tuple of the same
items, indexes, iterates and pickles like one), whose ``str()`` is one short
line (``5 files: xml, pdf, 3 supplementary``; ``has preprint 10.1101/…``).

How pandas shows them: a DataFrame renders an object cell with
``pprint_thing``, which prints a tuple item by item, whatever its
``__str__`` says, but prints anything with a ``__next__`` attribute with
``str()``. These classes set ``__next__ = None``: the attribute exists, so
pandas takes the short text; being ``None`` it is not a method, so the
tuple is not an iterator (``next(cell)`` raises, and
``isinstance(cell, collections.abc.Iterator)`` is false), as for any tuple.
``repr()`` stays the tuple's own, with every value's full form, for debugging.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, ClassVar

import pandas as pd

from ...files import Blob, File, FileKind, media_label
from ...metadata import Related

__all__ = ["FileSet", "Relations", "column_kinds", "file_set", "relations"]

_EXTENSIONS = {"JATS": "xml", "Elsevier XML": "xml", "XML": "xml"}


def _body_label(file: File) -> str:
    label = media_label(file.media_type, file.filename)
    return _EXTENSIONS.get(label, label.lower())


class FileSet(tuple[File, ...]):
    """A ``files`` cell: the row's :class:`~litfetch_df.File` values, shown as one short line."""

    __slots__ = ()
    # Read by pandas' pprint_thing as "print me with str()"; see the module docstring.
    __next__: ClassVar[None] = None

    def __str__(self) -> str:
        """``'5 files: xml, pdf, 3 supplementary'``; ``'no files'`` when empty."""
        if not self:
            return "no files"
        bodies = [_body_label(f) for f in self if f.kind is FileKind.BODY]
        extra = sum(1 for f in self if f.kind is not FileKind.BODY)
        parts = [f"{n} {label}" if n > 1 else label for label, n in Counter(bodies).items()]
        if extra:
            parts.append(f"{extra} supplementary")
        noun = "file" if len(self) == 1 else "files"
        return f"{len(self)} {noun}: {', '.join(parts)}"


class Relations(tuple[Related, ...]):
    """A ``related`` cell: the row's :class:`~litfetch_df.Related` values, as one short line."""

    __slots__ = ()
    __next__: ClassVar[None] = None

    def __str__(self) -> str:
        """``'has preprint 10.1101/…'``; with more, ``'… (+2 more)'``; ``'no relations'``."""
        if not self:
            return "no relations"
        first = str(self[0])
        return first if len(self) == 1 else f"{first} (+{len(self) - 1} more)"


def file_set(files: Iterable[Any]) -> FileSet:
    """Return ``files`` as a :class:`FileSet` cell."""
    return files if isinstance(files, FileSet) else FileSet(files)


def relations(found: Iterable[Any]) -> Relations:
    """Return ``found`` as a :class:`Relations` cell."""
    return found if isinstance(found, Relations) else Relations(found)


def _na(value: object) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and value != value


def column_kinds(frame: pd.DataFrame) -> dict[str, str]:
    """Return ``{column: 'blob' | 'files' | 'related'}`` for the columns of litfetch_df values.

    Judged by content: every non-NA cell a :class:`~litfetch_df.Blob`; or
    every cell a tuple of :class:`~litfetch_df.File` (of
    :class:`~litfetch_df.Related`). A column of only empty tuples counts by
    its name (``files`` / ``related``).
    """
    kinds: dict[str, str] = {}
    for position, column in enumerate(frame.columns):
        series = frame.iloc[:, position]
        if series.dtype != object or not isinstance(column, str):
            continue
        cells = [c for c in series.tolist() if not _na(c)]
        if not cells:
            continue
        if all(isinstance(c, Blob) for c in cells):
            kinds[column] = "blob"
            continue
        if not all(isinstance(c, tuple) and not hasattr(c, "_fields") for c in cells):
            continue
        items = [item for c in cells for item in c]
        if items and all(isinstance(i, File) for i in items):
            kinds[column] = "files"
        elif items and all(isinstance(i, Related) for i in items):
            kinds[column] = "related"
        elif not items and column in ("files", "related"):
            kinds[column] = column
    return kinds
