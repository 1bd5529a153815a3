"""Europe PMC REST search: PMID → PMCID (and DOI) through the MEDLINE record.

Europe PMC also knows the PMC ids of UK-funded author manuscripts that NCBI's
converter lacks, and its MEDLINE record carries PubMed's DOI for articles that
are not in PMC at all. :class:`EuropePmcResolver` asks about one PMID;
:func:`search_pmids` OR-s up to :data:`BATCH_CAP` PMIDs into one query (used by
the batch resolver in :mod:`litfetch_df.operations.resolution`). Both read
records through :func:`record_ids`, so per-item and batch answers agree.

The same records say what Europe PMC holds of each article (``inEPMC``,
``isOpenAccess``, ``inPMC``, ``hasPDF``). :func:`holdings` reads them for a
table's PMCIDs, 100 OR-ed into one query, so a table-level caller can leave
out the full-text requests that cannot be answered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..ids import ArticleIds, parse_doi, parse_pmcid, parse_pmid
from ..metadata import SourceMetadata
from ..wire.http import Http, Rate, get_logger
from .bulk_recipe import BulkKey, BulkResult, IdRecords, bulk_lookup, chunk_answer, ids_by_key
from .common import GetRequest, parsed_or_none

__all__ = [
    "BATCH_CAP",
    "HOLDING_RECORD_KIND",
    "PMID_RECORD_KIND",
    "SEARCH_URL",
    "EuropePmcHolding",
    "EuropePmcResolver",
    "holding_access",
    "holdings",
    "holdings_in",
    "pmcid_search_request",
    "record_holding",
    "record_ids",
    "search_key",
    "search_pmcids",
    "search_pmids",
]

log = get_logger(__name__)

SEARCH_URL: Final = "https://www.ebi.ac.uk/europepmc/webservices/rest/search"
"""Europe PMC's REST search endpoint."""

BATCH_CAP: Final = 100
"""PMIDs OR-ed into one query (keeps the GET URL short)."""

PMID_RECORD_KIND: Final = "europepmc-search pmid lite"
"""The name a PMID search's per-PMID answers (the ids found) are kept under in the cache."""

HOLDING_RECORD_KIND: Final = "europepmc-search pmcid lite"
"""The name a PMCID search's per-PMCID answers (what Europe PMC holds) are kept under."""


def _parse(parser: Callable[[object], str], value: object) -> str | None:
    # Only JSON strings and integers are ids here: a float or a list is dropped.
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    return parsed_or_none(parser, value)


def search_key(ids: ArticleIds) -> str | None:
    """Return the PMID to search for, or ``None`` when there is none or nothing to gain.

    A bundle is worth a search when it has a valid PMID and lacks a PMCID or a DOI.
    """
    if ids.pmcid is not None and ids.doi is not None:
        return None
    return _parse(parse_pmid, ids.pmid)


def record_ids(record: Mapping[str, Any]) -> tuple[str, ArticleIds] | None:
    """Return ``(pmid, ids)`` for one search result, or ``None`` when it names no PMID.

    The PMID comes from ``pmid``, falling back to ``id`` (the MEDLINE id is the
    PMID); the PMCID is re-prefixed defensively; unparseable values are dropped.
    """
    pmid = _parse(parse_pmid, record.get("pmid"))
    if pmid is None and record.get("source", "MED") == "MED":
        pmid = _parse(parse_pmid, record.get("id"))
    if pmid is None:
        return None
    return pmid, ArticleIds(
        pmid=pmid,
        pmcid=_parse(parse_pmcid, record.get("pmcid")),
        doi=_parse(parse_doi, record.get("doi")),
    )


def _query(pmids: Sequence[str]) -> str:
    if len(pmids) == 1:
        # The single-id form is the per-item request, so a scope cache can share it.
        return f"EXT_ID:{pmids[0]} AND SRC:MED"
    return "(" + " OR ".join(f"EXT_ID:{p}" for p in pmids) + ") AND SRC:MED"


