"""Access terms read from body bytes: :func:`extract_source_metadata`.

Dispatch is on ``Blob.file.media_type``: JATS (also BITS book parts) and
Elsevier full-text XML carry terms; anything else (PDF, text) gives an empty
:class:`SourceMetadata`. Parsing goes through the hardened
:func:`litfetch_df._xml.parse_xml`; bytes that do not parse give empty terms.

For one JATS ``<license>`` the ``licence`` value is the first of:

1. the ``xlink:href`` of ``<license>``;
2. the text of an ``<ali:license_ref>`` child (one without ``specific-use``, or
   with ``specific-use="vor"``, preferred over others);
3. an ``<ext-link>`` inside ``<license-p>`` whose href points at
   creativecommons.org;
4. a creativecommons.org URL written in the ``<license-p>`` prose (many
   publishers state the licence only in text: ``"... Creative Commons
   Attribution 4.0 International License
   (http://creativecommons.org/licenses/by/4.0/) ..."``);
5. the ``license-type`` attribute;
6. the ``<license-p>`` text, whitespace collapsed.

Step 4 is this library's addition to the upstream reference's recommended
order: without it a prose-only licence would be reported as its bare
``license-type`` (e.g. ``"OpenAccess"``), which names no licence at all.
``access`` is ``"open-access"`` when ``license-type`` contains ``open``
(any case), else ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Final

from lxml import etree

from .._xml import XmlError, local_name, parse_xml
from ..files import ELSEVIER_XML, JATS_XML, Blob
from ..metadata import SourceMetadata

__all__ = ["extract_source_metadata"]

_BASIS: Final = "artifact"
_OPEN_ACCESS: Final = "open-access"

# A CC URL in prose ends at whitespace, a quote, a bracket or list punctuation;
# a trailing full stop belongs to the sentence, not the URL.
_CC_URL = re.compile(r"https?://(?:www\.)?creativecommons\.org/[^\s<>\"'(),;\]]*", re.IGNORECASE)
_SPACE = re.compile(r"\s+")

_Terms = tuple[str | None, str | None]  # (licence, access)


def extract_source_metadata(blob: Blob) -> SourceMetadata:
    """Return the licence / access terms stated inside ``blob``'s bytes (``basis='artifact'``).

    JATS articles: ``article-meta/permissions`` first, then any ``<license>`` in
    document order. BITS book parts (root ``book-part-wrapper``): the part's own
    ``book-part-meta/permissions``, then the book's ``book-meta/permissions``;
    the first licence with a term supplies the whole answer (a BITS ``book``
    root: ``book-meta/permissions``, then document order). Elsevier XML:
    ``openaccessUserLicense`` and ``openaccess``. Returns an empty
    :class:`SourceMetadata` for other media types, unparseable bytes, or when no
    licence is stated.
    """
    media_type = (blob.file.media_type or "").split(";", 1)[0].strip().lower()
    if media_type not in {JATS_XML, ELSEVIER_XML}:
        return SourceMetadata()
    try:
        root = parse_xml(blob.content)
    except XmlError:
        return SourceMetadata()
    if media_type == ELSEVIER_XML:
        licence, access = _elsevier_terms(root)
    else:
        licence, access = _jats_terms(root)
    if licence is None and access is None:
        return SourceMetadata()
    return SourceMetadata(licence=licence, access=access, basis=_BASIS)


# -- JATS / BITS ---------------------------------------------------------------------------------


def _jats_terms(root: etree._Element) -> _Terms:
    name = local_name(root)
    if name == "book-part-wrapper":
        # Only the part's own terms, then the whole book's; a figure's or a
        # table's licence elsewhere in the part never speaks for the part.
        for scope in (
            _path(root, "book-part", "book-part-meta", "permissions"),
            _path(root, "book-meta", "permissions"),
        ):
            terms = _first_terms(_children(scope, "license"))
            if terms is not None:
                return terms
        return None, None
    if name == "book":
        preferred = list(_children(_path(root, "book-meta", "permissions"), "license"))
    else:
        preferred = list(_children(_path(root, "front", "article-meta", "permissions"), "license"))
    terms = _first_terms(preferred)
    if terms is not None:
        return terms
    tried = set(preferred)
    rest = (el for el in root.iter() if local_name(el) == "license" and el not in tried)
    terms = _first_terms(rest)
    return terms if terms is not None else (None, None)


def _first_terms(licences: Iterable[etree._Element]) -> _Terms | None:
    """Return the terms of the first ``<license>`` that states any, else ``None``."""
    for lic in licences:
        licence, access = _license_terms(lic)
        if licence is not None or access is not None:
            return licence, access
    return None


def _license_terms(lic: etree._Element) -> _Terms:
    license_type = _clean(lic.get("license-type"))
    access = _OPEN_ACCESS if license_type and "open" in license_type.lower() else None
    paragraphs = [p for p in lic.iter() if local_name(p) == "license-p"]
    licence = (
        _href(lic)
        or _ali_ref(lic)
        or _cc_ext_link(paragraphs)
        or _cc_url_in_text(paragraphs)
        or license_type
        or _collapsed(paragraphs or [lic])
    )
    return licence, access


def _href(element: etree._Element) -> str | None:
    # xlink:href in any namespace (or none): match on the attribute's local name.
    for attr, value in element.attrib.items():
        if str(attr).rsplit("}", 1)[-1] == "href":
            cleaned = _clean(str(value))
            if cleaned:
                return cleaned
    return None


def _ali_ref(lic: etree._Element) -> str | None:
    refs = [(ref, _clean(_text(ref))) for ref in lic if local_name(ref) == "license_ref"]
    refs = [(ref, text) for ref, text in refs if text]
    for ref, text in refs:
        if ref.get("specific-use") in (None, "vor"):
            return text
    return refs[0][1] if refs else None


def _cc_ext_link(paragraphs: list[etree._Element]) -> str | None:
    for p in paragraphs:
        for link in p.iter():
            if local_name(link) != "ext-link":
                continue
            href = _href(link)
            if href and "creativecommons.org" in href.lower():
                return href
    return None


def _cc_url_in_text(paragraphs: list[etree._Element]) -> str | None:
    for p in paragraphs:
        m = _CC_URL.search(_text(p))
        if m:
            return m.group(0).rstrip(".")
    return None


def _collapsed(elements: list[etree._Element]) -> str | None:
    return _clean(" ".join(_text(el) for el in elements))


# -- Elsevier --------------------------------------------------------------------------------------


def _elsevier_terms(root: etree._Element) -> _Terms:
    licence: str | None = None
    access: str | None = None
    for el in root.iter():
        name = local_name(el)
        if name == "openaccessUserLicense" and licence is None:
            licence = _clean(_text(el))
        elif name == "openaccess" and access is None and _text(el).strip().lower() in {"1", "true"}:
            access = _OPEN_ACCESS
    return licence, access


# -- helpers -------------------------------------------------------------------------------------


def _path(root: etree._Element, *names: str) -> list[etree._Element]:
    """Follow ``names`` from ``root`` through direct children only; every match at each step."""
    level = [root]
    for name in names:
        level = [child for el in level for child in el if local_name(child) == name]
    return level


def _children(parents: list[etree._Element], name: str) -> Iterator[etree._Element]:
    for parent in parents:
        for child in parent:
            if local_name(child) == name:
                yield child


def _text(element: etree._Element) -> str:
    return "".join(t if isinstance(t, str) else t.decode() for t in element.itertext())


def _clean(value: str | None) -> str | None:
    """Collapse whitespace; ``None`` for a blank value."""
    if value is None:
        return None
    collapsed = _SPACE.sub(" ", value).strip()
    return collapsed or None
