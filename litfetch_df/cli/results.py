"""Writing a result table and printing its summary: shared by the CLI and the demo.

:mod:`litfetch_df.cli.app` re-exports these names (``litfetch_df.cli.app.write_result``
and friends keep working); the demo imports them from here, so it never imports
the command line.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import pandas as pd

from ..frame.engine.pipeline import files_long
from ..frame.io.export import flatten
from ..frame.summary import summarise

__all__ = ["OUTPUT_FORMATS", "flatten_result", "output_format", "summary_text", "write_result"]

OUTPUT_FORMATS: Final[Mapping[str, str]] = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet"}
"""Output suffix → format."""


def output_format(path: str | os.PathLike[str]) -> str:
    """Return the format (``csv``, ``tsv``, ``parquet``) that ``path``'s suffix names.

    Raises :class:`ValueError`, with a message fit for a user, for any other suffix.
    """
    suffix = Path(path).suffix.lower()
    fmt = OUTPUT_FORMATS.get(suffix)
    if fmt is None:
        raise ValueError(
            f"cannot write {suffix or 'a file without a suffix'}: "
            f"OUTPUT must end in {', '.join(OUTPUT_FORMATS)}"
        )
    return fmt


def flatten_result(frame: pd.DataFrame) -> pd.DataFrame:
    """Return ``frame`` with only scalar cells, ready for CSV or Parquet.

    The ``body`` column (bytes) is dropped — ``body_source``, ``body_size``
    and ``body_path`` stay; ``files`` is dropped in favour of ``n_files`` (the
    long form is written separately); ``related`` becomes text such as
    ``"published:10.1000/x; preprint:10.1101/y"``. Any other non-scalar cell
    is written as its text. Identifier columns are text (no ``.0``), so
    :func:`~litfetch_df.read_table` reads them back as they were.
    """
    out = flatten(frame, files=False)
    return out.drop(columns=[c for c in ("body",) if c in out.columns])


def _long_frame(long: pd.DataFrame) -> pd.DataFrame:
    name = long.index.name if long.index.name is not None else "row"
    flat = long.reset_index(names=name)
    return flatten_result(flat)


def _files_path(output: Path) -> Path:
    return output.with_name(f"{output.stem}.files{output.suffix}")


def _write_table(frame: pd.DataFrame, path: Path) -> None:
    fmt = output_format(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    os.close(fd)
    try:
        if fmt == "parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False, sep="\t" if fmt == "tsv" else ",")
        # A reader (or an interrupted run) never sees half a table under the final name.
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_result(
    frame: pd.DataFrame,
    output: str | os.PathLike[str],
    *,
    files: pd.DataFrame | None = None,
) -> list[Path]:
    """Write a pipeline result to ``output`` (CSV, TSV or Parquet by suffix); return the paths.

    The table is :func:`flatten_result` of ``frame``. When ``frame`` has a
    ``files`` column (the files step ran), its long form — one row per file,
    ``row`` naming the article's row — goes next to it as
    ``<stem>.files<suffix>``; ``files`` may supply that long form instead
    (with download paths). Each file is written atomically.
    """
    path = Path(output)
    output_format(path)
    _write_table(flatten_result(frame), path)
    written = [path]
    long = files if files is not None else (files_long(frame) if "files" in frame.columns else None)
    if long is not None:
        extra = _files_path(path)
        _write_table(_long_frame(long), extra)
        written.append(extra)
    return written


def _percent(value: object) -> str:
    if isinstance(value, int | float) and value == value:
        return f"{float(value):.0%}"
    return "-"


def summary_text(frame: pd.DataFrame) -> str:
    """Return :func:`~litfetch_df.frame.summary.summarise` of ``frame`` as a printable table.

    Shares are shown as whole percentages.
    """
    with pd.option_context("display.width", 200):
        return summarise(frame).to_string(na_rep="-", formatters={"share": _percent})
