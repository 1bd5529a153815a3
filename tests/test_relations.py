"""related_ids: bioRxiv/medRxiv published links and Crossref relations, merged and de-duplicated."""

from __future__ import annotations

from typing import Any

import pytest

from litfetch_df import ArticleIds, Related, RelationType, Session
from litfetch_df.operations.relations import related_ids
from tests.fake_upstream import FakeResponse, FakeUpstream, json_response
from tests.test_crossref import CROSSREF, route_crossref

BIORXIV = "api.biorxiv.org"
PREPRINT = "10.1101/2024.04.01.587366"  # Crossref: is-preprint-of 10.1016/j.xgen.2025.100814
ARTICLE = "10.3389/fgene.2017.00147"  # Crossref: has-preprint 10.1101/171108
PUBLISHED = "10.1016/j.xgen.2025.100814"


def details(doi: str, published: str, *, versions: int = 2) -> dict[str, Any]:
    """A details-API answer shaped as upstream.md 3.6 shows."""
    collection = [
        {
            "doi": doi,
            "date": f"2024-04-0{v}",
            "version": str(v),
            "type": "new results",
            "license": "cc_by",
            "jatsxml": f"https://www.biorxiv.org/content/early/2024/04/0{v}/{doi[8:]}.source.xml",
            "published": "NA" if v < versions else published,
            "server": "bioRxiv",
        }
        for v in range(1, versions + 1)
    ]
    return {"messages": [{"status": "ok"}], "collection": collection}


NOT_FOUND = {"messages": [{"status": "no posts found"}], "collection": []}


def route_biorxiv(
    fake: FakeUpstream, biorxiv: FakeResponse, medrxiv: FakeResponse | None = None
) -> None:
    fake.route(BIORXIV, r"/details/biorxiv/.+", biorxiv)
    fake.route(BIORXIV, r"/details/medrxiv/.+", medrxiv or json_response(NOT_FOUND))


async def test_preprint_biorxiv_and_crossref_agree_biorxiv_casing_kept(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_crossref(fake)
    route_biorxiv(fake, json_response(details(PREPRINT, "10.1016/J.XGEN.2025.100814")))
    related = await fake_session.related_ids(ArticleIds(doi=PREPRINT))
    assert related == (
        Related(RelationType.PUBLISHED, ArticleIds(doi="10.1016/J.XGEN.2025.100814")),
    )
    assert fake.count(BIORXIV) == 1  # bioRxiv answered; medRxiv not asked
    assert fake.count(CROSSREF) == 1


async def test_both_sources_contribute_in_order(fake: FakeUpstream, fake_session: Session) -> None:
    route_crossref(fake)
    route_biorxiv(fake, json_response(details(PREPRINT, "10.5555/other-journal.1")))
    related = await related_ids(fake_session, ArticleIds(doi=PREPRINT))
    assert related == (
        Related(RelationType.PUBLISHED, ArticleIds(doi="10.5555/other-journal.1")),
        Related(RelationType.PUBLISHED, ArticleIds(doi=PUBLISHED)),
    )


async def test_published_article_has_preprint_without_asking_biorxiv(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_crossref(fake)
    route_biorxiv(fake, json_response(details(ARTICLE, "10.1000/x")))
    related = await related_ids(fake_session, ArticleIds(doi=ARTICLE))
    assert related == (Related(RelationType.PREPRINT, ArticleIds(doi="10.1101/171108")),)
    assert fake.count(BIORXIV) == 0


async def test_medrxiv_fallback_when_biorxiv_says_na(
    fake: FakeUpstream, fake_session: Session
) -> None:
    doi = "10.64898/2026.04.07.716663"
    route_crossref(fake)  # unknown to Crossref: 404
    route_biorxiv(
        fake,
        json_response(details(doi, "NA")),
        json_response(details(doi, "https://doi.org/10.1000/journal.2026.123")),
    )
    related = await related_ids(fake_session, ArticleIds(doi=doi))
    assert related == (Related(RelationType.PUBLISHED, ArticleIds(doi="10.1000/journal.2026.123")),)
    assert [r.path for r in fake.requests(BIORXIV)] == [
        f"/details/biorxiv/{doi}",
        f"/details/medrxiv/{doi}",
    ]


async def test_no_doi_or_escaping_doi_no_request(fake: FakeUpstream, fake_session: Session) -> None:
    route_crossref(fake)
    route_biorxiv(fake, json_response(NOT_FOUND))
    assert await related_ids(fake_session, ArticleIds(pmid="30000001")) == ()
    assert await related_ids(fake_session, ArticleIds(doi="10.1101/../../admin")) == ()
    assert await related_ids(fake_session, ArticleIds(doi="10.1234/../../admin")) == ()
    assert fake.count() == 0


async def test_a_failing_upstream_contributes_nothing(
    fake: FakeUpstream, fake_session: Session
) -> None:
    route_crossref(fake)
    route_biorxiv(fake, json_response(details(PREPRINT, "10.5555/other-journal.1")))
    fake.fail_next(BIORXIV, "/details/", *(["drop"] * 6))
    related = await related_ids(fake_session, ArticleIds(doi=PREPRINT))
    assert related == (Related(RelationType.PUBLISHED, ArticleIds(doi=PUBLISHED)),)
    assert fake_session.failures


async def test_crossref_retried_then_answers(fake: FakeUpstream, fake_session: Session) -> None:
    route_crossref(fake)
    fake.fail_next(CROSSREF, "/works/", FakeResponse(503, "busy"))
    related = await related_ids(fake_session, ArticleIds(doi=ARTICLE))
    assert related == (Related(RelationType.PREPRINT, ArticleIds(doi="10.1101/171108")),)
    assert fake.count(CROSSREF) == 2


async def test_crossref_all_failing_is_empty(fake: FakeUpstream, fake_session: Session) -> None:
    route_crossref(fake)
    fake.fail_next(CROSSREF, "/works/", *([FakeResponse(500, "oops")] * 3))
    assert await related_ids(fake_session, ArticleIds(doi=ARTICLE)) == ()
    assert fake_session.failures


@pytest.mark.parametrize(
    "answer",
    [
        FakeResponse(200, b'{"collection": [{"published": "10.'),
        FakeResponse(200, b"<html><body>Error</body></html>", {"Content-Type": "text/html"}),
        json_response({"collection": [{"published": "not a doi"}]}),
        json_response({"collection": [{"published": None}]}),
    ],
)
async def test_malformed_answers_contribute_nothing(
    fake: FakeUpstream, fake_session: Session, answer: FakeResponse
) -> None:
    fake.route(CROSSREF, r"/works/.+", answer)
    route_biorxiv(fake, answer, answer)
    assert await related_ids(fake_session, ArticleIds(doi=PREPRINT)) == ()
