"""Readers for the article tables users actually hold.

:func:`read_pubmed` turns any of PubMed's own exports — "Save → CSV", the
MEDLINE / ``.nbib`` text format and PubMed XML (efetch output) — into one frame
with one row per record and the identifier columns the ``.lit`` accessor finds
by name (``PMID``, ``PMCID``, ``DOI``, ``NBK``). :func:`read_table` reads any
other table (CSV, TSV, Parquet) with every column as text, so identifiers never
turn into floats.

Every value is read as text into pandas' nullable ``"string"`` dtype: a blank
cell is ``<NA>``, never ``""``, and ``12345`` is never ``12345.0``.
"""

from __future__ import annotations

import dataclasses
import errno
import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Final, Literal

import pandas as pd

from .parquet import arrow_to_pandas_quietly
from .pubmed_records import CORE_COLUMNS, TAG_LINE, read_medline, read_pubmed_xml

__all__ = [
    "CORE_COLUMNS",
    "PUBMED_FORMATS",
    "read_pubmed",
    "read_table",
    "sniff_pubmed_format",
]

PubmedFormat = Literal["csv", "medline", "xml"]

PUBMED_FORMATS: Final[tuple[str, ...]] = ("csv", "medline", "xml")
"""The export formats :func:`read_pubmed` understands (``"nbib"`` is accepted for ``"medline"``)."""


PathOrBuffer = str | os.PathLike[str] | bytes | bytearray | IO[bytes] | IO[str]

_UTF8_NAMES: Final[frozenset[str]] = frozenset({"utf-8", "utf8", "utf_8", "utf-8-sig", "utf_8_sig"})


# --------------------------------------------------------------------------- input


@dataclasses.dataclass(frozen=True, slots=True)
class _Source:
    """The raw content of one input plus a name to put in error messages."""

    data: bytes | str
    name: str


def _load(source: PathOrBuffer) -> _Source:
    if isinstance(source, bytes | bytearray):
        return _Source(bytes(source), "<bytes>")
    if isinstance(source, str | os.PathLike):
        path = Path(source)
        try:
            return _Source(path.read_bytes(), str(path))
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such file", str(path)) from None
    read = getattr(source, "read", None)
    if not callable(read):
        raise TypeError(
            f"expected a path, bytes or a file-like object, not {type(source).__name__}"
        )
    name = getattr(source, "name", None)
    data = read()
    if not isinstance(data, bytes | str):
        raise TypeError(f"read() returned {type(data).__name__}, not bytes or str")
    return _Source(data, str(name) if isinstance(name, str) else "<buffer>")


def _decode(src: _Source, encoding: str | None) -> str:
    if isinstance(src.data, str):
        return src.data.removeprefix("\ufeff")
    enc = encoding or "utf-8"
    # utf-8-sig strips PubMed's BOM and reads BOM-less UTF-8 all the same.
    codec = "utf-8-sig" if enc.lower() in _UTF8_NAMES else enc
    try:
        return src.data.decode(codec)
    except UnicodeDecodeError as exc:
        raise _undecodable(src.name, enc, exc) from exc
    except LookupError:
        raise ValueError(f"unknown encoding {enc!r}") from None


def _undecodable(
    name: str, encoding: str, exc: UnicodeDecodeError, *, offset: bool = True
) -> ValueError:
    bad = exc.object[exc.start : exc.start + 1]
    where = [f"byte 0x{bad.hex()}"] if bad else []
    if offset:
        where.append(f"at offset {exc.start}")
    detail = f" ({' '.join(where)})" if where else ""
    return ValueError(
        f"{name}: not valid {encoding} text{detail}; "
        "pass encoding= with the file's encoding, e.g. encoding='latin-1'"
    )


# --------------------------------------------------------------------------- sniffing


def _is_medline_tag_line(line: str) -> bool:
    # MEDLINE puts a 1-4 character tag, padded to four columns, then "- ".
    return len(line) >= 5 and line[4] == "-" and TAG_LINE.match(line) is not None


def sniff_pubmed_format(content: bytes | str) -> PubmedFormat:
    """Return which PubMed export ``content`` is: ``"xml"``, ``"medline"`` or ``"csv"``.

    XML starts with ``<`` (after any BOM and whitespace); MEDLINE's first
    non-blank line is a tag line such as ``PMID- 30000001``; anything else is
    taken for CSV.
    """
    head = content[:4096]
    text = head.decode("utf-8", "replace") if isinstance(head, bytes) else head
    text = text.lstrip("\ufeff \t\r\n")
    if text.startswith("<"):
        return "xml"
    first = text.split("\n", 1)[0].rstrip("\r")
    if _is_medline_tag_line(first):
        return "medline"
    return "csv"


