"""Semantic Scholar: the paper lookup, the open-access PDF source and the per-item resolver."""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Mapping

import httpx
import pytest

from litfetch_df import PDF, ArticleIds, File, FileKind, Rate, Session
from litfetch_df.sources.semantic_scholar import (
    SemanticScholarFileSource,
    SemanticScholarResolver,
    s2_article_ids,
    s2_paper_id,
    s2_pdf_files,
)
from tests.conftest import data_json
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream, json_response

S2 = "api.semanticscholar.org"
KEY = "s2-secret-93b1d0"
CREDS = {"semantic_scholar_api_key": KEY}

NATURE = "10.1038/s42256-024-00832-8"  # openAccessPdf.url is a nature.com PDF
XGEN = "10.1016/j.xgen.2025.100814"  # openAccessPdf.url is a doi.org link
PREPRINT = "10.1101/2024.04.01.587366"  # recorded 404
RECORDED = {
    NATURE: "s2_graph_paper_DOI_10.1038_s42256-024-00832-8.json",
    XGEN: "s2_graph_paper_DOI_10.1016_j.xgen.2025.100814.json",
}


def route_s2(fake: FakeUpstream) -> None:
    """Serve the recorded S2 papers (by DOI, or by the PMID / PMCID they carry)."""
    by_id: dict[str, str] = {}
    for doi, name in RECORDED.items():
        ext = data_json("json", name)["externalIds"]
        by_id[f"DOI:{doi.lower()}"] = name
        by_id[f"PMID:{ext['PubMed']}"] = name
        by_id[f"PMCID:{ext['PubMedCentral']}"] = name

    def handler(req: FakeRequest) -> FakeResponse:
        paper_id = urllib.parse.unquote(req.path.removeprefix("/graph/v1/paper/"))
        prefix, _, value = paper_id.partition(":")
        name = by_id.get(f"{prefix}:{value.lower()}")
        if name is None:
            if paper_id == f"DOI:{PREPRINT}":
                body = data_json("json", "s2_graph_paper_DOI_10.1101_2024.04.01.587366_404.json")
            else:
                body = {"error": f"Paper with id {paper_id} not found"}
            return json_response(body, status=404)
        record = data_json("json", name)
        fields = (req.param("fields") or "").split(",")
        return json_response(
            {"paperId": record["paperId"], **{f: record[f] for f in fields if f in record}}
        )

    fake.route(S2, r"/graph/v1/paper/.+", handler)


def test_paper_id_forms() -> None:
    assert s2_paper_id(ArticleIds(doi="10.1000/a?b", pmid="30000001")) == "DOI:10.1000/a%3Fb"
    assert s2_paper_id(ArticleIds(pmid="30000001", pmcid="PMC7000001")) == "PMID:30000001"
    assert s2_paper_id(ArticleIds(pmcid="PMC7000001")) == "PMCID:7000001"
    assert s2_paper_id(ArticleIds(doi="10.1234/../../admin")) is None
    assert s2_paper_id(ArticleIds(doi="10.1234/../../admin", pmid="30000001")) == "PMID:30000001"
    assert s2_paper_id(ArticleIds(bookid="NBK1116")) is None


# -- the file source -----------------------------------------------------------------------


async def test_file_source_hit_unkeyed(fake: FakeUpstream, fake_session: Session) -> None:
    route_s2(fake)
    files = await SemanticScholarFileSource().list_files(ArticleIds(doi=NATURE), http=fake_session)
    assert files == (
        File(
            FileKind.BODY,
            "semantic_scholar",
            media_type=PDF,
            uri="https://www.nature.com/articles/s42256-024-00832-8.pdf",
        ),
    )
    (req,) = fake.requests(S2)
    assert req.path == f"/graph/v1/paper/DOI:{NATURE}"
    assert req.param("fields") == "openAccessPdf"
    assert "x-api-key" not in req.headers


