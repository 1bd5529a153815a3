"""Crossref works: the shared record request, the TDM file mapping and the relation mapping."""

from __future__ import annotations

import urllib.parse
from collections.abc import AsyncIterator

import pytest

from litfetch_df import ArticleIds, File, FileKind, Related, RelationType, Session
from litfetch_df.sources.crossref import (
    CrossrefFileSource,
    crossref_relations,
    crossref_tdm_files,
    fetch_crossref_work,
)
from tests.conftest import FAST_RETRY, data_json
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream, json_response

CROSSREF = "api.crossref.org"
CONTACT = "dev@lab.example"

# DOI (lower-cased) -> recorded Crossref answer in tests/data/json/
RECORDED = {
    "10.1016/j.xgen.2025.100814": (
        "crossref_work_10.1016_j.xgen.2025.100814_elsevier-tdm-links.json"
    ),
    "10.1038/s42256-024-00832-8": "crossref_work_10.1038_s42256-024-00832-8_links-ccby.json",
    "10.1101/2024.04.01.587366": "crossref_work_10.1101_2024.04.01.587366_is-preprint-of.json",
    "10.3389/fgene.2017.00147": "crossref_work_10.3389_fgene.2017.00147_has-preprint.json",
}


def route_crossref(fake: FakeUpstream) -> None:
    """Serve the recorded Crossref works; anything else is Crossref's plain-text 404."""

    def handler(req: FakeRequest) -> FakeResponse:
        doi = urllib.parse.unquote(req.path.removeprefix("/works/")).lower()
        name = RECORDED.get(doi)
        if name is None:
            return FakeResponse(404, "Resource not found.")
        return json_response(data_json("json", name))

    fake.route(CROSSREF, r"/works/.+", handler)


@pytest.fixture
async def contact_session(fake: FakeUpstream) -> AsyncIterator[Session]:
    async with Session(
        client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT
    ) as s:
        yield s


# -- the request ---------------------------------------------------------------------------


async def test_hit_returns_the_message_and_sends_mailto(
    fake: FakeUpstream, contact_session: Session
) -> None:
    route_crossref(fake)
    record = await fetch_crossref_work(contact_session, "10.1016/j.xgen.2025.100814")
    assert record is not None
    assert record["DOI"] == "10.1016/j.xgen.2025.100814"
    (req,) = fake.requests(CROSSREF)
    assert req.path == "/works/10.1016/j.xgen.2025.100814"
    assert req.param("mailto") == CONTACT


async def test_no_contact_no_mailto(fake: FakeUpstream, fake_session: Session) -> None:
    route_crossref(fake)
    assert await fetch_crossref_work(fake_session, "https://doi.org/10.1038/s42256-024-00832-8")
    (req,) = fake.requests(CROSSREF)
    assert "mailto" not in req.query
    assert req.path == "/works/10.1038/s42256-024-00832-8"


async def test_miss_404_plain_text(fake: FakeUpstream, fake_session: Session) -> None:
    route_crossref(fake)
    assert await fetch_crossref_work(fake_session, "10.1000/unknown.1") is None
    assert fake.count(CROSSREF) == 1
    assert fake_session.failures == ()


async def test_retried_failure_then_hit(fake: FakeUpstream, fake_session: Session) -> None:
    route_crossref(fake)
    fake.fail_next(CROSSREF, "/works/", FakeResponse(503, "busy"))
    record = await fetch_crossref_work(fake_session, "10.3389/fgene.2017.00147")
    assert record is not None and record["DOI"] == "10.3389/fgene.2017.00147"
    assert fake.count(CROSSREF) == 2


@pytest.mark.parametrize("outcome", [FakeResponse(503, "busy"), "drop"])
async def test_all_attempts_failing_declines(
    fake: FakeUpstream, fake_session: Session, outcome: FakeResponse | str
) -> None:
    route_crossref(fake)
    fake.fail_next(CROSSREF, "/works/", outcome, outcome, outcome)
    assert await fetch_crossref_work(fake_session, "10.3389/fgene.2017.00147") is None
    assert fake.count(CROSSREF) == FAST_RETRY.max_attempts
    assert fake_session.failures


@pytest.mark.parametrize(
    "answer",
    [
        FakeResponse(200, b'{"status": "ok", "message": {"DOI": '),
        FakeResponse(
            200, b"<html><body>Service Unavailable</body></html>", {"Content-Type": "text/html"}
        ),
        json_response(["not", "a", "work"]),
        json_response({"status": "ok", "message": "nope"}),
        json_response({"status": "failed", "message-type": "validation-failure"}, status=400),
    ],
)
async def test_malformed_answers_decline(
    fake: FakeUpstream, fake_session: Session, answer: FakeResponse
) -> None:
    fake.route(CROSSREF, r"/works/.+", answer)
    assert await fetch_crossref_work(fake_session, "10.1000/abc.1") is None


