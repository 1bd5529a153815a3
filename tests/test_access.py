"""resolve_access: Unpaywall's licence and OA status for a DOI."""

from __future__ import annotations

import pytest

from litfetch_df import ArticleIds, Session, SourceMetadata
from litfetch_df.operations.access import fill_missing_terms, resolve_access
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


# -- the artifact's terms completed by the service's (issue 15) ----------------------------------

ART = "artifact"
UPW = "unpaywall"


@pytest.mark.parametrize(
    ("stated", "asserted", "expected"),
    [
        (  # the bytes state the licence, Unpaywall the status
            SourceMetadata("https://creativecommons.org/licenses/by/4.0/", None, ART),
            SourceMetadata("cc-by", "gold", UPW),
            SourceMetadata("https://creativecommons.org/licenses/by/4.0/", "gold", ART, UPW),
        ),
        (  # the bytes state only the status: Unpaywall's licence, the artifact's status
            SourceMetadata(None, "open-access", ART),
            SourceMetadata("cc-by", "gold", UPW),
            SourceMetadata("cc-by", "open-access", UPW, ART),
        ),
        (  # nothing from the service: the artifact's terms as they were
            SourceMetadata("CC BY", None, ART),
            SourceMetadata(),
            SourceMetadata("CC BY", None, ART),
        ),
        (  # nothing in the bytes: the service's terms as they were
            SourceMetadata(),
            SourceMetadata(None, "closed", UPW),
            SourceMetadata(None, "closed", UPW),
        ),
        (  # the service has neither field the bytes lack
            SourceMetadata(None, "open-access", ART),
            SourceMetadata(None, "bronze", UPW),
            SourceMetadata(None, "open-access", ART),
        ),
    ],
    ids=["status-from-service", "licence-from-service", "no-service", "no-bytes", "nothing-new"],
)
def test_fill_missing_terms(
    stated: SourceMetadata, asserted: SourceMetadata, expected: SourceMetadata
) -> None:
    got = fill_missing_terms(stated, asserted)
    assert got == expected
    assert got.access_from == (expected.access_basis or expected.basis if got.access else None)


def test_access_from_names_the_basis_of_the_status() -> None:
    assert SourceMetadata("x", None, ART).access_from is None
    assert SourceMetadata("x", "gold", ART).access_from == ART
    assert SourceMetadata("x", "gold", ART, UPW).access_from == UPW
