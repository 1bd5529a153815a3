"""Springer OpenAccess by DOI list: OR pages of 20, one article per DOI, a 403 shrinks once.

Through a :class:`~litfetch_df.Session` on ``httpx.MockTransport`` answering like the
OpenAccess JATS API (one envelope, an ``<article>`` per DOI it serves).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx

from litfetch_df import Session
from litfetch_df.sources.springer import extract_article
from litfetch_df.sources.springer_oa_batch import (
    OA_PAGE,
    SMALL_OA_PAGE,
    OaPages,
    split_articles,
    springer_oa_pages,
)
from tests.conftest import FAST_RETRY

KEY = "oa-key-0123"


def _article(doi: str) -> str:
    return (
        f'<article article-type="research-article"><front><article-meta>'
        f'<article-id pub-id-type="doi">{doi}</article-id></article-meta></front>'
        f"<body><p>text of {doi}</p></body></article>"
    )


def _envelope(dois: list[str]) -> bytes:
    records = "".join(_article(d) for d in dois)
    return (
        '<?xml version="1.0"?>\n<!DOCTYPE response [\n<!ENTITY % a SYSTEM "x.dtd">\n]>'
        f"<response><records>{records}</records></response>"
    ).encode()


def _served(doi: str) -> bool:
    return not doi.endswith("closed")


def _handler(max_page: int, seen: list[httpx.Request]) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if int(request.url.params.get("p", "10")) > max_page:
            return httpx.Response(403, json={"status": "Fail", "message": "premium feature"})
        asked = re.findall(r"doi:([^\s)]+)", request.url.params["q"])
        return httpx.Response(200, content=_envelope([d for d in asked if _served(d)]))

    return handle


async def _pages(dois: list[str], max_page: int) -> tuple[OaPages, list[httpx.Request]]:
    seen: list[httpx.Request] = []
    transport = httpx.MockTransport(_handler(max_page, seen))
    session = Session(
        client_factory=lambda: httpx.AsyncClient(transport=transport), retry=FAST_RETRY
    )
    async with session:
        found = await springer_oa_pages(session, dois, KEY)
    return found, seen


DOIS = [f"10.1007/s{i:05d}" for i in range(45)] + [f"10.1007/x{i}-closed" for i in range(5)]


async def test_fifty_dois_take_three_pages_and_each_article_finds_its_doi() -> None:
    found, seen = await _pages(DOIS, max_page=20)
    assert len(seen) == 3 == -(-len(DOIS) // OA_PAGE)
    assert {r.url.params["p"] for r in seen} == {str(OA_PAGE)}
    assert set(found.articles) == {d.lower() for d in DOIS if _served(d)}
    assert found.absent == {d.lower() for d in DOIS if not _served(d)}
    one = found.articles["10.1007/s00007"]
    assert b"text of 10.1007/s00007" in one and b"s00008" not in one
    # the per-article reader takes the cut-out article as it takes a one-article answer
    assert extract_article(b"<response><records>" + one + b"</records></response>") is not None


async def test_a_premium_403_shrinks_the_page_once_and_stays_bulk() -> None:
    found, seen = await _pages(DOIS, max_page=SMALL_OA_PAGE)
    pages = [int(r.url.params["p"]) for r in seen]
    # three refused pages of 20, then five of 10: never one DOI per request
    assert pages == [OA_PAGE] * 3 + [SMALL_OA_PAGE] * 5
    assert len(found.articles) == 45


async def test_a_page_refused_twice_leaves_its_dois_unsettled() -> None:
    found, seen = await _pages(DOIS[:5], max_page=5)
    assert [int(r.url.params["p"]) for r in seen] == [OA_PAGE, SMALL_OA_PAGE]
    assert found.articles == {} and found.absent == frozenset()


def test_split_articles_skips_an_article_without_a_doi() -> None:
    envelope = (
        b"<records><article><body/></article>" + _article("10.1007/A").encode() + b"</records>"
    )
    assert list(split_articles(envelope)) == ["10.1007/a"]