async def test_reserved_characters_stay_inside_the_path(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_crossref(fake)
    await fetch_crossref_work(fake_session, "10.1000/a?b#c d")
    (req,) = fake.requests(CROSSREF)
    assert req.path == "/works/10.1000/a%3Fb%23c%20d"
    assert req.query == {}


@pytest.mark.parametrize("doi", ["10.1234/../../admin", "10.1234/./x", "not a doi"])
async def test_path_escaping_or_invalid_doi_sends_nothing(
    fake: FakeUpstream, fake_session: Session, doi: str
) -> None:
    route_crossref(fake)
    assert await fetch_crossref_work(fake_session, doi) is None
    source = CrossrefFileSource()
    assert await source.list_files(ArticleIds(doi=doi), http=fake_session) == ()
    assert fake.count() == 0


# -- TDM files -----------------------------------------------------------------------------


def test_tdm_files_from_recorded_nature_record() -> None:
    record = data_json("json", RECORDED["10.1038/s42256-024-00832-8"])["message"]
    assert crossref_tdm_files(record) == (
        File(
            FileKind.BODY,
            "crossref_tdm",
            media_type="application/pdf",
            uri="https://www.nature.com/articles/s42256-024-00832-8.pdf",
        ),
        File(
            FileKind.BODY,
            "crossref_tdm",
            media_type="text/html",
            uri="https://www.nature.com/articles/s42256-024-00832-8",
        ),
    )


def test_tdm_files_skip_similarity_checking_and_map_unspecified() -> None:
    record = {
        "link": [
            {
                "URL": "https://publisher.example.org/tdm/abc.1.xml",
                "content-type": "unspecified",
                "intended-application": "text-mining",
            },
            {
                "URL": "https://publisher.example.org/tdm/abc.1.bin",
                "intended-application": "text-mining",
            },
            {
                "URL": "https://publisher.example.org/abc.1",
                "content-type": "unspecified",
                "intended-application": "similarity-checking",
            },
            {"URL": "", "content-type": "application/pdf", "intended-application": "text-mining"},
            {
                "URL": "file:///etc/passwd",
                "content-type": "text/xml",
                "intended-application": "text-mining",
            },
        ]
    }
    files = crossref_tdm_files(record)
    assert [(f.uri, f.media_type) for f in files] == [
        ("https://publisher.example.org/tdm/abc.1.xml", None),
        ("https://publisher.example.org/tdm/abc.1.bin", None),
    ]
    assert crossref_tdm_files({"link": None}) == ()
    assert (
        crossref_tdm_files(data_json("json", RECORDED["10.1101/2024.04.01.587366"])["message"])
        == ()
    )


# -- relations -----------------------------------------------------------------------------


def test_relations_from_recorded_records() -> None:
    preprint = data_json("json", RECORDED["10.1101/2024.04.01.587366"])["message"]
    assert crossref_relations(preprint) == (
        Related(RelationType.PUBLISHED, ArticleIds(doi="10.1016/j.xgen.2025.100814")),
    )
    article = data_json("json", RECORDED["10.3389/fgene.2017.00147"])["message"]
    assert crossref_relations(article) == (
        Related(RelationType.PREPRINT, ArticleIds(doi="10.1101/171108")),
    )
    assert (
        crossref_relations(data_json("json", RECORDED["10.1038/s42256-024-00832-8"])["message"])
        == ()
    )


def test_relations_normalise_skip_invalid_and_dedupe() -> None:
    record = {
        "DOI": "10.1000/journal.2026.123",
        "relation": {
            "has-preprint": [
                {"id-type": "doi", "id": "https://doi.org/10.1101/2026.01.05.600001"},
                {"id-type": "doi", "id": "10.1101/2026.01.05.600001"},
                {"id-type": "doi", "id": "not-a-doi"},
                {"id-type": "doi", "id": ""},
                {"id-type": "arxiv", "id": "2601.00001"},
                {"id-type": "doi", "id": "10.1000/JOURNAL.2026.123"},
            ],
            "is-preprint-of": [{"id-type": "doi", "id": "doi:10.5555/xyz-9"}],
            "is-version-of": [{"id-type": "doi", "id": "10.5555/other"}],
            "has-review": [{"id-type": "doi", "id": "10.5555/review"}],
        },
    }
    assert crossref_relations(record) == (
        Related(RelationType.PREPRINT, ArticleIds(doi="10.1101/2026.01.05.600001")),
        Related(RelationType.PUBLISHED, ArticleIds(doi="10.5555/xyz-9")),
    )
    assert crossref_relations({"relation": None}) == ()


# -- the file source -----------------------------------------------------------------------


async def test_file_source_lists_and_downloads(fake: FakeUpstream, fake_session: Session) -> None:
    route_crossref(fake)
    fake.route(
        "www.nature.com",
        r"/articles/s42256-024-00832-8\.pdf",
        FakeResponse(302, b"", {"Location": "https://www.nature.com/content/pdf/s42256.pdf"}),
    )
    fake.route("www.nature.com", r"/content/pdf/s42256\.pdf", FakeResponse(200, b"%PDF-1.7 ..."))
    fake.route("www.nature.com", r"/articles/s42256-024-00832-8", FakeResponse(403, "Forbidden"))
    source = CrossrefFileSource()
    files = await source.list_files(ArticleIds(doi="10.1038/s42256-024-00832-8"), http=fake_session)
    assert [f.media_type for f in files] == ["application/pdf", "text/html"]
    blob = await source.fetch_file(files[0], http=fake_session)
    assert blob is not None and blob.file is files[0] and blob.content == b"%PDF-1.7 ..."
    assert await source.fetch_file(files[1], http=fake_session) is None


async def test_file_source_needs_a_doi(fake: FakeUpstream, fake_session: Session) -> None:
    route_crossref(fake)
    assert (
        await CrossrefFileSource().list_files(ArticleIds(pmid="30000001"), http=fake_session) == ()
    )
    assert (
        await CrossrefFileSource().fetch_file(
            File(FileKind.BODY, "crossref_tdm"), http=fake_session
        )
        is None
    )
    assert fake.count() == 0
