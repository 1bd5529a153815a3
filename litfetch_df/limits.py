"""What each service publishes about itself: rates, concurrency, quotas, costs and bulk forms.

One table, one row per host, request kind and tier (keyed or keyless, polite or public,
a plan such as Springer Nature Basic), each row with the source it was read from. The
limiter takes its hard ceilings from here, the planner its request counts, costs and
quotas, and the quota ledger its periods. Figures are the 2026 ones
(``shared/spec/limits-2026.md``); where a service publishes nothing the row says so
(``basis="none"``) and the limiter learns the pace from the answers instead.

This module imports nothing from the rest of the package: it is data plus lookups.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "KINDS",
    "LIMITS",
    "UNLISTED",
    "Basis",
    "Kind",
    "Limit",
    "Period",
    "limits_for",
    "published_limit",
    "quota_calls",
    "request_kind",
    "tier_of",
]

Kind = Literal["single", "list", "search", "fulltext", "file"]
"""What a request asks for: one record, a list/filter (many ids in one call), a search
query, one article's full text, or a file (S3 object, supplement, PDF)."""

KINDS: tuple[Kind, ...] = ("single", "list", "search", "fulltext", "file")

Basis = Literal["doc", "staff", "obs", "none"]
"""Where a figure comes from: the provider's documentation, a provider employee, a third
party's observation, or nothing published (the library's own politeness choice)."""

Period = Literal["day", "week"]


@dataclass(frozen=True)
class Limit:
    """The published terms of one host for one kind of request on one tier.

    ``per_second`` / ``per_minute`` are ceilings never passed (``None``: nothing
    published for that window); ``in_flight`` the published concurrency (``None``:
    unpublished). ``quota`` is the number of calls allowed per ``period``; for a host
    that meters money instead (OpenAlex), ``cost_usd`` is the price of one call and
    ``budget_usd`` what the tier gets per ``period``. ``batch`` is how many ids one
    call of this kind may carry, ``page_size`` the most records one page returns.
    ``tier`` names the plan (``"keyed"``, ``"keyless"``, ``"polite"``, ``"public"``,
    ``"basic"``, ``"premium"``, ``"any"``); ``source`` says where each figure was read.
    """

    host: str
    kind: Kind
    tier: str
    basis: Basis
    source: str
    per_second: float | None = None
    per_minute: float | None = None
    in_flight: int | None = None
    quota: int | None = None
    period: Period | None = None
    cost_usd: float | None = None
    budget_usd: float | None = None
    batch: int = 1
    page_size: int | None = None

    @property
    def published(self) -> bool:
        """Whether any figure of this row comes from the service (not the library)."""
        return self.basis != "none"

    @property
    def rate(self) -> float | None:
        """The binding sustained rate in requests per second (the tighter window).

        ``None`` when neither a per-second nor a per-minute figure is published.
        """
        rates = [r for r in (self.per_second, _per_minute_as_rate(self.per_minute)) if r]
        return min(rates) if rates else None


def _per_minute_as_rate(per_minute: float | None) -> float | None:
    return None if per_minute is None else per_minute / 60.0


# The library's politeness for a host that publishes nothing: a choice, not a fact.
# 20/s and 8 in flight are well under what any public scholarly API has been seen to
# allow, and high enough that latency, not the ceiling, bounds a small table.
UNLISTED = Limit(
    host="*",
    kind="single",
    tier="any",
    basis="none",
    source="litfetch_df's own politeness ceiling for unlisted hosts (ADR 0007)",
    per_second=20.0,
    in_flight=8,
)

_OA = "help.openalex.org api/authentication.md, access/example-costs.md (2026-08)"
_XREF = "Crossref blog 2025-11-05 'announcing changes to REST API rate limits'; x-api-pool headers"
_NCBI = "NCBI KA-05510/KA-05317 (E-utilities 3/s, 10/s with a key); NBK25499"
_EPMC = "Europe PMC developer forum, staff, 2026-02-26 (10/s and 500/min)"
_SPR = "Springer Nature portal plans via sprynger#29 (2024-09) and #66 (2026-09)"
_ELS = "dev.elsevier.com/api_key_settings.html (Article Retrieval 10/s, 50,000/week)"
_S2 = "allenai/s2-folks API_RELEASE_NOTES.md (2024: new keys 1 RPS); api-docs /paper/batch"
_UPW = "unpaywall.org/products/api ('please limit use to 100,000 calls per day')"

