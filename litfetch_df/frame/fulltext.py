"""The frame face of :mod:`litfetch_df.text`: wide text columns for every row.

:func:`text_columns` reads each row's body (the ``body`` Blob, or the file at
``body_path``) once per distinct body and adds the columns of
:data:`TEXT_COLUMNS`. A row without a body gets NA (the bodies step's
``body_error`` says why); a body that is not a text format (a PDF) or cannot be
read gets NA and the reason in ``text_error``; row count, order and index are
kept. With ``out_dir`` the body text is written to ``<body stem>.txt`` there and
``text_path`` replaces ``body_text``, so a frame's memory does not grow with
its bodies' text. :func:`text` fetches the bodies first when the frame has none.
"""

from __future__ import annotations

import functools
import os
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from pathlib import PurePath
from typing import Any, Final

import pandas as pd

from ..files import Blob
from ..ids import ArticleIds
from ..text import MATH_MODES, Document, read_text
from .engine.context import CallOptions
from .engine.offload import offload
from .io.long import ids_columns
from .io.outdir import id_stem
from .io.outputs import Out, open_out
from .io.table import column as column_of
from .io.table import is_na
from .io.urlout import read_location

__all__ = [
    "TEXT_COLUMNS",
    "TEXT_PATH_COLUMNS",
    "body_token",
    "has_bodies",
    "loss_text",
    "text",
    "text_columns",
]

TEXT_COLUMNS: Final[Mapping[str, str]] = {
    "text_format": "string",
    "title": "string",
    "abstract": "string",
    "other_abstracts": "string",
    "keywords": "string",
    "article_type": "string",
    "body_text": "string",
    "funding_statement": "string",
    "data_availability": "string",
    "competing_interests": "string",
    "n_sections": "Int64",
    "n_paragraphs": "Int64",
    "n_references": "Int64",
    "n_figures": "Int64",
    "n_tables": "Int64",
    "n_words": "Int64",
    "text_loss": "string",
    "text_error": "string",
}
"""The columns ``df.lit.text()`` adds and their dtypes, in order."""

TEXT_PATH_COLUMNS: Final[Mapping[str, str]] = {
    ("text_path" if k == "body_text" else k): v for k, v in TEXT_COLUMNS.items()
}
"""The same with an ``out_dir``: ``text_path`` (the ``.txt`` file) in place of ``body_text``."""

_STATEMENTS: Final = {
    "funding_statement": "funding",
    "data_availability": "data availability",
    "competing_interests": "competing interests",
}
# Multi-valued fields are joined into one text cell, so every column is a plain nullable
# dtype that CSV, Parquet and Dask carry as they are.
KEYWORD_SEPARATOR: Final = "; "


def has_bodies(frame: pd.DataFrame) -> bool:
    """Return whether ``frame`` holds bodies (a ``body`` or ``body_path`` column)."""
    return "body" in frame.columns or "body_path" in frame.columns


def body_token(body: object, path: object) -> tuple[Hashable, Blob | str] | None:
    """Return a token naming a row's body (rows that share one share it) and the body.

    A Blob in ``body`` wins, then a file at ``body_path``; neither gives ``None``.
    """
    if isinstance(body, Blob):
        return ("blob", id(body)), body
    if isinstance(path, str | os.PathLike) and not is_na(path):
        where = os.fspath(path)
        return ("path", where), where
    return None


def read_body(held: Blob | str, math: str) -> Document:
    """Read a held body (a Blob, or the location of its file) into a Document; never raises."""
    if isinstance(held, Blob):
        return read_text(held, math=math)
    try:
        content = read_location(held)
    except (OSError, ValueError) as exc:
        return Document(text_error=f"unreadable: {type(exc).__name__}: {exc}")
    return read_text(content, math=math)


def loss_text(doc: Document) -> str:
    """``text_loss`` as one cell: ``'sub-article×2 (31 chars); formula-image×9'``, ``''``: none."""
    parts = []
    for loss in doc.text_loss:
        chars = f" ({loss.chars} chars)" if loss.chars else ""
        parts.append(f"{loss.element}×{loss.count}{chars}")
    return "; ".join(parts)


