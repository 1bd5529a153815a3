"""resolve_access: Unpaywall's licence and OA status for a DOI."""

from __future__ import annotations

import pytest

from litfetch_df import ArticleIds, Session, SourceMetadata
from litfetch_df.operations.access import resolve_access
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeResponse, FakeUpstream, json_response
from tests.test_unpaywall import BRONZE, CLOSED, GOLD, UNPAYWALL, route_unpaywall

CONTACT = "dev@lab.example"


def open_session(fake: FakeUpstream, contact: str | None = CONTACT) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=contact)


@pytest.mark.parametrize(
    ("doi", "expected"),
    [
        (GOLD, SourceMetadata(licence="cc-by", access="gold", basis="unpaywall")),
        (BRONZE, SourceMetadata(licence=None, access="bronze", basis="unpaywall")),
        (CLOSED, SourceMetadata(licence=None, access="closed", basis="unpaywall")),
        ("10.1000/unknown.1", SourceMetadata()),  # Unpaywall 404
    ],
)
async def test_recorded_records(fake: FakeUpstream, doi: str, expected: SourceMetadata) -> None:
    route_unpaywall(fake)
    async with open_session(fake) as s:
        assert await s.resolve_access(ArticleIds(doi=doi)) == expected
        assert s.failures == ()
    (req,) = fake.requests(UNPAYWALL)
    assert req.param("email") == CONTACT


async def test_doi_forms_are_normalised(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    async with open_session(fake) as s:
        terms = await resolve_access(
            s, ArticleIds(doi="https://doi.org/10.1016/J.XGEN.2025.100814")
        )
    assert terms.licence == "cc-by"
    assert fake.requests(UNPAYWALL)[0].path == "/v2/10.1016/J.XGEN.2025.100814"


async def test_email_argument_overrides_and_replaces_contact(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    async with open_session(fake) as s:
        await s.resolve_access(ArticleIds(doi=GOLD), email="me@lab.example")
    async with open_session(fake, contact=None) as s:
        terms = await s.resolve_access(ArticleIds(doi=GOLD), email="only@lab.example")
    assert terms.access == "gold"
    assert [r.param("email") for r in fake.requests(UNPAYWALL)] == [
        "me@lab.example",
        "only@lab.example",
    ]


async def test_skipped_without_doi_or_email(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    async with open_session(fake, contact=None) as s:
        assert await s.resolve_access(ArticleIds(doi=GOLD)) == SourceMetadata()
        assert await s.resolve_access(ArticleIds(doi=GOLD), email="") == SourceMetadata()
    async with open_session(fake) as s:
        assert await s.resolve_access(ArticleIds(pmid="30000001")) == SourceMetadata()
        assert await s.resolve_access(ArticleIds(doi="10.1234/../../admin")) == SourceMetadata()
    assert fake.count() == 0


async def test_retried_failure_then_hit(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    fake.fail_next(UNPAYWALL, "/v2/", FakeResponse(502, "bad gateway"))
    async with open_session(fake) as s:
        assert (await s.resolve_access(ArticleIds(doi=GOLD))).licence == "cc-by"
    assert fake.count(UNPAYWALL) == 2


async def test_all_failing_is_empty_and_recorded(fake: FakeUpstream) -> None:
    route_unpaywall(fake)
    fake.fail_next(UNPAYWALL, "/v2/", "drop", "drop", "drop")
    async with open_session(fake) as s:
        assert await s.resolve_access(ArticleIds(doi=GOLD)) == SourceMetadata()
        assert s.failures


@pytest.mark.parametrize(
    "answer",
    [
        FakeResponse(200, b'{"doi": "10.1016/j.xgen.2025.100814", "oa_status": "go'),
        FakeResponse(
            200, b"<html><body>502 Bad Gateway</body></html>", {"Content-Type": "text/html"}
        ),
        json_response("gold"),
        json_response({"HTTP_status_code": 422, "error": True, "message": "bad email"}, status=422),
        json_response({"oa_status": "", "best_oa_location": {"license": "  "}}),
    ],
)
async def test_malformed_or_refused_is_empty(fake: FakeUpstream, answer: FakeResponse) -> None:
    fake.route(UNPAYWALL, r"/v2/.+", answer)
    async with open_session(fake) as s:
        assert await s.resolve_access(ArticleIds(doi=GOLD)) == SourceMetadata()