# fmt: off
LIMITS: tuple[Limit, ...] = (
    # OpenAlex: 100 req/s whatever the cost; singletons free, list calls $0.0001.
    Limit("api.openalex.org", "list", "keyed", "doc", _OA, per_second=100.0,
          period="day", cost_usd=0.0001, budget_usd=1.0, batch=100, page_size=100),
    Limit("api.openalex.org", "list", "keyless", "doc", _OA, per_second=100.0,
          period="day", cost_usd=0.0001, budget_usd=0.10, batch=100, page_size=100),
    Limit("api.openalex.org", "single", "keyed", "doc", _OA, per_second=100.0,
          period="day", cost_usd=0.0, budget_usd=1.0),
    Limit("api.openalex.org", "single", "keyless", "doc", _OA, per_second=100.0,
          period="day", cost_usd=0.0, budget_usd=0.10),
    # Crossref since 2025-12-01: single records and lists are separate pools.
    Limit("api.crossref.org", "single", "polite", "doc", _XREF, per_second=10.0, in_flight=3),
    Limit("api.crossref.org", "single", "public", "doc", _XREF, per_second=5.0, in_flight=1),
    Limit("api.crossref.org", "list", "polite", "doc", _XREF, per_second=3.0, in_flight=3,
          batch=50, page_size=1000),
    Limit("api.crossref.org", "list", "public", "doc", _XREF, per_second=1.0, in_flight=1,
          batch=50, page_size=1000),
    # NCBI: per IP without a key, per key with one; idconv counts as NCBI (not separately
    # published, so the E-utilities figure is the ceiling).
    Limit("eutils.ncbi.nlm.nih.gov", "list", "keyless", "doc", _NCBI, per_second=3.0, batch=200),
    Limit("eutils.ncbi.nlm.nih.gov", "list", "keyed", "doc", _NCBI, per_second=10.0, batch=200),
    Limit("pmc.ncbi.nlm.nih.gov", "list", "keyless", "doc",
          _NCBI + "; pmc.ncbi.nlm.nih.gov/tools/id-converter-api (200 ids)",
          per_second=3.0, batch=200),
    Limit("pmc.ncbi.nlm.nih.gov", "list", "keyed", "doc",
          _NCBI + "; pmc.ncbi.nlm.nih.gov/tools/id-converter-api (200 ids)",
          per_second=10.0, batch=200),
    # Europe PMC: one throttle for every endpoint.
    Limit("www.ebi.ac.uk", "search", "any", "staff", _EPMC, per_second=10.0, per_minute=500.0,
          batch=100, page_size=1000),
    Limit("www.ebi.ac.uk", "fulltext", "any", "staff", _EPMC, per_second=10.0, per_minute=500.0),
    # Semantic Scholar: new keys 1/s on every endpoint; keyless callers share one pool.
    Limit("api.semanticscholar.org", "list", "keyed", "doc", _S2, per_second=1.0, batch=500),
    Limit("api.semanticscholar.org", "list", "keyless", "obs", _S2 + "; shared keyless pool",
          per_second=1.0, in_flight=1, batch=500),
    Limit("api.semanticscholar.org", "single", "keyed", "doc", _S2, per_second=1.0),
    Limit("api.semanticscholar.org", "single", "keyless", "obs", _S2 + "; shared keyless pool",
          per_second=1.0, in_flight=1),
    # Springer Nature: the plan sets rate, daily quota and page size.
    Limit("api.springernature.com", "list", "basic", "obs", _SPR, per_minute=100.0,
          quota=500, period="day", batch=25, page_size=25),
    Limit("api.springernature.com", "list", "premium", "obs", _SPR, per_minute=300.0,
          quota=10_000, period="day", batch=100, page_size=100),
    Limit("api.springernature.com", "fulltext", "basic", "obs", _SPR, per_minute=100.0,
          quota=500, period="day", batch=20, page_size=20),
    Limit("api.springernature.com", "fulltext", "premium", "obs", _SPR, per_minute=300.0,
          quota=10_000, period="day", batch=20, page_size=20),
    # Elsevier: quotas per key and per API, a rolling seven days.
    Limit("api.elsevier.com", "fulltext", "keyed", "doc", _ELS, per_second=10.0,
          quota=50_000, period="week"),
    # Unpaywall: no published rate; a daily request the library treats as a budget.
    Limit("api.unpaywall.org", "single", "any", "doc", _UPW, quota=100_000, period="day"),
    # Published nothing: listed so the planner knows their bulk form (or lack of one).
    Limit("api.biorxiv.org", "single", "any", "none",
          "api.biorxiv.org/details help (one DOI per call; no rate published)"),
    Limit("pmc-oa-opendata.s3.amazonaws.com", "list", "any", "none",
          "pmc.ncbi.nlm.nih.gov/tools/pmcaws (no published request limit)", page_size=1000),
    Limit("pmc-oa-opendata.s3.amazonaws.com", "file", "any", "none",
          "pmc.ncbi.nlm.nih.gov/tools/pmcaws (no published request limit)"),
)
# fmt: on


