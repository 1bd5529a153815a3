"""service_terms: Semantic Scholar, OpenAlex and Europe PMC terms read from held answers only.

The bulk answers are built from real recorded answers (tests/data/json, see
PROVENANCE.md there: Semantic Scholar and OpenAlex records recorded by
Future-House/paper-qa, the Europe PMC ``lite`` search by
JonasHeinickeBio/pyEuropePMC), put into the bulk shapes the services answer
with (an aligned array for the S2 batch, ``results`` for the OpenAlex filter,
``resultList.result`` for the Europe PMC search).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from litfetch_df import SourceMetadata
from litfetch_df.frame.engine import bulk
from litfetch_df.ids import ArticleIds
from litfetch_df.operations.service_terms import SERVICE_ORDER, service_terms
from litfetch_df.sources.europe_pmc_search import SEARCH_URL
from litfetch_df.sources.openalex import WORKS_URL, openalex_access
from litfetch_df.sources.semantic_scholar_batch import S2_BATCH_URL
from tests.conftest import data_json, mock_session

NATURE = "10.1038/s42256-024-00832-8"  # S2: HYBRID, CCBY
XGEN = "10.1016/j.xgen.2025.100814"  # S2: GOLD, CCBY; OpenAlex: gold, cc-by
PNAS = "10.1073/pnas.1414271111"  # OpenAlex: bronze, no licence
EPMC_OPEN = "PMC12120539"  # isOpenAccess Y
EPMC_NOT_OPEN = "PMC12124214"  # isOpenAccess N, inEPMC Y
SEARCH = "europepmc_rest_search_cancer_resultType-lite.json"


def s2_record(doi: str) -> dict[str, Any]:
    return data_json("json", f"s2_graph_paper_DOI_{doi.replace('/', '_')}.json")


def openalex_work(doi: str) -> dict[str, Any]:
    return data_json("json", f"openalex_work_doi_{doi.replace('/', '_')}.json")


class Upstream:
    """Answers the three bulk endpoints from recorded records; counts every request."""

    def __init__(self, *, s2: dict[str, dict[str, Any]] | None = None, status: int = 200) -> None:
        self.s2 = s2 if s2 is not None else {NATURE: s2_record(NATURE), XGEN: s2_record(XGEN)}
        self.status = status
        self.seen: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(request)
        if self.status != 200:
            return httpx.Response(self.status)
        url = str(request.url.copy_with(query=None))
        if url == S2_BATCH_URL:
            ids = json.loads(request.content)["ids"]
            return httpx.Response(200, json=[self.s2.get(i.removeprefix("DOI:")) for i in ids])
        if url == WORKS_URL:
            dois = request.url.params["filter"].removeprefix("doi:").split("|")
            known = {d: openalex_work(d) for d in (XGEN, PNAS)}
            return httpx.Response(
                200, json={"meta": {}, "results": [known[d] for d in dois if d in known]}
            )
        if url == SEARCH_URL:
            return httpx.Response(200, json=data_json("json", SEARCH))
        raise AssertionError(f"unexpected request {request.url}")


async def primed_terms(
    ids: ArticleIds,
    have: SourceMetadata,
    services: frozenset[bulk.Service],
    upstream: Upstream | None = None,
    *,
    failed: bool = False,
) -> tuple[SourceMetadata, int]:
    """Prime the services for ``ids``, then read; return the terms and the requests read cost."""
    upstream = upstream or Upstream()
    async with mock_session(upstream) as session:
        await bulk.prime(session, [ids], services)
        before = len(upstream.seen)
        async with session.scope() as scope:
            got = await service_terms(scope, ids, have)
            assert bool(scope.failures) == failed, scope.failures
    return got, len(upstream.seen) - before


S2 = frozenset({bulk.Service.SEMANTIC_SCHOLAR})
OPENALEX = frozenset({bulk.Service.OPENALEX_TERMS})
EPMC = frozenset({bulk.Service.EUROPE_PMC_FULL_TEXT})


async def test_semantic_scholar_fills_an_empty_row_from_its_batch_answer() -> None:
    got, cost = await primed_terms(ArticleIds(doi=NATURE), SourceMetadata(), S2)
    assert got == SourceMetadata(
        licence="CCBY", access="HYBRID", basis="semantic_scholar", oa_status="hybrid"
    )
    assert cost == 0


async def test_a_landing_page_pdf_url_does_not_hide_the_status() -> None:
    got, _ = await primed_terms(ArticleIds(doi=XGEN), SourceMetadata(), S2)
    assert (got.licence, got.access, got.oa_status) == ("CCBY", "GOLD", "gold")


async def test_what_the_body_stated_stays_and_only_the_gaps_are_filled() -> None:
    body = SourceMetadata(
        licence="http://creativecommons.org/licenses/by/4.0/",
        access="open-access",
        basis="artifact",
    )
    got, _ = await primed_terms(ArticleIds(doi=NATURE), body, S2)
    # The body's licence and access stay; S2's classification gives only the colour.
    assert got == SourceMetadata(
        licence=body.licence, access="open-access", basis="artifact", oa_status="hybrid"
    )

    licence_only = SourceMetadata(licence=body.licence, basis="artifact")
    got, _ = await primed_terms(ArticleIds(doi=NATURE), licence_only, S2)
    assert (got.basis, got.access, got.access_basis, got.access_from) == (
        "artifact",
        "HYBRID",
        "semantic_scholar",
        "semantic_scholar",
    )


async def test_unpaywall_terms_are_never_replaced() -> None:
    unpaywall = SourceMetadata(licence="cc-by", access="gold", basis="unpaywall", oa_status="gold")
    got, cost = await primed_terms(ArticleIds(doi=NATURE), unpaywall, S2 | OPENALEX | EPMC)
    assert got == unpaywall
    assert cost == 0


async def test_openalex_fills_what_semantic_scholar_did_not_know() -> None:
    upstream = Upstream(s2={})  # S2 answers null for every id
    got, _ = await primed_terms(ArticleIds(doi=XGEN), SourceMetadata(), S2 | OPENALEX, upstream)
    assert got == SourceMetadata(licence="cc-by", access="gold", basis="openalex", oa_status="gold")

    got, _ = await primed_terms(ArticleIds(doi=PNAS), SourceMetadata(), S2 | OPENALEX, upstream)
    assert got == SourceMetadata(access="bronze", basis="openalex", oa_status="bronze")


async def test_semantic_scholar_comes_before_openalex() -> None:
    assert SERVICE_ORDER == ("semantic_scholar", "openalex", "europe_pmc")
    got, _ = await primed_terms(ArticleIds(doi=XGEN), SourceMetadata(), S2 | OPENALEX)
    assert (got.licence, got.basis) == ("CCBY", "semantic_scholar")


async def test_europe_pmc_open_access_flag_gives_access_but_no_colour() -> None:
    got, cost = await primed_terms(ArticleIds(pmcid=EPMC_OPEN), SourceMetadata(), EPMC)
    assert got == SourceMetadata(access="open-access", basis="europe_pmc")
    assert got.oa_status is None
    assert cost == 0
    # isOpenAccess "N" is not "closed": Europe PMC also serves author manuscripts.
    got, _ = await primed_terms(ArticleIds(pmcid=EPMC_NOT_OPEN), SourceMetadata(), EPMC)
    assert got == SourceMetadata()


async def test_the_europe_pmc_statement_fills_access_after_a_crossref_style_licence() -> None:
    licence = SourceMetadata(
        licence="https://creativecommons.org/licenses/by/4.0/", basis="crossref"
    )
    got, _ = await primed_terms(ArticleIds(pmcid=EPMC_OPEN), licence, EPMC)
    assert (got.licence, got.basis, got.access, got.access_basis) == (
        licence.licence,
        "crossref",
        "open-access",
        "europe_pmc",
    )


async def test_nothing_held_asks_nothing() -> None:
    upstream = Upstream()
    async with mock_session(upstream) as session:
        got = await service_terms(
            session, ArticleIds(doi=NATURE, pmcid=EPMC_OPEN), SourceMetadata()
        )
    assert got == SourceMetadata()
    assert upstream.seen == []


async def test_an_unanswered_bulk_lookup_leaves_the_row_as_it_was_and_counts_as_a_failure() -> None:
    # Nothing is read and nothing is asked, but the answer the lookup would have held is
    # unknown: the scope records the failure, so the frame's row says it is partial.
    body = SourceMetadata(licence="cc-by", basis="artifact")
    got, cost = await primed_terms(
        ArticleIds(doi=NATURE), body, S2, Upstream(status=503), failed=True
    )
    assert got == body
    assert cost == 0


async def test_an_http_that_holds_nothing_gives_the_terms_back() -> None:
    class Plain:
        contact = None

        async def get(self, url: str, **_: object) -> httpx.Response:
            raise AssertionError("no request may be made")

    have = SourceMetadata(licence="cc-by", basis="artifact")
    assert await service_terms(Plain(), ArticleIds(doi=NATURE), have) == have  # type: ignore[arg-type]


async def test_a_stored_answer_is_held_too(tmp_path: Path) -> None:
    # A per-article S2 lookup an earlier run stored in the persistent cache is read, not re-asked.
    from litfetch_df.sources.semantic_scholar import fetch_s2_paper

    upstream = Upstream()

    def single(request: httpx.Request) -> httpx.Response:
        upstream.seen.append(request)
        record = s2_record(NATURE)
        return httpx.Response(
            200, json={"paperId": record["paperId"], **{"openAccessPdf": record["openAccessPdf"]}}
        )

    async with mock_session(single, cache=tmp_path) as first:
        await fetch_s2_paper(first, ArticleIds(doi=NATURE), fields="openAccessPdf")
    async with mock_session(single, cache=tmp_path) as second:
        got = await service_terms(second, ArticleIds(doi=NATURE), SourceMetadata())
    assert (got.licence, got.access, got.basis) == ("CCBY", "HYBRID", "semantic_scholar")
    assert len(upstream.seen) == 1


def test_openalex_leaves_out_a_preprint_copys_licence() -> None:
    work = openalex_work(XGEN)
    work["best_oa_location"] = {**work["best_oa_location"], "version": "submittedVersion"}
    assert openalex_access(work) == SourceMetadata(access="gold", basis="openalex")


def test_which_services_the_terms_need_primed() -> None:
    # OpenAlex with a contact too: its classification is Unpaywall's, a hundred a request.
    assert bulk.for_service_terms("me@example.org") == {
        bulk.Service.SEMANTIC_SCHOLAR,
        bulk.Service.EUROPE_PMC_FULL_TEXT,
        bulk.Service.OPENALEX_TERMS,
    }
    assert bulk.Service.OPENALEX_TERMS in bulk.for_service_terms(None)
    assert bulk.may_prime(bulk.Service.EUROPE_PMC_FULL_TEXT, SEARCH_URL)
    assert bulk.may_prime(bulk.Service.OPENALEX_TERMS, WORKS_URL)
