"""Reading cells out of a frame and building typed columns back into one.

Object columns are built cell by cell, so a tuple stays one cell; other
columns take pandas' nullable dtypes (``string``, ``Int64``), ``None`` and
``pd.NA`` both meaning missing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np
import pandas as pd

__all__ = ["column", "is_na", "previous", "text", "with_columns"]


def _objects(values: Sequence[object]) -> np.ndarray[Any, Any]:
    # Built cell by cell so tuples stay tuples (a list of tuples would become 2-D).
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def column(values: Sequence[object], dtype: str, index: pd.Index[Any]) -> pd.Series[Any]:
    """Return ``values`` as a column of ``dtype`` on ``index`` (``None``/NA: missing)."""
    if dtype == "object":
        cleaned = [None if v is pd.NA else v for v in values]
        return pd.Series(_objects(cleaned), index=index, dtype=object)
    cleaned2 = [pd.NA if v is None else v for v in values]
    return pd.Series(pd.array(cleaned2, dtype=cast(Any, dtype)), index=index)


def is_na(value: object) -> bool:
    """Return whether a cell is missing (``None``, ``pd.NA``, ``NaT`` or a float NaN)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and value != value


def previous(frame: pd.DataFrame, name: str) -> list[object]:
    """Return column ``name``'s cells (missing ones as ``None``), or all ``None`` without it."""
    if name not in frame.columns:
        return [None] * len(frame)
    return [None if is_na(v) else v for v in frame[name].tolist()]


def text(value: object) -> str | None:
    """Return ``value`` when it is a string, else ``None``."""
    return value if isinstance(value, str) else None


def with_columns(
    frame: pd.DataFrame, values: Mapping[str, Sequence[object]], dtypes: Mapping[str, str]
) -> pd.DataFrame:
    """Return a new frame: ``frame`` with ``values`` as columns of ``dtypes``."""
    new = {name: column(values[name], dtypes[name], frame.index) for name in values}
    return frame.assign(**new)
