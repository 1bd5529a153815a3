"""``ddf.lit.text()`` and ``ddf.lit.text_long()``: the text columns, partition by partition.

Reading a body as text needs nothing but the row itself, so a frame that holds
its bodies is worked in place, each partition by the pandas method (no shuffle,
no session); one without bodies has them fetched first, lazily, by
``ddf.lit.fetch_bodies`` (which does shuffle, so a bundle is fetched once).
The ``meta`` is the pandas method's answer on the empty frame.
"""

from __future__ import annotations

import os
from typing import Any

import dask.dataframe as dd
import pandas as pd

from ..frame.fulltext import has_bodies, text_columns
from ..frame.text_long import text_long

__all__ = ["long_frames", "text_frame"]


def _text(frame: pd.DataFrame, math: str, out_dir: str | None) -> pd.DataFrame:
    return text_columns(frame, math=math, out_dir=out_dir)


def _long(frame: pd.DataFrame, part: str, math: str) -> pd.DataFrame:
    return text_long(frame, part, math=math)


def _with_bodies(frame: Any, out_dir: str | None, fetch: dict[str, Any]) -> Any:
    if has_bodies(frame._meta):
        return frame
    if out_dir is not None:
        fetch = {**fetch, "out_dir": out_dir}
    return frame.lit.fetch_bodies(**fetch)


def text_frame(
    frame: dd.DataFrame,
    *,
    math: str = "tex",
    out_dir: str | os.PathLike[str] | None = None,
    fetch: dict[str, Any],
) -> dd.DataFrame:
    """Lazy :func:`~litfetch_df.frame.fulltext.text_columns`, bodies fetched first if none."""
    where = os.fspath(out_dir) if out_dir is not None else None
    source: Any = _with_bodies(frame, where, fetch)
    empty = source._meta
    # The meta of an out_dir call is the in-memory one's with text_path: nothing is written.
    meta = text_columns(empty, math=math)
    if where is not None:
        meta = meta.rename(columns={"body_text": "text_path"})
    result: dd.DataFrame = source.map_partitions(_text, math, where, meta=meta)
    return result


def long_frames(
    frame: dd.DataFrame, part: str, *, math: str = "tex", fetch: dict[str, Any]
) -> dd.DataFrame:
    """Lazy :func:`~litfetch_df.frame.text_long.text_long`, bodies fetched first if none."""
    source: Any = _with_bodies(frame, None, fetch)
    meta = text_long(source._meta, part, math=math)  # an unknown part fails here, eagerly
    result: dd.DataFrame = source.map_partitions(_long, part, math, meta=meta, clear_divisions=True)
    return result
