"""The quota benchmark's audit: a deferral counts as excused only where the world's truth
says no service that still answers holds the fact, and only when the row says so."""

from __future__ import annotations

from benchmarks.quota_audit import FACT_COLUMNS, audit, only_spent_holds
from tests.fakes.world import Article

UNPAYWALL = "api.unpaywall.org"
OPENALEX = "api.openalex.org"
DEFERRED = "deferred: api.unpaywall.org daily quota, resets in 5 h 12 min"

CLOSED_UNKNOWN = Article(doi="10.5555/closed-1", oa_status="closed", in_openalex=False)
CLOSED_KNOWN = Article(doi="10.5555/closed-2", oa_status="closed")
OPEN_UNKNOWN = Article(
    doi="10.5555/open-1",
    oa_status="green",
    in_openalex=False,
    pdf_url="https://repository.example/1.pdf",
)


def _facts(rows: list[dict[str, str | None]]) -> dict[str, list[str | None]]:
    columns = [*FACT_COLUMNS, "resolve_error", "body_error", "files_error", "licence_error"]
    return {c: [row.get(c) for row in rows] for c in columns}


def test_only_a_closed_status_of_a_doi_openalex_lacks_is_held_by_unpaywall_alone() -> None:
    assert only_spent_holds(CLOSED_UNKNOWN, "access", [UNPAYWALL])
    assert not only_spent_holds(CLOSED_KNOWN, "access", [UNPAYWALL])  # OpenAlex answers
    assert not only_spent_holds(OPEN_UNKNOWN, "access", [UNPAYWALL])  # S2 states it open
    # a spent OpenAlex list budget excuses nothing: its singleton lookups are free
    assert not only_spent_holds(CLOSED_UNKNOWN, "access", [OPENALEX])
    assert not only_spent_holds(CLOSED_UNKNOWN, "doi", [UNPAYWALL])
    assert not only_spent_holds(None, "access", [UNPAYWALL])


def test_excused_deferrals_leave_the_answering_figure_whole() -> None:
    articles = [CLOSED_UNKNOWN, CLOSED_KNOWN, OPEN_UNKNOWN, None]
    unspent = _facts(
        [
            {"doi": "10.5555/closed-1", "access": "closed"},
            {"doi": "10.5555/closed-2", "access": "closed"},
            {"doi": "10.5555/open-1", "access": "green", "licence": "cc-by"},
            {"resolve_error": "invalid DOI"},
        ]
    )
    spent = _facts(
        [
            {"doi": "10.5555/closed-1", "licence_error": DEFERRED},
            {"doi": "10.5555/closed-2", "access": "closed"},
            # the same facts from another service, in its own words, are found
            {"doi": "10.5555/open-1", "access": "GREEN", "licence": "http://cc/by"},
            {"resolve_error": "invalid DOI"},
        ]
    )
    by_column = {a.column: a for a in audit(articles, unspent, spent, [UNPAYWALL, OPENALEX])}
    access = by_column["access"]
    assert (access.reference, access.found, access.deferred, access.missed) == (3, 2, 1, 0)
    assert access.of_answering == 1.0
    assert round(access.of_unspent, 3) == 0.667
    assert by_column["licence"].of_answering == 1.0
    assert by_column["doi"].reference == 3


def test_a_deferral_the_truth_does_not_excuse_is_missed() -> None:
    articles = [CLOSED_KNOWN, CLOSED_UNKNOWN, CLOSED_UNKNOWN]
    unspent = _facts([{"access": "closed"}] * 3)
    spent = _facts(
        [
            {"licence_error": DEFERRED},  # OpenAlex knows this DOI: it should have answered
            {"licence_error": "abandoned: api.unpaywall.org asked to wait 30000 s"},
            {},  # empty without a word
        ]
    )
    (access,) = [a for a in audit(articles, unspent, spent, [UNPAYWALL]) if a.column == "access"]
    assert (access.found, access.deferred, access.missed) == (0, 0, 3)
    assert access.of_answering == 0.0
    # a deferral naming a host whose quota is not spent is no excuse either
    spent_other = _facts([{"licence_error": DEFERRED}] * 3)
    (access,) = [
        a for a in audit(articles, unspent, spent_other, [OPENALEX]) if a.column == "access"
    ]
    assert access.deferred == 0
