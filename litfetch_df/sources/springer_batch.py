"""Springer Nature Meta API by DOI list: up to 25 records per request (Basic's page).

``GET /meta/v2/json?q=doi:a OR doi:b&p=<n>&api_key=<key>``.

Assumption (the upstream reference marks this query syntax *unverified*):
Meta ORs ``doi:`` terms joined by `` OR ``, ``p`` is the page size, and each
record carries its ``doi``. Chunks stay at :data:`SPRINGER_BATCH_CAP` (25) so
a page always holds every answer, records are matched to the request by
``doi`` case-insensitively, and a DOI that could break the boolean syntax
(whitespace, quotes or parentheses in it) is asked on its own. A one-DOI
request is exactly the per-article one (``q=doi:<doi>``, no ``p``), so inside a
scope it is shared with :class:`~.springer.SpringerFileSource`, and, as there,
its first record is taken.

The key (``credentials['springer_meta_api_key']``) is sent only in the
``api_key`` parameter of these requests: it is never logged (nothing here logs
a URL or an exception text), never part of a ``File.uri`` (a link echoing it
is dropped), and never in a repr.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import httpx

from ..files import File
from ..ids import ArticleIds, doi_key, parse_doi
from ..wire.http import Http, Rate, get_logger
from .bulk_recipe import (
    BulkKey,
    BulkResult,
    ChunkLookup,
    IdRecords,
    Settled,
    bulk_lookup,
    bulk_stream,
    chunk_answer,
    json_object_record,
)
from .common import usable_credential
from .springer import SPRINGER_META_URL, springer_meta_files, springer_serves

__all__ = [
    "SPRINGER_BATCH_CAP",
    "SPRINGER_RECORD_KIND",
    "springer_batch_each",
    "springer_batch_files",
    "springer_batch_key",
    "springer_batch_records",
]

log = get_logger(__name__)

SPRINGER_BATCH_CAP: Final = 25
"""DOIs OR-ed into one Meta query: the largest page (``p``) Springer Nature's Basic plan
allows (Premium allows 100), so a page always holds every answer on either plan."""

SMALL_PAGE: Final = 10
"""The page a query shrinks to, once per lookup, when Meta answers 403 "premium feature"
(a plan that allows less than :data:`SPRINGER_BATCH_CAP`): still a bulk query."""

SPRINGER_RECORD_KIND: Final = "springer-meta"
"""The name each DOI's Meta record is kept under in the persistent cache."""

_CREDENTIAL: Final = "springer_meta_api_key"

# Characters that are query syntax for Meta's boolean parser.
_SYNTAX = re.compile(r"[\s\"()]")


def springer_batch_key(article_ids: ArticleIds) -> BulkKey | None:
    """Return how a bundle is asked about, or ``None`` without a Springer Nature DOI.

    A DOI that does not parse, or that is not Springer Nature's (see
    :func:`~.springer.springer_serves`), is never asked about.
    """
    if article_ids.doi is None:
        return None
    try:
        doi = parse_doi(article_ids.doi)
    except ValueError:
        log.warning("springer: declined an invalid DOI")
        return None
    if not springer_serves(doi):
        return None
    return BulkKey(key=doi_key(doi), wire=doi)


def _record_doi(record: Mapping[str, Any]) -> str | None:
    """The comparison form of the DOI a Meta record names (``doi``, else ``identifier``)."""
    for value in (record.get("doi"), record.get("identifier")):
        try:
            return doi_key(parse_doi(value))
        except ValueError:
            continue
    return None


class _Form:
    """The page size a lookup's queries use; a premium-feature 403 shrinks it once."""

    def __init__(self) -> None:
        self.page = SPRINGER_BATCH_CAP

    def shrink(self) -> bool:
        if self.page <= SMALL_PAGE:
            return False
        log.info(
            "springer: Meta refused a %d-record page as premium; asking %d", self.page, SMALL_PAGE
        )
        self.page = SMALL_PAGE
        return True


def _premium_refusal(response: httpx.Response) -> bool:
    return response.status_code == 403 and b"premium" in response.content[:4096].lower()


