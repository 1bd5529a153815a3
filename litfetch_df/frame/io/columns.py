"""Finding the identifier columns of a frame and normalising their values.

Columns are recognised by name, ignoring case and punctuation (``PMID``,
``PubMed ID``, ``ids.pmid``, ``PMC ID``, ``DOI link``, ``Bookshelf ID`` …),
or named explicitly. Each cell goes through the foundation's ``parse_*``
functions; a value that does not parse is reported, never sent upstream.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import pandas as pd

from ...ids import FIELDS, ArticleIds, doi_key, parse_bookid, parse_doi, parse_pmcid, parse_pmid

__all__ = [
    "ACCEPTED_NAMES",
    "CANONICAL",
    "IdColumns",
    "ParsedIds",
    "bundle_key",
    "detect_id_columns",
    "kind_of_name",
    "normalise_name",
    "parse_cell",
    "parse_rows",
    "sniff_kind",
]

CANONICAL: Final[tuple[str, ...]] = FIELDS
"""The canonical id output columns, in order: ``pmid``, ``pmcid``, ``doi``, ``bookid``."""

# Normalised forms (see normalise_name) of the names each kind is known by, in
# order of preference when a frame carries more than one of them.
ACCEPTED_NAMES: Final[Mapping[str, tuple[str, ...]]] = {
    "pmid": (
        "pmid",
        "pubmedid",
        "idspmid",
        "pubmed",
        "pmids",
        "pubmedids",
        "pubmeduid",
        "pubmedidentifier",
        "medlineid",
    ),
    "pmcid": (
        "pmcid",
        "idspmcid",
        "pmc",
        "pmcids",
        "pubmedcentralid",
        "pmcidentifier",
        "pmcaccession",
    ),
    "doi": (
        "doi",
        "idsdoi",
        "dois",
        "doiurl",
        "doilink",
        "doiuri",
        "digitalobjectidentifier",
    ),
    "bookid": (
        "bookid",
        "nbk",
        "nbkid",
        "bookshelfid",
        "bookaccession",
        "bookshelfaccession",
        "idsbookid",
    ),
}

_PARSERS = {"pmid": parse_pmid, "pmcid": parse_pmcid, "doi": parse_doi, "bookid": parse_bookid}
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")


def normalise_name(name: object) -> str:
    """Return a column name folded for matching: lower-case, letters and digits only."""
    return _NOT_ALNUM.sub("", str(name).casefold())


def kind_of_name(name: object) -> str | None:
    """Return the id kind a column name stands for (``'pmid'`` …), or ``None``."""
    folded = normalise_name(name)
    for kind, names in ACCEPTED_NAMES.items():
        if folded in names:
            return kind
    return None


@dataclass(frozen=True, slots=True)
class IdColumns:
    """The column each id kind is read from (``None``: the frame has none)."""

    pmid: Hashable | None = None
    pmcid: Hashable | None = None
    doi: Hashable | None = None
    bookid: Hashable | None = None

    def items(self) -> list[tuple[str, Hashable]]:
        """Return ``(kind, column)`` for every kind that has a column."""
        return [(k, getattr(self, k)) for k in CANONICAL if getattr(self, k) is not None]

    def is_empty(self) -> bool:
        """Return whether no id column was found."""
        return not self.items()


def _accepted_text() -> str:
    shown = {
        "pmid": "PMID, PubMed ID, pubmed_id, ids.pmid",
        "pmcid": "PMCID, PMC ID, PMC, ids.pmcid",
        "doi": "DOI, doi_url, DOI link, ids.doi",
        "bookid": "bookid, NBK, Bookshelf ID, book accession",
    }
    return "; ".join(f"{k}: {v}" for k, v in shown.items())


def detect_id_columns(
    columns: Iterable[Hashable],
    explicit: Mapping[str, Hashable | None] | None = None,
) -> IdColumns:
    """Return which column holds each id kind.

    ``explicit`` maps a kind to a column label and wins over detection; a
    label that is not in ``columns`` raises :class:`KeyError`. Otherwise a
    column is matched by name, case- and punctuation-insensitively; the
    canonical name (``pmid`` …) is preferred, then the order of
    :data:`ACCEPTED_NAMES`, then column order. Raises :class:`ValueError`
    naming the columns looked at and the accepted names when nothing fits.
    """
    cols = list(columns)
    found: dict[str, Hashable] = {}
    for kind, label in (explicit or {}).items():
        if kind not in _PARSERS:
            raise TypeError(f"unknown id kind {kind!r}; expected one of {list(CANONICAL)}")
        if label is None:
            continue
        if label not in cols:
            raise KeyError(f"{kind}={label!r} is not a column of this frame (columns: {cols!r})")
        found[kind] = label
    # A column the caller named for one kind is not also read as another.
    claimed = list(found.values())
    free = [c for c in cols if not any(c is label or c == label for label in claimed)]
    for kind, names in ACCEPTED_NAMES.items():
        if kind in found:
            continue
        exact = [c for c in free if isinstance(c, str) and c == kind]
        if exact:
            found[kind] = exact[0]
            continue
        best: tuple[int, int] | None = None
        for position, col in enumerate(free):
            folded = normalise_name(col)
            if folded in names:
                rank = (names.index(folded), position)
                if best is None or rank < best:
                    best = rank
        if best is not None:
            found[kind] = free[best[1]]
    result = IdColumns(**found)
    if result.is_empty():
        raise ValueError(
            f"no identifier column found; looked at {cols!r}. Accepted names (any case or "
            f"punctuation): {_accepted_text()}. Or name one: df.lit.resolve(doi='My DOI column')."
        )
    return result


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_blank(value: object) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, float) and value != value:
        return True
    return isinstance(value, str) and not value.strip()


def parse_cell(kind: str, value: object) -> tuple[str | None, str | None]:
    """Normalise one cell: return ``(canonical id or None, error message or None)``.

    Blank cells (``None``, NA, NaN, empty or whitespace) are absent, not errors.
    An invalid value gives e.g. ``(None, "invalid doi: 'foo'")``.
    """
    if _is_blank(value):
        return None, None
    try:
        return _PARSERS[kind](value), None
    except ValueError:
        return None, f"invalid {kind}: {_show(value)}"


@dataclass(frozen=True, slots=True)
class ParsedIds:
    """Per-row result of normalising a frame's id columns (aligned with its rows)."""

    bundles: tuple[ArticleIds, ...]
    errors: tuple[str | None, ...]