def _other_abstracts(doc: Document) -> str:
    main = doc.abstract
    skipped = False
    others = []
    for a in doc.abstracts:
        if a.text == main and not skipped:
            skipped = True  # the main abstract has its own column; only its first copy
            continue
        head = " ".join(x for x in (a.abstract_type, a.language and f"[{a.language}]") if x)
        title = a.title or head
        others.append(f"{title}: {a.text}" if title else a.text)
    return "\n\n".join(others)


def _count_sections(doc: Document) -> int:
    todo = list(doc.sections)
    n = 0
    while todo:
        s = todo.pop()
        n += 1
        todo.extend(s.children)
    return n


def _words(doc: Document) -> int:
    return sum(len(p.text.split()) for p in doc.paragraphs)


def document_row(doc: Document) -> dict[str, object]:
    """The wide text cells of one Document (``text_error`` set: only that, the rest NA)."""
    if doc.text_error:
        return {"text_error": doc.text_error}
    kinds = [c.kind for c in doc.captions]
    row: dict[str, object] = {
        "text_format": doc.text_format,
        "title": doc.title,
        "abstract": doc.abstract,
        "other_abstracts": _other_abstracts(doc),
        "keywords": KEYWORD_SEPARATOR.join(doc.keywords),
        "article_type": doc.article_type,
        "body_text": doc.body_text,
        "n_sections": _count_sections(doc),
        "n_paragraphs": len(doc.paragraphs),
        "n_references": len(doc.references),
        "n_figures": kinds.count("figure"),
        "n_tables": kinds.count("table"),
        "n_words": _words(doc),
        "text_loss": loss_text(doc),
    }
    for column, kind in _STATEMENTS.items():
        row[column] = doc.statement(kind)
    return row


class _TextFiles:
    """Where each body's text goes under ``out_dir``: ``<body file stem>.txt``, unique."""

    def __init__(self, out: Out) -> None:
        self.out = out
        # Only the locations: each body is written once (a shared one is remembered by
        # text_columns), so a taken location is always another body's. Keeping no token
        # per row keeps the call's memory from growing with the rows.
        self.taken: set[str] = set()

    def write(self, held: Blob | str, ids: ArticleIds, text: str) -> str:
        stem = PurePath(held).stem if isinstance(held, str) else id_stem(ids)
        location = self.out.locate(stem + ".txt")
        if location in self.taken:
            # Two bodies with one stem (an in-memory Blob and a file, say): keep both.
            location = self.out.locate(f"{stem}-{len(self.taken)}.txt")
        self.taken.add(location)
        return self.out.write_to(location, text.encode("utf-8"))


def text_columns(
    frame: pd.DataFrame,
    *,
    math: str = "tex",
    out_dir: str | os.PathLike[str] | None = None,
) -> pd.DataFrame:
    """Return a new frame: ``frame`` with the text columns of every row's body.

    Each distinct body is read once and its cells fanned out to the rows that
    hold it. ``math`` is :func:`~litfetch_df.text.read_text`'s. With
    ``out_dir`` the body text of each body goes to a ``.txt`` file there and
    the frame holds ``text_path`` (only one body's text is in memory at a
    time). Raises :class:`ValueError` for an unknown ``math``.
    """
    if math not in MATH_MODES:  # fails here, before any body is read
        raise ValueError(f"math must be one of {MATH_MODES}, not {math!r}")
    dtypes = TEXT_PATH_COLUMNS if out_dir is not None else TEXT_COLUMNS
    files = _TextFiles(open_out(out_dir)) if out_dir is not None else None
    done: dict[Hashable, dict[str, object]] = {}
    # How many rows hold each body: a body of one row is not remembered once read.
    shared = _shared_tokens(frame)
    columns = _Columns(dtypes)
    # The frame is read and the columns built a chunk of rows at a time: the Python
    # copies of its cells (paths, ids) and of the new text cells then never exceed one
    # chunk, so the call's peak beyond the columns it returns does not grow with rows.
    for begin in range(0, len(frame), _CHUNK):
        part = frame.iloc[begin : begin + _CHUNK]
        bodies = _cells(part, "body")
        paths = _cells(part, "body_path")
        sources = _cells(part, "body_source")
        ids = ids_columns(part)
        for i, (body, path) in enumerate(zip(bodies, paths, strict=True)):
            found = body_token(body, path)
            row: dict[str, object] = {}
            if found is None and isinstance(sources[i], str):
                # Fetched, but the bytes were not kept (a table saved without its bodies).
                row = {"text_error": f"no body bytes in the frame (served by {sources[i]})"}
            elif found is not None:
                token, held = found
                if token not in done:
                    cells = document_row(read_body(held, math))
                    if files is not None:
                        text = cells.pop("body_text", None)
                        if isinstance(text, str):
                            bundle = ArticleIds(**{k: _text(v[i]) for k, v in ids.items()})
                            cells["text_path"] = files.write(held, bundle, text)
                    if token in shared:  # kept only for the rows still to come that share it
                        done[token] = cells
                    row = cells
                else:
                    row = done[token]
            columns.add(row)
        columns.flush()
    return frame.assign(
        **{
            name: pd.Series(array, index=frame.index, copy=False)
            for name, array in columns.finish().items()
        }
    )


