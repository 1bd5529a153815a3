"""OpenAlex works filter: DOI → PMID / PMCID, many DOIs per request, ids only.

OpenAlex covers DOI-bearing papers NCBI's converter cannot route (not in PMC).
It has no per-item resolver here: the filter endpoint is the bulk route, and
:func:`works_by_doi` is what the batch ``OpenAlexResolver`` (in
:mod:`litfetch_df.operations.resolution`) chunks over.

Since February 2026 OpenAlex meters use against a daily budget, tiny without
an API key. It documents 403 as "rate limit exceeded (slow down)" and 429 as
"daily budget exhausted", so both are transient here: the chunk is abandoned
and worth retrying later, never a definitive miss.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from .._http import Http, Rate, get_logger
from ..ids import ArticleIds, doi_key, parse_doi, parse_pmcid, parse_pmid
from ..metadata import SourceMetadata
from ._common import parsed_or_none
from .bulk_recipe import chunk_answer, ids_by_key

__all__ = [
    "BATCH_CAP",
    "RECORD_KIND",
    "WORKS_URL",
    "check_api_key",
    "doi_lookup_key",
    "openalex_access",
    "work_ids",
    "works_by_doi",
]

log = get_logger(__name__)

WORKS_URL: Final = "https://api.openalex.org/works"
"""The OpenAlex works list endpoint (filterable)."""

BATCH_CAP: Final = 50
"""DOIs OR-ed into one filter (OpenAlex allows 100 values; 50 leaves headroom)."""

RECORD_KIND: Final = "openalex-works select=ids,doi"
"""The name the works filter's per-DOI answers (pmid / pmcid) are kept under in the cache."""

# Statuses that mean "not answered, ask again later" for this service.
_TRANSIENT_EXTRA: Final = frozenset({403})


def check_api_key(api_key: object) -> str | None:
    """Return ``api_key`` if it is ``None`` or a usable key, else raise :class:`ValueError`.

    A usable key is a non-empty string without whitespace. The message never
    repeats the value.
    """
    if api_key is None:
        return None
    if not isinstance(api_key, str) or not api_key or any(c.isspace() for c in api_key):
        raise ValueError("OpenAlex api_key must be a non-empty string without whitespace")
    return api_key


def doi_lookup_key(ids: ArticleIds) -> str | None:
    """Return the lower-cased DOI to look up, or ``None`` when there is none or nothing to gain.

    A bundle is worth a lookup when it has a valid DOI and lacks a PMID or a PMCID.
    """
    if ids.doi is None or (ids.pmid is not None and ids.pmcid is not None):
        return None
    try:
        return doi_key(parse_doi(ids.doi))
    except ValueError:
        return None


def _last_segment(url: object) -> str | None:
    if not isinstance(url, str):
        return None
    parts = [p for p in url.strip().split("/") if p]
    return parts[-1] if parts else None


def work_ids(work: Mapping[str, Any]) -> tuple[str, ArticleIds] | None:
    """Return ``(lower-cased doi, ids)`` for one work, or ``None`` when it names no DOI.

    OpenAlex gives every id as a URL: the DOI after ``doi.org/``, the PMID and
    PMCID as the last non-empty path segment (the PMCID re-prefixed with ``PMC``).
    The ids carry only pmid and pmcid, so the caller's DOI casing survives a merge.
    """
    raw_ids = work.get("ids")
    id_map: Mapping[str, Any] = raw_ids if isinstance(raw_ids, Mapping) else {}
    raw_doi = work.get("doi") or id_map.get("doi")
    doi = parsed_or_none(parse_doi, raw_doi) if isinstance(raw_doi, str) else None
    if doi is None:
        return None
    return doi_key(doi), ArticleIds(
        pmid=parsed_or_none(parse_pmid, _last_segment(id_map.get("pmid"))),
        pmcid=parsed_or_none(parse_pmcid, _last_segment(id_map.get("pmcid"))),
    )


async def works_by_doi(
    http: Http, dois: Sequence[str], *, api_key: str | None = None
) -> dict[str, ArticleIds] | None:
    """Look up lower-cased, canonical ``dois`` in one ``filter=doi:a|b|…`` request.

    Sends ``select=ids,doi``, ``per-page`` = the number of DOIs, the session
    contact as ``mailto`` and ``api_key`` only when given, paced at
    :attr:`Rate.OPENALEX`. Returns a mapping from each DOI OpenAlex answered
    to the pmid / pmcid it knows (a DOI it does not know, a 400/404 or a
    non-JSON body is absence), or ``None`` when the request was not answered:
    a transport failure or 429/5xx after every retry, or a 403 (OpenAlex's
    "slow down").
    """
    if not dois:
        return {}
    params: dict[str, str | int] = {
        "filter": "doi:" + "|".join(dois),
        "select": "ids,doi",
        "per-page": len(dois),
    }
    contact = getattr(http, "contact", None)
    if contact:
        params["mailto"] = contact
    if api_key is not None:
        params["api_key"] = api_key

    def read(body: Any) -> dict[str, ArticleIds] | None:
        results = body.get("results") if isinstance(body, Mapping) else None
        return ids_by_key(results, set(dois), work_ids)

    # chunk_answer logs neither the URL nor the params: they may carry the key.
    what = f"OpenAlex works filter ({len(dois)} DOI{'s' if len(dois) != 1 else ''})"
    send = http.get(WORKS_URL, params=params, rate=Rate.OPENALEX)
    return await chunk_answer(send, what, read, logger=log, transient=_TRANSIENT_EXTRA)


def openalex_access(work: Mapping[str, Any]) -> SourceMetadata:
    """Return the access terms of an OpenAlex work, ``basis='openalex'``.

    ``access`` is ``open_access.oa_status`` and ``licence``
    ``best_oa_location.license``, both raw; a work with neither gives an
    empty :class:`SourceMetadata`.
    """
    open_access = work.get("open_access")
    best = work.get("best_oa_location")
    status = open_access.get("oa_status") if isinstance(open_access, dict) else None
    raw_licence = best.get("license") if isinstance(best, dict) else None
    access = status.strip() if isinstance(status, str) and status.strip() else None
    licence = raw_licence.strip() if isinstance(raw_licence, str) and raw_licence.strip() else None
    if licence is None and access is None:
        return SourceMetadata()
    return SourceMetadata(licence=licence, access=access, basis="openalex")
