"""Unpaywall: the record lookup, the PDF file source and the access-term mapping."""

from __future__ import annotations

import urllib.parse

import pytest

from litfetch_df import PDF, ArticleIds, File, FileKind, Session, SourceMetadata
from litfetch_df.sources.unpaywall import (
    UnpaywallFileSource,
    fetch_unpaywall_record,
    unpaywall_access,
    unpaywall_files,
)
from tests.conftest import FAST_RETRY, data_json
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream, json_response

UNPAYWALL = "api.unpaywall.org"
CONTACT = "dev@lab.example"

RECORDED = {
    "10.1073/pnas.1414271111": "unpaywall_v2_10.1073_pnas.1414271111_bronze_pmc-repository.json",
    "10.1016/j.xgen.2025.100814": "unpaywall_v2_10.1016_j.xgen.2025.100814_gold.json",
    "10.1007/s40278-023-41815-2": "unpaywall_v2_10.1007_s40278-023-41815-2_closed.json",
}
BRONZE = "10.1073/pnas.1414271111"  # best location has a url_for_pdf, licence null
GOLD = "10.1016/j.xgen.2025.100814"  # cc-by, url_for_pdf null
CLOSED = "10.1007/s40278-023-41815-2"  # best_oa_location null


def route_unpaywall(fake: FakeUpstream) -> None:
    """Serve the recorded Unpaywall records; an unknown DOI gets Unpaywall's JSON 404."""

    def handler(req: FakeRequest) -> FakeResponse:
        if not req.param("email"):
            return json_response({"HTTP_status_code": 422, "error": True}, status=422)
        doi = urllib.parse.unquote(req.path.removeprefix("/v2/")).lower()
        name = RECORDED.get(doi)
        if name is None:
            body = {
                "HTTP_status_code": 404,
                "error": True,
                "message": f"'{doi}' isn't in Unpaywall.",
            }
            return json_response(body, status=404)
        return json_response(data_json("json", name))

    fake.route(UNPAYWALL, r"/v2/.+", handler)


def session_for(fake: FakeUpstream, contact: str | None = CONTACT) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=contact)


