"""The body ladder: order, demand-driven resolution, skipping, error isolation."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import httpx
import pytest

from litfetch_df import JATS_XML, ArticleIds, Blob, File, FileKind, Http, Session
from litfetch_df.operations.ladder import default_fetchers, fetch_body
from litfetch_df.operations.types import Fetcher
from litfetch_df.sources.europe_pmc import EuropePmcBookshelfFetcher, EuropePmcFetcher
from litfetch_df.sources.pmc_oa import PmcOaFetcher
from litfetch_df.sources.springer import SpringerFetcher
from tests.conftest import data_bytes, mock_session
from tests.fake_upstream import FakeResponse, FakeUpstream, xml_response

JATS = data_bytes("jats", "PMC3166277_bmc-microbiol_1471-2180-11-174.nxml")


class NoHttp:
    """An Http that fails the test if anything asks it for a request."""

    contact: str | None = None

    async def get(self, url: str, **kwargs: object) -> httpx.Response:
        raise AssertionError(f"unexpected request to {url}")


class StubFetcher:
    """A fetcher that records the ids it was called with and answers as scripted."""

    def __init__(
        self,
        name: str,
        requires: set[str],
        *,
        hit: bool = False,
        error: BaseException | None = None,
        log: list[str] | None = None,
    ) -> None:
        self.name = name
        self.requires = frozenset(requires)
        self.hit = hit
        self.error = error
        self.calls: list[ArticleIds] = []
        self.log = log if log is not None else []

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        self.calls.append(article_ids)
        self.log.append(self.name)
        if self.error is not None:
            raise self.error
        if not self.hit:
            return None
        return Blob(
            File(FileKind.BODY, self.name, JATS_XML, f"https://x.example/{self.name}"), b"<a/>"
        )


class CountingResolver:
    def __init__(self, answer: ArticleIds, log: list[str] | None = None) -> None:
        self.answer = answer
        self.calls: list[ArticleIds] = []
        self.log = log if log is not None else []

    async def __call__(self, ids: ArticleIds, http: Http) -> ArticleIds:
        self.calls.append(ids)
        self.log.append("resolver")
        return ids.merge(self.answer)


def test_stub_satisfies_the_protocol() -> None:
    assert isinstance(StubFetcher("a", {"pmcid"}), Fetcher)


async def test_first_non_none_wins_in_order() -> None:
    order: list[str] = []
    a = StubFetcher("a", {"pmcid"}, log=order)
    b = StubFetcher("b", {"pmcid"}, hit=True, log=order)
    c = StubFetcher("c", {"pmcid"}, hit=True, log=order)
    blob = await fetch_body(NoHttp(), ArticleIds(pmcid="PMC7000001"), fetchers=[a, b, c])
    assert blob is not None and blob.file.source == "b"
    assert order == ["a", "b"]


async def test_nothing_serves_gives_none() -> None:
    fetchers = [StubFetcher("a", {"pmcid"}), StubFetcher("b", {"doi"})]
    ids = ArticleIds(pmcid="PMC7000001", doi="10.1000/x")
    assert await fetch_body(NoHttp(), ids, fetchers=fetchers) is None
    assert [len(f.calls) for f in fetchers] == [1, 1]


async def test_resolver_runs_once_and_only_on_demand() -> None:
    order: list[str] = []
    resolver = CountingResolver(ArticleIds(), log=order)  # finds nothing
    fetchers = [
        StubFetcher("has-pmcid", {"pmcid"}, log=order),
        StubFetcher("needs-doi", {"doi"}, log=order),
        StubFetcher("needs-pmid", {"pmid"}, log=order),
        StubFetcher("needs-doi-again", {"doi"}, log=order),
    ]
    blob = await fetch_body(
        NoHttp(), ArticleIds(pmcid="PMC7000001"), resolver=resolver, fetchers=fetchers
    )
    assert blob is None
    # Resolved exactly when the first fetcher lacking an id came up; never again.
    assert order == ["has-pmcid", "resolver"]
    assert len(resolver.calls) == 1


async def test_resolver_not_called_when_ids_suffice() -> None:
    resolver = CountingResolver(ArticleIds(doi="10.1000/x"))
    fetchers = [StubFetcher("a", {"pmcid"}, hit=True), StubFetcher("b", {"doi"})]
    blob = await fetch_body(
        NoHttp(), ArticleIds(pmcid="PMC7000001"), resolver=resolver, fetchers=fetchers
    )
    assert blob is not None
    assert resolver.calls == []


async def test_resolved_ids_feed_later_fetchers_without_overwriting() -> None:
    resolver = CountingResolver(ArticleIds(pmid="30000009", pmcid="PMC7000009", doi="10.1000/r"))
    needs_pmcid = StubFetcher("needs-pmcid", {"pmcid"})
    needs_doi = StubFetcher("needs-doi", {"doi"}, hit=True)
    ids = ArticleIds(pmid="30000001")
    blob = await fetch_body(NoHttp(), ids, resolver=resolver, fetchers=[needs_pmcid, needs_doi])
    assert blob is not None and blob.file.source == "needs-doi"
    expected = ArticleIds(pmid="30000001", pmcid="PMC7000009", doi="10.1000/r")
    assert needs_pmcid.calls == [expected]
    assert needs_doi.calls == [expected]
    assert resolver.calls == [ids]


async def test_unmet_requirements_are_skipped() -> None:
    resolver = CountingResolver(ArticleIds(pmcid="PMC7000001"))  # no doi to be had
    book = StubFetcher("book", {"bookid"})
    doi = StubFetcher("doi", {"doi"})
    pmc = StubFetcher("pmc", {"pmcid"}, hit=True)
    blob = await fetch_body(
        NoHttp(), ArticleIds(pmid="30000001"), resolver=resolver, fetchers=[book, doi, pmc]
    )
    assert blob is not None and blob.file.source == "pmc"
    assert book.calls == [] and doi.calls == []
    assert len(resolver.calls) == 1


async def test_missing_bookid_never_triggers_resolution() -> None:
    resolver = CountingResolver(ArticleIds(pmcid="PMC7000001"))
    book = StubFetcher("book", {"bookid"})
    assert (
        await fetch_body(NoHttp(), ArticleIds(pmid="1"), resolver=resolver, fetchers=[book]) is None
    )
    assert resolver.calls == [] and book.calls == []


async def test_http_error_in_a_fetcher_is_logged_and_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken = StubFetcher(
        "broken", {"pmcid"}, error=httpx.ConnectError("boom https://h/x?api_key=SECRET123")
    )
    good = StubFetcher("good", {"pmcid"}, hit=True)
    with caplog.at_level(logging.WARNING):
        blob = await fetch_body(NoHttp(), ArticleIds(pmcid="PMC1"), fetchers=[broken, good])
    assert blob is not None and blob.file.source == "good"
    assert "broken" in caplog.text
    assert "SECRET123" not in caplog.text


async def test_other_exceptions_propagate() -> None:
    broken = StubFetcher("broken", {"pmcid"}, error=RuntimeError("bug"))
    later = StubFetcher("later", {"pmcid"}, hit=True)
    with pytest.raises(RuntimeError, match="bug"):
        await fetch_body(NoHttp(), ArticleIds(pmcid="PMC1"), fetchers=[broken, later])
    assert later.calls == []


async def test_resolver_network_failure_is_not_fatal() -> None:
    async def failing(ids: ArticleIds, http: Http) -> ArticleIds:
        raise httpx.ReadTimeout("slow")

    fetcher = StubFetcher("doi", {"doi"})
    pmc = StubFetcher("pmc", {"pmcid"}, hit=True)
    blob = await fetch_body(
        NoHttp(), ArticleIds(pmcid="PMC1"), resolver=failing, fetchers=[fetcher, pmc]
    )
    assert blob is not None and fetcher.calls == []


def test_default_fetchers_order() -> None:
    pytest.importorskip("litfetch_df.sources.elsevier")
    ladder = default_fetchers()
    assert [f.name for f in ladder] == [
        "europe_pmc_bookshelf",
        "pmc_oa_s3",
        "europe_pmc",
        "elsevier_oa",
        "springer_oa",
    ]
    assert [set(f.requires) for f in ladder] == [{"bookid"}, {"pmcid"}, {"pmcid"}, {"doi"}, {"doi"}]
    assert all(isinstance(f, Fetcher) for f in ladder)
    assert default_fetchers()[0] is not ladder[0]  # fresh instances each call


# -- over the real sources (fake upstream) ------------------------------------------------------


# The default order without the Elsevier rung, so these tests do not depend on it.
def ladder_without_elsevier() -> list[Fetcher]:
    return [EuropePmcBookshelfFetcher(), PmcOaFetcher(), EuropePmcFetcher(), SpringerFetcher()]


BITS = b"""<?xml version="1.0" encoding="UTF-8"?>
<book-part-wrapper dtd-version="2.0"><book-meta/><book-part><book-part-meta/>
<body><p>Chapter.</p></body></book-part></book-part-wrapper>"""


async def test_bookid_is_tried_first_and_decides(fake: FakeUpstream, fake_session: Session) -> None:
    fake.route("www.ebi.ac.uk", r".*/NBK1116/bookXML", xml_response(BITS))
    resolver = CountingResolver(ArticleIds(pmcid="PMC7000001"))
    blob = await fake_session.fetch_body(
        ArticleIds(bookid="NBK1116", pmid="30000001"),
        resolver=resolver,
        fetchers=ladder_without_elsevier(),
    )
    assert blob is not None and blob.file.source == "europe_pmc_bookshelf"
    assert [r.path for r in fake.requests()] == ["/europepmc/webservices/rest/NBK1116/bookXML"]
    assert resolver.calls == []


async def test_bad_bookid_raises_before_any_request(
    fake: FakeUpstream, fake_session: Session
) -> None:
    resolver = CountingResolver(ArticleIds(pmcid="PMC7000001"))
    with pytest.raises(ValueError, match="Bookshelf"):
        await fake_session.fetch_body(
            ArticleIds(bookid="NBK1116/../x", pmcid="PMC7000001"),
            resolver=resolver,
            fetchers=ladder_without_elsevier(),
        )
    assert fake.count() == 0
    assert resolver.calls == []


async def test_walks_on_to_europe_pmc_after_a_pmc_miss(
    fake: FakeUpstream, fake_session: Session
) -> None:
    empty_listing = (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        "<Name>pmc-oa-opendata</Name><Prefix>PMC7000001.</Prefix><KeyCount>0</KeyCount>"
        "<MaxKeys>1000</MaxKeys><Delimiter>/</Delimiter><IsTruncated>false</IsTruncated>"
        "</ListBucketResult>"
    )
    fake.route("pmc-oa-opendata.s3.amazonaws.com", r"/", xml_response(empty_listing))
    fake.route("www.ebi.ac.uk", r".*/PMC7000001/fullTextXML", xml_response(JATS))
    async with fake_session.scope() as scope:
        blob = await scope.fetch_body(
            ArticleIds(pmcid="PMC7000001", doi="10.1000/abc.1"), fetchers=ladder_without_elsevier()
        )
    assert blob is not None and blob.file.source == "europe_pmc" and blob.content == JATS
    assert [r.host for r in fake.requests()] == [
        "pmc-oa-opendata.s3.amazonaws.com",
        "www.ebi.ac.uk",
    ]


async def test_publisher_fetcher_without_credential_makes_no_request(
    fake: FakeUpstream, fake_session: Session
) -> None:
    fake.route("api.springernature.com", r".*", FakeResponse(200, b"<response/>"))
    blob = await fake_session.fetch_body(
        ArticleIds(doi="10.1186/s00000-026-00001-2"),
        fetchers=ladder_without_elsevier(),
        credentials={"elsevier_api_key": "els-key"},  # the wrong service's key
    )
    assert blob is None
    assert fake.count() == 0


async def test_transport_failure_moves_down_the_ladder() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "pmc-oa-opendata.s3.amazonaws.com":
            raise httpx.ConnectError("unreachable", request=request)
        if request.url.path.endswith("/PMC7000001/fullTextXML"):
            return httpx.Response(200, content=JATS)
        return httpx.Response(404)

    async with mock_session(handler) as session:
        blob = await session.fetch_body(
            ArticleIds(pmcid="PMC7000001"), fetchers=ladder_without_elsevier()
        )
        assert blob is not None and blob.file.source == "europe_pmc"
        assert session.failures  # the abandoned S3 listing was recorded