# Rows read and turned into typed arrays at a time (see text_columns).
_CHUNK: Final = 256


class _Columns:
    """The new columns, built a chunk at a time into arrays of their dtypes."""

    def __init__(self, dtypes: Mapping[str, str]) -> None:
        self.dtypes = dtypes
        self.pending: dict[str, list[object]] = {c: [] for c in dtypes}
        self.chunks: dict[str, list[pd.api.extensions.ExtensionArray]] = {c: [] for c in dtypes}

    def add(self, row: Mapping[str, object]) -> None:
        for column, out in self.pending.items():
            out.append(row.get(column))

    def flush(self) -> None:
        """Turn the pending cells into arrays (for strings, Arrow buffers, not Python str)."""
        for column, cells in self.pending.items():
            if cells:
                series = column_of(cells, self.dtypes[column], pd.RangeIndex(len(cells)))
                self.chunks[column].append(series.array)
            self.pending[column] = []

    def finish(self) -> dict[str, pd.api.extensions.ExtensionArray]:
        self.flush()
        out = {}
        for column, chunks in self.chunks.items():
            if not chunks:
                chunks = [column_of([], self.dtypes[column], pd.RangeIndex(0)).array]
            # Arrow-backed strings concatenate as chunks of one array, without a copy.
            out[column] = pd.concat(
                [pd.Series(c, copy=False) for c in chunks], ignore_index=True
            ).array
        return out


def _shared_tokens(frame: pd.DataFrame) -> set[Hashable]:
    """The tokens of the bodies more than one row holds.

    Only rows whose Blob or path recurs can share a token, so only they are looked
    at: a frame of distinct body files costs no Python copy of its paths here.
    """
    candidates = pd.Series(False, index=pd.RangeIndex(len(frame)))
    if "body_path" in frame.columns:
        candidates |= frame["body_path"].duplicated(keep=False).to_numpy(dtype=bool)
    if "body" in frame.columns:
        blobs = [id(b) if isinstance(b, Blob) else None for b in frame["body"].tolist()]
        ids = pd.Series(blobs, dtype=object)
        candidates |= (ids.notna() & ids.duplicated(keep=False)).to_numpy(dtype=bool)
    rows = candidates.to_numpy().nonzero()[0]
    if not len(rows):
        return set()
    part = frame.iloc[rows]
    counts = Counter(
        found[0]
        for found in map(body_token, _cells(part, "body"), _cells(part, "body_path"))
        if found is not None
    )
    return {token for token, n in counts.items() if n > 1}


def _cells(frame: pd.DataFrame, name: str) -> Sequence[object]:
    return frame[name].tolist() if name in frame.columns else [None] * len(frame)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


async def text(
    frame: pd.DataFrame,
    *,
    math: str = "tex",
    out_dir: str | os.PathLike[str] | None = None,
    fetch: Mapping[str, Any],
    config: CallOptions | None = None,
) -> pd.DataFrame:
    """:func:`text_columns` of ``frame``, fetching the bodies first when it holds none.

    ``fetch`` are :func:`~litfetch_df.frame.engine.pipeline.fetch_bodies`' keywords
    (``fetchers``, ``resolver``, ``resolve``, ``force``); the bodies go to
    ``out_dir`` too when it is given. The parse runs on the shared worker
    pool, so an event loop stays free meanwhile.
    """
    if not has_bodies(frame):
        from .engine.pipeline import fetch_bodies

        frame = await fetch_bodies(frame, out_dir=out_dir, config=config, **fetch)
    return await offload(functools.partial(text_columns, frame, math=math, out_dir=out_dir))
