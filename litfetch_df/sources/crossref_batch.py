"""Crossref works by DOI list: up to 100 work records per request.

``GET /works?filter=doi:a,doi:b,…&rows=<n>&select=DOI,link,relation,license``
ORs the repeated ``doi:`` filters. Items come in no promised order and are
matched to the request by DOI, case-insensitively; a DOI Crossref does not know
is simply missing (absence). The items carry the same ``link[]`` and
``relation`` objects as the single-work record, so the per-article mappings
(:func:`~.crossref.crossref_tdm_files`, :func:`~.crossref.crossref_relations`)
apply to them unchanged and a row's answer equals the per-article one.

A chunk of one DOI, and any DOI containing ``,`` (the filter separator), is
asked with the very request :func:`~.crossref.fetch_crossref_work` issues, so
inside a scope it is shared with the per-article consumers (the Elsevier link
locator among them).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

from ..files import File
from ..ids import ArticleIds, doi_key, parse_doi
from ..metadata import Related
from ..wire.http import Http, Rate, get_logger
from .bulk_recipe import (
    BulkKey,
    BulkResult,
    IdRecords,
    Settled,
    bulk_lookup,
    bulk_stream,
    chunk_answer,
    json_object_record,
)
from .crossref import (
    crossref_relations,
    crossref_tdm_files,
    crossref_work_request,
    crossref_work_url,
)

__all__ = [
    "CROSSREF_BATCH_CAP",
    "CROSSREF_BATCH_SELECT",
    "CROSSREF_LIST_URL",
    "CROSSREF_RECORD_KIND",
    "crossref_batch_each",
    "crossref_batch_files",
    "crossref_batch_key",
    "crossref_batch_records",
    "crossref_batch_relations",
]

log = get_logger(__name__)

CROSSREF_LIST_URL: Final = "https://api.crossref.org/works"
"""The works list endpoint (filterable)."""

CROSSREF_BATCH_CAP: Final = 100
"""DOIs per list request: Crossref allows ``rows`` up to 1000, but 100 keeps the URL short."""

CROSSREF_BATCH_SELECT: Final = "DOI,link,relation,license"
"""Fields each item carries: its DOI (to match it), TDM links, relations, licences."""


CROSSREF_RECORD_KIND: Final = f"crossref-works select={CROSSREF_BATCH_SELECT}"
"""The name each DOI's work record is kept under in the persistent cache."""

_SELECTED: Final = tuple(CROSSREF_BATCH_SELECT.split(","))


def _selected(record: dict[str, Any]) -> dict[str, Any]:
    # A lone DOI's single-work answer carries every field; keep what a list item would.
    return {name: record[name] for name in _SELECTED if name in record}


_RECORDS: Final = IdRecords(CROSSREF_RECORD_KIND, _selected, json_object_record)


def crossref_batch_key(article_ids: ArticleIds) -> BulkKey | None:
    """Return how a bundle is asked about, or ``None`` without a usable DOI.

    A DOI is usable when the per-article lookup would request it (it parses
    and does not escape its URL path); it is sent in canonical form with the
    caller's casing and compared lower-cased.
    """
    if article_ids.doi is None:
        return None
    try:
        crossref_work_url(article_ids.doi)
        doi = parse_doi(article_ids.doi)
    except ValueError:
        log.warning("Crossref: not looking up an invalid DOI %r", article_ids.doi)
        return None
    return BulkKey(key=doi_key(doi), wire=doi)


async def _single(http: Http, doi: str) -> dict[str, dict[str, Any]] | None:
    """Ask the single-work endpoint with the very request the per-article lookup sends."""

    def read(body: Any) -> dict[str, dict[str, Any]] | None:
        message = body.get("message") if isinstance(body, dict) else None
        return {doi: message} if isinstance(message, dict) else None

    send = crossref_work_request(doi, http.contact).send(http)
    return await chunk_answer(send, f"Crossref lookup for {doi}", read, logger=log, absent={404})


async def _listed(http: Http, dois: list[str]) -> dict[str, dict[str, Any]] | None:
    """Ask the list endpoint about ``dois``; map each one answered to its item."""
    params: dict[str, str | int] = {
        "filter": ",".join(f"doi:{doi}" for doi in dois),
        "rows": len(dois),
        "select": CROSSREF_BATCH_SELECT,
    }
    if http.contact:
        params["mailto"] = http.contact

    def read(body: Any) -> dict[str, dict[str, Any]] | None:
        message = body.get("message") if isinstance(body, dict) else None
        items = message.get("items") if isinstance(message, dict) else None
        if not isinstance(items, list):
            return None
        wanted = {doi_key(doi): doi for doi in dois}
        found: dict[str, dict[str, Any]] = {}
        for item in items:
            if not isinstance(item, dict):
                continue
            try:
                key = doi_key(parse_doi(item.get("DOI")))
            except ValueError:
                continue
            doi = wanted.get(key)
            if doi is not None and doi not in found:
                found[doi] = item
        return found

    send = http.get(CROSSREF_LIST_URL, params=params, rate=Rate.CROSSREF)
    return await chunk_answer(send, f"Crossref works list ({len(dois)} DOIs)", read, logger=log)


