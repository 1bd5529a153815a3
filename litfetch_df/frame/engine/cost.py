"""What a table will cost before anything is sent: requests per host and kind, time, quota.

:func:`plan_costs` reads only the frame's id columns and :mod:`litfetch_df.limits`:
for each step asked for it counts the bulk requests the ids need (the forms the
frame uses: 200 ids an ID Converter call, 100 DOIs an OpenAlex filter, 100 a
Crossref list, 500 ids a Semantic Scholar batch, 25 DOIs a Springer Meta page),
estimates the per-article requests from the ids and the stated priors (the ids
resolution will add, one PMC listing per PMCID and a GET where the bucket holds
the body, Europe PMC full text for the rest and for books, Elsevier and
Springer full text for a share of their DOIs), and
prices each host: the time its published rate and the latency allow, the share of
today's quota it takes (what the ledger says is left, when a session is given) and
the rows that would be deferred. Per-article requests whose need only the answers
reveal (Unpaywall for DOIs OpenAlex does not know, full text a search may rule
out) are estimated from stated priors and marked ``estimate``.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ...ids import doi_key
from ...limits import UNLISTED, Kind, published_limit, quota_calls
from ...publishers import Publisher, by_prefix
from ...sources.crossref_batch import CROSSREF_BATCH_CAP
from ...store.quota import QuotaLedger
from .plan import parse_ids

__all__ = [
    "ELSEVIER_ASKED",
    "EPMC_FULLTEXT",
    "GAINS_DOI",
    "GAINS_PMCID",
    "IN_BUCKET",
    "PUBLISHER_GAIN",
    "STEPS_PLANNED",
    "UNKNOWN_TO_OPENALEX",
    "HostCost",
    "format_plan",
    "plan_costs",
    "plan_for",
]

STEPS_PLANNED: tuple[str, ...] = ("resolve", "bodies", "files", "licences")
"""The steps a plan prices by default (those of ``run()`` that ask per row)."""

UNKNOWN_TO_OPENALEX = 0.09
"""The share of DOIs unknown to OpenAlex (asked of Unpaywall one by one): a prior, since
only OpenAlex's answer tells; the benchmark's corpus has 8.9 %, real tables fewer."""

GAINS_DOI = 0.82
"""The share of id bundles without a DOI that resolution gives one (benchmark corpus: 0.82;
most PubMed and PMC records since 2000 carry one)."""

GAINS_PMCID = 0.38
"""The share of id bundles without a PMCID that resolution finds one for (benchmark corpus:
0.38; PMC holds about a third of PubMed)."""

IN_BUCKET = 0.85
"""The share of PMCIDs whose body the PMC OA bucket holds (one GET after the listing).
Benchmark corpus: 0.86."""

EPMC_FULLTEXT = 0.13
"""The share of PMCIDs whose body is asked of Europe PMC's ``fullTextXML``: those the bucket
lacks *and* Europe PMC's search says it holds, so fewer than ``1 - IN_BUCKET`` (a search
answer rules the rest out). Benchmark corpus: 0.13 (126 of 920 PMCIDs at N=2,000)."""

ELSEVIER_ASKED = 0.47
"""The share of Elsevier DOIs the body ladder reaches Elsevier's full text for (the others
have a PMC copy first, or no entitlement). Benchmark corpus: 0.47."""

PUBLISHER_GAIN = 0.35
"""How much of the given DOIs' publisher mix the DOIs resolution adds keep (a publisher
with 10 % of the given DOIs is planned 3.5 % of the added ones). Benchmark corpus: 0.35."""

SPRINGER_OA_PAGE = 20
"""DOIs per Springer OpenAccess OR query on the Basic plan."""


@dataclass(frozen=True, slots=True)
class HostCost:
    """One host and kind of request in a plan: how many, how long, what share of the quota."""

    host: str
    kind: Kind
    requests: int
    ids_per_request: int
    seconds: float
    quota: int | None
    quota_left: int | None
    deferred_rows: int
    basis: str


def _tier(host: str, credentials: Mapping[str, object], contact: bool) -> str | None:
    if host == "api.openalex.org":
        return "keyed" if credentials.get("openalex_api_key") else "keyless"
    if host == "api.crossref.org":
        return "polite" if contact else "public"
    if host in ("eutils.ncbi.nlm.nih.gov", "pmc.ncbi.nlm.nih.gov"):
        return "keyed" if credentials.get("ncbi_api_key") else "keyless"
    if host == "api.semanticscholar.org":
        return "keyed" if credentials.get("semantic_scholar_api_key") else "keyless"
    return None


def plan_costs(
    frame: pd.DataFrame,
    steps: Iterable[str] = STEPS_PLANNED,
    *,
    credentials: Mapping[str, object] | None = None,
    contact: bool = True,
    latency: float = 0.05,
    ledger: QuotaLedger | None = None,
    id_columns: Mapping[str, Hashable | None] | None = None,
) -> pd.DataFrame:
    """Return one row per host and request kind that the ``steps`` would ask, sending nothing.

    Columns: ``host``, ``kind``, ``requests``, ``ids_per_request``, ``seconds``
    (the published rate's time for those requests, at least one ``latency``),
    ``quota`` (calls per period, ``<NA>`` when unmetered), ``quota_left``
    (from ``ledger``, else the whole quota), ``quota_share`` (requests ÷ what is
    left), ``deferred_rows`` (rows beyond what is left) and ``basis``
    (``bulk`` for counted bulk forms, ``estimate`` for per-article guesses,
    ``detour`` for OpenAlex's free singletons asked once its list budget is spent).
    """
    wanted = set(steps)
    creds = dict(credentials or {})
    parsed = parse_ids(frame, dict(id_columns or {}))
    bundles = {b for b in parsed.bundles if not b.is_empty()}
    dois = {doi_key(b.doi) for b in bundles if b.doi}
    short_of_ids = [b for b in bundles if b.pmid is None or b.pmcid is None]
    pmcids = {b.pmcid for b in bundles if b.pmcid}
    # What resolution will add is known only from its answers: the priors above say how much.
    articles = [b for b in bundles if b.pmid or b.pmcid or b.doi]
    resolving = "resolve" in wanted
    n_dois = len(dois) + (GAINS_DOI * sum(1 for b in articles if not b.doi) if resolving else 0.0)
    n_pmcids = len(pmcids) + (
        GAINS_PMCID * sum(1 for b in articles if not b.pmcid) if resolving else 0.0
    )
    by_publisher = [by_prefix(d) for d in dois]
    share_of = {
        p: (sum(1 for q in by_publisher if q is p) / len(dois) if dois else 0.0)
        for p in (Publisher.ELSEVIER, Publisher.SPRINGER_NATURE)
    }
    # The DOIs resolution adds come from PubMed records, whose publisher mix is not the
    # given DOIs': they keep PUBLISHER_GAIN of it.
    gained = (n_dois - len(dois)) * PUBLISHER_GAIN
    n_springer = (len(dois) + gained) * share_of[Publisher.SPRINGER_NATURE]
    n_elsevier = (len(dois) + gained) * share_of[Publisher.ELSEVIER]

    asks: dict[tuple[str, Kind], tuple[float, int, str]] = {}

    def ask(host: str, kind: Kind, n_ids: float, per: int, basis: str = "bulk") -> None:
        if n_ids <= 0:
            return
        # A bulk call is sent for any remainder, so pages round up; a per-article estimate
        # is an expected count, kept fractional and rounded to nearest once per host and
        # kind (rounding each step's share up overstated small tables: 6 planned, 4 sent).
        count = n_ids if per == 1 and basis == "estimate" else math.ceil(round(n_ids, 6) / per)
        before = asks.get((host, kind), (0.0, per, basis))
        # Different steps' requests to one host and kind add up (each asks its own ids).
        basis = "estimate" if "estimate" in (basis, before[2]) else basis
        asks[(host, kind)] = (before[0] + count, per, basis)

    asked_in_resolve = 0
    if resolving and short_of_ids:
        ask("pmc.ncbi.nlm.nih.gov", "list", len(short_of_ids), 200)
        # a second round for the bundles another service gave a PMID or DOI
        doi_only = sum(1 for b in short_of_ids if b.doi and not b.pmid and not b.pmcid)
        ask("pmc.ncbi.nlm.nih.gov", "list", GAINS_DOI * doi_only, 200, "estimate")
        asked_in_resolve = sum(1 for b in short_of_ids if b.doi)
        ask("api.openalex.org", "list", asked_in_resolve, 100)
        pmid_only = sum(1 for b in short_of_ids if b.pmid and b.pmcid is None)
        ask("www.ebi.ac.uk", "search", pmid_only, 100)
        ask("www.ebi.ac.uk", "search", 1, 1, "estimate")  # the round for ids gained
    if "bodies" in wanted:
        ask("www.ebi.ac.uk", "search", n_pmcids, 100, "estimate")
        # one listing per PMCID, one GET where the bucket holds the body, else fullTextXML
        # where Europe PMC's search says it holds the text
        ask("pmc-oa-opendata.s3.amazonaws.com", "list", n_pmcids, 1, "estimate")
        ask("pmc-oa-opendata.s3.amazonaws.com", "file", n_pmcids * IN_BUCKET, 1, "estimate")
        books = {b.bookid for b in bundles if b.bookid}
        ask("www.ebi.ac.uk", "fulltext", len(books) + n_pmcids * EPMC_FULLTEXT, 1, "estimate")
        if creds.get("elsevier_api_key"):
            ask("api.elsevier.com", "fulltext", n_elsevier * ELSEVIER_ASKED, 1, "estimate")
        if creds.get("springer_api_key"):
            # every Springer DOI in OR pages of 20
            ask("api.springernature.com", "fulltext", n_springer, SPRINGER_OA_PAGE, "estimate")
    if "files" in wanted or "licences" in wanted:
        # one OpenAlex works lookup and one Crossref list serve both steps; the DOIs the
        # resolution asked OpenAlex about already are not asked again (it keeps their terms)
        ask(
            "api.openalex.org",
            "list",
            n_dois - asked_in_resolve,
            100,
            "estimate" if resolving else "bulk",
        )
        ask("api.crossref.org", "list", n_dois, CROSSREF_BATCH_CAP)
        if contact:
            ask("api.unpaywall.org", "single", n_dois * UNKNOWN_TO_OPENALEX, 1, "estimate")
    if "files" in wanted:
        ask("api.semanticscholar.org", "list", len(bundles), 500)
        if creds.get("springer_meta_api_key"):
            ask("api.springernature.com", "list", n_springer, 25, "estimate")

    rows = []
    detour: list[tuple[str, int]] = []
    for (host, kind), (expected, per, basis) in sorted(asks.items()):
        # Rounded to nearest; a host expected to get under half a request stays listed with 0,
        # since a plan that hides a host the run may ask (and whose quota may be spent) surprises.
        requests = math.floor(round(expected, 6) + 0.5)
        limit = published_limit(host, kind, _tier(host, creds, contact))
        rate = (limit.rate if limit is not None else None) or UNLISTED.per_second or 20.0
        in_flight = (limit.in_flight if limit is not None else None) or UNLISTED.in_flight or 8
        seconds = max(requests / rate, requests * latency / in_flight) + latency
        quota = quota_calls(limit) if limit is not None and limit.kind == kind else None
        left = quota
        if ledger is not None and limit is not None and quota is not None:
            left = ledger.left(limit)
        deferred = 0 if left is None else max(0, requests - left) * per
        if host == "api.openalex.org" and kind == "list" and deferred:
            # Past the list budget the free singletons answer instead: a detour, not a delay;
            # each DOI once (the steps share the answers), but for those the list calls still
            # left answer (whichever step sends them)
            detour.append((host, max(0, math.ceil(n_dois) - (left or 0) * per)))
            deferred = 0
        rows.append(
            {
                "host": host,
                "kind": kind,
                "requests": requests,
                "ids_per_request": per,
                "seconds": round(seconds, 2),
                "quota": quota,
                "quota_left": left,
                "quota_share": None if not left else round(requests / left, 4),
                "deferred_rows": min(deferred, len(parsed.bundles)),
                "basis": basis,
            }
        )
    for host, singles in detour:
        single = published_limit(host, "single", _tier(host, creds, contact))
        rate = (single.rate if single is not None else None) or 10.0
        rows.append(
            {
                "host": host,
                "kind": "single",
                "requests": singles,
                "ids_per_request": 1,
                "seconds": round(singles / rate + latency, 2),
                "quota": None,
                "quota_left": None,
                "quota_share": None,
                "deferred_rows": 0,
                "basis": "detour",
            }
        )
    out = pd.DataFrame(
        rows,
        columns=[
            "host", "kind", "requests", "ids_per_request", "seconds", "quota",
            "quota_left", "quota_share", "deferred_rows", "basis",
        ],
    )  # fmt: skip
    return out.astype({"quota": "Int64", "quota_left": "Int64", "quota_share": "Float64"})


def plan_for(
    frame: pd.DataFrame,
    steps: Iterable[str] = STEPS_PLANNED,
    *,
    session: object = None,
    credentials: Mapping[str, object] | None = None,
    contact: str | None = None,
    latency: float = 0.05,
) -> pd.DataFrame:
    """:func:`plan_costs` for a frame and the session a run would use (its ledger, contact).

    What is left of each quota comes from ``session``'s quota ledger (kept beside
    its cache), so a second plan the same day sees what the first run spent.
    """
    ledger = getattr(session, "quota", None)
    has_contact = bool(contact) or bool(getattr(session, "contact", None))
    return plan_costs(
        frame,
        steps,
        credentials=credentials,
        contact=has_contact,
        latency=latency,
        ledger=ledger if isinstance(ledger, QuotaLedger) else None,
    )


def format_plan(plan: pd.DataFrame) -> str:
    """The plan as a plain-text table (one line per host and kind, then the total)."""
    if plan.empty:
        return "no requests: the table holds no id a step could ask about"
    head = (
        f"{'host':<34} {'kind':<8} {'requests':>8} {'per req':>7} {'seconds':>8} "
        f"{'quota left':>10} {'share':>6} {'deferred':>8}  basis"
    )
    lines = [head]
    records: list[dict[str, Any]] = [
        {str(k): v for k, v in r.items()} for r in plan.to_dict("records")
    ]
    for r in records:
        left = "-" if pd.isna(r["quota_left"]) else str(int(r["quota_left"]))
        share = "-" if pd.isna(r["quota_share"]) else f"{float(r['quota_share']):.0%}"
        lines.append(
            f"{r['host']:<34} {r['kind']:<8} {int(r['requests']):>8} "
            f"{int(r['ids_per_request']):>7} {float(r['seconds']):>8.2f} {left:>10} "
            f"{share:>6} {int(r['deferred_rows']):>8}  {r['basis']}"
        )
    slowest = max(records, key=lambda r: float(r["seconds"]))
    lines.append(
        f"{sum(int(r['requests']) for r in records)} requests; the slowest host, "
        f"{slowest['host']}, needs about {float(slowest['seconds']):.1f} s; "
        f"{max(int(r['deferred_rows']) for r in records)} rows would be deferred"
    )
    return "\n".join(lines)
