"""Flattening a result frame to plain text-and-number columns, and writing it as CSV.

A CSV cell holds text, so :func:`flatten` turns every column of litfetch_df
values into text or leaves it out: the ``body`` bytes are dropped (their
``body_source``, ``body_media_type``, ``body_size`` and ``body_path`` stay);
``files`` becomes the file references joined with ``"; "`` (each its URI,
else its file name); ``related`` becomes ``"published:10.1000/x;
preprint:10.1101/y"``. Identifier columns are written as text, whole
numbers without ``.0``, so read back with :func:`~litfetch_df.read_table`
(every column text) a PMID stays ``"21810267"``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Hashable
from typing import Any

import numpy as np
import pandas as pd

from ...files import Blob, File
from ...metadata import Related
from .cells import column_kinds
from .columns import CANONICAL, detect_id_columns

__all__ = ["flatten", "to_csv"]


def _file_text(file: File) -> str:
    return file.uri or file.filename or file.source


def _files_text(cell: object) -> str | None:
    if not isinstance(cell, tuple | list):
        return None
    return "; ".join(_file_text(f) for f in cell if isinstance(f, File))


def related_text(cell: object) -> str | None:
    """Return a ``related`` cell as ``"published:10.1000/x; preprint:10.1101/y"`` (or ``None``)."""
    if not isinstance(cell, tuple | list) or not cell:
        return None
    parts = [
        f"{r.relation.value}:{r.ids.doi or r.ids.pmcid or r.ids.pmid or r.ids.bookid}"
        for r in cell
        if isinstance(r, Related)
    ]
    return "; ".join(parts) or None


def _cell_text(value: object) -> object:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, Blob):
        return None
    return str(value)


def _id_text(series: pd.Series[Any]) -> pd.Series[Any]:
    if isinstance(series.dtype, pd.StringDtype):
        return series
    if pd.api.types.is_float_dtype(series.dtype):
        values = series.dropna()
        if bool(((values % 1) == 0).all()):
            series = series.astype("Int64")
    return series.astype("string")


def _id_labels(frame: pd.DataFrame) -> list[Hashable]:
    labels: list[Hashable] = [c for c in CANONICAL if c in frame.columns]
    with contextlib.suppress(ValueError):
        labels += [label for _, label in detect_id_columns(frame.columns).items()]
    return labels


def flatten(frame: pd.DataFrame, *, files: bool = True) -> pd.DataFrame:
    """Return a new frame with only scalar cells, ready for CSV (see the module docstring).

    ``files=False`` leaves the ``files`` column out instead of writing it as
    text (the command line writes the long form beside the table).
    """
    kinds = column_kinds(frame)
    dropped = [c for c, kind in kinds.items() if kind == "blob"]
    if not files:
        dropped += [c for c, kind in kinds.items() if kind == "files"]
    if (
        "body" in frame.columns
        and "body" not in kinds
        and all(v is None or isinstance(v, Blob) for v in frame["body"].tolist())
    ):
        dropped.append("body")  # the step's body column, with no body in it
    if "files" in frame.columns and not files and "files" not in dropped:
        dropped.append("files")
    out = frame.drop(columns=dropped)
    changes: dict[str, pd.Series[Any]] = {}
    for column, kind in kinds.items():
        if column in dropped:
            continue
        convert = _files_text if kind == "files" else related_text
        texts = [convert(v) for v in out[column].tolist()]
        changes[column] = pd.Series(pd.array(texts, dtype="string"), index=out.index)
    if changes:
        out = out.assign(**changes)
    for label in dict.fromkeys(_id_labels(out)):
        if not isinstance(out[label], pd.Series):
            continue
        out[label] = _id_text(out[label])
    for position in range(out.shape[1]):
        series = out.iloc[:, position]
        if series.dtype == object:
            values = np.empty(len(series), dtype=object)
            for i, v in enumerate(series.tolist()):
                values[i] = _cell_text(v)
            out.isetitem(position, values)
    return out


def to_csv(frame: pd.DataFrame, path: str | os.PathLike[str], **kwargs: Any) -> None:
    """Write :func:`flatten` of ``frame`` to ``path`` as CSV (no index unless ``index=True``).

    Other ``kwargs`` go to :meth:`pandas.DataFrame.to_csv` (``sep="\\t"`` …).
    """
    kwargs.setdefault("index", False)
    flatten(frame).to_csv(path, **kwargs)
