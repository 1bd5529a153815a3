"""The published-limits table: every figure sourced, lookups conservative, kinds classified."""

from __future__ import annotations

import pytest

from litfetch_df.limits import (
    LIMITS,
    UNLISTED,
    limits_for,
    published_limit,
    quota_calls,
    request_kind,
)


def test_every_row_names_its_source_and_a_known_kind() -> None:
    for row in LIMITS:
        assert row.source.strip(), row
        assert row.kind in ("single", "list", "search", "fulltext", "file"), row
        assert row.batch >= 1
        # a quota or budget always comes with the period it renews in
        if row.quota is not None or row.budget_usd is not None:
            assert row.period in ("day", "week"), row


def test_rows_are_unique_per_host_kind_and_tier() -> None:
    keys = [(r.host, r.kind, r.tier) for r in LIMITS]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize(
    ("host", "kind", "tier", "rate", "in_flight"),
    [
        ("api.crossref.org", "list", "polite", 3.0, 3),
        ("api.crossref.org", "list", "public", 1.0, 1),
        ("api.crossref.org", "single", "polite", 10.0, 3),
        ("www.ebi.ac.uk", "search", None, 500 / 60, None),  # the per-minute window binds
        ("api.springernature.com", "list", "basic", 100 / 60, None),
        ("api.elsevier.com", "fulltext", "keyed", 10.0, None),
        ("eutils.ncbi.nlm.nih.gov", "list", None, 3.0, None),
    ],
)
def test_published_rates(
    host: str, kind: str, tier: str | None, rate: float, in_flight: int | None
) -> None:
    row = published_limit(host, kind, tier)  # type: ignore[arg-type]
    assert row is not None
    assert row.rate == pytest.approx(rate)
    assert row.in_flight == in_flight


def test_untiered_lookup_takes_the_conservative_tier() -> None:
    crossref = published_limit("api.crossref.org", "list")
    assert crossref is not None and crossref.tier == "public"
    openalex = published_limit("API.OpenAlex.org", "list")
    assert openalex is not None and openalex.tier == "keyless"


def test_unknown_kind_falls_back_to_the_hosts_tightest_row() -> None:
    row = published_limit("api.crossref.org", "fulltext", "polite")
    assert row is not None and row.rate == 3.0


def test_unlisted_host_has_no_row_and_a_documented_politeness() -> None:
    assert published_limit("example.org") is None
    assert limits_for("example.org") == ()
    assert UNLISTED.per_second == 20.0 and UNLISTED.in_flight == 8
    assert not UNLISTED.published


def test_quota_calls_turns_budgets_into_calls() -> None:
    keyed = published_limit("api.openalex.org", "list", "keyed")
    keyless = published_limit("api.openalex.org", "list", "keyless")
    single = published_limit("api.openalex.org", "single", "keyless")
    springer = published_limit("api.springernature.com", "list", "basic")
    assert keyed and keyless and single and springer
    assert quota_calls(keyed) == 10_000
    assert quota_calls(keyless) == 1_000
    assert quota_calls(single) is None  # singletons are free
    assert quota_calls(springer) == 500


@pytest.mark.parametrize(
    ("host", "path", "params", "kind"),
    [
        ("api.openalex.org", "/works", {"filter": "doi:a|b"}, "list"),
        ("api.openalex.org", "/works/doi:10.1/x", {}, "single"),
        ("api.crossref.org", "/works", {"filter": "doi:a,doi:b"}, "list"),
        ("api.crossref.org", "/works/10.1/x", {}, "single"),
        ("www.ebi.ac.uk", "/europepmc/webservices/rest/search", {"query": "x"}, "search"),
        ("www.ebi.ac.uk", "/europepmc/webservices/rest/PMC1/fullTextXML", {}, "fulltext"),
        ("api.springernature.com", "/meta/v2/json", {"q": "doi:x"}, "list"),
        ("api.springernature.com", "/openaccess/jats", {"q": "doi:x"}, "fulltext"),
        ("pmc-oa-opendata.s3.amazonaws.com", "/", {"list-type": "2", "prefix": "PMC1."}, "list"),
        ("pmc-oa-opendata.s3.amazonaws.com", "/PMC1.1/PMC1.1.xml", {}, "file"),
        ("api.semanticscholar.org", "/graph/v1/paper/batch", {}, "list"),
        ("example.org", "/anything", {}, "single"),
    ],
)
def test_request_kind(host: str, path: str, params: dict[str, str], kind: str) -> None:
    assert request_kind(host, path, params) == kind