async def search_pmids(http: Http, pmids: Sequence[str]) -> dict[str, ArticleIds] | None:
    """Look up canonical ``pmids`` in one search restricted to MEDLINE (``SRC:MED``).

    Returns a mapping from each PMID Europe PMC answered to the ids its record
    carries (pmcid when it has one, doi when PubMed has one); a PMID it does
    not know, an empty result, a definitive error (400, ...) or a non-JSON body
    is absence. Returns ``None`` when the request was given up after every
    retry (transport failure, or a 429/5xx that outlived the retries).
    """
    if not pmids:
        return {}
    params: dict[str, str | int] = {
        "query": _query(pmids),
        "format": "json",
        "resultType": "lite",
        "pageSize": len(pmids),
    }

    def read(body: Any) -> dict[str, ArticleIds] | None:
        result_list = body.get("resultList") if isinstance(body, Mapping) else None
        results = result_list.get("result") if isinstance(result_list, Mapping) else None
        return ids_by_key(results, set(pmids), record_ids)

    what = f"Europe PMC search ({len(pmids)} PMID{'s' if len(pmids) != 1 else ''})"
    send = http.get(SEARCH_URL, params=params, rate=Rate.EUROPE_PMC)
    return await chunk_answer(send, what, read, logger=log)


@dataclasses.dataclass(frozen=True)
class EuropePmcResolver:
    """A resolver that maps a bundle's PMID to its PMCID (and DOI) via Europe PMC search.

    Sends ``EXT_ID:<pmid> AND SRC:MED`` (``resultType=lite``, ``pageSize=1``),
    paced at :attr:`Rate.EUROPE_PMC`. Returns the bundle merged with the
    record's pmcid and doi (never overwriting a known id). A bundle without a
    valid PMID, or one already holding both a PMCID and a DOI, costs no
    request; a miss or a failed request leaves the bundle unchanged.
    """

    async def __call__(self, ids: ArticleIds, http: Http) -> ArticleIds:
        """Return ``ids`` enriched from the MEDLINE record of its PMID."""
        pmid = search_key(ids)
        if pmid is None:
            return ids
        found = await search_pmids(http, [pmid])
        record = found.get(pmid) if found else None
        return ids if record is None else ids.merge(record)


# -- what Europe PMC holds of an article ------------------------------------------------------


def _flag(value: object) -> bool | None:
    # Europe PMC writes its flags as "Y" / "N"; anything else says nothing.
    if value == "Y":
        return True
    if value == "N":
        return False
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class EuropePmcHolding:
    """What Europe PMC's search record says it holds of one article (``None``: not stated).

    ``in_epmc`` is ``inEPMC`` (Europe PMC holds the full text), ``open_access``
    ``isOpenAccess``, ``in_pmc`` ``inPMC``, ``has_pdf`` ``hasPDF``.
    """

    in_epmc: bool | None = None
    open_access: bool | None = None
    in_pmc: bool | None = None
    has_pdf: bool | None = None

    @property
    def lacks_full_text(self) -> bool:
        """Whether the record says Europe PMC holds no full text of the article at all.

        Only an explicit ``inEPMC: "N"`` says so. ``isOpenAccess: "N"`` alone
        does not: Europe PMC serves author manuscripts that are not in the
        open-access subset, so a body could be lost on that reading.
        """
        return self.in_epmc is False

    def join(self, other: EuropePmcHolding) -> EuropePmcHolding:
        """Combine two records of one article: whatever either says it holds, it holds."""

        def either(a: bool | None, b: bool | None) -> bool | None:
            return True if True in (a, b) else (False if False in (a, b) else None)

        return EuropePmcHolding(
            in_epmc=either(self.in_epmc, other.in_epmc),
            open_access=either(self.open_access, other.open_access),
            in_pmc=either(self.in_pmc, other.in_pmc),
            has_pdf=either(self.has_pdf, other.has_pdf),
        )


def record_holding(record: Mapping[str, Any]) -> tuple[str, EuropePmcHolding] | None:
    """Return ``(pmcid, holding)`` for one search result, or ``None`` when it names no PMCID."""
    pmcid = _parse(parse_pmcid, record.get("pmcid"))
    if pmcid is None:
        return None
    return pmcid, EuropePmcHolding(
        in_epmc=_flag(record.get("inEPMC")),
        open_access=_flag(record.get("isOpenAccess")),
        in_pmc=_flag(record.get("inPMC")),
        has_pdf=_flag(record.get("hasPDF")),
    )


def pmcid_search_request(pmcids: Sequence[str]) -> GetRequest:
    """Return the search :func:`search_pmcids` sends for canonical ``pmcids``.

    ``(PMCID:PMC1 OR PMCID:PMC2 …)`` (a lone PMCID unbracketed) with
    ``format=json``, ``resultType=lite`` and a page as large as the list,
    paced at :attr:`Rate.EUROPE_PMC`. For one PMCID this is the request a
    table-level caller primes with what a bulk search said of that article.
    """
    terms = [f"PMCID:{p}" for p in pmcids]
    params: dict[str, str | int] = {
        "query": terms[0] if len(terms) == 1 else "(" + " OR ".join(terms) + ")",
        "format": "json",
        "resultType": "lite",
        "pageSize": len(pmcids),
    }
    return GetRequest(url=SEARCH_URL, params=params, headers=None, rate=Rate.EUROPE_PMC)


