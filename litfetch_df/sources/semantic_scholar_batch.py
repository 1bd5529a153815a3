"""Semantic Scholar paper batch: up to 500 papers per POST, for file-sets and resolution.

``POST /graph/v1/paper/batch?fields=externalIds,openAccessPdf`` with
``{"ids": [...]}`` answers with a JSON array aligned with the request ids
(``null`` for a paper S2 does not know). Both fields are asked for every time,
so one request serves the file-set (:func:`s2_batch_files`) and resolution
(:class:`SemanticScholarBatchResolver`), and inside a scope an identical id
list costs one request.

Each record is read through the same pure mappings as the per-article source
(:func:`~.semantic_scholar.s2_pdf_files`, :func:`~.semantic_scholar.s2_article_ids`),
so a row's answer equals the per-article one on the same upstream data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ..files import File
from ..ids import RESOLVABLE, ArticleIds, doi_key, parse_doi
from ..wire.http import BulkHttp, Http, Rate, can_post, get_logger
from .bulk_recipe import (
    BulkKey,
    BulkResult,
    ChunkLookup,
    IdRecords,
    Settled,
    bulk_lookup,
    bulk_stream,
    chunk_answer,
    distinct_keys,
    json_object_record,
)
from .common import usable_credential, usable_text
from .semantic_scholar import (
    fetch_s2_paper,
    s2_article_ids,
    s2_paper_id,
    s2_pdf_files,
)

__all__ = [
    "S2_BATCH_CAP",
    "S2_BATCH_FIELDS",
    "S2_BATCH_URL",
    "S2_RECORD_KIND",
    "SemanticScholarBatchResolver",
    "s2_batch_each",
    "s2_batch_files",
    "s2_batch_key",
    "s2_batch_records",
]

log = get_logger(__name__)

S2_BATCH_URL: Final = "https://api.semanticscholar.org/graph/v1/paper/batch"
"""The paper batch endpoint (a read, although it is a POST)."""

S2_BATCH_FIELDS: Final = "externalIds,openAccessPdf"
"""Fields every batch request asks for: resolution and the open-access PDF in one answer."""

S2_BATCH_CAP: Final = 500
"""Most ids S2 accepts in one batch request (more gives a 400)."""

S2_RECORD_KIND: Final = f"s2-batch fields={S2_BATCH_FIELDS}"
"""The name the batch's per-id records are kept under in the persistent cache."""

_CREDENTIAL: Final = "semantic_scholar_api_key"


def s2_batch_key(article_ids: ArticleIds) -> BulkKey | None:
    """Return how a bundle is asked about in a batch, or ``None`` without a usable id.

    The id scheme is the per-article one (:func:`~.semantic_scholar.s2_paper_id`:
    DOI, else PMID, else PMCID digits). The batch carries ids in a JSON body,
    not a URL path, so a DOI is sent as ``DOI:<doi>`` unencoded; DOIs compare
    case-insensitively.
    """
    paper_id = s2_paper_id(article_ids)
    if paper_id is None:
        return None
    if paper_id.startswith("DOI:") and article_ids.doi is not None:
        # s2_paper_id chose the DOI, so it parses.
        doi = parse_doi(article_ids.doi)
        return BulkKey(key="DOI:" + doi_key(doi), wire="DOI:" + doi)
    return BulkKey(key=paper_id, wire=paper_id)


async def _post_chunk(
    http: BulkHttp, ids: list[str], key: str | None
) -> dict[str, dict[str, Any]] | None:
    """POST one chunk; map each id S2 knows to its record, or ``None`` if never answered."""

    def read(body: Any) -> dict[str, dict[str, Any]] | None:
        if not isinstance(body, list) or len(body) != len(ids):
            # Without alignment there is no safe way to tell which record answers which id.
            return None
        return {
            paper_id: record
            for paper_id, record in zip(ids, body, strict=True)
            if isinstance(record, dict)
        }

    send = http.post(
        S2_BATCH_URL,
        json={"ids": ids},
        params={"fields": S2_BATCH_FIELDS},
        headers={"x-api-key": key} if key else None,
        rate=Rate.S2_KEYED if key else Rate.S2_UNKEYED,
    )
    what = f"Semantic Scholar batch ({len(ids)} id{'s' if len(ids) != 1 else ''})"
    return await chunk_answer(send, what, read, logger=log, absent={404})


async def _records(
    keys: Sequence[BulkKey | None], http: BulkHttp, api_key: str | None
) -> BulkResult[dict[str, Any]]:
    if not can_post(http):
        raise TypeError("a Semantic Scholar batch needs an Http that can post (a Session)")
    key = usable_text(api_key)

    lookup, records = _recipe(http, key)
    return await bulk_lookup(keys, lookup, cap=S2_BATCH_CAP, records=records, memo=http)


def _recipe(
    http: BulkHttp, key: str | None
) -> tuple[ChunkLookup[dict[str, Any]], IdRecords[dict[str, Any]]]:
    async def lookup(ids: list[str]) -> dict[str, dict[str, Any]] | None:
        return await _post_chunk(http, ids, key)

    # The key changes the pace, not the answer: records are shared with and without one.
    records = IdRecords(S2_RECORD_KIND, dict, json_object_record, () if key is None else (key,))
    return lookup, records


