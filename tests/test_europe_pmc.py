"""Europe PMC full text (/PMC<n>/fullTextXML) and Bookshelf (/NBK<n>/bookXML) fetchers."""

from __future__ import annotations

from collections.abc import Mapping

import httpx
import pytest

from litfetch_df import JATS_XML, ArticleIds, File, FileKind, Rate, Session
from litfetch_df.sources.europe_pmc import EuropePmcBookshelfFetcher, EuropePmcFetcher
from tests.conftest import data_bytes
from tests.fake_upstream import FakeResponse, FakeUpstream, xml_response

HOST = "www.ebi.ac.uk"
REST = "/europepmc/webservices/rest"
BASE = f"https://{HOST}{REST}"
JATS = data_bytes("jats", "PMC3166277_bmc-microbiol_1471-2180-11-174.nxml")

ENVELOPE = b"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<fullTextXMLBean>
  <fullTextXML>
    <pmId>NBK0000001</pmId>
    <message>No open access book part is available for this identifier.</message>
    <isOpenAccess>N</isOpenAccess>
  </fullTextXML>
</fullTextXMLBean>
"""

BITS = b"""<?xml version="1.0" encoding="UTF-8"?>
<book-part-wrapper xmlns:xlink="http://www.w3.org/1999/xlink"
                   xmlns:mml="http://www.w3.org/1998/Math/MathML"
                   dtd-version="2.0" content-type="chapter">
  <book-meta>
    <book-id book-id-type="publisher">example-reviews</book-id>
    <book-title-group><book-title>Example Reviews</book-title></book-title-group>
    <permissions>
      <copyright-statement>Copyright 2001-2026, Example University.</copyright-statement>
      <license xlink:href="https://books.example.org/terms/">
        <license-p>Chapters may be reproduced for non-commercial research use.</license-p>
      </license>
    </permissions>
  </book-meta>
  <book-part book-part-type="chapter" id="example">
    <book-part-meta>
      <title-group><title>Example Syndrome</title></title-group>
    </book-part-meta>
    <body><sec><title>Summary</title><p>Example text.</p></sec></body>
  </book-part>