async def _chunk(
    http: Http, dois: list[str], key: str, form: _Form | None = None
) -> dict[str, dict[str, Any]] | None:
    form = form if form is not None else _Form()
    if len(dois) > form.page:
        parts = [dois[i : i + form.page] for i in range(0, len(dois), form.page)]
        answers = await asyncio.gather(*(_chunk(http, part, key, form) for part in parts))
        if any(answer is None for answer in answers):
            return None  # a part never answered: the whole chunk is asked again on a re-run
        merged: dict[str, dict[str, Any]] = {}
        for answer in answers:
            merged.update(answer or {})
        return merged
    query = " OR ".join(f"doi:{doi}" for doi in dois)
    params: dict[str, str | int] = {"q": query}
    if len(dois) > 1:
        params["p"] = len(dois)
    params["api_key"] = key

    def read(body: Any) -> dict[str, dict[str, Any]] | None:
        records = body.get("records") if isinstance(body, dict) else None
        if not isinstance(records, list):
            return None
        if len(dois) == 1:
            # The per-article source takes the first record of its one-DOI query.
            first = records[0] if records and isinstance(records[0], dict) else None
            return {dois[0]: first} if first is not None else {}
        wanted = {doi_key(doi): doi for doi in dois}
        found: dict[str, dict[str, Any]] = {}
        for record in records:
            if not isinstance(record, dict):
                continue
            doi = wanted.get(_record_doi(record) or "")
            if doi is not None and doi not in found:
                found[doi] = record
        return found

    what = f"springer: Meta query ({len(dois)} DOI{'s' if len(dois) != 1 else ''})"
    try:
        response = await http.get(SPRINGER_META_URL, params=params, rate=Rate.DEFAULT)
    except httpx.HTTPError as exc:
        failure: httpx.HTTPError | None = exc
        response = None
    else:
        failure = None
    if response is not None and len(dois) > 1 and _premium_refusal(response) and form.shrink():
        return await _chunk(http, dois, key, form)

    async def answered() -> httpx.Response:
        if failure is not None:
            raise failure
        assert response is not None
        return response

    return await chunk_answer(answered(), what, read, logger=log)


def _alone(doi: str) -> bool:
    return _SYNTAX.search(doi) is not None


async def springer_batch_records(
    batch: Sequence[ArticleIds],
    http: Http,
    *,
    credentials: Mapping[str, object] | None = None,
) -> BulkResult[dict[str, Any]]:
    """Return the Springer Meta record for each bundle's DOI, many DOIs per request.

    Needs ``credentials['springer_meta_api_key']`` (a non-blank string);
    without it every value is ``None`` and no request is made. Each distinct
    DOI (compared case-insensitively) is sent once, in OR queries of at most
    :data:`SPRINGER_BATCH_CAP` issued together at :attr:`Rate.DEFAULT`.
    ``values[i]`` is the record, or ``None`` without a Springer Nature DOI
    (never asked), when Meta has no
    record for it, or when its chunk failed. A chunk never answered (transport
    failure, or 429/5xx after retries) puts its indices in ``abandoned``; any
    other non-200 (a 401 for a wrong key, say) or a body that is not JSON is
    logged and leaves the values ``None``. Records may echo the key: with a
    persistent cache on ``http`` (a session) each record that does not is
    kept per DOI (absence too), and a DOI answered before is not asked again.
    """
    key = usable_credential(credentials, _CREDENTIAL)
    if key is None:
        return BulkResult.empty(len(batch))

    keys = [springer_batch_key(ids) for ids in batch]
    lookup, records = _recipe(http, key)
    return await bulk_lookup(
        keys, lookup, cap=SPRINGER_BATCH_CAP, alone=_alone, records=records, memo=http
    )


async def springer_batch_each(
    batch: Sequence[ArticleIds],
    http: Http,
    each: Callable[[Settled[dict[str, Any]]], None],
    *,
    credentials: Mapping[str, object] | None = None,
) -> None:
    """:func:`springer_batch_records`, handing each DOI's answer to ``each`` as its chunk is in.

    The same requests (none without the key); nothing is kept once handed
    over (see :func:`~.bulk_recipe.bulk_stream`).
    """
    key = usable_credential(credentials, _CREDENTIAL)
    if key is None:
        return
    lookup, records = _recipe(http, key)
    keys = [springer_batch_key(ids) for ids in batch]
    await bulk_stream(
        keys, lookup, each, cap=SPRINGER_BATCH_CAP, alone=_alone, records=records, memo=http
    )


def _recipe(http: Http, key: str) -> tuple[ChunkLookup[dict[str, Any]], IdRecords[dict[str, Any]]]:
    form = _Form()

    async def lookup(dois: list[str]) -> dict[str, dict[str, Any]] | None:
        return await _chunk(http, dois, key, form)

    # A record echoing the key is never kept (IdRecords.secrets): it is asked again instead.
    return lookup, IdRecords(SPRINGER_RECORD_KIND, dict, json_object_record, (key,))


async def springer_batch_files(
    batch: Sequence[ArticleIds],
    http: Http,
    *,
    credentials: Mapping[str, object] | None = None,
) -> BulkResult[tuple[File, ...]]:
    """Return the ``springer`` file-set of each bundle, from Meta OR queries.

    ``values[i]`` is ``None`` without a record (see
    :func:`springer_batch_records`), else the record's openURL PDF through
    :func:`~.springer.springer_meta_files` (``INSTITUTIONAL`` unless open
    access; a link echoing the key is dropped), so ``values[i] or ()`` equals
    :class:`~.springer.SpringerFileSource` ``list_files`` for the bundle.
    """
    key = usable_credential(credentials, _CREDENTIAL)
    records = await springer_batch_records(batch, http, credentials=credentials)
    return records.map(lambda record: springer_meta_files(record, api_key=key))
