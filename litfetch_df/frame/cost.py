"""What a table will cost before anything is sent: requests per host and kind, time, quota.

:func:`plan_costs` reads only the frame's id columns and :mod:`litfetch_df.limits`:
for each step asked for it counts the bulk requests the ids need (the forms the
frame uses: 200 ids an ID Converter call, 100 DOIs an OpenAlex filter, 50 a
Crossref list, 500 ids a Semantic Scholar batch, 25 DOIs a Springer Meta page),
estimates the per-article requests from the ids (one PMC listing per PMCID), and
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

import pandas as pd

from .._quota import QuotaLedger
from ..ids import doi_key
from ..limits import UNLISTED, Kind, published_limit, quota_calls
from ..publishers import Publisher, by_prefix
from .plan import parse_ids

__all__ = ["STEPS_PLANNED", "UNKNOWN_TO_OPENALEX", "HostCost", "plan_costs", "plan_for"]

STEPS_PLANNED: tuple[str, ...] = ("resolve", "bodies", "files", "licences")
"""The steps a plan prices by default (those of ``run()`` that ask per row)."""

UNKNOWN_TO_OPENALEX = 0.05
"""The share of DOIs assumed unknown to OpenAlex (asked of Unpaywall one by one): a prior,
since only OpenAlex's answer tells; OpenAlex holds Crossref's and DataCite's DOIs."""


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
    (``bulk`` for counted bulk forms, ``estimate`` for per-article guesses).
    """
    wanted = set(steps)
    creds = dict(credentials or {})
    parsed = parse_ids(frame, dict(id_columns or {}))
    bundles = {b for b in parsed.bundles if not b.is_empty()}
    dois = {doi_key(b.doi) for b in bundles if b.doi}
    short_of_ids = [b for b in bundles if b.pmid is None or b.pmcid is None]
    pmcids = {b.pmcid for b in bundles if b.pmcid}
    springer = {d for d in dois if by_prefix(d) is Publisher.SPRINGER_NATURE}

    asks: dict[tuple[str, Kind], tuple[int, int, str]] = {}

    def ask(host: str, kind: Kind, n_ids: int, per: int, basis: str = "bulk") -> None:
        if n_ids <= 0:
            return
        count = math.ceil(n_ids / per)
        before = asks.get((host, kind), (0, per, basis))
        # Steps sharing one lookup (the OpenAlex works, Crossref) ask it once.
        asks[(host, kind)] = (max(before[0], count), per, basis)

    if "resolve" in wanted:
        ask("pmc.ncbi.nlm.nih.gov", "list", len(short_of_ids), 200)
        ask("api.openalex.org", "list", sum(1 for b in short_of_ids if b.doi), 100)
        ask("www.ebi.ac.uk", "search", sum(1 for b in short_of_ids if b.pmcid is None), 100)
    if "bodies" in wanted:
        ask("www.ebi.ac.uk", "search", len(pmcids), 100)
        ask("pmc-oa-opendata.s3.amazonaws.com", "list", len(pmcids), 1, "estimate")
    if "files" in wanted or "licences" in wanted:
        ask("api.openalex.org", "list", len(dois), 100)
        ask("api.crossref.org", "list", len(dois), 50)
        unknown = math.ceil(len(dois) * UNKNOWN_TO_OPENALEX)
        if contact:
            ask("api.unpaywall.org", "single", unknown, 1, "estimate")
    if "files" in wanted:
        ask("api.semanticscholar.org", "list", len(bundles), 500)
        if creds.get("springer_meta_api_key"):
            ask("api.springernature.com", "list", len(springer), 25)

    rows = []
    for (host, kind), (requests, per, basis) in sorted(asks.items()):
        limit = published_limit(host, kind, _tier(host, creds, contact))
        rate = (limit.rate if limit is not None else None) or UNLISTED.per_second or 20.0
        in_flight = (limit.in_flight if limit is not None else None) or UNLISTED.in_flight or 8
        seconds = max(requests / rate, requests * latency / in_flight) + latency
        quota = quota_calls(limit) if limit is not None and limit.kind == kind else None
        left = quota
        if ledger is not None and limit is not None and quota is not None:
            left = ledger.left(limit)
        deferred = 0 if left is None else max(0, requests - left) * per
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
