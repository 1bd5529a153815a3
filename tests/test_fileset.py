"""list_files / fetch_file: union over sources, routing, isolation, scope sharing, credentials."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

import httpx
import pytest

from litfetch_df import PDF, ArticleIds, Blob, File, FileKind, Rate, Session
from litfetch_df.operations.fileset import default_file_sources, fetch_file, list_files
from litfetch_df.sources.crossref import CrossrefFileSource
from litfetch_df.sources.elsevier import ElsevierFetcher
from litfetch_df.sources.semantic_scholar import SemanticScholarFileSource
from litfetch_df.sources.unpaywall import UnpaywallFileSource
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeResponse, FakeUpstream, json_response, xml_response
from tests.test_crossref import CROSSREF, route_crossref
from tests.test_elsevier import ELSEVIER, FULL_TEXT
from tests.test_semantic_scholar import S2, route_s2
from tests.test_unpaywall import BRONZE, UNPAYWALL, route_unpaywall

CONTACT = "dev@lab.example"
XGEN = "10.1016/j.xgen.2025.100814"  # recorded in Crossref, S2 and Unpaywall
S2_KEY = "s2-secret-5c0ffee"
ELS_KEY = "els-secret-77aa01"
SPRINGER_KEY = "springer-meta-secret-31"
CREDS = {
    "semantic_scholar_api_key": S2_KEY,
    "elsevier_api_key": ELS_KEY,
    "springer_meta_api_key": SPRINGER_KEY,
}

# An Unpaywall record with a PDF for XGEN, shaped as upstream.md 4.2 shows.
UNPAYWALL_XGEN = {
    "doi": XGEN,
    "is_oa": True,
    "oa_status": "gold",
    "best_oa_location": {
        "url": "https://www.cell.com/action/showPdf?pii=S2666-979X(25)00070-9",
        "url_for_pdf": "https://www.cell.com/action/showPdf?pii=S2666-979X(25)00070-9",
        "license": "cc-by",
        "host_type": "publisher",
        "version": "publishedVersion",
    },
    "oa_locations": [],
}


def route_all(fake: FakeUpstream) -> None:
    route_crossref(fake)
    route_s2(fake)
    route_unpaywall(fake)
    fake.route(UNPAYWALL, r"/v2/10\.1016/j\.xgen\.2025\.100814", json_response(UNPAYWALL_XGEN))


def open_session(fake: FakeUpstream, contact: str | None = CONTACT) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=contact)


class StubSource:
    """A file source that lists fixed files, or fails, and records what it was asked."""

    def __init__(
        self, name: str, files: tuple[File, ...] = (), error: Exception | None = None
    ) -> None:
        self.name = name
        self.files = files
        self.error = error
        self.fetched: list[File] = []
        self.credentials: list[Mapping[str, object] | None] = []

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: object,
    ) -> tuple[File, ...]:
        self.credentials.append(credentials)
        if self.error is not None:
            raise self.error
        return self.files

    async def fetch_file(
        self,
        file: File,
        *,
        credentials: Mapping[str, object] | None = None,
        http: object,
    ) -> Blob | None:
        self.fetched.append(file)
        if self.error is not None:
            raise self.error
        return Blob(file=file, content=self.name.encode())


def supp(name: str) -> File:
    return File(FileKind.SUPPLEMENTARY, "stub", uri=f"https://files.example/{name}", filename=name)


def body(name: str, source: str = "stub") -> File:
    return File(FileKind.BODY, source, media_type=PDF, uri=f"https://files.example/{name}")


# -- defaults ------------------------------------------------------------------------------


def test_default_file_sources_order() -> None:
    pytest.importorskip("litfetch_df.sources.pmc_oa")
    pytest.importorskip("litfetch_df.sources.springer")
    sources = default_file_sources()
    assert [s.name for s in sources] == [
        "pmc_oa_s3",
        "unpaywall",
        "semantic_scholar",
        "crossref_tdm",
        "springer",
    ]
    assert default_file_sources() is not sources  # a fresh tuple each call


async def test_default_sources_with_only_a_doi(fake: FakeUpstream) -> None:
    pytest.importorskip("litfetch_df.sources.pmc_oa")
    pytest.importorskip("litfetch_df.sources.springer")
    route_all(fake)
    async with open_session(fake) as s:
        files = await s.list_files(ArticleIds(doi=XGEN))
    # Semantic Scholar's openAccessPdf.url for XGEN is https://doi.org/…: a landing page,
    # not a PDF, so it is not listed (issue 15).
    assert [f.source for f in files] == ["unpaywall", "crossref_tdm", "crossref_tdm"]
    assert set(r.host for r in fake.requests()) == {CROSSREF, S2, UNPAYWALL}


# -- list_files ----------------------------------------------------------------------------


async def test_union_in_source_order_whatever_finishes_first(fake: FakeUpstream) -> None:
    route_all(fake)
    # Crossref answers last, yet its files stay where its source is. (S2's doi.org
    # "PDF" for XGEN is a landing page and is not listed: issue 15.)
    fake.latency(0.2, CROSSREF)
    sources = (CrossrefFileSource(), SemanticScholarFileSource(), UnpaywallFileSource())
    async with open_session(fake) as s:
        files = await list_files(s, ArticleIds(doi=XGEN), sources=sources)
    assert [(f.source, f.media_type, f.uri) for f in files] == [
        (
            "crossref_tdm",
            "text/xml",
            "https://api.elsevier.com/content/article/PII:S2666979X25000709?httpAccept=text/xml",
        ),
        (
            "crossref_tdm",
            "text/plain",
            "https://api.elsevier.com/content/article/PII:S2666979X25000709?httpAccept=text/plain",
        ),
        ("unpaywall", PDF, UNPAYWALL_XGEN["best_oa_location"]["url_for_pdf"]),  # type: ignore[index]
    ]


class BarrierHttp:
    """An Http whose every GET waits until ``n`` GETs are in flight at once."""

    contact = CONTACT

    def __init__(self, n: int) -> None:
        self.n = n
        self.in_flight = 0
        self.all_in = asyncio.Event()

    async def get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        self.in_flight += 1
        if self.in_flight >= self.n:
            self.all_in.set()
        await self.all_in.wait()
        return httpx.Response(404, text="Resource not found.", request=httpx.Request("GET", url))


async def test_sources_are_asked_concurrently() -> None:
    http = BarrierHttp(3)
    sources = (UnpaywallFileSource(), SemanticScholarFileSource(), CrossrefFileSource())
    # Asked one after another, the first GET would wait for ever.
    files = await asyncio.wait_for(
        list_files(http, ArticleIds(doi="10.1000/abc.1"), sources=sources), timeout=5
    )
    assert files == ()
    assert http.in_flight == 3


async def test_duplicates_removed_and_kind_filter() -> None:
    a, b = (
        StubSource("stub", (body("a.pdf"), supp("s1.xlsx"))),
        StubSource("stub", (body("a.pdf"), supp("s2.csv"))),
    )
    http = BarrierHttp(0)
    both = await list_files(http, ArticleIds(doi="10.1000/abc.1"), sources=(a, b))
    assert both == (body("a.pdf"), supp("s1.xlsx"), supp("s2.csv"))
    only_supp = await list_files(
        http, ArticleIds(doi="10.1000/abc.1"), sources=(a, b), kind=FileKind.SUPPLEMENTARY
    )
    assert only_supp == (supp("s1.xlsx"), supp("s2.csv"))
    only_body = await list_files(
        http, ArticleIds(doi="10.1000/abc.1"), sources=(a, b), kind=FileKind.BODY
    )
    assert only_body == (body("a.pdf"),)


async def test_a_failing_source_contributes_nothing(caplog: pytest.LogCaptureFixture) -> None:
    good = StubSource("good", (body("a.pdf", "good"),))
    bad = StubSource("bad", error=httpx.ConnectError("connection refused"))
    with caplog.at_level(logging.WARNING):
        files = await list_files(
            BarrierHttp(0), ArticleIds(doi="10.1000/abc.1"), sources=(bad, good)
        )
    assert files == (body("a.pdf", "good"),)
    assert "bad" in caplog.text


async def test_a_bug_in_a_source_is_not_swallowed() -> None:
    broken = StubSource("broken", error=KeyError("oops"))
    with pytest.raises(KeyError):
        await list_files(BarrierHttp(0), ArticleIds(doi="10.1000/abc.1"), sources=(broken,))


async def test_credentials_reach_each_source_but_keys_reach_only_their_host(
    fake: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    route_all(fake)
    stub = StubSource("stub")
    sources = (UnpaywallFileSource(), SemanticScholarFileSource(), CrossrefFileSource(), stub)
    async with open_session(fake) as s:
        files = await s.list_files(ArticleIds(doi=XGEN), sources=sources, credentials=CREDS)
        for file in files:
            fake.route(httpx.URL(file.uri or "").host, r"/.*", FakeResponse(200, b"%PDF-1.7"))
        for file in files:
            await s.fetch_file(file, sources=sources, credentials=CREDS)
    assert stub.credentials == [CREDS]
    for req in fake.requests():
        sent = repr(req.headers) + repr(req.query) + req.path
        assert (S2_KEY in sent) is (req.host == S2), req.host
        assert ELS_KEY not in sent and SPRINGER_KEY not in sent
    assert fake.count(ELSEVIER) == 2  # both TDM links downloaded, without the Elsevier key
    for key in CREDS.values():
        assert key not in caplog.text


async def test_path_escaping_doi_reaches_no_host(fake: FakeUpstream) -> None:
    route_all(fake)
    ids = ArticleIds(doi="10.1234/../../admin")
    sources = (UnpaywallFileSource(), SemanticScholarFileSource(), CrossrefFileSource())
    async with open_session(fake) as s:
        assert await s.list_files(ids, sources=sources, credentials=CREDS) == ()
        assert await ElsevierFetcher().fetch(ids, credentials=CREDS, http=s) is None
        assert (await s.resolve_access(ids)).is_empty()
        assert await s.related_ids(ids) == ()
    assert fake.count() == 0


# -- fetch_file ----------------------------------------------------------------------------


async def test_fetch_file_routes_by_source_name() -> None:
    first, second = StubSource("one"), StubSource("two")
    file = body("x.pdf", "two")
    blob = await fetch_file(BarrierHttp(0), file, sources=(first, second))
    assert blob is not None and blob.content == b"two" and blob.file is file
    assert (first.fetched, second.fetched) == ([], [file])
    assert (
        await fetch_file(BarrierHttp(0), body("x.pdf", "nobody"), sources=(first, second)) is None
    )


async def test_fetch_file_http_error_is_none() -> None:
    failing = StubSource("stub", error=httpx.ReadTimeout("slow"))
    assert await fetch_file(BarrierHttp(0), body("x.pdf"), sources=(failing,)) is None


async def test_fetch_file_follows_redirects_on_the_fake(fake: FakeUpstream) -> None:
    fake.route(
        "www.cell.com",
        r"/action/showPdf",
        FakeResponse(302, b"", {"Location": "https://cdn.cell.example/x.pdf"}),
    )
    fake.route("cdn.cell.example", r"/x\.pdf", FakeResponse(200, b"%PDF-1.5 cell"))
    file = File(
        FileKind.BODY, "unpaywall", media_type=PDF, uri="https://www.cell.com/action/showPdf?pii=S1"
    )
    async with open_session(fake) as s:
        blob = await s.fetch_file(file, sources=(UnpaywallFileSource(),))
        assert blob is not None and blob.content == b"%PDF-1.5 cell" and blob.file is file
        missing = File(FileKind.BODY, "unpaywall", uri=None)
        assert await s.fetch_file(missing, sources=(UnpaywallFileSource(),)) is None


# -- one record per scope ------------------------------------------------------------------


async def test_unpaywall_record_fetched_once_per_scope(fake: FakeUpstream) -> None:
    route_all(fake)
    ids = ArticleIds(doi=XGEN)
    async with open_session(fake) as session:
        async with session.scope() as s:
            files = await s.list_files(ids, sources=(UnpaywallFileSource(),))
            access = await s.resolve_access(ids)
        assert [f.source for f in files] == ["unpaywall"]
        assert (access.licence, access.access, access.basis) == ("cc-by", "gold", "unpaywall")
        assert fake.count(UNPAYWALL) == 1
        async with session.scope() as s:  # concurrently, the in-flight request is shared
            await asyncio.gather(
                s.list_files(ids, sources=(UnpaywallFileSource(),)), s.resolve_access(ids)
            )
        assert fake.count(UNPAYWALL) == 2
        await session.list_files(ids, sources=(UnpaywallFileSource(),))  # no scope, no cache
        await session.resolve_access(ids)
    assert fake.count(UNPAYWALL) == 4


async def test_crossref_record_fetched_once_per_scope(fake: FakeUpstream) -> None:
    route_all(fake)
    fake.route(ELSEVIER, r"/content/article/.+", xml_response(FULL_TEXT))
    ids = ArticleIds(doi=XGEN)
    async with open_session(fake) as session:
        async with session.scope() as s:
            blob = await ElsevierFetcher().fetch(ids, credentials=CREDS, http=s)
            files = await s.list_files(ids, sources=(CrossrefFileSource(),))
            related = await s.related_ids(ids)
        assert blob is not None and len(files) == 2 and related == ()
        assert fake.count(CROSSREF) == 1
        async with session.scope() as s:
            await asyncio.gather(
                ElsevierFetcher().fetch(ids, credentials=CREDS, http=s),
                s.list_files(ids, sources=(CrossrefFileSource(),)),
                s.related_ids(ids),
            )
        assert fake.count(CROSSREF) == 2
    assert all(r.param("mailto") == CONTACT for r in fake.requests(CROSSREF))


async def test_unpaywall_without_contact_is_skipped_but_others_run(fake: FakeUpstream) -> None:
    route_all(fake)
    async with open_session(fake, contact=None) as s:
        files = await s.list_files(
            ArticleIds(doi=BRONZE), sources=(UnpaywallFileSource(), CrossrefFileSource())
        )
    assert files == ()
    assert fake.count(UNPAYWALL) == 0
    assert fake.count(CROSSREF) == 1


# -- one URL once, every source named; landing pages; sources per kind (issue 15) ----------------


def test_merge_lists_a_url_once_with_every_source_that_listed_it() -> None:
    from litfetch_df.operations.fileset import merge_listings

    shared = "https://files.example/a.pdf"
    pmc = (File(FileKind.BODY, "pmc_oa_s3", media_type=PDF, uri=shared), supp("s1.csv"))
    upw = (File(FileKind.BODY, "unpaywall", media_type=PDF, uri=shared), body("b.pdf", "unpaywall"))
    s2 = (File(FileKind.BODY, "semantic_scholar", media_type=PDF, uri=shared),)
    merged = merge_listings([pmc, upw, s2, upw])
    assert [f.uri for f in merged] == [shared, supp("s1.csv").uri, "https://files.example/b.pdf"]
    first = merged[0]
    assert first.source == "pmc_oa_s3"  # the first lister fetches it
    assert first.also_listed_by == ("unpaywall", "semantic_scholar")
    assert first.listed_by == ("pmc_oa_s3", "unpaywall", "semantic_scholar")
    assert merged[1].also_listed_by == () and merged[2].also_listed_by == ()


def test_merge_drops_landing_pages_listed_as_pdfs(caplog: pytest.LogCaptureFixture) -> None:
    from litfetch_df.operations.fileset import merge_listings

    caplog.set_level(logging.DEBUG, logger="litfetch_df")
    landing = File(FileKind.BODY, "stub", media_type=PDF, uri="https://doi.org/10.1000/x.1")
    html = File(FileKind.BODY, "stub", media_type="text/html", uri="https://doi.org/10.1000/x.1")
    assert merge_listings([(landing, body("real.pdf")), (html,)]) == (body("real.pdf"), html)
    assert "landing page" in caplog.text


async def test_a_kind_asks_only_the_sources_that_list_it(fake: FakeUpstream) -> None:
    pytest.importorskip("litfetch_df.sources.pmc_oa")
    route_all(fake)
    async with open_session(fake) as s:
        files = await s.list_files(ArticleIds(doi=XGEN), kind=FileKind.SUPPLEMENTARY)
    assert files == ()
    # Unpaywall, Semantic Scholar and Crossref list body renditions only: none was asked.
    assert fake.requests() == []


async def test_a_source_without_kinds_is_asked_for_every_kind() -> None:
    from litfetch_df.operations.fileset import sources_for_kind

    anything = StubSource("any", (supp("s.csv"),))
    body_only = StubSource("body", (supp("never.csv"),))
    body_only.kinds = frozenset({FileKind.BODY})  # type: ignore[attr-defined]
    chosen = sources_for_kind([anything, body_only], FileKind.SUPPLEMENTARY)
    assert chosen == (anything,)
    assert sources_for_kind([anything, body_only], None) == (anything, body_only)
    got = await list_files(
        object(),  # type: ignore[arg-type]
        ArticleIds(doi="10.1000/x"),
        sources=[anything, body_only],
        kind=FileKind.SUPPLEMENTARY,
    )
    assert got == (supp("s.csv"),) and body_only.credentials == []
