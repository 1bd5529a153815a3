"""Europe PMC REST search: PMID → PMCID (and DOI) through the MEDLINE record.

Europe PMC also knows the PMC ids of UK-funded author manuscripts that NCBI's
converter lacks, and its MEDLINE record carries PubMed's DOI for articles that
are not in PMC at all. :class:`EuropePmcResolver` asks about one PMID;
:func:`search_pmids` OR-s up to :data:`BATCH_CAP` PMIDs into one query (used by
the batch resolver in :mod:`litfetch_df.operations.resolution`). Both read
records through :func:`record_ids`, so per-item and batch answers agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from .._http import Http, Rate, get_logger
from ..ids import ArticleIds, parse_doi, parse_pmcid, parse_pmid
from ._common import parsed_or_none
from .bulk import chunk_answer, ids_by_key

__all__ = [
    "BATCH_CAP",
    "SEARCH_URL",
    "EuropePmcResolver",
    "record_ids",
    "search_key",
    "search_pmids",
]

log = get_logger(__name__)

SEARCH_URL: Final = "https://www.ebi.ac.uk/europepmc/webservices/rest/search"
"""Europe PMC's REST search endpoint."""

BATCH_CAP: Final = 100
"""PMIDs OR-ed into one query (keeps the GET URL short)."""


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
