"""The long text frames: one row per section, paragraph, reference, citation or caption.

Each row carries the label of the row its body came from (the index) and that
row's ``pmid``/``pmcid``/``doi``/``bookid``, so it joins back to the wide frame.
Bodies are read one at a time, so only the rows asked for are held in memory.
Multi-valued fields (a section path, a reference's authors, a table's cells)
are joined into one text cell, so every column has a plain nullable dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Final

import pandas as pd

from ..text import MATH_MODES, Document
from .fulltext import body_token, read_body
from .io.columns import CANONICAL
from .io.long import ids_columns, repeat_index
from .io.table import column

__all__ = ["LONG_COLUMNS", "TEXT_PARTS", "text_long"]

PATH_SEPARATOR: Final = " / "
"""Between the titles of a section path (``'Results / Binding'``)."""

_Rows = Callable[[Document], Iterator[dict[str, object]]]


def _sections(doc: Document) -> Iterator[dict[str, object]]:
    counts: dict[tuple[str, ...], int] = {}
    for p in doc.paragraphs:
        counts[p.section_path] = counts.get(p.section_path, 0) + 1
    todo = list(reversed(doc.sections))
    n = 0
    while todo:
        s = todo.pop()
        yield {
            "section_index": n,
            "section_path": PATH_SEPARATOR.join(s.path),
            "title": s.title,
            "label": s.label,
            "section_type": s.section_type,
            "depth": s.depth,
            "n_paragraphs": counts.get(s.path, 0),
        }
        n += 1
        todo.extend(reversed(s.children))


def _paragraphs(doc: Document) -> Iterator[dict[str, object]]:
    for i, p in enumerate(doc.paragraphs):
        yield {
            "paragraph_index": i,
            "section_path": PATH_SEPARATOR.join(p.section_path),
            "section_type": p.section_type,
            "text": p.text,
            "start": p.start,
            "end": p.end,
            "n_words": len(p.text.split()),
        }


def _references(doc: Document) -> Iterator[dict[str, object]]:
    for i, r in enumerate(doc.references):
        yield {
            "reference_index": i,
            "ref_id": r.ref_id,
            "label": r.label,
            "ref_doi": r.doi or None,
            "ref_pmid": r.pmid or None,
            "ref_pmcid": r.pmcid or None,
            "ref_title": r.title,
            "source": r.source,
            "year": r.year,
            "authors": "; ".join(r.authors),
            "raw": r.raw,
        }


def _citations(doc: Document) -> Iterator[dict[str, object]]:
    where = {r.ref_id: i for i, r in enumerate(doc.references) if r.ref_id}
    for i, c in enumerate(doc.citations):
        text = doc.paragraphs[c.paragraph].text if c.paragraph < len(doc.paragraphs) else ""
        yield {
            "citation_index": i,
            "ref_id": c.ref_id,
            # NA when the xref points at no reference of the list (a broken rid).
            "reference_index": where.get(c.ref_id),
            "paragraph_index": c.paragraph,
            "start": c.start,
            "end": c.end,
            "cited_text": text[c.start : c.end],
        }


def _captions(doc: Document) -> Iterator[dict[str, object]]:
    for i, c in enumerate(doc.captions):
        yield {
            "caption_index": i,
            "kind": c.kind,
            "label": c.label,
            "caption": c.caption,
            "n_rows": len(c.cells),
            "n_cols": max((len(r) for r in c.cells), default=0),
            # One line per table row, cells between " | " (as a pipe table would show them).
            "cells": "\n".join(" | ".join(r) for r in c.cells),
        }


_PARTS: Final[Mapping[str, tuple[_Rows, Mapping[str, str]]]] = {
    "sections": (
        _sections,
        {
            "section_index": "Int64",
            "section_path": "string",
            "title": "string",
            "label": "string",
            "section_type": "string",
            "depth": "Int64",
            "n_paragraphs": "Int64",
        },
    ),
    "paragraphs": (
        _paragraphs,
        {
            "paragraph_index": "Int64",
            "section_path": "string",
            "section_type": "string",
            "text": "string",
            "start": "Int64",
            "end": "Int64",
            "n_words": "Int64",
        },
    ),
    "references": (
        _references,
        {
            "reference_index": "Int64",
            "ref_id": "string",
            "label": "string",
            "ref_doi": "string",
            "ref_pmid": "string",
            "ref_pmcid": "string",
            "ref_title": "string",
            "source": "string",
            "year": "string",
            "authors": "string",
            "raw": "string",
        },
    ),
    "citations": (
        _citations,
        {
            "citation_index": "Int64",
            "ref_id": "string",
            "reference_index": "Int64",
            "paragraph_index": "Int64",
            "start": "Int64",
            "end": "Int64",
            "cited_text": "string",
        },
    ),
    "captions": (
        _captions,
        {
            "caption_index": "Int64",
            "kind": "string",
            "label": "string",
            "caption": "string",
            "n_rows": "Int64",
            "n_cols": "Int64",
            "cells": "string",
        },
    ),
}

TEXT_PARTS: Final[tuple[str, ...]] = tuple(_PARTS)
"""The long frames ``df.lit.text_long(part)`` gives: one row per item of ``part``."""

LONG_COLUMNS: Final[Mapping[str, Mapping[str, str]]] = {
    part: {**{k: "string" for k in CANONICAL}, **dtypes} for part, (_, dtypes) in _PARTS.items()
}
"""Each long frame's columns and dtypes: the row's ids, then the part's own."""


def text_long(frame: pd.DataFrame, part: str, *, math: str = "tex") -> pd.DataFrame:
    """Return one row per ``part`` item (see :data:`TEXT_PARTS`) of every row's body.

    The index repeats the label of the row each item came from; the columns
    are that row's ids, then the part's (:data:`LONG_COLUMNS`). A row without
    a readable body adds no rows (its ``text_error`` in ``df.lit.text()`` says
    why). Raises :class:`ValueError` for an unknown ``part`` or ``math``.
    """
    if part not in _PARTS:
        raise ValueError(f"part must be one of {TEXT_PARTS}, not {part!r}")
    if math not in MATH_MODES:
        raise ValueError(f"math must be one of {MATH_MODES}, not {math!r}")
    rows_of, _ = _PARTS[part]
    dtypes = LONG_COLUMNS[part]
    ids = ids_columns(frame)
    bodies = frame["body"].tolist() if "body" in frame.columns else [None] * len(frame)
    paths = frame["body_path"].tolist() if "body_path" in frame.columns else [None] * len(frame)
    labels: list[Hashable] = []
    values: dict[str, list[object]] = {c: [] for c in dtypes}
    for pos, (label, body, path) in enumerate(zip(frame.index, bodies, paths, strict=True)):
        found = body_token(body, path)
        if found is None:
            continue
        doc = read_body(found[1], math)
        for item in rows_of(doc):
            labels.append(label)
            for k in CANONICAL:
                values[k].append(ids[k][pos])
            for k, v in item.items():
                values[k].append(v)
    index = repeat_index(frame, labels)
    out = pd.DataFrame({c: column(v, dtypes[c], index) for c, v in values.items()}, index=index)
    out.attrs = dict(frame.attrs)
    return out
