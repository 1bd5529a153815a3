"""A narrow frame of what matters first, for reading a result without touching display options.

A frame that went through every step has some thirty columns, more than
pandas shows by default, and the elided middle is where the new ids sit.
:func:`view` returns a new frame of just the columns a reader looks at
first, in a fixed order: the canonical ids, the body's source, the licence
family, the open-access terms, the counts, then the errors.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Final

import pandas as pd

from .io.columns import CANONICAL, detect_id_columns
from .summary import ERROR_COLUMNS

__all__ = ["VIEW_COLUMNS", "view"]

VIEW_COLUMNS: Final[tuple[str, ...]] = (
    *CANONICAL,
    "body_source",
    "licence_family",
    "oa_status",
    "access",
    "body_size",
    "n_files",
    "n_related",
    *ERROR_COLUMNS,
)
"""The columns :func:`view` shows, in order, when the frame has them."""


def view(frame: pd.DataFrame, extra: Sequence[Hashable] = ()) -> pd.DataFrame:
    """Return a new frame of ``frame``'s key columns (see :data:`VIEW_COLUMNS`), same rows.

    ``extra`` columns (a title, say) come right after the ids. A frame no
    step has run on yet shows its identifier columns as detected. Raises
    :class:`KeyError` for an ``extra`` name the frame does not have.
    """
    missing = [c for c in extra if c not in frame.columns]
    if missing:
        raise KeyError(f"not columns of this frame: {missing!r}")
    present = [c for c in VIEW_COLUMNS if c in frame.columns]
    ids: list[Hashable] = [c for c in present if c in CANONICAL]
    if not ids:
        try:
            ids = [label for _, label in detect_id_columns(frame.columns).items()]
        except ValueError:
            ids = []
    rest = [c for c in present if c not in CANONICAL]
    chosen: list[Hashable] = []
    for column in (*ids, *extra, *rest):
        if column not in chosen:
            chosen.append(column)
    return frame.loc[:, chosen].copy()
