"""Every statement of a licence a document makes, ranked: :func:`rank_licence_clues`.

A JATS ``<license>`` can state its licence five ways at once, and they do not
always agree: a publisher's agreement URL on ``xlink:href`` beside a Creative
Commons URL in a ``<uri>`` of the text (Frontiers, 2012), a generic
``license-type="open-access"`` beside text that names the Creative Commons
licence. Each statement is a :class:`LicenceClue`; one ranking decides which
of them is *the* licence, for JATS, Elsevier and service answers alike:

1. a Creative Commons or public-domain URL, wherever it was written;
2. a licence named in the text (Creative Commons Attribution and its
   NonCommercial / NoDerivatives / ShareAlike variants, CC0, public domain),
   with its version where the text states one;
3. any other URL (``xlink:href``, ``ali:license_ref``, a service's licence);
4. the ``license-type`` attribute (``open-access``, ``cc-by`` …);
5. the licence text itself, whitespace collapsed.

Ties keep document order. The text stays available on
:class:`LicenceEvidence` whichever clue wins.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Final

from lxml import etree

from ..metadata import is_open_licence_url

__all__ = [
    "OPEN_ACCESS",
    "LicenceClue",
    "LicenceEvidence",
    "is_open_licence_url",
    "licence_named_in",
    "license_evidence",
    "rank_licence_clues",
]

OPEN_ACCESS: Final = "open-access"
"""The ``access`` value a document's own open-access statement gives."""

# Where a clue was written. The URL places rank by what the URL names.
HREF: Final = "xlink:href"
ALI: Final = "ali:license_ref"
LINK: Final = "license-p link"
PROSE_URL: Final = "license-p url"
NAMED: Final = "license-p name"
LICENSE_TYPE: Final = "license-type"
TEXT: Final = "license-p"
_URL_PLACES: Final = frozenset({HREF, ALI, LINK, PROSE_URL})

# A CC URL in prose ends at whitespace, a quote, a bracket or list punctuation;
# a trailing full stop belongs to the sentence, not the URL.
_CC_URL = re.compile(r"https?://(?:www\.)?creativecommons\.org/[^\s<>\"'(),;\]]*", re.IGNORECASE)
_SPACE = re.compile(r"\s+")

_NAME = re.compile(
    r"(?P<cc0>\bCC[\s-]?(?:0|zero)\b|Creative\s+Commons\s+Zero|public\s+domain\s+dedication)"
    r"|(?P<cc>Creative\s+Commons\s+(?:\(CC\)\s+)?Attribution"
    r"(?P<terms>(?:[\s-]*(?:Non[\s-]?Commercial|No[\s-]?Deriv(?:ative)?s?|Share[\s-]?Alike))*))"
    r"|(?P<short>\bCC[\s-]BY(?P<short_terms>(?:[\s-](?:NC|ND|SA)\b)*))"
    # "not in the public domain" names no licence.
    r"|(?P<pd>(?<!not in the )(?<!not )\bpublic\s+domain\b)",
    re.IGNORECASE,
)
# A version belongs to the name when it follows within a few words, in the same sentence.
_VERSION = re.compile(r"[^.;:]{0,30}?\b([1-4]\.[05])\b")


@dataclasses.dataclass(frozen=True, slots=True)
class LicenceClue:
    """One statement of a licence: the raw ``value`` and ``where`` the document wrote it."""

    value: str
    where: str


@dataclasses.dataclass(frozen=True, slots=True)
class LicenceEvidence:
    """What a document says about its terms: every licence clue (best first), text, access.

    ``text`` is the licence text, whitespace collapsed, whichever clue won;
    ``access`` is :data:`OPEN_ACCESS` when the document says it is open access,
    and ``access_where`` names the statement that said so.
    """

    clues: tuple[LicenceClue, ...] = ()
    text: str | None = None
    access: str | None = None
    access_where: str | None = None

    @property
    def licence(self) -> str | None:
        """The best clue's value, or ``None`` when no licence is stated."""
        return self.clues[0].value if self.clues else None

    def is_empty(self) -> bool:
        """Return whether neither a licence nor an access status is stated."""
        return not self.clues and self.access is None


def _tier(clue: LicenceClue) -> int:
    if clue.where in _URL_PLACES and is_open_licence_url(clue.value):
        return 0
    if clue.where == NAMED:
        return 1
    if clue.where == LICENSE_TYPE:
        return 3
    if clue.where == TEXT:
        return 4
    return 2  # any other URL or a service's licence string


def rank_licence_clues(clues: Iterable[LicenceClue]) -> tuple[LicenceClue, ...]:
    """Return ``clues`` best first (the ranking in this module's docstring), repeats dropped."""
    seen: set[tuple[str, str]] = set()
    ranked: list[tuple[int, int, LicenceClue]] = []
    for position, clue in enumerate(clues):
        key = (clue.value, clue.where)
        if key not in seen:
            seen.add(key)
            ranked.append((_tier(clue), position, clue))
    ranked.sort(key=lambda entry: (entry[0], entry[1]))
    return tuple(clue for _, _, clue in ranked)