async def test_file_source_keyed_sends_the_key_header(
    fake: FakeUpstream, fake_session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    route_s2(fake)
    files = await SemanticScholarFileSource().list_files(
        ArticleIds(pmcid="PMC12008803"), credentials=CREDS, http=fake_session
    )
    # The recorded openAccessPdf.url is https://doi.org/…, a landing page: not listed (issue 15).
    assert files == ()
    (req,) = fake.requests(S2)
    assert req.path == "/graph/v1/paper/PMCID:12008803"
    assert req.headers["x-api-key"] == KEY
    assert KEY not in req.path and KEY not in repr(req.query)
    assert KEY not in caplog.text


async def test_blank_key_is_no_key(fake: FakeUpstream, fake_session: Session) -> None:
    route_s2(fake)
    await SemanticScholarFileSource().list_files(
        ArticleIds(doi=NATURE), credentials={"semantic_scholar_api_key": " "}, http=fake_session
    )
    assert "x-api-key" not in fake.requests(S2)[0].headers


@pytest.mark.parametrize(
    "answer",
    [
        json_response({"paperId": "x", "openAccessPdf": None}),
        json_response(
            {"paperId": "x", "openAccessPdf": {"url": "", "status": None, "license": None}}
        ),
        json_response({"paperId": "x"}),
        json_response({"error": "Paper with id DOI:10.1000/zzz not found"}, status=404),
        FakeResponse(200, b'{"paperId": "x", "openAccessPdf": {"url": "https://'),
        FakeResponse(200, b"<html><body>Bad gateway</body></html>", {"Content-Type": "text/html"}),
        json_response({"message": "Forbidden"}, status=403),
    ],
)
async def test_file_source_misses_and_malformed(
    fake: FakeUpstream, fake_session: Session, answer: FakeResponse
) -> None:
    fake.route(S2, r"/graph/v1/paper/.+", answer)
    assert (
        await SemanticScholarFileSource().list_files(ArticleIds(doi=NATURE), http=fake_session)
        == ()
    )


async def test_recorded_404_is_a_miss(fake: FakeUpstream, fake_session: Session) -> None:
    route_s2(fake)
    assert (
        await SemanticScholarFileSource().list_files(ArticleIds(doi=PREPRINT), http=fake_session)
        == ()
    )
    assert fake_session.failures == ()


async def test_retried_failure_then_hit(fake: FakeUpstream, fake_session: Session) -> None:
    route_s2(fake)
    fake.fail_next(
        S2, "/graph/", FakeResponse(429, {"message": "Too Many Requests.", "code": "429"})
    )
    files = await SemanticScholarFileSource().list_files(
        ArticleIds(doi=NATURE), credentials=CREDS, http=fake_session
    )
    assert len(files) == 1
    assert fake.count(S2) == 2


@pytest.mark.parametrize("outcome", [FakeResponse(429, {"message": "Too Many Requests."}), "drop"])
async def test_all_failing_declines(
    fake: FakeUpstream, fake_session: Session, outcome: FakeResponse | str
) -> None:
    route_s2(fake)
    fake.fail_next(S2, "/graph/", outcome, outcome, outcome)
    files = await SemanticScholarFileSource().list_files(
        ArticleIds(doi=NATURE), credentials=CREDS, http=fake_session
    )
    assert files == ()
    assert fake_session.failures
    assert all(KEY not in reason for reason in fake_session.failures)


async def test_fetch_file_does_not_send_the_key(fake: FakeUpstream, fake_session: Session) -> None:
    fake.route("www.nature.com", r"/articles/.+\.pdf", FakeResponse(200, b"%PDF-1.7"))
    file = File(
        FileKind.BODY,
        "semantic_scholar",
        media_type=PDF,
        uri="https://www.nature.com/articles/x.pdf",
    )
    blob = await SemanticScholarFileSource().fetch_file(file, credentials=CREDS, http=fake_session)
    assert blob is not None and blob.content == b"%PDF-1.7"
    assert "x-api-key" not in fake.requests("www.nature.com")[0].headers


def test_pdf_mapping_from_recorded_record() -> None:
    record = data_json("json", RECORDED[NATURE])
    assert [f.uri for f in s2_pdf_files(record)] == [
        "https://www.nature.com/articles/s42256-024-00832-8.pdf"
    ]
    assert s2_pdf_files({"openAccessPdf": {"url": None}}) == ()


# -- the resolver --------------------------------------------------------------------------


async def test_resolver_merges_external_ids(fake: FakeUpstream, fake_session: Session) -> None:
    route_s2(fake)
    resolved = await SemanticScholarResolver()(ArticleIds(doi=NATURE), fake_session)
    assert resolved == ArticleIds(pmid="38799228", pmcid="PMC11116106", doi=NATURE)
    (req,) = fake.requests(S2)
    assert req.param("fields") == "externalIds"
    assert "x-api-key" not in req.headers


async def test_resolver_by_pmid_never_overwrites(fake: FakeUpstream, fake_session: Session) -> None:
    route_s2(fake)
    resolver = SemanticScholarResolver(api_key=KEY)
    mine = ArticleIds(pmid="40120586", pmcid="PMC99", bookid="NBK1116")
    resolved = await resolver(mine, fake_session)
    assert resolved == ArticleIds(pmid="40120586", pmcid="PMC99", doi=XGEN, bookid="NBK1116")
    (req,) = fake.requests(S2)
    assert req.path == "/graph/v1/paper/PMID:40120586"
    assert req.headers["x-api-key"] == KEY
    assert KEY not in repr(resolver)


async def test_resolver_no_ops(fake: FakeUpstream, fake_session: Session) -> None:
    route_s2(fake)
    resolver = SemanticScholarResolver(api_key=KEY)
    assert await resolver(ArticleIds(), fake_session) == ArticleIds()
    assert await resolver(ArticleIds(bookid="NBK1116"), fake_session) == ArticleIds(
        bookid="NBK1116"
    )
    full = ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/abc.1")
    assert await resolver(full, fake_session) == full
    escaping = ArticleIds(doi="10.1234/../../admin")
    assert await resolver(escaping, fake_session) == escaping
    assert fake.count() == 0


async def test_resolver_miss_and_failure_leave_ids_unchanged(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_s2(fake)
    resolver = SemanticScholarResolver(api_key=KEY)
    assert await resolver(ArticleIds(doi=PREPRINT), fake_session) == ArticleIds(doi=PREPRINT)
    fake.fail_next(S2, "/graph/", "drop", "drop", "drop")
    assert await resolver(ArticleIds(doi=NATURE), fake_session) == ArticleIds(doi=NATURE)
    assert fake_session.failures


def test_external_ids_mapping() -> None:
    record = {
        "externalIds": {"DOI": "", "PubMed": 30000001, "PubMedCentral": "7000001", "CorpusId": 1}
    }
    assert s2_article_ids(record) == ArticleIds(pmid="30000001", pmcid="PMC7000001")
    assert s2_article_ids({"externalIds": {"DOI": "junk", "PubMed": "x"}}) == ArticleIds()
    assert s2_article_ids({"externalIds": None}) == ArticleIds()


class RecordingHttp:
    """An Http that records each call's rate and headers and answers a fixed S2 record."""

    contact = None

    def __init__(self) -> None:
        self.calls: list[tuple[str, Rate, dict[str, str]]] = []

    async def get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        self.calls.append((url, rate, dict(headers or {})))
        body = data_json("json", RECORDED[NATURE])
        return httpx.Response(200, json=body, request=httpx.Request("GET", url))


async def test_rate_follows_the_key() -> None:
    http = RecordingHttp()
    await SemanticScholarFileSource().list_files(ArticleIds(doi=NATURE), http=http)
    await SemanticScholarFileSource().list_files(
        ArticleIds(doi=NATURE), credentials=CREDS, http=http
    )
    await SemanticScholarResolver()(ArticleIds(doi=NATURE), http)
    await SemanticScholarResolver(api_key=KEY)(ArticleIds(doi=NATURE), http)
    assert [(rate, "x-api-key" in headers) for _, rate, headers in http.calls] == [
        (Rate.S2_UNKEYED, False),
        (Rate.S2_KEYED, True),
        (Rate.S2_UNKEYED, False),
        (Rate.S2_KEYED, True),
    ]
