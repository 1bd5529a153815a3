"""Access terms read from body bytes: :func:`extract_source_metadata`, :func:`licence_evidence`.

Dispatch is on ``Blob.file.media_type``: JATS (also BITS book parts) and
Elsevier full-text XML carry terms; anything else (PDF, text) gives empty
terms. Only the front matter is parsed
(:func:`litfetch_df.safexml.frontmatter.read_front_matter`, as hardened as
:func:`litfetch_df.safexml.parse.parse_xml`); the whole document is parsed only when
the front matter states nothing, to find a ``<license>`` further on. Bytes
that do not parse give empty terms.

The licence is the best of every statement the ``<license>`` elements make,
ranked by :func:`~litfetch_df.operations.licence_evidence.rank_licence_clues`:
a Creative Commons or public-domain URL wherever it is written (``xlink:href``,
``ali:license_ref``, an ``ext-link`` or ``uri`` in ``<license-p>``, a URL in the
prose), then a licence the text names (``"CC BY-NC 3.0"``), then any other URL,
then ``license-type``, then the text itself. ``access`` is ``"open-access"``
when the document says so anywhere it can: a ``license-type`` containing
``open``, PMC's ``custom-meta`` ``pmc-prop-open-access = yes``, PMC's
``<?properties open_access?>`` marker; Elsevier's ``openaccess`` flag, else
its ``openaccessArticle``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from lxml import etree

from ..files import ELSEVIER_XML, JATS_XML, Blob
from ..metadata import SourceMetadata
from ..safexml.frontmatter import read_front_matter
from ..safexml.parse import XmlError, local_name, parse_xml
from .licence_evidence import (
    OPEN_ACCESS,
    LicenceClue,
    LicenceEvidence,
    collapse,
    element_text,
    license_evidence,
    rank_licence_clues,
)

__all__ = ["extract_source_metadata", "licence_evidence"]

_BASIS: Final = "artifact"
_CUSTOM_META: Final = "custom-meta pmc-prop-open-access"
_PMC_MARKER: Final = "<?properties open_access?>"
_ELSEVIER_LICENCE: Final = "openaccessUserLicense"
_TRUE: Final = frozenset({"1", "true", "yes"})


def extract_source_metadata(blob: Blob) -> SourceMetadata:
    """Return the licence / access terms stated inside ``blob``'s bytes (``basis='artifact'``).

    JATS articles: ``article-meta/permissions`` first, then any ``<license>`` in
    document order. BITS book parts (root ``book-part-wrapper``): the part's own
    ``book-part-meta/permissions``, then the book's ``book-meta/permissions``
    (a BITS ``book`` root: ``book-meta/permissions``, then document order).
    Elsevier XML: ``openaccessUserLicense``, ``openaccess`` / ``openaccessArticle``.
    Returns an empty :class:`SourceMetadata` for other media types, unparseable
    bytes, or when nothing is stated. :func:`licence_evidence` gives every
    clue behind the answer.
    """
    evidence = licence_evidence(blob)
    if evidence.is_empty():
        return SourceMetadata()
    return SourceMetadata(licence=evidence.licence, access=evidence.access, basis=_BASIS)


def licence_evidence(blob: Blob) -> LicenceEvidence:
    """Return everything ``blob``'s bytes state about their terms, the best licence first.

    The evidence behind :func:`extract_source_metadata`: every licence clue
    with where it was written, the licence text, and which statement gave the
    access status. Empty for media types that carry no terms and for bytes
    that do not parse.
    """
    media_type = (blob.file.media_type or "").split(";", 1)[0].strip().lower()
    if media_type not in {JATS_XML, ELSEVIER_XML}:
        return LicenceEvidence()
    read = _elsevier_evidence if media_type == ELSEVIER_XML else _jats_evidence
    try:
        front = read_front_matter(blob.content)
        evidence = read(front.root, whole=front.complete)
        # Elsevier terms live in <coredata> only, which the front matter holds whole.
        if evidence.clues or front.complete or media_type == ELSEVIER_XML:
            return evidence
        # No licence in the front matter: one may still sit further on (an access
        # statement alone does not settle it).
        return read(parse_xml(blob.content), whole=True)
    except XmlError:
        return LicenceEvidence()


# -- JATS / BITS ---------------------------------------------------------------------------------


def _jats_evidence(root: etree._Element, *, whole: bool = True) -> LicenceEvidence:
    """The terms of a JATS / BITS tree; ``whole=False``: a front-matter tree, front scopes only."""
    found = _licence_scopes(root, whole=whole)
    access, where = found.access, found.access_where
    if access is None and local_name(root) == "article":
        access, where = _article_access(root)
    if access is None:
        return found
    return LicenceEvidence(found.clues, found.text, access, where)


def _licence_scopes(root: etree._Element, *, whole: bool) -> LicenceEvidence:
    name = local_name(root)
    if name == "book-part-wrapper":
        # Only the part's own terms, then the whole book's; a figure's or a
        # table's licence elsewhere in the part never speaks for the part.
        for scope in (
            _path(root, "book-part", "book-part-meta", "permissions"),
            _path(root, "book-meta", "permissions"),
        ):
            evidence = license_evidence(list(_children(scope, "license")))
            if not evidence.is_empty():
                return evidence
        return LicenceEvidence()
    if name == "book":
        preferred = list(_children(_path(root, "book-meta", "permissions"), "license"))
    else:
        preferred = list(_children(_path(root, "front", "article-meta", "permissions"), "license"))
    evidence = license_evidence(preferred)
    if not evidence.is_empty() or not whole:
        # A partial tree may end inside an element after the front matter: only
        # a whole tree is searched further.
        return evidence
    # Elsewhere, the first <license> that states anything speaks alone: a
    # figure's licence is not merged with a sub-article's.
    tried = set(preferred)
    for lic in root.iter("{*}license"):
        if lic not in tried:
            evidence = license_evidence([lic])
            if not evidence.is_empty():
                return evidence
    return LicenceEvidence()


def _article_access(root: etree._Element) -> tuple[str | None, str | None]:
    """PMC's own open-access statements: ``custom-meta``, then the ``properties`` marker."""
    for group in _path(root, "front", "article-meta", "custom-meta-group"):
        for meta in _children([group], "custom-meta"):
            names = [collapse(element_text(el)) for el in _children([meta], "meta-name")]
            values = [collapse(element_text(el)) for el in _children([meta], "meta-value")]
            if "pmc-prop-open-access" in names and any((v or "").lower() in _TRUE for v in values):
                return OPEN_ACCESS, _CUSTOM_META
    for node in root:
        if (
            isinstance(node, etree._ProcessingInstruction)
            and node.target == "properties"
            and "open_access" in (node.text or "").split()
        ):
            return OPEN_ACCESS, _PMC_MARKER
    return None, None