def parse_rows(frame: pd.DataFrame, columns: IdColumns) -> ParsedIds:
    """Normalise every row's ids; invalid values are left out of the bundle and reported."""
    n = len(frame)
    values: dict[str, list[str | None]] = {k: [None] * n for k in CANONICAL}
    errors: list[list[str]] = [[] for _ in range(n)]
    cache: dict[tuple[str, type, object], tuple[str | None, str | None]] = {}
    for kind, label in columns.items():
        selected = frame[label]
        if isinstance(selected, pd.DataFrame):
            raise ValueError(f"column {label!r} appears more than once; rename one of them")
        raw = selected.tolist()
        out = values[kind]
        for i, cell in enumerate(raw):
            try:
                hit = cache.get((kind, type(cell), cell))
            except TypeError:  # an unhashable cell; parse it without the memo
                hit = None
            if hit is None:
                hit = parse_cell(kind, cell)
                with contextlib.suppress(TypeError):
                    cache[(kind, type(cell), cell)] = hit
            out[i], err = hit
            if err is not None:
                errors[i].append(err)
    bundles = tuple(
        ArticleIds(
            pmid=values["pmid"][i],
            pmcid=values["pmcid"][i],
            doi=values["doi"][i],
            bookid=values["bookid"][i],
        )
        for i in range(n)
    )
    return ParsedIds(bundles, tuple("; ".join(e) if e else None for e in errors))


def bundle_key(ids: ArticleIds) -> ArticleIds:
    """Return the de-duplication key of a bundle (DOIs compare case-insensitively)."""
    if ids.doi is None:
        return ids
    return ArticleIds(pmid=ids.pmid, pmcid=ids.pmcid, doi=doi_key(ids.doi), bookid=ids.bookid)


def sniff_kind(values: Sequence[object]) -> str | None:
    """Guess the id kind of a column from its values (``None`` when unclear).

    Bookshelf ids, DOIs and ``PMC``-prefixed ids are unambiguous; bare digits
    are taken as PMIDs. The kind that parses most non-blank values wins, and
    must parse at least half of them.
    """
    sample = [v for v in values if not _is_blank(v)][:500]
    if not sample:
        return None
    scores: dict[str, int] = {}
    for v in sample:
        text = str(v).strip().lower()
        if parse_cell("bookid", v)[0] is not None:
            kind = "bookid"
        elif parse_cell("doi", v)[0] is not None:
            kind = "doi"
        elif parse_cell("pmcid", v)[0] is not None and "pmc" in text:
            kind = "pmcid"
        elif parse_cell("pmid", v)[0] is not None:
            kind = "pmid"
        else:
            continue
        scores[kind] = scores.get(kind, 0) + 1
    if not scores:
        return None
    kind, score = max(scores.items(), key=lambda kv: kv[1])
    return kind if score * 2 >= len(sample) else None
