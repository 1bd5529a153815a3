"""Saving a result frame to Parquet and loading it back, every added column intact.

pandas cannot write the object cells the steps add (``Blob`` bodies, the
``files`` and ``related`` tuples). :func:`to_parquet` writes them as Arrow
structs and lists of structs, and records which columns they were in the
file's key-value metadata (key ``litfetch_df``); :func:`read_parquet` turns
them back into the same values. The schema:

* a body column (``Blob`` cells): ``struct<file: FILE, content: binary>``;
* a file-set column (``files``): ``list<FILE>``, an empty list for "no files";
* a relations column (``related``): ``list<struct<relation, pmid, pmcid,
  doi, bookid: string>>``;

where ``FILE`` is ``struct<kind, source, media_type, uri, filename,
credential_key: string, size_bytes: int64, description: string,
also_listed_by: list<string>>``. Every
other column goes through pyarrow's own pandas conversion, which keeps the
index and the nullable dtypes. Bodies written to ``out_dir`` are already
``body_path`` text and are saved as such; the text columns (``df.lit.text()``)
and the long text frames are plain nullable columns, saved as they are. The frame's session settings
(:mod:`litfetch_df.frame.io.provenance`) travel in ``attrs``; keys never do.

Needs pyarrow (``pip install 'litfetch_df[parquet]'``).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Final

import numpy as np
import pandas as pd

from ...files import Blob, File, FileKind
from ...ids import ArticleIds
from ...metadata import Related, RelationType
from ...serde import file_to_dict
from .cells import FileSet, Relations, column_kinds
from .provenance import restore_attrs, saved_attrs

__all__ = [
    "DATASET_GLOB",
    "METADATA_KEY",
    "arrow_to_pandas_quietly",
    "dataset_parts",
    "read_parquet",
    "to_parquet",
]

METADATA_KEY: Final = b"litfetch_df"
"""The Parquet key-value metadata entry naming the columns of litfetch_df values."""

FORMAT_VERSION: Final = 1

_FILE_FIELDS: Final = (
    "kind",
    "source",
    "media_type",
    "uri",
    "filename",
    "credential_key",
    "size_bytes",
    "description",
    "also_listed_by",
)
_RELATED_FIELDS: Final = ("relation", "pmid", "pmcid", "doi", "bookid")


@contextmanager
def arrow_to_pandas_quietly() -> Iterator[None]:
    """Within this block, silence pandas 2.2.0's warning about pyarrow < 15's conversion.

    pandas 2.2.0 deprecated building a frame from a block manager, which is how
    pyarrow before 15 turns every table into pandas, so each read warned
    (pandas-dev/pandas#56171; pandas 2.2.1 dropped the warning). The read itself
    is sound: only that one message is silenced, so a caller running with
    warnings as errors can still read on the oldest supported pair. Yields nothing.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message="Passing a BlockManager to DataFrame is deprecated",
            category=DeprecationWarning,
        )
        yield


def _pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ImportError("Parquet needs pyarrow: pip install 'litfetch_df[parquet]'") from None
    return pyarrow


def _na(value: object) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and value != value


def _file_record(file: File) -> dict[str, object]:
    # The serde dict, with ``also_listed_by`` always present: a Parquet struct has fixed fields.
    return {**file_to_dict(file), "also_listed_by": list(file.also_listed_by)}


def _file_of(record: Mapping[str, Any]) -> File:
    size: Any = record.get("size_bytes")
    return File(
        kind=FileKind(record["kind"]),
        source=str(record["source"]),
        media_type=record.get("media_type"),
        uri=record.get("uri"),
        filename=record.get("filename"),
        credential_key=record.get("credential_key"),
        size_bytes=None if _na(size) else int(size),
        description=record.get("description"),
        also_listed_by=tuple(str(s) for s in (record.get("also_listed_by") or ())),
    )


def _related_record(rel: Related) -> dict[str, object]:
    return {
        "relation": rel.relation.value,
        "pmid": rel.ids.pmid,
        "pmcid": rel.ids.pmcid,
        "doi": rel.ids.doi,
        "bookid": rel.ids.bookid,
    }


def _related_of(record: Mapping[str, Any]) -> Related:
    ids = ArticleIds(**{k: record.get(k) for k in _RELATED_FIELDS if k != "relation"})
    return Related(RelationType(record["relation"]), ids)


def _types(pa: Any) -> dict[str, Any]:
    text = pa.string()
    kinds = {"size_bytes": pa.int64(), "also_listed_by": pa.list_(text)}
    file = pa.struct([(name, kinds.get(name, text)) for name in _FILE_FIELDS])
    related = pa.struct([(name, text) for name in _RELATED_FIELDS])
    return {
        "blob": pa.struct([("file", file), ("content", pa.binary())]),
        "files": pa.list_(file),
        "related": pa.list_(related),
    }


_TO_RECORD: Final[Mapping[str, Callable[[Any], object]]] = {
    "blob": lambda blob: {"file": _file_record(blob.file), "content": blob.content},
    "files": lambda cell: [_file_record(f) for f in cell],
    "related": lambda cell: [_related_record(r) for r in cell],
}


