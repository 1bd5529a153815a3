"""Article identity: the :class:`ArticleIds` bundle and the one place ids are parsed.

Every identifier that enters the library goes through a ``parse_*`` function
here before any source sees it. Each parser accepts the forms users actually
hold (prefixed, versioned, URL-wrapped, read from a float column, padded with
whitespace) and returns the canonical form, or raises :class:`ValueError` that
names the offending value. Nothing but ``ValueError`` escapes a parser.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import urllib.parse
from collections.abc import Iterable
from typing import Final, NamedTuple

__all__ = [
    "FIELDS",
    "RESOLVABLE",
    "ArticleIds",
    "Pmcid",
    "doi_key",
    "doi_path",
    "is_preprint_doi",
    "parse_bookid",
    "parse_doi",
    "parse_pmcid",
    "parse_pmcid_versioned",
    "parse_pmid",
]

RESOLVABLE: Final[frozenset[str]] = frozenset({"pmid", "pmcid", "doi"})
"""The identifiers a resolver can supply from one another."""

FIELDS: Final[tuple[str, ...]] = ("pmid", "pmcid", "doi", "bookid")
"""Every field of :class:`ArticleIds`, in canonical order."""

_MAX_LEN = 1000  # longer than any real identifier; bounds regex work on junk input


@dataclasses.dataclass(frozen=True, slots=True)
class ArticleIds:
    """An immutable bundle of any subset of pmid / pmcid / doi / bookid.

    Values are stored as given; build a bundle with :meth:`parse` to normalise
    and validate messy input first.
    """

    pmid: str | None = None
    pmcid: str | None = None
    doi: str | None = None
    bookid: str | None = None

    def merge(self, other: ArticleIds) -> ArticleIds:
        """Return a bundle with this bundle's gaps filled from ``other``.

        A known identifier is never overwritten.
        """
        return ArticleIds(
            pmid=self.pmid if self.pmid is not None else other.pmid,
            pmcid=self.pmcid if self.pmcid is not None else other.pmcid,
            doi=self.doi if self.doi is not None else other.doi,
            bookid=self.bookid if self.bookid is not None else other.bookid,
        )

    def has(self, fields: Iterable[str]) -> bool:
        """Return whether every named identifier is present (not ``None``)."""
        return all(getattr(self, f, None) is not None for f in fields)

    def missing(self, fields: Iterable[str]) -> frozenset[str]:
        """Return the named identifiers that are absent."""
        return frozenset(f for f in fields if getattr(self, f, None) is None)

    def is_empty(self) -> bool:
        """Return whether no identifier is present (every field is ``None``, as in :meth:`has`)."""
        return self.pmid is None and self.pmcid is None and self.doi is None and self.bookid is None

    @classmethod
    def parse(
        cls,
        *,
        pmid: object = None,
        pmcid: object = None,
        doi: object = None,
        bookid: object = None,
    ) -> ArticleIds:
        """Build a bundle from raw values, normalising each present one.

        Blank values (``None``, ``""``, NaN) count as absent. Raises
        :class:`ValueError` naming the field and value that failed.
        """
        out: dict[str, str | None] = {}
        for name, raw, parser in (
            ("pmid", pmid, parse_pmid),
            ("pmcid", pmcid, parse_pmcid),
            ("doi", doi, parse_doi),
            ("bookid", bookid, parse_bookid),
        ):
            if _is_blank(raw):
                out[name] = None
                continue
            try:
                out[name] = parser(raw)
            except ValueError as exc:
                raise ValueError(f"{name}: {exc}") from None
        return cls(**out)


class Pmcid(NamedTuple):
    """A parsed PMCID: the canonical ``PMC<digits>`` plus the version, if one was given."""

    pmcid: str
    version: int | None


def _is_blank(value: object) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    if isinstance(value, str) and not value.strip():
        return True
    # pandas.NA / NaT compare strangely; detect them without importing pandas.
    return type(value).__name__ in {"NAType", "NaTType"}


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _as_text(value: object, what: str) -> str:
    """Coerce a cell value to stripped text; floats that hold integers lose their ``.0``."""
    if isinstance(value, bool):
        raise ValueError(f"not a {what}: {_show(value)}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and value >= 0:
            return str(int(value))
        raise ValueError(f"not a {what}: {_show(value)}")
    if isinstance(value, bytes):
        try:
            value = value.decode("ascii")
        except UnicodeDecodeError:
            raise ValueError(f"not a {what}: {_show(value)}") from None
    if not isinstance(value, str):
        # numpy integers and the like stringify sensibly; anything else is rejected below.
        # A broken __str__ must still surface as ValueError, the parsers' only error.
        try:
            value = str(value)
        except Exception:
            raise ValueError(f"not a {what}: <unprintable {type(value).__name__}>") from None
    text = value.strip()
    if len(text) > _MAX_LEN:
        raise ValueError(f"not a {what} (too long): {_show(text)}")
    return text


_PMID_URL = re.compile(
    r"^(?:https?://)?(?:www\.)?(?:pubmed\.ncbi\.nlm\.nih\.gov|ncbi\.nlm\.nih\.gov/pubmed)/"
    r"(?P<digits>[0-9]+)/?(?:[?#].*)?$",
    re.IGNORECASE,
)
_PMID_PREFIX = re.compile(r"^(?:pmid|pubmed)\s*[:=]?\s*", re.IGNORECASE)
_DIGITS = re.compile(r"^[0-9]+$")
_FLOATISH = re.compile(r"^([0-9]+)\.0+$")
# PMIDs are about 4 * 10**7 today and grow by about 1.5 * 10**6 a year, so nine digits
# last for centuries; a longer number is a phone number, an ISBN or a mangled cell.
_PMID_MAX_DIGITS: Final = 9


def parse_pmid(value: object) -> str:
    """Return the canonical PMID (ASCII digits, no leading zeros) for ``value``.

    Accepts ``"30000001"``, ``30000001``, ``30000001.0`` (a float column),
    ``"PMID: 30000001"`` and PubMed URLs. Raises :class:`ValueError` otherwise.
    """
    text = _as_text(value, "PMID")
    m = _PMID_URL.match(text)
    if m:
        text = m.group("digits")
    else:
        text = _PMID_PREFIX.sub("", text, count=1)
        floatish = _FLOATISH.match(text)
        if floatish:
            text = floatish.group(1)
    if not _DIGITS.match(text) or not text.isascii():
        raise ValueError(f"not a PMID: {_show(value)}")
    canonical = text.lstrip("0")
    if not canonical:
        raise ValueError(f"not a PMID (zero): {_show(value)}")
    if len(canonical) > _PMID_MAX_DIGITS:
        raise ValueError(f"not a PMID (more than {_PMID_MAX_DIGITS} digits): {_show(value)}")
    return canonical


_PMCID = re.compile(r"^(?:pmc)?\s*([0-9]+)(?:\.([0-9]+))?$", re.IGNORECASE)
_PMC_URL = re.compile(
    r"^(?:https?://)?(?:www\.)?(?:ncbi\.nlm\.nih\.gov/pmc|pmc\.ncbi\.nlm\.nih\.gov|europepmc\.org)"
    r"/(?:articles|article/PMC|abstract/PMC)/(?P<id>(?:pmc)?[0-9]+(?:\.[0-9]+)?)/?(?:[?#].*)?$",
    re.IGNORECASE,
)
_PMCID_PREFIX = re.compile(r"^pmcid\s*[:=]\s*", re.IGNORECASE)


def parse_pmcid_versioned(value: object) -> Pmcid:
    """Parse a PMCID and keep its version: ``"PMC7000001.2"`` → ``Pmcid("PMC7000001", 2)``.

    Accepts ``PMC123``, ``pmc123``, bare digits, ``PMCID: PMC123``, a version
    suffix and PMC / Europe PMC article URLs.
    """
    text = _as_text(value, "PMCID")
    m = _PMC_URL.match(text)
    if m:
        text = m.group("id")
    text = _PMCID_PREFIX.sub("", text, count=1)
    m = _PMCID.match(text)
    if not m or not text.isascii():
        raise ValueError(f"not a PMCID: {_show(value)}")
    digits = m.group(1).lstrip("0")
    if not digits:
        raise ValueError(f"not a PMCID (zero): {_show(value)}")
    version = int(m.group(2)) if m.group(2) is not None else None
    if version is not None and version < 1:
        raise ValueError(f"not a PMCID (version 0): {_show(value)}")
    return Pmcid(f"PMC{digits}", version)


def parse_pmcid(value: object) -> str:
    """Return the canonical unversioned PMCID (``PMC<digits>``) for ``value``.

    ``PMC7000001.2`` gives ``PMC7000001``; use :func:`parse_pmcid_versioned`
    to keep the version.
    """
    return parse_pmcid_versioned(value).pmcid


_DOI_RESOLVER = re.compile(r"^(?:https?://)?(?:dx\.|www\.)?doi\.org/", re.IGNORECASE)
_DOI_SCHEME = re.compile(r"^doi\s*:\s*", re.IGNORECASE)
_DOI_SHAPE = re.compile(r"^10\.[0-9]+(?:\.[0-9]+)*/\S(?:.*\S)?$", re.DOTALL)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_doi(value: object) -> str:
    """Return the bare DOI for ``value``, case preserved.

    Strips ``https://doi.org/``, ``http://dx.doi.org/``, ``doi:`` and
    surrounding whitespace, then checks the ``10.<digits>(.<digits>)*/<suffix>``
    shape. URL-encoded input (``10.1000%2Fabc``) is decoded once. Compare DOIs
    with :func:`doi_key`, never by raw equality.
    """
    if not isinstance(value, str | bytes):
        raise ValueError(f"not a DOI: {_show(value)}")
    return _parse_doi_text(value)


@functools.lru_cache(maxsize=16384)
def _parse_doi_text(value: str | bytes) -> str:
    # Memoised: a table run parses the same DOIs again in every source and step.
    # Only successes are kept (lru_cache does not store a raised ValueError).
    text = _as_text(value, "DOI")
    stripped = _DOI_RESOLVER.sub("", text, count=1)
    if stripped != text and "%" in stripped:
        # A doi.org URL carries the DOI percent-encoded; the DOI itself does not.
        stripped = urllib.parse.unquote(stripped)
    stripped = _DOI_SCHEME.sub("", stripped, count=1).strip()
    if not _DOI_SHAPE.match(stripped) and "%2f" in stripped.lower():
        # The whole DOI was URL-encoded (``10.1000%2Fabc``): decode it once. Only a value
        # that fails as it stands is decoded, so a canonical DOI re-parses unchanged.
        stripped = urllib.parse.unquote(stripped).strip()
    if _CONTROL.search(stripped) or not _DOI_SHAPE.match(stripped):
        raise ValueError(f"not a DOI: {_show(value)}")
    if any(seg in {".", "..", ""} for seg in stripped.split("/")[1:]):
        # The sources put a DOI in a URL path, where such a segment would be folded
        # away and name another resource: refused here, so no source ever sees one.
        raise ValueError(f"not a DOI (a '.', '..' or empty path segment): {_show(value)}")
    return stripped


def doi_key(doi: str) -> str:
    """Return the comparison key of a DOI (DOIs are case-insensitive)."""
    return doi.lower()


def doi_path(doi: str) -> str:
    """Return ``doi`` encoded for use inside a URL path.

    Each ``/``-separated segment is percent-encoded with no safe characters,
    so ``?``, ``#``, ``%`` and the like cannot reshape the URL. A DOI with a
    ``.`` or ``..`` segment (or an empty one, ``//``) is rejected with
    :class:`ValueError`, as is anything :func:`parse_doi` rejects.
    """
    canonical = parse_doi(doi)
    return _doi_path(canonical)


@functools.lru_cache(maxsize=16384)
def _doi_path(canonical: str) -> str:
    # Memoised for the same reason as parse_doi: every source quotes the same DOIs.
    segments = canonical.split("/")
    if any(seg in {".", "..", ""} for seg in segments):
        raise ValueError(f"DOI would escape its URL path: {_show(canonical)}")
    return "/".join(urllib.parse.quote(seg, safe="") for seg in segments)


_PREPRINT_PREFIXES = ("10.1101/", "10.64898/")


def is_preprint_doi(doi: str) -> bool:
    """Return whether ``doi`` is registered by bioRxiv / medRxiv (Cold Spring Harbor).

    The prefix is tested on the normalised DOI, so ``doi:`` and ``https://doi.org/``
    forms count; a value that is not a DOI gives ``False``.
    """
    try:
        canonical = parse_doi(doi)
    except ValueError:
        return False
    return canonical.lower().startswith(_PREPRINT_PREFIXES)


_BOOKID = re.compile(r"^(?:nbk)([0-9]+)$", re.IGNORECASE | re.ASCII)


def parse_bookid(value: object) -> str:
    """Return the canonical NCBI Bookshelf accession (``NBK<digits>``) for ``value``.

    Matching is ASCII-only, so look-alike characters (the Kelvin sign, non-ASCII
    digits) are rejected. Raises :class:`ValueError` for anything else.
    """
    if not isinstance(value, str | bytes):
        raise ValueError(f"not a Bookshelf id (NBK<digits>): {_show(value)}")
    text = _as_text(value, "Bookshelf id")
    if not text.isascii():
        raise ValueError(f"not a Bookshelf id (NBK<digits>): {_show(value)}")
    m = _BOOKID.match(text)
    if not m or not m.group(1).strip("0"):
        raise ValueError(f"not a Bookshelf id (NBK<digits>): {_show(value)}")
    return f"NBK{m.group(1)}"