# -- Elsevier --------------------------------------------------------------------------------------


def _elsevier_evidence(root: etree._Element, *, whole: bool = True) -> LicenceEvidence:
    """The terms in an Elsevier answer's ``<coredata>`` (the rest is the article, not its terms)."""
    del whole  # <coredata> is complete in a front-matter tree and a whole one alike
    licence: str | None = None
    flags: dict[str, str] = {}
    for el in (el for core in _path(root, "coredata") for el in core.iter()):
        name = local_name(el)
        if name == _ELSEVIER_LICENCE and licence is None:
            licence = collapse(element_text(el))
        elif name in {"openaccess", "openaccessArticle"} and name not in flags:
            flags[name] = element_text(el).strip().lower()
    # ``openaccess`` decides when it is stated; ``openaccessArticle`` only stands in for it.
    where = "openaccess" if "openaccess" in flags else "openaccessArticle"
    is_open = flags.get(where) in _TRUE
    clues = rank_licence_clues([LicenceClue(licence, _ELSEVIER_LICENCE)] if licence else [])
    return LicenceEvidence(
        clues=clues,
        text=None,
        access=OPEN_ACCESS if is_open else None,
        access_where=where if is_open else None,
    )


# -- helpers -------------------------------------------------------------------------------------


def _path(root: etree._Element, *names: str) -> list[etree._Element]:
    """Follow ``names`` from ``root`` through direct children only; every match at each step."""
    level = [root]
    for name in names:
        level = [child for el in level for child in el.iterchildren("{*}" + name)]
    return level


def _children(parents: list[etree._Element], name: str) -> Iterator[etree._Element]:
    for parent in parents:
        yield from parent.iterchildren("{*}" + name)
