"""The long forms of a frame's nested cells: one row per file, one row per relation."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, Final, TypeVar, cast

import pandas as pd

from ...files import File, FileKind
from ...metadata import Related
from .columns import CANONICAL
from .table import column, is_na, previous

__all__ = [
    "FILE_COLUMNS",
    "file_of_row",
    "files_long",
    "ids_columns",
    "is_listed",
    "relations_long",
    "repeat_index",
]

T = TypeVar("T")

FILE_COLUMNS: Final[tuple[str, ...]] = (
    "kind",
    "source",
    "media_type",
    "uri",
    "filename",
    "size_bytes",
    "credential_key",
    "description",
)
"""The columns of the long file-set frame that describe one :class:`File`."""


def ids_columns(frame: pd.DataFrame) -> dict[str, list[object]]:
    """Return the cells of the canonical id columns (all ``None`` for a missing one)."""
    return {k: previous(frame, k) for k in CANONICAL}


def repeat_index(frame: pd.DataFrame, labels: list[Hashable]) -> pd.Index[Any]:
    """Return an index of ``frame``'s kind (name, dtype, levels) holding ``labels``.

    A long frame's rows carry the label of the row they came from, so they join back.
    """
    # tupleize_cols=False: a flat index whose labels are tuples must not become a MultiIndex.
    index = pd.Index(labels, name=frame.index.name, dtype=frame.index.dtype, tupleize_cols=False)
    if isinstance(frame.index, pd.MultiIndex):
        index = (
            pd.MultiIndex.from_tuples(
                cast(list[tuple[Hashable, ...]], labels), names=frame.index.names
            )
            if labels
            else (frame.index[:0])
        )
    return index


def _long(
    frame: pd.DataFrame,
    name: str,
    item_type: type[T],
    fields: Mapping[str, Callable[[T], object]],
    dtypes: Mapping[str, str],
) -> pd.DataFrame:
    """Return one row per ``item_type`` item of ``frame[name]``: the row's ids, then ``fields``.

    The index repeats the original row labels; a column's dtype is
    ``dtypes.get(name, "string")``.
    """
    ids = ids_columns(frame)
    labels: list[Hashable] = []
    rows: dict[str, list[object]] = {c: [] for c in (*CANONICAL, *fields)}
    for pos, (label, found) in enumerate(zip(frame.index, frame[name].tolist(), strict=True)):
        if not isinstance(found, tuple | list):
            continue
        for item in found:
            if not isinstance(item, item_type):
                continue
            labels.append(label)
            for k in CANONICAL:
                rows[k].append(ids[k][pos])
            for field, read in fields.items():
                rows[field].append(read(item))
    index = repeat_index(frame, labels)
    data = {c: column(v, dtypes.get(c, "string"), index) for c, v in rows.items()}
    out = pd.DataFrame(data, index=index)
    out.attrs = dict(frame.attrs)  # the session settings travel to the long form too
    return out


# In FILE_COLUMNS order: the long frame's columns follow it.
_FILE_FIELDS: Final[Mapping[str, Callable[[File], object]]] = {
    "kind": lambda f: f.kind.value,
    "source": lambda f: f.source,
    "media_type": lambda f: f.media_type,
    "uri": lambda f: f.uri,
    "filename": lambda f: f.filename,
    "size_bytes": lambda f: f.size_bytes,
    "credential_key": lambda f: f.credential_key,
    "description": lambda f: f.description,
}


def is_listed(frame: pd.DataFrame) -> bool:
    """Return whether ``frame`` holds a file-set listing (``files_error``, or File tuples)."""
    if "files_error" in frame.columns:
        return True
    if "files" not in frame.columns:
        return False
    cells = [c for c in frame["files"].tolist() if not is_na(c)]
    return all(isinstance(c, tuple) and all(isinstance(f, File) for f in c) for c in cells)


def files_long(frame: pd.DataFrame) -> pd.DataFrame:
    """Return the tidy file-set of a frame that has a ``files`` column: one row per File.

    The index repeats the original row labels; columns are the row's ids
    then :data:`FILE_COLUMNS`.
    """
    return _long(frame, "files", File, _FILE_FIELDS, {"size_bytes": "Int64"})


_RELATION_FIELDS: Final[Mapping[str, Callable[[Related], object]]] = {
    "relation": lambda rel: rel.relation.value,
    "related_doi": lambda rel: rel.ids.doi,
}


def relations_long(frame: pd.DataFrame) -> pd.DataFrame:
    """Return one row per relation of a frame with a ``related`` column, keyed to its index."""
    return _long(frame, "related", Related, _RELATION_FIELDS, {})


def file_of_row(row: Mapping[str, object]) -> File:
    """Return the :class:`File` a long file-set row describes; ``ValueError`` if it cannot."""

    def text(name: str) -> str | None:
        value = row.get(name)
        return None if is_na(value) else str(value)

    kind_text = text("kind")
    source = text("source")
    if kind_text is None or source is None:
        raise ValueError("a file row needs 'kind' and 'source'")
    size = row.get("size_bytes")
    return File(
        kind=FileKind(kind_text),
        source=source,
        media_type=text("media_type"),
        uri=text("uri"),
        filename=text("filename"),
        credential_key=text("credential_key"),
        size_bytes=None if is_na(size) else int(size),  # type: ignore[call-overload]
        description=text("description"),
    )
