"""PubMed's record formats, MEDLINE (``.nbib``) text and PubMed XML, as rows of text.

Both give the :data:`CORE_COLUMNS` in that order, then the optional
identifier columns that occur, then the abstract (and MEDLINE's citation).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Final

import pandas as pd
from lxml import etree

from litfetch_df.safexml.parse import XmlError, local_name, parse_xml

__all__ = [
    "CORE_COLUMNS",
    "TAG_LINE",
    "frame_of_rows",
    "read_medline",
    "read_pubmed_xml",
]

CORE_COLUMNS: Final[tuple[str, ...]] = (
    "PMID",
    "Title",
    "Authors",
    "Journal",
    "Year",
    "PMCID",
    "DOI",
)
"""Columns every frame from :func:`read_pubmed` has, whatever the input format."""


def frame_of_rows(
    records: list[dict[str, str | None]],
    leading: Iterable[str],
    optional: Iterable[str],
    trailing: Iterable[str],
) -> pd.DataFrame:
    """Return ``records`` as a text frame: ``leading``, the ``optional`` found, ``trailing``."""
    columns = list(leading)
    columns += [c for c in optional if any(r.get(c) is not None for r in records)]
    columns += list(trailing)
    data = {c: [r.get(c) for r in records] for c in columns}
    return pd.DataFrame(data, columns=columns, dtype="string")


# --------------------------------------------------------------------------- MEDLINE

TAG_LINE: Final = re.compile(r"^([A-Z][A-Z0-9]{0,3}) *-(?: (.*)|)$")
"""A MEDLINE line: a tag of 1-4 characters padded to four columns, then ``- `` and text."""
_SUFFIXED_ID = re.compile(r"^(.*?)\s*\[([A-Za-z]+)\]$")
_YEAR = re.compile(r"\b(1[5-9][0-9]{2}|2[0-9]{3})\b")


def _medline_records(text: str) -> list[dict[str, list[str]]]:
    records: list[dict[str, list[str]]] = []
    current: dict[str, list[str]] = {}
    last: str | None = None
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        if not line.strip():
            if current:
                records.append(current)
            current, last = {}, None
            continue
        m = None if line[0].isspace() else TAG_LINE.match(line)
        if m is not None:
            tag, value = m.group(1), (m.group(2) or "").strip()
            if tag == "PMID" and "PMID" in current:
                # No blank line between records: a second PMID starts the next one.
                records.append(current)
                current = {}
            current.setdefault(tag, []).append(value)
            last = tag
        elif last is not None:
            # A wrapped value: continuation lines are indented; join them with one space.
            values = current[last]
            values[-1] = f"{values[-1]} {line.strip()}".strip()
        else:
            raise ValueError(
                f"not MEDLINE text: {line[:60]!r} is neither a tag line nor a continuation"
            )
    if current:
        records.append(current)
    return records


def _first(values: Mapping[str, list[str]], *tags: str) -> str | None:
    for tag in tags:
        for value in values.get(tag, ()):
            if value:
                return value
    return None


def _tagged_id(values: Mapping[str, list[str]], kind: str) -> str | None:
    """Return the first ``AID`` / ``LID`` value marked ``[kind]`` (AID first: the article's own)."""
    for tag in ("AID", "LID"):
        for value in values.get(tag, ()):
            m = _SUFFIXED_ID.match(value)
            if m and m.group(2).lower() == kind and m.group(1):
                return m.group(1)
    return None


def _year(text: str | None) -> str | None:
    if not text:
        return None
    m = _YEAR.search(text)
    return m.group(1) if m else None


def _authors(names: list[str]) -> str | None:
    names = [n for n in names if n]
    # PubMed's CSV writes "Doe J, Roe RA." — match it so frames from any format agree.
    return ", ".join(names) + "." if names else None


def read_medline(text: str, name: str) -> pd.DataFrame:
    """Return one row per record of MEDLINE / ``.nbib`` ``text`` (``name`` for messages)."""
    try:
        records = _medline_records(text)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    rows = []
    for rec in records:
        rows.append(
            {
                "PMID": _first(rec, "PMID"),
                "Title": _first(rec, "TI", "BTI"),
                "Authors": _authors(rec.get("AU", []) + rec.get("CN", [])),
                "Journal": _first(rec, "TA", "JT", "BTI"),
                "Year": _year(_first(rec, "DP")),
                "PMCID": _first(rec, "PMC"),
                "DOI": _tagged_id(rec, "doi"),
                "NBK": _tagged_id(rec, "bookaccession"),
                "NIHMS ID": _first(rec, "MID"),
                "Abstract": _first(rec, "AB"),
                "Citation": _first(rec, "SO"),
            }
        )
    return frame_of_rows(rows, CORE_COLUMNS, ("NBK", "NIHMS ID"), ("Abstract", "Citation"))


# --------------------------------------------------------------------------- XML

_XML_DECL = re.compile(r"^\s*<\?xml[^>]*\?>")
_SPACE = re.compile(r"\s+")


def read_pubmed_xml(data: bytes | str, name: str) -> pd.DataFrame:
    """Return one row per article of PubMed XML ``data`` (``name`` for messages)."""
    if isinstance(data, str):
        # Text already decoded: its declaration's encoding no longer describes these bytes.
        data = _XML_DECL.sub("", data.removeprefix("\ufeff"), count=1).encode("utf-8")
    try:
        root = parse_xml(data)
    except XmlError as exc:
        raise XmlError(f"{name}: not readable as PubMed XML: {exc}") from None
    rows = [_xml_row(el) for el in _xml_articles(root, name)]
    return frame_of_rows(rows, CORE_COLUMNS, ("NBK", "NIHMS ID"), ("Abstract",))


_ARTICLE_TAGS: Final[frozenset[str]] = frozenset({"PubmedArticle", "PubmedBookArticle"})


def _xml_articles(root: etree._Element, name: str) -> list[etree._Element]:
    tag = local_name(root)
    if tag in _ARTICLE_TAGS:
        return [root]
    if tag in ("PubmedArticleSet", "PubmedBookArticleSet"):
        # DeleteCitation and other siblings are not records.
        return [el for el in root if local_name(el) in _ARTICLE_TAGS]
    raise ValueError(f"{name}: not PubMed XML (root element <{tag}>, expected <PubmedArticleSet>)")


def _child(el: etree._Element | None, *path: str) -> etree._Element | None:
    """Follow direct children by local name (PubMed XML has no namespace, but be tolerant)."""
    for step in path:
        if el is None:
            return None
        el = next((c for c in el if local_name(c) == step), None)
    return el


def _children(el: etree._Element | None, name: str) -> list[etree._Element]:
    return [] if el is None else [c for c in el if local_name(c) == name]


def _text(el: etree._Element | None) -> str | None:
    if el is None:
        return None
    # Titles carry inline markup (<i>, <sup>); keep its text, collapse the layout whitespace.
    text = _SPACE.sub(" ", "".join(str(t) for t in el.itertext())).strip()
    return text or None


def _ids(lists: Iterable[etree._Element | None]) -> dict[str, str]:
    """Collect ``ArticleId`` values by ``IdType`` from the given ``ArticleIdList``s, first wins."""
    found: dict[str, str] = {}
    for lst in lists:
        for el in _children(lst, "ArticleId"):
            kind = (el.get("IdType") or "").strip().lower()
            value = _text(el)
            if kind and value and kind not in found:
                found[kind] = value
    return found


def _xml_authors(author_list: etree._Element | None) -> str | None:
    names: list[str] = []
    for author in _children(author_list, "Author"):
        collective = _text(_child(author, "CollectiveName"))
        if collective:
            names.append(collective)
            continue
        last = _text(_child(author, "LastName"))
        initials = _text(_child(author, "Initials"))
        if last:
            names.append(f"{last} {initials}" if initials else last)
    return _authors(names)


def _pub_year(date: etree._Element | None) -> str | None:
    return _year(_text(_child(date, "Year"))) or _year(_text(_child(date, "MedlineDate")))


def _abstract(abstract: etree._Element | None) -> str | None:
    parts = []
    for el in _children(abstract, "AbstractText"):
        text = _text(el)
        if text:
            label = el.get("Label")
            parts.append(f"{label}: {text}" if label else text)
    return " ".join(parts) or None


def _xml_row(article: etree._Element) -> dict[str, str | None]:
    if local_name(article) == "PubmedBookArticle":
        return _xml_book_row(article)
    citation = _child(article, "MedlineCitation")
    art = _child(citation, "Article")
    journal = _child(art, "Journal")
    # Only the record's own ArticleIdList: the ones inside ReferenceList are cited works.
    ids = _ids([_child(article, "PubmedData", "ArticleIdList")])
    doi = ids.get("doi")
    if doi is None:
        doi = next(
            (
                _text(el)
                for el in _children(art, "ELocationID")
                if (el.get("EIdType") or "").lower() == "doi" and _text(el)
            ),
            None,
        )
    year = _pub_year(_child(journal, "JournalIssue", "PubDate")) or _pub_year(
        _child(art, "ArticleDate")
    )
    return {
        "PMID": _text(_child(citation, "PMID")) or ids.get("pubmed"),
        "Title": _text(_child(art, "ArticleTitle")) or _text(_child(art, "VernacularTitle")),
        "Authors": _xml_authors(_child(art, "AuthorList")),
        "Journal": _text(_child(citation, "MedlineJournalInfo", "MedlineTA"))
        or _text(_child(journal, "ISOAbbreviation"))
        or _text(_child(journal, "Title")),
        "Year": year,
        "PMCID": ids.get("pmc"),
        "DOI": doi,
        "NBK": ids.get("bookaccession"),
        "NIHMS ID": ids.get("mid"),
        "Abstract": _abstract(_child(art, "Abstract")),
    }


def _xml_book_row(article: etree._Element) -> dict[str, str | None]:
    doc = _child(article, "BookDocument")
    book = _child(doc, "Book")
    # The chapter's ids; Book/ArticleIdList would name the whole book instead.
    ids = _ids([_child(doc, "ArticleIdList"), _child(article, "PubmedBookData", "ArticleIdList")])
    author_lists = _children(doc, "AuthorList")
    authors = next(
        (a for a in author_lists if (a.get("Type") or "authors") == "authors"),
        None,
    )
    if authors is None:
        authors = next(
            (a for a in _children(book, "AuthorList") if (a.get("Type") or "authors") == "authors"),
            None,
        )
    book_title = _text(_child(book, "BookTitle"))
    return {
        "PMID": _text(_child(doc, "PMID")) or ids.get("pubmed"),
        "Title": _text(_child(doc, "ArticleTitle")) or book_title,
        "Authors": _xml_authors(authors),
        "Journal": book_title,
        "Year": _pub_year(_child(book, "PubDate")),
        "PMCID": ids.get("pmc"),
        "DOI": ids.get("doi"),
        "NBK": ids.get("bookaccession"),
        "NIHMS ID": ids.get("mid"),
        "Abstract": _abstract(_child(doc, "Abstract")),
    }