def holdings_in(body: Any, pmcids: Sequence[str]) -> dict[str, EuropePmcHolding] | None:
    """Return what a search answer's records say Europe PMC holds of each of ``pmcids``.

    A PMCID no record names is absent; two records naming one PMCID are
    joined. ``None`` when ``body`` is not a search answer (no
    ``resultList.result`` list).
    """
    result_list = body.get("resultList") if isinstance(body, Mapping) else None
    results = result_list.get("result") if isinstance(result_list, Mapping) else None
    if not isinstance(results, list):
        return None
    wanted = set(pmcids)
    found: dict[str, EuropePmcHolding] = {}
    for record in results:
        named = record_holding(record) if isinstance(record, Mapping) else None
        if named is None or named[0] not in wanted:
            continue
        pmcid, holding = named
        found[pmcid] = found[pmcid].join(holding) if pmcid in found else holding
    return found


async def search_pmcids(http: Http, pmcids: Sequence[str]) -> dict[str, EuropePmcHolding] | None:
    """Look up canonical ``pmcids`` in one search; return what Europe PMC holds of each.

    Sends :func:`pmcid_search_request` and reads the answer with
    :func:`holdings_in`. Returns ``None`` when the request was given up after
    every retry, like :func:`search_pmids`.
    """
    if not pmcids:
        return {}
    request = pmcid_search_request(pmcids)

    def read(body: Any) -> dict[str, EuropePmcHolding] | None:
        return holdings_in(body, pmcids)

    what = f"Europe PMC search ({len(pmcids)} PMCID{'s' if len(pmcids) != 1 else ''})"
    return await chunk_answer(request.send(http), what, read, logger=log)


def holding_access(holding: EuropePmcHolding) -> SourceMetadata:
    """Return the access terms a Europe PMC record states, ``basis='europe_pmc'``.

    ``isOpenAccess: "Y"`` (the article is in Europe PMC's open-access subset)
    gives ``access='open-access'``, the same statement a JATS body makes; it
    names no colour and no licence. Anything else gives an empty
    :class:`SourceMetadata`: ``"N"`` does not mean closed (Europe PMC serves
    author manuscripts outside that subset), and ``inEPMC``, ``inPMC`` and
    ``hasPDF`` say what Europe PMC holds, not on what terms. The search's
    ``lite`` records carry no ``license`` (only ``resultType=core`` does).
    """
    if holding.open_access is True:
        return SourceMetadata(access="open-access", basis="europe_pmc")
    return SourceMetadata()


def _pmcid_key(ids: ArticleIds) -> BulkKey | None:
    pmcid = _parse(parse_pmcid, ids.pmcid)
    return None if pmcid is None else BulkKey(key=pmcid, wire=pmcid)


async def holdings(batch: Sequence[ArticleIds], http: Http) -> BulkResult[EuropePmcHolding]:
    """Return what Europe PMC holds of each bundle's PMCID, :data:`BATCH_CAP` per request.

    ``values[i]`` is ``None`` without a valid PMCID, when no record names it,
    or when its chunk was not answered (its index is then in ``abandoned``).
    Each distinct PMCID is asked once; the chunks are issued together. With a
    persistent cache on ``http`` (a session), each answer is kept per PMCID
    and a PMCID answered before is not asked again.
    """

    async def lookup(pmcids: list[str]) -> dict[str, EuropePmcHolding] | None:
        return await search_pmcids(http, pmcids)

    return await bulk_lookup(
        [_pmcid_key(ids) for ids in batch],
        lookup,
        cap=BATCH_CAP,
        records=_HOLDING_RECORDS,
        memo=http,
    )


def _holding_from_json(data: Any) -> EuropePmcHolding:
    if not isinstance(data, dict):
        raise TypeError("not a stored holding")
    flags = {f.name: data.get(f.name) for f in dataclasses.fields(EuropePmcHolding)}
    if any(v is not None and not isinstance(v, bool) for v in flags.values()):
        raise TypeError("not a stored holding")
    return EuropePmcHolding(**flags)


_HOLDING_RECORDS: Final = IdRecords(HOLDING_RECORD_KIND, dataclasses.asdict, _holding_from_json)