def _normalise_format(fmt: str | None) -> PubmedFormat | None:
    if fmt is None:
        return None
    key = fmt.strip().lower().lstrip(".")
    if key in ("medline", "nbib"):
        return "medline"
    if key == "csv":
        return "csv"
    if key in ("xml", "pubmed-xml"):
        return "xml"
    raise ValueError(f"unknown PubMed export format {fmt!r}; expected one of csv, medline, xml")


# --------------------------------------------------------------------------- public


def read_pubmed(
    path_or_buffer: PathOrBuffer,
    *,
    format: str | None = None,
    encoding: str | None = None,
) -> pd.DataFrame:
    """Read a PubMed export into a frame with one row per record.

    ``path_or_buffer`` is a path, the file's bytes, or an open file (binary
    or text). ``format`` is ``"csv"`` (PubMed "Save → CSV", either header
    layout, with or without a BOM), ``"medline"`` (also ``"nbib"``: the
    MEDLINE tagged text) or ``"xml"`` (PubMed XML, ``PubmedArticleSet``); by
    default it is sniffed from the content. ``encoding`` applies to CSV and
    MEDLINE text (default UTF-8); XML declares its own.

    Returns a frame with a fresh ``RangeIndex`` whose columns include
    :data:`CORE_COLUMNS` (``PMID``, ``Title``, ``Authors``, ``Journal``,
    ``Year``, ``PMCID``, ``DOI``), plus ``NBK`` and ``NIHMS ID`` when any
    record has one. MEDLINE input also gives ``Abstract`` and ``Citation``,
    XML input ``Abstract``; CSV input keeps every original column under
    PubMed's own name. Every column has the nullable ``"string"`` dtype, so
    identifiers stay text and blanks are ``<NA>``. Authors are written as
    PubMed's CSV writes them (``"Doe J, Roe RA."``).

    Raises :class:`FileNotFoundError` for a missing path, and
    :class:`ValueError` for undecodable text (naming the file and suggesting
    ``encoding=``), unsafe or malformed XML (an :class:`~litfetch_df.safexml.parse.XmlError`),
    and content that is not a PubMed export.
    """
    fmt = _normalise_format(format)
    src = _load(path_or_buffer)
    if fmt is None:
        fmt = sniff_pubmed_format(src.data)
    if fmt == "xml":
        return read_pubmed_xml(src.data, src.name)
    text = _decode(src, encoding)
    if fmt == "medline":
        return read_medline(text, src.name)
    return _read_csv(text, src.name)


_EXCEL: Final[frozenset[str]] = frozenset({".xlsx", ".xls", ".xlsm", ".ods"})
_COMPRESSION: Final[frozenset[str]] = frozenset({".gz", ".bz2", ".xz", ".zip", ".zst"})
_DELIMITED: Final[Mapping[str, str]] = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
_PUBMED_SUFFIXES: Final[frozenset[str]] = frozenset({".txt", ".nbib", ".medline", ".xml"})
_SUPPORTED = ".csv, .tsv, .tab (optionally compressed), .parquet, .txt, .nbib, .medline, .xml"