async def test_record_hit_sends_contact_email(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    async with session_for(fake) as s:
        record = await fetch_unpaywall_record(s, BRONZE)
    assert record is not None and record["oa_status"] == "bronze"
    (req,) = fake.requests(UNPAYWALL)
    assert req.path == "/v2/10.1073/pnas.1414271111"
    assert req.query == {"email": [CONTACT]}


async def test_email_precedence(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    async with session_for(fake) as s:
        await fetch_unpaywall_record(s, BRONZE, email="override@lab.example")
        await UnpaywallFileSource(email="source@lab.example").list_files(
            ArticleIds(doi=BRONZE), http=s
        )
        await UnpaywallFileSource().list_files(ArticleIds(doi=BRONZE), http=s)
    assert [r.param("email") for r in fake.requests(UNPAYWALL)] == [
        "override@lab.example",
        "source@lab.example",
        CONTACT,
    ]


async def test_without_any_email_no_request(fake: FakeUpstream, fake_session: Session) -> None:
    route_unpaywall(fake)
    assert await fetch_unpaywall_record(fake_session, BRONZE) is None
    assert await fetch_unpaywall_record(fake_session, BRONZE, email="  ") is None
    assert await UnpaywallFileSource().list_files(ArticleIds(doi=BRONZE), http=fake_session) == ()
    assert fake.count() == 0


async def test_file_source_hit(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    async with session_for(fake) as s:
        files = await UnpaywallFileSource().list_files(ArticleIds(doi=BRONZE), http=s)
    assert files == (
        File(
            FileKind.BODY,
            "unpaywall",
            media_type=PDF,
            uri="https://www.pnas.org/content/pnas/111/45/E4832.full.pdf",
        ),
    )


@pytest.mark.parametrize("doi", [GOLD, CLOSED, "10.1000/unknown.1"])
async def test_file_source_misses(fake: FakeUpstream, doi: str) -> None:
    """No url_for_pdf, a closed article, and a 404 each list nothing."""
    route_unpaywall(fake)
    async with session_for(fake) as s:
        assert await UnpaywallFileSource().list_files(ArticleIds(doi=doi), http=s) == ()
        assert s.failures == ()
    assert fake.count(UNPAYWALL) == 1


async def test_file_source_needs_a_doi(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    async with session_for(fake) as s:
        assert await UnpaywallFileSource().list_files(ArticleIds(pmcid="PMC7000001"), http=s) == ()
    assert fake.count() == 0


async def test_rejected_email_422_is_no_record(fake: FakeUpstream) -> None:
    fake.route(UNPAYWALL, r"/v2/.+", json_response({"HTTP_status_code": 422, "error": True}, 422))
    async with session_for(fake) as s:
        assert await fetch_unpaywall_record(s, BRONZE) is None


async def test_retried_failure_then_hit(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    fake.fail_next(UNPAYWALL, "/v2/", FakeResponse(503, "busy"))
    async with session_for(fake) as s:
        files = await UnpaywallFileSource().list_files(ArticleIds(doi=BRONZE), http=s)
    assert len(files) == 1
    assert fake.count(UNPAYWALL) == 2


@pytest.mark.parametrize("outcome", [FakeResponse(429, "slow down"), "drop"])
async def test_all_failing_declines(fake: FakeUpstream, outcome: FakeResponse | str) -> None:
    route_unpaywall(fake)
    fake.fail_next(UNPAYWALL, "/v2/", outcome, outcome, outcome)
    async with session_for(fake) as s:
        assert await UnpaywallFileSource().list_files(ArticleIds(doi=BRONZE), http=s) == ()
        assert s.failures


@pytest.mark.parametrize(
    "answer",
    [
        FakeResponse(200, b'{"doi": "10.1073/pnas.1414271111", "best_oa_location": {'),
        FakeResponse(
            200, b"<!DOCTYPE html><html><body>Oops</body></html>", {"Content-Type": "text/html"}
        ),
        json_response([1, 2, 3]),
        json_response({"best_oa_location": {"url_for_pdf": ""}, "oa_status": "green"}),
        json_response({"best_oa_location": {"url_for_pdf": "javascript:alert(1)"}}),
    ],
)
async def test_malformed_answers_list_nothing(fake: FakeUpstream, answer: FakeResponse) -> None:
    fake.route(UNPAYWALL, r"/v2/.+", answer)
    async with session_for(fake) as s:
        assert await UnpaywallFileSource().list_files(ArticleIds(doi=BRONZE), http=s) == ()


async def test_path_escaping_doi_sends_nothing(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    async with session_for(fake) as s:
        ids = ArticleIds(doi="10.1234/../../admin")
        assert await UnpaywallFileSource().list_files(ids, http=s) == ()
        assert await fetch_unpaywall_record(s, "10.1234/../../admin") is None
    assert fake.count() == 0


async def test_fetch_file_follows_redirects(fake: FakeUpstream) -> None:
    pdf_url = "http://www.pnas.org/content/pnas/111/45/E4832.full.pdf"
    fake.route(
        "www.pnas.org",
        r"/content/pnas/111/45/E4832\.full\.pdf",
        FakeResponse(301, b"", {"Location": "https://cdn.pnas.example/E4832.pdf"}),
    )
    fake.route("cdn.pnas.example", r"/E4832\.pdf", FakeResponse(200, b"%PDF-1.4 body"))
    file = File(FileKind.BODY, "unpaywall", media_type=PDF, uri=pdf_url)
    async with session_for(fake) as s:
        blob = await UnpaywallFileSource().fetch_file(file, http=s)
        assert blob is not None and blob.file is file and blob.content == b"%PDF-1.4 body"
        fake.route("cdn.pnas.example", r"/E4832\.pdf", FakeResponse(404, "gone"))
        gone = File(
            FileKind.BODY, "unpaywall", media_type=PDF, uri="https://cdn.pnas.example/E4832.pdf"
        )
        assert await UnpaywallFileSource().fetch_file(gone, http=s) is None


def test_access_mapping_from_recorded_records() -> None:
    assert unpaywall_access(data_json("json", RECORDED[GOLD])) == SourceMetadata(
        licence="cc-by", access="gold", basis="unpaywall"
    )
    assert unpaywall_access(data_json("json", RECORDED[BRONZE])) == SourceMetadata(
        licence=None, access="bronze", basis="unpaywall"
    )
    assert unpaywall_access(data_json("json", RECORDED[CLOSED])) == SourceMetadata(
        licence=None, access="closed", basis="unpaywall"
    )
    assert unpaywall_access({"oa_status": None, "best_oa_location": None}) == SourceMetadata()
    assert unpaywall_files(data_json("json", RECORDED[CLOSED])) == ()
