"""Europe PMC REST full text: article JATS and Bookshelf BITS book parts.

Endpoints: ``/PMC<n>/fullTextXML`` and ``/NBK<n>/bookXML``.

Both endpoints answer a miss in two ways: 404, or 200 with a small
``<fullTextXMLBean>`` envelope instead of the document. The envelope is told
apart by its root element name alone. A 200 is accepted only when the bytes
are well-formed XML with the expected root (``article`` for full text,
``book-part-wrapper`` or ``book`` for a book part), so an HTML maintenance page
or a JSON error served with 200 is never returned as a body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ..files import JATS_XML, Blob, File, FileKind
from ..ids import ArticleIds, parse_bookid, parse_pmcid
from ..safexml.parse import XmlError, local_name, parse_xml, root_name
from ..wire.http import Http, Rate, get_logger
from .common import GetRequest, fetch_ok

__all__ = [
    "EUROPE_PMC_REST",
    "EuropePmcBookshelfFetcher",
    "EuropePmcFetcher",
    "full_text_request",
]

log = get_logger(__name__)

EUROPE_PMC_REST: Final = "https://www.ebi.ac.uk/europepmc/webservices/rest"
"""Base URL of the Europe PMC REST service."""

_ENVELOPE: Final = "fullTextXMLBean"


class EuropePmcFetcher:
    """Body fetcher for Europe PMC's open full text (``/PMC<n>/fullTextXML``).

    Returns the JATS ``<article>`` as a ``Blob`` (``application/jats+xml``,
    ``uri`` = the request URL), or ``None`` on a miss or failure.
    """

    name: str = "europe_pmc"
    requires: frozenset[str] = frozenset({"pmcid"})

    def __repr__(self) -> str:
        return "EuropePmcFetcher()"

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Return the article's JATS full text, or ``None``."""
        if article_ids.pmcid is None:
            return None
        try:
            # Europe PMC keys on the unversioned PMCID.
            pmcid = parse_pmcid(article_ids.pmcid)
        except ValueError as exc:
            log.warning("europe_pmc: declined an invalid PMCID: %s", exc)
            return None
        request = full_text_request(pmcid)
        return await _fetch_xml(http, request.url, source=self.name, roots=frozenset({"article"}))


def full_text_request(pmcid: str) -> GetRequest:
    """Return the full-text request :class:`EuropePmcFetcher` sends for a parsed ``pmcid``.

    ``GET /PMC<n>/fullTextXML``, no parameters, paced at :attr:`Rate.EUROPE_PMC`.
    """
    return GetRequest(
        url=f"{EUROPE_PMC_REST}/{pmcid}/fullTextXML",
        params=None,
        headers=None,
        rate=Rate.EUROPE_PMC,
    )


class EuropePmcBookshelfFetcher:
    """Body fetcher for an NCBI Bookshelf book part via Europe PMC (``/NBK<n>/bookXML``).

    Returns the BITS document as a ``Blob`` with media type
    ``application/jats+xml``, or ``None`` on a miss or failure. A ``bookid``
    that is not ``NBK<digits>`` raises :class:`ValueError` before any request.
    """

    name: str = "europe_pmc_bookshelf"
    requires: frozenset[str] = frozenset({"bookid"})

    def __repr__(self) -> str:
        return "EuropePmcBookshelfFetcher()"

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Return the book part's BITS XML, or ``None``; raise ``ValueError`` for a bad bookid."""
        if article_ids.bookid is None:
            return None
        bookid = parse_bookid(article_ids.bookid)  # a caller error: let it raise
        url = f"{EUROPE_PMC_REST}/{bookid}/bookXML"
        return await _fetch_xml(
            http, url, source=self.name, roots=frozenset({"book-part-wrapper", "book"})
        )


async def _fetch_xml(http: Http, url: str, *, source: str, roots: frozenset[str]) -> Blob | None:
    """GET ``url`` and return its bytes as a JATS-typed body if the root is one of ``roots``."""
    response = await fetch_ok(http.get(url, rate=Rate.EUROPE_PMC), f"{source}: {url}", logger=log)
    if response is None:
        return None
    content = response.content
    if not content.strip():
        log.debug("%s: empty answer for %s", source, url)
        return None
    name = root_name(content)
    if name == _ENVELOPE:
        log.debug("%s: no open full text (envelope) for %s", source, url)
        return None
    if name not in roots:
        log.warning("%s: unexpected document (root %r) for %s; declined", source, name, url)
        return None
    try:
        parsed = parse_xml(content)
    except XmlError as exc:
        log.warning("%s: unusable XML for %s: %s", source, url, exc)
        return None
    if local_name(parsed) not in roots:
        log.warning("%s: unexpected root %r for %s; declined", source, local_name(parsed), url)
        return None
    file = File(kind=FileKind.BODY, source=source, media_type=JATS_XML, uri=url)
    return Blob(file=file, content=content)
