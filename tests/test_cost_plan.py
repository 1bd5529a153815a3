"""df.lit.plan(): requests per host and kind, time and quota share, before anything is sent."""

from __future__ import annotations

import math

import httpx
import pandas as pd

import litfetch_df  # noqa: F401  (registers df.lit)
from litfetch_df import Session
from litfetch_df.frame.engine.cost import GAINS_DOI, plan_costs
from litfetch_df.store.quota import QuotaLedger
from tests.virtual_clock import EPOCH


def _frame(n: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "doi": [f"10.1000/x.{i}" for i in range(n)],
            "pmid": [str(30000000 + i) if i % 2 else None for i in range(n)],
            "pmcid": [f"PMC{7000000 + i}" if i % 4 == 1 else None for i in range(n)],
        }
    )


def row(plan: pd.DataFrame, host: str, kind: str) -> pd.Series:
    hits = plan[(plan["host"] == host) & (plan["kind"] == kind)]
    assert len(hits) == 1, (host, kind, plan)
    return hits.iloc[0]


def test_the_plan_counts_bulk_forms_and_sends_nothing() -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    session = Session(
        client_factory=lambda: httpx.AsyncClient(transport=httpx.MockTransport(handler))
    )
    plan = _frame(1_000).lit.plan(session=session, contact="me@lab.example")
    assert sent == []
    # OpenAlex: the resolver's 750 DOIs short of an id (their terms kept), then the terms
    # lookup of the other 250 only, 100 DOIs a call.
    assert row(plan, "api.openalex.org", "list")["requests"] == 8 + 3
    assert row(plan, "api.crossref.org", "list")["requests"] == 10
    # the ID Converter: the 750 bundles short of an id, then a round for the 500 DOI-only
    # ones the other services are expected to give a PMID (GAINS_DOI)
    idconv = math.ceil(750 / 200) + math.ceil(500 * GAINS_DOI / 200)
    assert row(plan, "pmc.ncbi.nlm.nih.gov", "list")["requests"] == idconv
    assert row(plan, "api.semanticscholar.org", "list")["requests"] == 2
    unpaywall = row(plan, "api.unpaywall.org", "single")
    assert unpaywall["basis"] == "estimate" and unpaywall["requests"] == 90
    # With a contact Crossref puts the lists in its polite pool: 3 a second.
    assert row(plan, "api.crossref.org", "list")["seconds"] >= 10 / 3
    assert plan["deferred_rows"].sum() == 0


def test_a_spent_list_budget_plans_the_singleton_detour() -> None:
    ledger = QuotaLedger(None, now=lambda: EPOCH, quotas={("api.openalex.org", "list"): 3})
    plan = plan_costs(_frame(1_000), ["licences"], ledger=ledger)
    openalex = row(plan, "api.openalex.org", "list")
    assert openalex["quota"] == 1_000 and openalex["quota_left"] == 3
    assert openalex["quota_share"] > 1
    # Past the list budget OpenAlex's free singletons answer: a detour, nothing deferred.
    assert openalex["deferred_rows"] == 0
    singles = row(plan, "api.openalex.org", "single")
    # one singleton per DOI the three list calls left do not answer (300 of them do),
    # whichever step sends them: the steps share the answers
    assert singles["basis"] == "detour" and singles["requests"] == 700
    # Without a contact Unpaywall is not planned.
    assert "api.unpaywall.org" not in set(plan_costs(_frame(10), contact=False)["host"])


def test_an_empty_frame_plans_nothing() -> None:
    plan = plan_costs(pd.DataFrame({"doi": [None, "not a doi"]}))
    assert plan.empty and list(plan.columns)[:3] == ["host", "kind", "requests"]


def test_a_spent_unpaywall_day_shows_as_deferred_rows() -> None:
    ledger = QuotaLedger(None, now=lambda: EPOCH, quotas={("api.unpaywall.org", "single"): 10})
    plan = plan_costs(_frame(1_000), ["licences"], ledger=ledger)
    unpaywall = row(plan, "api.unpaywall.org", "single")
    assert unpaywall["quota_left"] == 10
    assert unpaywall["deferred_rows"] == unpaywall["requests"] - 10 > 0


def test_a_host_is_planned_no_more_requests_than_its_quota_has_left() -> None:
    from litfetch_df.frame.engine.spent import planned_by_host

    ledger = QuotaLedger(None, now=lambda: EPOCH, quotas={("api.unpaywall.org", "single"): 10})
    plan = plan_costs(_frame(1_000), ["licences"], ledger=ledger)
    assert planned_by_host(plan)["api.unpaywall.org"] == 10