def read_table(
    path: str | os.PathLike[str],
    *,
    encoding: str = "utf-8",
    **kw: Any,
) -> pd.DataFrame:
    """Read a table of articles from ``path``, choosing the reader by suffix.

    ``.csv`` and ``.tsv`` / ``.tab`` (optionally ``.gz``, ``.bz2``, ``.xz``,
    ``.zip``, ``.zst`` compressed) go to :func:`pandas.read_csv` (an
    uncompressed ``.csv`` whose header holds more ``;`` than ``,`` is read
    with ``sep=";"``, as spreadsheets save it in many locales); ``.parquet``
    to :func:`pandas.read_parquet`; ``.txt``, ``.nbib``, ``.medline`` and
    ``.xml`` to :func:`read_pubmed`. Extra keyword arguments go to that
    reader. ``encoding`` applies to text files; a UTF-8 BOM is dropped.

    Returns a frame in which every column has the nullable ``"string"``
    dtype: blank cells are ``<NA>`` and whole numbers read from Parquet float
    columns lose their ``.0``. Raises :class:`FileNotFoundError` naming a
    missing path, and :class:`ValueError` for an unsupported suffix (Excel
    included) or a file that is not valid text in ``encoding`` (the message
    names the file and suggests ``encoding=``).
    """
    p = Path(path)
    suffixes = [s.lower() for s in p.suffixes]
    compressed = bool(suffixes) and suffixes[-1] in _COMPRESSION
    kind = suffixes[-2] if compressed and len(suffixes) >= 2 else (suffixes[-1] if suffixes else "")
    if kind in _EXCEL:
        raise ValueError(f"{p}: Excel workbooks are not read; save the sheet as CSV first")
    if compressed and kind not in _DELIMITED:
        raise ValueError(f"{p}: cannot read compressed {kind!r} files; supported: {_SUPPORTED}")
    if not kind:
        raise ValueError(f"{p}: has no suffix to choose a reader by; supported: {_SUPPORTED}")
    if kind not in _DELIMITED and kind != ".parquet" and kind not in _PUBMED_SUFFIXES:
        raise ValueError(f"{p}: cannot read {kind!r} files; supported: {_SUPPORTED}")
    if not p.exists():
        raise FileNotFoundError(errno.ENOENT, "no such file", str(p))
    if kind in _PUBMED_SUFFIXES:
        return read_pubmed(p, encoding=encoding, **kw)
    if kind == ".parquet":
        with arrow_to_pandas_quietly():
            table = pd.read_parquet(p, **kw)
        return _all_string(table)
    options: dict[str, Any] = {
        "sep": _DELIMITED[kind],
        "dtype": "string",
        "keep_default_na": False,
        "na_values": [""],
        "encoding": "utf-8-sig" if encoding.lower() in _UTF8_NAMES else encoding,
    }
    if kind == ".csv" and not compressed and "sep" not in kw and "delimiter" not in kw:
        options["sep"] = _sniff_separator(p, options["encoding"])
    options.update(kw)
    try:
        frame = pd.read_csv(p, **options)
    except UnicodeDecodeError as exc:
        # pandas decodes in chunks, so the offset it reports is not the file's.
        raise _undecodable(str(p), encoding, exc, offset=False) from exc
    return _all_string(frame)


def _sniff_separator(path: Path, encoding: str) -> str:
    """Return ``";"`` for a ``.csv`` whose header is separated by semicolons, else ``","``.

    Spreadsheets in many locales save "CSV" with ``;``; read with ``,`` such a
    file is one column and no identifier column is found.
    """
    try:
        with path.open(encoding=encoding, errors="replace", newline="") as handle:
            header = handle.readline(65536)
    except (OSError, LookupError):
        return ","
    return ";" if header.count(";") > header.count(",") else ","


# --------------------------------------------------------------------------- frames


def _all_string(frame: pd.DataFrame) -> pd.DataFrame:
    """Return ``frame`` with every column as nullable text, integral floats without ``.0``."""
    columns: list[pd.Series] = []
    for i in range(frame.shape[1]):
        col = frame.iloc[:, i]
        if isinstance(col.dtype, pd.StringDtype) and col.dtype.na_value is pd.NA:
            columns.append(col)
            continue
        if pd.api.types.is_float_dtype(col.dtype):
            values = col.dropna()
            if bool(((values % 1) == 0).all()) and bool((values.abs() < 2**53).all()):
                # A float column of whole numbers is an id column that met a NaN.
                col = col.astype("Int64")
        columns.append(col.astype("string"))
    if not columns:
        return frame.copy()
    # Positional concat keeps duplicate column names apart.
    result = pd.concat(columns, axis=1, ignore_index=True)
    result.columns = frame.columns
    return result


# --------------------------------------------------------------------------- CSV

# PubMed's CSV names for the core columns it spells differently.
_CSV_ALIASES: Final[Mapping[str, tuple[str, ...]]] = {
    "Journal": ("Journal/Book",),
    "Year": ("Publication Year",),
}


def _read_csv(text: str, name: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(
            io.StringIO(text),
            dtype="string",
            keep_default_na=False,
            na_values=[""],
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise ValueError(f"{name}: not a PubMed CSV export: {exc}") from None
    if "PMID" not in frame.columns:
        shown = ", ".join(map(str, frame.columns[:12]))
        raise ValueError(
            f"{name}: not a PubMed CSV export (no PMID column; columns: {shown}); "
            "use read_table() for other tables"
        )
    frame = _all_string(frame)
    for core in CORE_COLUMNS:
        if core in frame.columns:
            continue
        source = next((a for a in _CSV_ALIASES.get(core, ()) if a in frame.columns), None)
        frame[core] = (
            frame[source].copy()
            if source is not None
            else pd.Series(pd.NA, index=frame.index, dtype="string")
        )
    return frame