def to_parquet(frame: pd.DataFrame, path: str | os.PathLike[str] | BinaryIO, **kwargs: Any) -> None:
    """Write ``frame`` to ``path`` (a file name or a binary file object) as Parquet,
    litfetch_df value columns included.

    ``kwargs`` go to :func:`pyarrow.parquet.write_table` (``compression=`` …).
    The frame is not changed. Raises :class:`ImportError` without pyarrow.
    """
    pa = _pyarrow()
    kinds = column_kinds(frame)
    types = _types(pa)
    # Placeholders keep the column positions; the typed arrays replace them below.
    plain = frame.assign(**{c: pd.Series(None, index=frame.index, dtype=object) for c in kinds})
    plain.attrs = {}
    table = pa.Table.from_pandas(plain)
    for column, kind in kinds.items():
        convert = _TO_RECORD[kind]
        values = [None if _na(c) else convert(c) for c in frame[column].tolist()]
        position = table.schema.get_field_index(column)
        table = table.set_column(position, column, pa.array(values, type=types[kind]))
    extra = {
        "format": FORMAT_VERSION,
        "columns": kinds,
        "attrs": saved_attrs(frame.attrs),
    }
    metadata = dict(table.schema.metadata or {})
    metadata[METADATA_KEY] = json.dumps(extra).encode()
    table = table.replace_schema_metadata(metadata)
    pa.parquet.write_table(table, _where(path), **kwargs)


def _cells(values: Sequence[object], make: Callable[[Any], object]) -> np.ndarray[Any, Any]:
    out = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        out[i] = None if value is None else make(value)
    return out


_FROM_RECORD: Final[Mapping[str, Callable[[Any], object]]] = {
    "blob": lambda r: Blob(_file_of(r["file"]), bytes(r["content"])),
    "files": lambda items: FileSet(_file_of(r) for r in items),
    "related": lambda items: Relations(_related_of(r) for r in items),
}


def _where(path: str | os.PathLike[str] | BinaryIO) -> Any:
    return path if hasattr(path, "read") or hasattr(path, "write") else os.fspath(path)


DATASET_GLOB: Final = "part.*.parquet"
"""The files of a partitioned dataset (``ddf.lit.to_parquet``), read in name order."""


def dataset_parts(folder: Path) -> list[Path]:
    """Return the part files of the partitioned dataset in ``folder``, in order."""
    return sorted(folder.glob(DATASET_GLOB))


def read_parquet(path: str | os.PathLike[str] | BinaryIO, **kwargs: Any) -> pd.DataFrame:
    """Read a frame written by :func:`to_parquet` (or any Parquet file) back.

    ``path`` may be a file name, a binary file object, or the directory of a
    partitioned dataset written by ``ddf.lit.to_parquet`` (its
    ``part.*.parquet`` files, read in order and concatenated).

    Bodies come back as :class:`~litfetch_df.Blob`, file-sets and relations
    as the tuples the steps make, the index and the nullable dtypes as they
    were, and ``attrs`` with the session settings the frame was made with.
    ``kwargs`` go to :func:`pyarrow.parquet.read_table` (``columns=`` …).
    """
    if isinstance(path, str | os.PathLike) and Path(path).is_dir():
        return _read_dataset(Path(path), **kwargs)
    pa = _pyarrow()
    table = pa.parquet.read_table(_where(path), **kwargs)
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    extra: dict[str, Any] = json.loads(raw) if raw else {}
    kinds: dict[str, str] = {
        str(k): str(v) for k, v in extra.get("columns", {}).items() if v in _FROM_RECORD
    }
    present = [c for c in kinds if c in table.column_names]
    with arrow_to_pandas_quietly():
        frame: pd.DataFrame = table.to_pandas()
    if present:
        converted: dict[Hashable, pd.Series[Any]] = {}
        for column in present:
            values = table.column(column).to_pylist()
            converted[column] = pd.Series(
                _cells(values, _FROM_RECORD[kinds[column]]), index=frame.index, dtype=object
            )
        frame = frame.assign(**{str(k): v for k, v in converted.items()})
    _restore_index_dtype(frame, table.schema.metadata or {})
    frame.attrs = restore_attrs(extra.get("attrs"))
    return frame


def _restore_index_dtype(frame: pd.DataFrame, metadata: Mapping[bytes, bytes]) -> None:
    """Give a one-level index its nullable ``string`` dtype back (pyarrow does it for columns)."""
    raw = metadata.get(b"pandas")
    if not raw or isinstance(frame.index, pd.MultiIndex):
        return
    described = json.loads(raw)
    names = described.get("index_columns") or []
    if len(names) != 1 or not isinstance(names[0], str):
        return  # a RangeIndex is described, not stored
    column: dict[str, Any] = next(
        (c for c in described.get("columns", []) if c.get("field_name") == names[0]), {}
    )
    if column.get("numpy_type") == "string" and str(frame.index.dtype) != "string":
        frame.index = frame.index.astype("string")


def _read_dataset(folder: Path, **kwargs: Any) -> pd.DataFrame:
    parts = dataset_parts(folder)
    if not parts:
        raise FileNotFoundError(f"no {DATASET_GLOB} files in {folder}")
    frames = [read_parquet(p, **kwargs) for p in parts]
    # An empty part has no litfetch_df values to type its columns: it takes the others' dtypes.
    whole = pd.concat(frames) if len(frames) > 1 else frames[0]
    whole.attrs = frames[0].attrs
    return whole
