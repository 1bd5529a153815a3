"""A Dask result to Parquet and back: one file per partition, each as ``df.lit.to_parquet``.

:func:`to_parquet` writes every partition with the pandas writer
(:func:`litfetch_df.frame.io.parquet.to_parquet`: bodies, file-sets and relations
as Arrow structs and lists), as ``part.00000.parquet``, ``part.00001.parquet``,
... in one directory, a local path or an fsspec URL. Each file appears whole or
not at all (:func:`litfetch_df.frame.io.outputs.open_out`). :func:`read_parquet`
reads such a directory back, one partition per file, with the same columns,
dtypes and values; ``litfetch_df.read_parquet`` reads a local one into pandas.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from typing import Any

import dask as _dask
import dask.dataframe as dd
import pandas as pd

from ..frame.io import parquet as pq
from ..frame.io.outdir import local_root
from ..frame.io.outputs import open_out
from ..frame.io.urlout import filesystem, is_url, read_location

__all__ = ["part_name", "read_parquet", "to_parquet"]

_dk: Any = _dask  # dask's API is untyped
_dd: Any = dd


def part_name(number: int) -> str:
    """Return the file name of partition ``number``: ``part.00007.parquet``."""
    return f"part.{number:05d}.parquet"


def _write_part(frame: pd.DataFrame, folder: str, number: int, kwargs: Mapping[str, Any]) -> str:
    buffer = io.BytesIO()
    pq.to_parquet(frame, buffer, **kwargs)
    out = open_out(folder)
    return out.write_to(out.locate(part_name(number)), buffer.getvalue())


def _listed(folder: str) -> list[str]:
    """The part files in ``folder`` (a path or URL), in partition order."""
    pattern = pq.DATASET_GLOB
    if is_url(folder):
        fs, base = filesystem(folder)
        root = folder.rstrip("/")
        names = sorted(str(p).rsplit("/", 1)[-1] for p in fs.glob(f"{base.rstrip('/')}/{pattern}"))
        return [f"{root}/{name}" for name in names]
    return [str(p) for p in pq.dataset_parts(local_root(folder))]  # a file:// URL too


def to_parquet(
    frame: dd.DataFrame, path: str | os.PathLike[str], *, compute: bool = True, **kwargs: Any
) -> Any:
    """Write ``frame`` to the directory ``path`` (a path or URL), one Parquet file a partition.

    ``kwargs`` go to :func:`pyarrow.parquet.write_table`. Part files of an
    earlier, longer dataset in the same directory are removed once every new
    part is written, so the directory holds this frame only. Returns the
    written locations, or with ``compute=False`` a ``dask.delayed`` that
    writes them.
    """
    folder = os.fspath(path)
    whole: Any = frame
    parts: Any = whole.to_delayed()
    writes = [
        _dk.delayed(_write_part)(part, folder, i, dict(kwargs)) for i, part in enumerate(parts)
    ]
    done: Any = _dk.delayed(_prune)(writes, folder)
    if not compute:
        return done
    (written,) = _dk.compute(done)
    return written


def _prune(written: list[str], folder: str) -> list[str]:
    keep = set(written)
    stale = [p for p in _listed(folder) if p not in keep]
    if stale:
        out = open_out(folder)
        for location in stale:
            out.remove(location)
    return written


def _read_part(location: str, kwargs: Mapping[str, Any]) -> pd.DataFrame:
    return pq.read_parquet(io.BytesIO(read_location(location)), **kwargs)


def read_parquet(path: str | os.PathLike[str], **kwargs: Any) -> dd.DataFrame:
    """Read a directory written by :func:`to_parquet` (a path or URL) as a Dask DataFrame.

    One partition per part file, in order; each holds what
    ``litfetch_df.read_parquet`` gives for that file (``Blob`` bodies,
    file-set and relation tuples, nullable dtypes, the index). ``kwargs`` go
    to :func:`pyarrow.parquet.read_table` (``columns=`` ...). Raises
    :class:`FileNotFoundError` when the directory holds no part file.
    """
    folder = os.fspath(path)
    files = _listed(folder)
    if not files:
        raise FileNotFoundError(f"no {pq.DATASET_GLOB} files in {folder}")
    meta = _read_part(files[0], kwargs).iloc[:0]
    # Dask turns object columns into Arrow strings on read; these hold Blobs and tuples.
    with _dk.config.set({"dataframe.convert-string": False}):
        result: dd.DataFrame = _dd.from_map(_read_part, files, args=(dict(kwargs),), meta=meta)
    return result