</book-part-wrapper>
"""

HTML_ERROR = (
    b"<!DOCTYPE html>\n<html><head><title>Europe PMC - maintenance</title></head>"
    b"<body><p>We are down for maintenance.</p></body></html>"
)


def route_fulltext(fake: FakeUpstream, pmcid: str, response: FakeResponse) -> None:
    fake.route(HOST, rf"{REST}/{pmcid}/fullTextXML", response)


# -- full text ----------------------------------------------------------------------------------


async def test_fulltext_hit(fake: FakeUpstream, fake_session: Session) -> None:
    route_fulltext(fake, "PMC7000001", xml_response(JATS))
    blob = await EuropePmcFetcher().fetch(ArticleIds(pmcid="pmc7000001.3"), http=fake_session)
    assert blob is not None
    assert blob.content == JATS
    assert blob.file == File(
        kind=FileKind.BODY,
        source="europe_pmc",
        media_type=JATS_XML,
        uri=f"{BASE}/PMC7000001/fullTextXML",
    )
    (req,) = fake.requests(HOST)
    assert req.path == f"{REST}/PMC7000001/fullTextXML"  # unversioned, prefixed


@pytest.mark.parametrize(
    "response",
    [
        FakeResponse(404, b""),
        xml_response(ENVELOPE),
        FakeResponse(200, b""),
        FakeResponse(200, b"   \n"),
        FakeResponse(403, b"Forbidden"),
        FakeResponse(200, b'{"errCode": 500, "errMsg": "oops"}'),
        xml_response(BITS),  # a well-formed document of the wrong kind
    ],
    ids=["404", "envelope", "empty", "blank", "403", "json-200", "wrong-root"],
)
async def test_fulltext_misses_and_malformed_answers_decline(
    fake: FakeUpstream, fake_session: Session, response: FakeResponse
) -> None:
    route_fulltext(fake, "PMC7000001", response)
    assert await EuropePmcFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=fake_session) is None
    assert fake.count(HOST) == 1


@pytest.mark.parametrize(
    "response",
    [FakeResponse(200, HTML_ERROR, {"Content-Type": "text/html"}), xml_response(JATS[:5000])],
    ids=["html-200", "truncated"],
)
async def test_fulltext_payloads_that_are_not_answers_are_transient(
    fake: FakeUpstream, fake_session: Session, response: FakeResponse
) -> None:
    # Issue 14 moved these out of the declines above: an HTML page or a truncated body
    # served with 200 is retried, then given up with a reason; never kept or cached.
    route_fulltext(fake, "PMC7000001", response)
    assert await EuropePmcFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=fake_session) is None
    assert fake.count(HOST) == 3
    assert any("UnexpectedPayload" in f for f in fake_session.failures)


async def test_fulltext_retried_failure_then_success(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_fulltext(fake, "PMC7000001", xml_response(JATS))
    fake.fail_next(HOST, f"{REST}/PMC7000001", FakeResponse(503, b"busy"))
    blob = await EuropePmcFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=fake_session)
    assert blob is not None and blob.content == JATS
    assert fake.count(HOST) == 2


@pytest.mark.parametrize("outcome", [FakeResponse(503, b"busy"), "drop"])
async def test_fulltext_failure_after_retries_declines_and_is_recorded(
    fake: FakeUpstream, fake_session: Session, outcome: FakeResponse | str
) -> None:
    route_fulltext(fake, "PMC7000001", xml_response(JATS))
    fake.fail_next(HOST, f"{REST}/PMC7000001", outcome, outcome, outcome)
    async with fake_session.scope() as scope:
        assert await EuropePmcFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=scope) is None
        assert scope.failures
    assert fake.count(HOST) == 3


async def test_fulltext_invalid_or_missing_pmcid_makes_no_request(
    fake: FakeUpstream, fake_session: Session
) -> None:
    fetcher = EuropePmcFetcher()
    assert await fetcher.fetch(ArticleIds(pmcid="PMC1/../../admin"), http=fake_session) is None
    assert await fetcher.fetch(ArticleIds(pmid="30000001"), http=fake_session) is None
    assert fake.count() == 0


class RecordingHttp:
    """A fake Http that records each call and answers from a fixed response."""

    contact: str | None = None

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.calls: list[tuple[str, Rate, bool]] = []

    async def get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        self.calls.append((url, rate, follow_redirects))
        return self.response


async def test_europe_pmc_requests_are_paced_at_the_europe_pmc_rate() -> None:
    http = RecordingHttp(httpx.Response(200, content=JATS))
    assert await EuropePmcFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=http) is not None
    http.response = httpx.Response(200, content=BITS)
    assert (
        await EuropePmcBookshelfFetcher().fetch(ArticleIds(bookid="NBK1116"), http=http) is not None
    )
    assert http.calls == [
        (f"{BASE}/PMC7000001/fullTextXML", Rate.EUROPE_PMC, False),
        (f"{BASE}/NBK1116/bookXML", Rate.EUROPE_PMC, False),
    ]


# -- Bookshelf ----------------------------------------------------------------------------------


async def test_bookshelf_hit(fake: FakeUpstream, fake_session: Session) -> None:
    fake.route(HOST, rf"{REST}/NBK1116/bookXML", xml_response(BITS))
    blob = await EuropePmcBookshelfFetcher().fetch(
        ArticleIds(bookid=" nbk1116 "), http=fake_session
    )
    assert blob is not None
    assert blob.content == BITS
    assert blob.file == File(
        kind=FileKind.BODY,
        source="europe_pmc_bookshelf",
        media_type=JATS_XML,
        uri=f"{BASE}/NBK1116/bookXML",
    )


@pytest.mark.parametrize(
    "response",
    [
        xml_response(ENVELOPE),
        FakeResponse(200, b""),
        FakeResponse(404, b""),
        FakeResponse(200, HTML_ERROR),
        xml_response(JATS),  # an article is not a book part
        xml_response(BITS[:-40]),
        FakeResponse(500, b"error"),
    ],
    ids=["envelope", "empty", "404", "html-200", "article-root", "truncated", "500"],
)
async def test_bookshelf_misses_decline(
    fake: FakeUpstream, fake_session: Session, response: FakeResponse
) -> None:
    fake.route(HOST, rf"{REST}/NBK1116/bookXML", response)
    assert (
        await EuropePmcBookshelfFetcher().fetch(ArticleIds(bookid="NBK1116"), http=fake_session)
        is None
    )


@pytest.mark.parametrize(
    "bookid", ["1116", "NBK", "PMC1116", "NBK1116/../x", "NBK1116?x=1", "NB\u212a1116", ""]
)
async def test_bad_bookid_raises_before_any_request(
    fake: FakeUpstream, fake_session: Session, bookid: str
) -> None:
    with pytest.raises(ValueError):
        await EuropePmcBookshelfFetcher().fetch(ArticleIds(bookid=bookid), http=fake_session)
    assert fake.count() == 0


async def test_bookshelf_retried_then_abandoned(fake: FakeUpstream, fake_session: Session) -> None:
    fake.route(HOST, rf"{REST}/NBK1116/bookXML", xml_response(BITS))
    fake.fail_next(HOST, f"{REST}/NBK1116", "drop", FakeResponse(502, b""))
    fetcher = EuropePmcBookshelfFetcher()
    assert await fetcher.fetch(ArticleIds(bookid="NBK1116"), http=fake_session) is not None
    fake.fail_next(HOST, f"{REST}/NBK1116", *(FakeResponse(504, b""),) * 3)
    async with fake_session.scope() as scope:
        assert await fetcher.fetch(ArticleIds(bookid="NBK1116"), http=scope) is None
        assert scope.failures
