"""A small frame describing what a run found: ids resolved, bodies, licences, errors.

Pure bookkeeping over the columns the accessor steps add; it sends no request.
"""

from __future__ import annotations

import pandas as pd

from .engine.outcome import is_abandoned, is_partial
from .engine.spent import requests_table
from .io.columns import CANONICAL

__all__ = ["ERROR_COLUMNS", "summarise"]

ERROR_COLUMNS = (
    "resolve_error",
    "body_error",
    "licence_error",
    "files_error",
    "related_error",
    "fetch_error",
)
"""The steps' error columns, in pipeline order."""


_NOT_ROWS = frozenset({("files", "files")})
_NOT_ROW_SECTIONS = frozenset({"requests planned", "requests sent"})


def summarise(frame: pd.DataFrame) -> pd.DataFrame:
    """Return counts of what the frame holds, indexed by ``(section, item)``.

    Sections: ``rows`` (total); ``resolved`` (non-NA canonical ids per kind);
    ``bodies`` (rows per ``body_source``); ``licences`` (rows per
    ``licence_family``, or per raw ``licence`` on a frame without families)
    and ``licence_basis`` (per basis); ``oa_status`` (per open-access
    status); ``files`` (rows with at
    least one file, and files in total); ``errors`` (rows with an error per
    step), ``abandoned`` (rows given up with nothing found) and ``partial``
    (rows keeping what was found while a source was given up); a re-run
    retries both; on a frame made by ``run()``, ``requests planned`` and
    ``requests sent`` (per host: what the plan expected, what went out).
    Columns: ``count`` (Int64) and ``share`` (fraction of all rows, Float64;
    NA for the number of files and for requests, which are not rows).
    """
    n = len(frame)
    entries: list[tuple[str, str, int]] = [("rows", "total", n)]
    for kind in CANONICAL:
        if kind in frame.columns:
            entries.append(("resolved", kind, int(frame[kind].notna().sum())))
    # Licences are counted by family when the frame has one: the same licence written as
    # a URL by one source and as "cc-by" by another is one licence to a reader.
    licence = "licence_family" if "licence_family" in frame.columns else "licence"
    for column, section in (
        ("body_source", "bodies"),
        (licence, "licences"),
        ("licence_basis", "licence_basis"),
        ("oa_status", "oa_status"),
    ):
        if column in frame.columns:
            counts = frame[column].dropna().astype(str).value_counts()
            for item, count in counts.items():
                entries.append((section, str(item), int(count)))
            entries.append((section, "none", int(frame[column].isna().sum())))
    if "n_files" in frame.columns:
        n_files = frame["n_files"]
        entries.append(("files", "rows with files", int((n_files.fillna(0) > 0).sum())))
        entries.append(("files", "files", int(n_files.fillna(0).sum())))
    if "n_related" in frame.columns:
        n_related = frame["n_related"]
        entries.append(("related", "rows with relations", int((n_related.fillna(0) > 0).sum())))
    present = [c for c in ERROR_COLUMNS if c in frame.columns]
    cells = {c: frame[c].tolist() for c in present}
    for column in present:
        step = column.removesuffix("_error")
        entries.append(("errors", step, sum(1 for c in cells[column] if isinstance(c, str))))
    for column in present:
        step = column.removesuffix("_error")
        given_up = sum(1 for c in cells[column] if is_abandoned(c) and not is_partial(c))
        entries.append(("abandoned", step, given_up))
    for column in present:
        step = column.removesuffix("_error")
        entries.append(("partial", step, sum(1 for c in cells[column] if is_partial(c))))
    # What run() sent per host beside its plan (no share: requests are not rows).
    sent = requests_table(frame.attrs).to_dict("records")
    entries.extend(("requests planned", str(r["host"]), int(r["planned"])) for r in sent)
    entries.extend(("requests sent", str(r["host"]), int(r["sent"])) for r in sent)
    index = pd.MultiIndex.from_tuples([(s, i) for s, i, _ in entries], names=["section", "item"])
    counts_arr = pd.array([c for _, _, c in entries], dtype="Int64")
    # The number of files is not a number of rows: it has no share of the rows.
    share = pd.array(
        [
            c / n if n and (s, i) not in _NOT_ROWS and s not in _NOT_ROW_SECTIONS else None
            for s, i, c in entries
        ],
        dtype="Float64",
    )
    return pd.DataFrame({"count": counts_arr, "share": share}, index=index)
