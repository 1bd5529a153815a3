"""Springer Nature OpenAccess JATS by DOI list: up to 20 articles per request (Basic's page).

``GET /openaccess/jats?q=(doi:a OR doi:b …)&p=20&api_key=<key>`` answers one
envelope holding an ``<article>`` per DOI it serves open access; a DOI it does
not serve is simply absent. :func:`springer_oa_pages` asks for the DOIs in pages
of :data:`OA_PAGE` (both plans allow 20, limits-2026.md §8) and cuts each answer
into one article per DOI, matched by the article's ``<article-id
pub-id-type="doi">`` (case-insensitively), as bytes (the envelope declares
parameter entities a hardened parser refuses; see
:func:`~.springer.extract_article`). A 403 "premium feature" shrinks the page
once to :data:`SMALL_OA_PAGE`, never to one DOI per request. A page that is
not answered (an error, a failure) leaves its DOIs unsettled: the per-article
request still goes out for them.

The key travels only in the ``api_key`` parameter; nothing here logs a URL.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

import httpx

from ..wire.http import Http, Rate, get_logger
from .springer import SPRINGER_OA_JATS_URL

__all__ = [
    "OA_PAGE",
    "SMALL_OA_PAGE",
    "OaPages",
    "single_answer",
    "split_articles",
    "springer_oa_pages",
]

log = get_logger(__name__)

OA_PAGE: Final = 20
"""DOIs OR-ed into one OpenAccess query: the page (``p``) both plans allow."""

SMALL_OA_PAGE: Final = 10
"""The page a lookup shrinks to, once, when OpenAccess answers 403 (a smaller plan)."""

_ARTICLE_OPEN = re.compile(rb"<article[\s>]")
_ARTICLE_CLOSE = b"</article>"
_DOI_ID = re.compile(rb'<article-id[^>]*pub-id-type="doi"[^>]*>\s*([^<\s]+)\s*</article-id>')
# A DOI holding query syntax for the boolean parser is asked on its own (per article).
_SYNTAX = re.compile(r"[\s\"()]")


@dataclass(frozen=True, slots=True)
class OaPages:
    """What the paged lookup settled: articles by DOI key, and the DOIs answered without one."""

    articles: dict[str, bytes]
    absent: frozenset[str]


def split_articles(envelope: bytes) -> dict[str, bytes]:
    """Cut every ``<article>`` out of an OpenAccess answer, keyed by its DOI (lower case).

    An article without a DOI ``<article-id>`` is left out (nothing to match it to).
    """
    out: dict[str, bytes] = {}
    pos = 0
    while True:
        start = _ARTICLE_OPEN.search(envelope, pos)
        if start is None:
            return out
        end = envelope.find(_ARTICLE_CLOSE, start.start())
        if end < 0:
            return out
        article = envelope[start.start() : end + len(_ARTICLE_CLOSE)]
        pos = end + len(_ARTICLE_CLOSE)
        found = _DOI_ID.search(article)
        if found is not None:
            out[found.group(1).decode("utf-8", "replace").lower()] = article


_ONE_HEAD: Final = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<response><result><total>1</total>'
    b"<start>1</start><pageLength>10</pageLength><recordsDisplayed>1</recordsDisplayed>"
    b"</result><records>"
)
_ONE_TAIL: Final = b"</records><facets/></response>\n"


def single_answer(article: bytes) -> bytes:
    """One article of a page, wrapped as the per-article (``q=doi:<doi>``) answer would be."""
    return _ONE_HEAD + article + _ONE_TAIL


def _query(dois: Sequence[str]) -> str:
    return "(" + " OR ".join(f"doi:{d}" for d in dois) + ")"


async def _page(http: Http, dois: Sequence[str], size: int, key: str) -> httpx.Response:
    params: dict[str, str | int] = {"q": _query(dois), "p": size, "api_key": key}
    return await http.get(SPRINGER_OA_JATS_URL, params=params, rate=Rate.DEFAULT)


async def springer_oa_pages(http: Http, dois: Sequence[str], api_key: str) -> OaPages:
    """Ask OpenAccess about ``dois`` (parsed, Springer Nature's) in OR pages; see the module.

    Returns the articles found and the DOIs a page answered without an article
    (served no open-access article). DOIs of pages not answered are in neither.
    """
    wanted = list(dict.fromkeys(d for d in dois if not _SYNTAX.search(d)))
    articles: dict[str, bytes] = {}
    absent: set[str] = set()
    size = OA_PAGE
    pending = [wanted[i : i + size] for i in range(0, len(wanted), size)]
    shrunk = False
    while pending:
        results = await asyncio.gather(
            *(_page(http, chunk, size, api_key) for chunk in pending), return_exceptions=True
        )
        retry: list[list[str]] = []
        for chunk, result in zip(pending, results, strict=True):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                log.info("springer_oa: a page was not answered (%s)", type(result).__name__)
                continue
            if result.status_code == 403 and not shrunk:
                retry.append(chunk)
                continue
            if result.status_code != 200:
                continue
            found = split_articles(result.content)
            for doi in chunk:
                article = found.get(doi.lower())
                if article is None:
                    absent.add(doi.lower())
                else:
                    articles[doi.lower()] = article
        pending = []
        if retry:
            # Premium-only page size: the same DOIs once more in smaller pages, still bulk.
            shrunk, size = True, SMALL_OA_PAGE
            flat = [d for chunk in retry for d in chunk]
            pending = [flat[i : i + size] for i in range(0, len(flat), size)]
    return OaPages(articles=articles, absent=frozenset(absent))