async def s2_batch_each(
    batch: Sequence[ArticleIds],
    http: BulkHttp,
    each: Callable[[Settled[dict[str, Any]]], None],
    *,
    api_key: str | None = None,
) -> None:
    """:func:`s2_batch_records`, handing each id's answer to ``each`` as its chunk is in.

    The same requests; nothing is kept once handed over (see
    :func:`~.bulk_recipe.bulk_stream`), so a caller holds one chunk's records at a time.
    """
    if not can_post(http):
        raise TypeError("a Semantic Scholar batch needs an Http that can post (a Session)")
    lookup, records = _recipe(http, usable_text(api_key))
    keys = [s2_batch_key(ids) for ids in batch]
    await bulk_stream(keys, lookup, each, cap=S2_BATCH_CAP, records=records, memo=http)


async def s2_batch_records(
    batch: Sequence[ArticleIds], http: BulkHttp, *, api_key: str | None = None
) -> BulkResult[dict[str, Any]]:
    """Return S2's paper record (``externalIds`` and ``openAccessPdf``) for each bundle.

    Keys each bundle as :func:`s2_batch_key` does, sends each distinct id once
    in POSTs of at most :data:`S2_BATCH_CAP`, issued together and paced by the
    session at :attr:`Rate.S2_KEYED` with a usable ``api_key`` (sent as
    ``x-api-key``), else :attr:`Rate.S2_UNKEYED`. ``values[i]`` is the record,
    or ``None`` when the bundle has no usable id (no request), S2 answered
    ``null`` for it, or its chunk failed. A chunk never answered (transport
    failure, or 429/5xx after retries) puts its indices in ``abandoned``; a 404,
    another 4xx, or a body that is not an aligned JSON array is logged and
    leaves its values ``None`` without abandoning them. With a persistent
    cache on ``http`` (a session), each record (or ``null``) is kept per id
    and an id answered before is not asked again. Records shared by
    repeated bundles are the same object: do not mutate them.
    """
    return await _records([s2_batch_key(ids) for ids in batch], http, api_key)


async def s2_batch_files(
    batch: Sequence[ArticleIds],
    http: BulkHttp,
    *,
    credentials: Mapping[str, object] | None = None,
) -> BulkResult[tuple[File, ...]]:
    """Return the ``semantic_scholar`` file-set of each bundle, from batch requests.

    The key comes from ``credentials['semantic_scholar_api_key']`` as for
    :class:`~.semantic_scholar.SemanticScholarFileSource`. ``values[i]`` is
    ``None`` without a record (see :func:`s2_batch_records`), else
    :func:`~.semantic_scholar.s2_pdf_files` of it, so ``values[i] or ()``
    equals that source's ``list_files`` for the bundle.
    """
    records = await s2_batch_records(
        batch, http, api_key=usable_credential(credentials, _CREDENTIAL)
    )
    return records.map(s2_pdf_files)


class SemanticScholarBatchResolver:
    """Batch resolver: ids cross-referenced through S2's ``externalIds``, 500 per POST.

    ``await SemanticScholarBatchResolver()(batch, http)`` returns the aligned
    bundles, each merged with what S2 knows (a known id is never overwritten),
    and the abandoned indices. Only bundles lacking one of pmid, pmcid, doi and
    holding a usable DOI, PMID or PMCID are asked about. ``api_key`` is
    optional; with one the requests carry ``x-api-key`` and pace at the keyed
    rate. Given an :class:`~litfetch_df.wire.http.Http` that cannot ``post``, it
    falls back to one per-article lookup (``GET /paper/{id}``) per distinct
    bundle, which can report nothing as abandoned.
    """

    __slots__ = ("_api_key",)

    def __init__(self, *, api_key: str | None = None) -> None:
        self._api_key = usable_text(api_key)

    def __repr__(self) -> str:
        # Never show the key itself.
        return f"SemanticScholarBatchResolver(api_key={'<set>' if self._api_key else None})"

    async def __call__(
        self, batch: Sequence[ArticleIds], http: Http
    ) -> tuple[list[ArticleIds], set[int]]:
        """Enrich ``batch`` from S2; see the class docstring."""
        out = list(batch)
        keys = [None if ids.has(RESOLVABLE) else s2_batch_key(ids) for ids in out]
        if not can_post(http):
            return await self._per_item(out, keys, http), set()
        records = await _records(keys, http, self._api_key)
        for index, record in enumerate(records.values):
            if record is not None:
                out[index] = out[index].merge(s2_article_ids(record))
        return out, set(records.abandoned)

    async def _per_item(
        self, out: list[ArticleIds], keys: Sequence[BulkKey | None], http: Http
    ) -> list[ArticleIds]:
        first = {key: indices[0] for key, (_wire, indices) in distinct_keys(keys).items()}
        records = await asyncio.gather(
            *(
                fetch_s2_paper(http, out[i], fields="externalIds", api_key=self._api_key)
                for i in first.values()
            )
        )
        # Only what S2 said fans out, never another row's own ids.
        found = {
            key: s2_article_ids(record)
            for key, record in zip(first, records, strict=True)
            if record is not None
        }
        return [
            ids if key is None or key.key not in found else ids.merge(found[key.key])
            for ids, key in zip(out, keys, strict=True)
        ]