def licence_named_in(text: str) -> str | None:
    """Return the first licence ``text`` names, e.g. ``"CC BY-NC 3.0"``, ``"CC0"``.

    The version is given only when the text states it next to the name; a
    mention of "Creative Commons" without the licence's terms names nothing.
    """
    match = _NAME.search(text)
    if match is None:
        return None
    version = _VERSION.match(text, match.end())
    suffix = f" {version.group(1)}" if version else ""
    if match.group("cc0"):
        return f"CC0{suffix}"
    if match.group("pd"):
        return "public domain"
    terms = (match.group("terms") or match.group("short_terms") or "").lower()
    parts = ["BY"]
    if "nc" in terms or "commercial" in terms:
        parts.append("NC")
    if "sa" in terms or "share" in terms:
        parts.append("SA")
    if "nd" in terms or "deriv" in terms:
        parts.append("ND")
    return "CC " + "-".join(parts) + suffix


def license_evidence(licences: Sequence[etree._Element]) -> LicenceEvidence:
    """Return the ranked evidence of a group of JATS ``<license>`` elements read together.

    Each ``<license>`` gives its ``xlink:href``; its ``ali:license_ref`` texts
    (one without ``specific-use``, or ``vor``, before the others); the URLs of
    the ``ext-link`` and ``uri`` elements in its ``<license-p>`` and the
    Creative Commons URLs written in that text (only open-licence URLs: a link
    to a publisher's terms page in the text is not the licence); the licence
    the text names; its ``license-type``; and the text. ``access`` is
    :data:`OPEN_ACCESS` when a ``license-type`` contains ``open``.
    """
    clues: list[LicenceClue] = []
    texts: list[str] = []
    access: str | None = None
    for lic in licences:
        # "{*}name": the element in any namespace or none, matched inside lxml.
        paragraphs = list(lic.iter("{*}license-p"))
        text = collapse(" ".join(element_text(el) for el in (paragraphs or [lic])))
        license_type = collapse(lic.get("license-type"))
        if license_type and access is None and "open" in license_type.lower():
            access = OPEN_ACCESS
        href = _href(lic)
        if href:
            clues.append(LicenceClue(href, HREF))
        clues.extend(LicenceClue(ref, ALI) for ref in _ali_refs(lic))
        clues.extend(
            LicenceClue(url, LINK) for url in _links(paragraphs) if is_open_licence_url(url)
        )
        for p in paragraphs:
            clues.extend(
                LicenceClue(m.group(0).rstrip("."), PROSE_URL)
                for m in _CC_URL.finditer(element_text(p))
            )
        named = licence_named_in(text) if text else None
        if named:
            clues.append(LicenceClue(named, NAMED))
        if license_type:
            clues.append(LicenceClue(license_type, LICENSE_TYPE))
        if text:
            clues.append(LicenceClue(text, TEXT))
            texts.append(text)
    return LicenceEvidence(
        clues=rank_licence_clues(clues),
        text=" ".join(texts) or None,
        access=access,
        access_where=LICENSE_TYPE if access else None,
    )


def _href(element: etree._Element) -> str | None:
    # xlink:href in any namespace (or none): match on the attribute's local name.
    for attr, value in element.attrib.items():
        if str(attr).rsplit("}", 1)[-1] == "href":
            cleaned = collapse(str(value))
            if cleaned:
                return cleaned
    return None


def _ali_refs(lic: etree._Element) -> list[str]:
    refs = [(ref, collapse(element_text(ref))) for ref in lic.iterchildren("{*}license_ref")]
    first = [text for ref, text in refs if text and ref.get("specific-use") in (None, "vor")]
    rest = [text for ref, text in refs if text and ref.get("specific-use") not in (None, "vor")]
    return first + rest


def _links(paragraphs: list[etree._Element]) -> list[str]:
    """The URL of every ``ext-link`` and ``uri`` in the paragraphs: its href, else its text."""
    urls: list[str] = []
    for p in paragraphs:
        for link in p.iter("{*}ext-link", "{*}uri"):
            url = _href(link) or collapse(element_text(link))
            if url:
                urls.append(url)
    return urls


def element_text(element: etree._Element) -> str:
    """Return all the text inside ``element``, markup dropped."""
    return "".join(t if isinstance(t, str) else t.decode() for t in element.itertext())


def collapse(value: str | None) -> str | None:
    """Collapse whitespace; ``None`` for a blank value."""
    if value is None:
        return None
    collapsed = _SPACE.sub(" ", value).strip()
    return collapsed or None