def limits_for(host: str) -> tuple[Limit, ...]:
    """Every row of :data:`LIMITS` for ``host`` (case-insensitive); empty when unlisted."""
    name = host.lower()
    return tuple(limit for limit in LIMITS if limit.host == name)


# Which tier a caller lands on when it does not say: the keyless / public / basic end,
# since a tier with more allowance is never assumed.
_DEFAULT_TIERS = ("any", "keyless", "public", "basic")


def published_limit(host: str, kind: Kind = "single", tier: str | None = None) -> Limit | None:
    """The row for ``host``, ``kind`` and ``tier``, or ``None`` when the table has none.

    ``tier=None`` picks the most conservative tier listed (``any``, ``keyless``,
    ``public``, ``basic``). When the host lists no row of ``kind`` the row of its
    other kinds with the tightest rate stands in, so a host's published ceiling is
    never lost because a request was classified differently.
    """
    rows = limits_for(host)
    if not rows:
        return None
    tiers = (tier, "any") if tier is not None else _DEFAULT_TIERS
    for wanted in tiers:
        for row in rows:
            if row.kind == kind and row.tier == wanted:
                return row
    same_tier = [r for r in rows if tier is None or r.tier in (tier, "any")] or list(rows)
    return min(same_tier, key=lambda r: r.rate if r.rate is not None else math.inf)


def quota_calls(limit: Limit) -> int | None:
    """Calls of this kind one ``period`` allows, or ``None`` when unmetered.

    A money budget becomes calls (``budget_usd / cost_usd``); a free call kind on a
    metered host is unmetered.
    """
    if limit.quota is not None:
        return limit.quota
    if limit.budget_usd is not None and limit.cost_usd:
        return round(limit.budget_usd / limit.cost_usd)
    return None


def request_kind(host: str, path: str, params: Mapping[str, str] | None = None) -> Kind:
    """Classify a request to ``host`` at ``path`` (with its query ``params``) by kind.

    The kinds follow how the services meter: OpenAlex and Crossref bill or pool a
    ``/works?filter=`` list apart from a ``/works/<id>`` singleton; Europe PMC's
    ``search`` apart from ``fullTextXML``; Springer's ``meta`` lists apart from its
    ``openaccess`` full text. Anything unrecognised is ``"single"`` (or ``"file"``
    on the PMC bucket).
    """
    name = host.lower()
    query = params or {}
    tail = path.rstrip("/")
    if name == "api.openalex.org" or name == "api.crossref.org":
        if tail.endswith("/works") and ("filter" in query or "query" in query):
            return "list"
        return "list" if tail.endswith("/works") else "single"
    if name == "www.ebi.ac.uk":
        if tail.endswith("/search") or tail.endswith("/searchPOST"):
            return "search"
        return "fulltext"
    if name == "api.springernature.com":
        if "/openaccess/" in path:
            return "fulltext"
        return "list" if path.startswith(("/meta/", "/metadata/")) else "single"
    if name == "api.elsevier.com":
        return "fulltext"
    if name in ("eutils.ncbi.nlm.nih.gov", "pmc.ncbi.nlm.nih.gov"):
        return "list"
    if name == "api.semanticscholar.org":
        return "list" if tail.endswith("/batch") else "single"
    if name == "pmc-oa-opendata.s3.amazonaws.com":
        return "list" if tail == "" or "list-type" in query or "prefix" in query else "file"
    return "single"


def tier_of(host: str, params: Mapping[str, object] | None) -> str:
    """The tier a request lands on, from what it carries (a key, a contact)."""
    query = params or {}
    if host == "api.openalex.org":
        return "keyed" if query.get("api_key") else "keyless"
    if host == "api.crossref.org":
        return "polite" if query.get("mailto") else "public"
    if host == "api.elsevier.com":
        return "keyed"
    if host == "api.springernature.com":
        return "basic"
    return "any"