def _alone(doi: str) -> bool:
    # A ',' inside a DOI would split its filter in two.
    return "," in doi


async def crossref_batch_records(
    batch: Sequence[ArticleIds],
    http: Http,
    *,
    credentials: Mapping[str, object] | None = None,
) -> BulkResult[dict[str, Any]]:
    """Return Crossref's work record for each bundle's DOI, many DOIs per request.

    Each distinct DOI (compared case-insensitively) is sent once, in list
    requests of at most :data:`CROSSREF_BATCH_CAP` issued together and paced by
    the session at :attr:`Rate.CROSSREF`, with the session contact as
    ``mailto``. A lone DOI (a one-DOI chunk, or a DOI containing ``,``) goes to
    the single-work endpoint instead. ``values[i]`` is the record (a list item
    holds only ``DOI``, ``link``, ``relation`` and ``license``), or ``None``
    without a usable DOI (no request), when Crossref does not know the DOI, or
    when its chunk failed. A chunk never answered (transport failure, or
    429/5xx after retries) puts its indices in ``abandoned``; any other non-200
    or a body that is not a work list is logged and leaves the values ``None``.
    ``credentials`` is accepted for a uniform signature and not used. With a
    persistent cache on ``http`` (a session), each DOI's record (its
    :data:`CROSSREF_BATCH_SELECT` fields) or absence is kept per DOI and a DOI
    answered before is not asked again. Records shared by repeated bundles
    are the same object: do not mutate them.
    """

    keys = [crossref_batch_key(ids) for ids in batch]
    return await bulk_lookup(
        keys, _lookup(http), cap=CROSSREF_BATCH_CAP, alone=_alone, records=_RECORDS, memo=http
    )


async def crossref_batch_each(
    batch: Sequence[ArticleIds], http: Http, each: Callable[[Settled[dict[str, Any]]], None]
) -> None:
    """:func:`crossref_batch_records`, handing each DOI's answer to ``each`` as its chunk is in.

    The same requests; nothing is kept once handed over (see
    :func:`~.bulk_recipe.bulk_stream`), so a caller holds one chunk's records at a time.
    """
    keys = [crossref_batch_key(ids) for ids in batch]
    await bulk_stream(
        keys,
        _lookup(http),
        each,
        cap=CROSSREF_BATCH_CAP,
        alone=_alone,
        records=_RECORDS,
        memo=http,
    )


def _lookup(http: Http) -> Callable[[list[str]], Awaitable[dict[str, dict[str, Any]] | None]]:
    async def lookup(dois: list[str]) -> dict[str, dict[str, Any]] | None:
        if len(dois) == 1:
            return await _single(http, dois[0])
        return await _listed(http, dois)

    return lookup


async def crossref_batch_files(
    batch: Sequence[ArticleIds],
    http: Http,
    *,
    credentials: Mapping[str, object] | None = None,
) -> BulkResult[tuple[File, ...]]:
    """Return the ``crossref_tdm`` file-set of each bundle, from list requests.

    ``values[i]`` is ``None`` without a record (see
    :func:`crossref_batch_records`), else the record's text-mining links
    (:func:`~.crossref.crossref_tdm_files`), so ``values[i] or ()`` equals
    :class:`~.crossref.CrossrefFileSource` ``list_files`` for the bundle.
    """
    records = await crossref_batch_records(batch, http, credentials=credentials)
    return records.map(crossref_tdm_files)


async def crossref_batch_relations(
    batch: Sequence[ArticleIds],
    http: Http,
    *,
    credentials: Mapping[str, object] | None = None,
) -> BulkResult[tuple[Related, ...]]:
    """Return the preprint / published relations Crossref asserts for each bundle's DOI.

    ``values[i]`` is ``None`` without a record (see
    :func:`crossref_batch_records`), else
    :func:`~.crossref.crossref_relations` of it: the Crossref part of
    :func:`~litfetch_df.operations.relations.related_ids` for the bundle.
    """
    records = await crossref_batch_records(batch, http, credentials=credentials)
    return records.map(crossref_relations)
