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

import asyncio
import dataclasses
import json
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, Final, Literal
from urllib.parse import quote

from ..files import PDF, Blob, File, FileKind
from ..ids import ArticleIds, doi_key, doi_path, parse_doi, parse_pmcid, parse_pmid
from ..metadata import SourceMetadata
from ..store.answers import can_hold, keeps_records
from ..store.quota import QuotaDeferred
from ..wire.http import Http, Rate, UpstreamUnavailable, get_logger
from .bulk_recipe import (
    BulkKey,
    BulkResult,
    IdRecords,
    bulk_lookup,
    chunk_answer,
    ids_by_key,
    json_object_record,
)
from .common import (
    GetRequest,
    download_file,
    download_url,
    fetch_json_object,
    is_web_url,
    parsed_or_none,
    usable_credential,
)
from .landing import is_landing_page

__all__ = [
    "BATCH_CAP",
    "DOI_BUDGET",
    "RECORD_KIND",
    "SINGLE_URL",
    "TERMS_SELECT",
    "URL_MAX",
    "WORKS_URL",
    "HeldWork",
    "OpenAlexFileSource",
    "check_api_key",
    "doi_lookup_key",
    "doi_width",
    "fetch_single_work",
    "held_work",
    "list_budget_spent",
    "openalex_access",
    "openalex_files",
    "single_works",
    "terms_key",
    "terms_records",
    "work_ids",
    "works_by_doi",
    "works_request",
    "works_with_terms",
]

log = get_logger(__name__)

WORKS_URL: Final = "https://api.openalex.org/works"
"""The OpenAlex works list endpoint (filterable)."""

SINGLE_URL: Final = WORKS_URL + "/doi:"
"""One work by DOI (``/works/doi:10.x/y``): a singleton lookup, free of OpenAlex's budget."""

BATCH_CAP: Final = 100
"""DOIs OR-ed into one filter: OpenAlex's documented maximum of OR values (2026), and its
``per_page`` maximum, so one list call (billed alike whatever its size) answers 100."""

URL_MAX: Final = 4_000
"""Longest works-filter URL sent. OpenAlex answers an error past about 4,094 characters
(pyalex#85, 2025-08-18; openalexR#230, 2024-04), which 100 long DOIs can pass."""

_URL_RESERVE: Final = 500
"""Characters of :data:`URL_MAX` kept for everything but the DOIs (endpoint, ``select``,
``per-page``, ``mailto``, ``api_key``)."""

DOI_BUDGET: Final = URL_MAX - _URL_RESERVE
"""Characters the OR-ed DOIs of one works-filter call may take, percent-encoded."""


def doi_width(doi: str) -> int:
    """Characters ``doi`` takes in a works-filter URL: percent-encoded, with its ``|``."""
    return len(quote(doi, safe="")) + len("%7C")


TERMS_SELECT: Final = "ids,doi,open_access,best_oa_location"
"""Fields asked for when a work's access terms are wanted besides its ids."""

TERMS_RECORD_KIND: Final = "openalex-works select=" + TERMS_SELECT
"""The name each DOI's work with its access terms is kept under in the cache."""

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


def works_request(
    dois: Sequence[str],
    *,
    select: str = "ids,doi",
    contact: str | None = None,
    api_key: str | None = None,
) -> GetRequest:
    """Return the works-filter GET for lower-cased, canonical ``dois``.

    ``filter=doi:a|b|…``, ``select``, ``per-page`` = the number of DOIs,
    ``mailto`` = ``contact`` and ``api_key`` only when given, paced at
    :attr:`Rate.OPENALEX`. For one DOI and :data:`TERMS_SELECT` this is the
    request a table-level caller primes with what a bulk filter said of it.
    """
    params: dict[str, str | int] = {
        "filter": "doi:" + "|".join(dois),
        "select": select,
        "per-page": len(dois),
    }
    if contact:
        params["mailto"] = contact
    if api_key is not None:
        params["api_key"] = api_key
    return GetRequest(url=WORKS_URL, params=params, headers=None, rate=Rate.OPENALEX)


async def works_by_doi(
    http: Http,
    dois: Sequence[str],
    *,
    api_key: str | None = None,
    keep: MutableMapping[str, dict[str, Any] | None] | None = None,
) -> dict[str, ArticleIds] | None:
    """Look up lower-cased, canonical ``dois`` in one ``filter=doi:a|b|…`` request.

    Sends ``select=ids,doi``, ``per-page`` = the number of DOIs, the session
    contact as ``mailto`` and ``api_key`` only when given, paced at
    :attr:`Rate.OPENALEX`. Returns a mapping from each DOI OpenAlex answered
    to the pmid / pmcid it knows (a DOI it does not know, a 400/404 or a
    non-JSON body is absence), or ``None`` when the request was not answered:
    a transport failure or 429/5xx after every retry, or a 403 (OpenAlex's
    "slow down").

    With ``keep``, the request selects :data:`TERMS_SELECT` instead (the same
    list call, a few fields more) and a well-formed answer puts each asked DOI's
    work in ``keep`` (``None`` for a DOI it lacks): a run that wants the access
    terms of the same DOIs later reads them there instead of asking again.
    """
    if not dois:
        return {}
    select = TERMS_SELECT if keep is not None else "ids,doi"
    request = works_request(
        dois, select=select, contact=getattr(http, "contact", None), api_key=api_key
    )

    def read(body: Any) -> dict[str, ArticleIds] | None:
        results = body.get("results") if isinstance(body, Mapping) else None
        found = ids_by_key(results, set(dois), work_ids)
        if keep is not None and isinstance(results, list) and found is not None:
            works: dict[str, dict[str, Any]] = {}
            for work in results:
                named = _work_by_doi(work) if isinstance(work, Mapping) else None
                if named is not None:
                    works.setdefault(*named)
            for doi in dois:
                keep[doi] = works.get(doi)
            if keeps_records(http):
                # As the terms lookup would keep them: a later run reads them per DOI.
                records = terms_records(api_key)
                for doi in dois:
                    records.keep(http, doi, works.get(doi))
        return found

    # chunk_answer logs neither the URL nor the params: they may carry the key.
    what = f"OpenAlex works filter ({len(dois)} DOI{'s' if len(dois) != 1 else ''})"
    return await chunk_answer(
        request.send(http), what, read, logger=log, transient=_TRANSIENT_EXTRA
    )


def terms_key(ids: ArticleIds) -> BulkKey | None:
    """Return how a bundle is asked about for its access terms: its DOI, or ``None`` without one."""
    doi = parsed_or_none(parse_doi, ids.doi) if ids.doi is not None else None
    return None if doi is None else BulkKey(key=doi_key(doi), wire=doi_key(doi))


def terms_records(api_key: str | None) -> IdRecords[dict[str, Any]]:
    """How each DOI's work with its access terms is kept per id (:data:`TERMS_RECORD_KIND`)."""
    return IdRecords(TERMS_RECORD_KIND, dict, json_object_record, (api_key,) if api_key else ())


def _work_by_doi(work: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    named = work_ids(work)
    return None if named is None else (named[0], dict(work))


async def works_with_terms(
    batch: Sequence[ArticleIds], http: Http, *, api_key: str | None = None
) -> BulkResult[dict[str, Any]]:
    """Return each bundle's OpenAlex work with :data:`TERMS_SELECT`, :data:`BATCH_CAP` a request.

    ``values[i]`` is the work (``ids``, ``doi``, ``open_access``,
    ``best_oa_location``), or ``None`` without a DOI, when OpenAlex does not
    know it, or when its chunk was not answered (the index is then in
    ``abandoned``; 403 counts as not answered, as for :func:`works_by_doi`).
    """

    async def lookup(dois: list[str]) -> dict[str, dict[str, Any]] | None:
        request = works_request(
            dois, select=TERMS_SELECT, contact=getattr(http, "contact", None), api_key=api_key
        )

        def read(body: Any) -> dict[str, dict[str, Any]] | None:
            results = body.get("results") if isinstance(body, Mapping) else None
            if not isinstance(results, list):
                return None
            wanted = set(dois)
            found: dict[str, dict[str, Any]] = {}
            for work in results:
                named = _work_by_doi(work) if isinstance(work, Mapping) else None
                # The first work naming a DOI answers for it (OpenAlex lists one per DOI).
                if named is not None and named[0] in wanted:
                    found.setdefault(*named)
            return found

        what = f"OpenAlex works filter ({len(dois)} DOI{'s' if len(dois) != 1 else ''})"
        return await chunk_answer(
            request.send(http), what, read, logger=log, transient=_TRANSIENT_EXTRA
        )

    # Each DOI's work (or its absence) is kept per id, so another frame of the same DOIs
    # is answered from the cache. A work never echoes the key, which is not kept.
    records = terms_records(api_key)
    return await bulk_lookup(
        [terms_key(ids) for ids in batch],
        lookup,
        cap=BATCH_CAP,
        records=records,
        memo=http,
        width=doi_width,
        budget=DOI_BUDGET,
    )


def openalex_access(work: Mapping[str, Any]) -> SourceMetadata:
    """Return the access terms of an OpenAlex work, ``basis='openalex'``.

    ``access`` is ``open_access.oa_status`` and ``licence``
    ``best_oa_location.license``, both raw; a work with neither gives an
    empty :class:`SourceMetadata`. The licence of a ``submittedVersion``
    location (a preprint copy) is left out: it is the preprint's, not the
    article's.
    """
    open_access = work.get("open_access")
    best = work.get("best_oa_location")
    status = open_access.get("oa_status") if isinstance(open_access, dict) else None
    raw_licence = best.get("license") if isinstance(best, dict) else None
    if isinstance(best, dict) and best.get("version") == "submittedVersion":
        raw_licence = None
    access = status.strip() if isinstance(status, str) and status.strip() else None
    licence = raw_licence.strip() if isinstance(raw_licence, str) and raw_licence.strip() else None
    if licence is None and access is None:
        return SourceMetadata()
    return SourceMetadata(licence=licence, access=access, basis="openalex")


@dataclasses.dataclass(frozen=True, slots=True)
class HeldWork:
    """What the session holds of one DOI's OpenAlex work, without asking.

    ``state`` is ``"known"`` (``work`` is the work), ``"unknown"`` (a bulk
    filter covering the DOI answered without it) or ``"not held"`` (no
    answer held: the DOI was not looked up, or its lookup was given up).
    """

    state: Literal["known", "unknown", "not held"]
    work: Mapping[str, Any] | None = None


_NOT_HELD: Final = HeldWork("not held")


async def held_work(http: Http, doi: str, *, api_key: str | None = None) -> HeldWork:
    """Return what ``http`` holds of ``doi``'s work from a primed terms filter (no request).

    Reads the one-DOI :data:`TERMS_SELECT` filter the frame primes from its
    bulk lookup (or the persistent cache holds). An ``http`` that holds
    nothing gives ``"not held"``.
    """
    if not can_hold(http):
        return _NOT_HELD
    parsed = parsed_or_none(parse_doi, doi)
    if parsed is None:
        return _NOT_HELD
    key = doi_key(parsed)
    request = works_request(
        [key], select=TERMS_SELECT, contact=getattr(http, "contact", None), api_key=api_key
    )
    entry = await http.held(request.url, params=request.params, headers=request.headers)
    if entry is None or entry.status_code != 200:
        return _NOT_HELD
    try:
        body = json.loads(entry.content)
    except ValueError:
        return _NOT_HELD
    results = body.get("results") if isinstance(body, Mapping) else None
    if not isinstance(results, list):
        return _NOT_HELD
    for work in results:
        named = work_ids(work) if isinstance(work, Mapping) else None
        if named is not None and named[0] == key:
            return HeldWork("known", work)
    return HeldWork("unknown")


async def fetch_single_work(
    http: Http, doi: str, *, api_key: str | None = None
) -> Mapping[str, Any] | None:
    """Return ``doi``'s work from the singleton lookup ``/works/doi:…`` (:data:`TERMS_SELECT`).

    A singleton costs nothing of OpenAlex's daily budget, so it is the detour
    when the list budget is spent or a bulk lookup was given up. ``None`` when
    OpenAlex does not know the DOI or the request was not answered.
    """
    parsed = parsed_or_none(parse_doi, doi)
    if parsed is None:
        return None
    params: dict[str, str | int] = {"select": TERMS_SELECT}
    if api_key is not None:
        params["api_key"] = api_key
    url = SINGLE_URL + doi_path(parsed)
    body = await fetch_json_object(
        http.get(url, params=params, rate=Rate.OPENALEX), "OpenAlex work", logger=log
    )
    return body if body is not None and work_ids(body) is not None else None


def list_budget_spent(http: Http, *, api_key: str | None = None) -> bool:
    """Whether ``http``'s quota ledger says OpenAlex's list budget is spent for this tier.

    ``False`` when ``http`` keeps no ledger (nothing says so).
    """
    ledger = getattr(http, "quota", None)
    check = getattr(ledger, "check", None)
    if check is None:
        return False
    params: dict[str, object] = {"filter": "doi:"}
    if api_key is not None:
        params["api_key"] = api_key
    try:
        check("api.openalex.org", "/works", params)
    except QuotaDeferred:
        return True
    return False


async def single_works(
    http: Http,
    dois: Sequence[str],
    *,
    api_key: str | None = None,
    on_answer: Callable[[str, Mapping[str, Any] | None], None] | None = None,
) -> dict[str, Mapping[str, Any] | None]:
    """Each lower-cased DOI's work by the free singleton lookup, asked together.

    The detour when the list budget is spent (singletons cost nothing of it).
    Maps a DOI to its work (:data:`TERMS_SELECT`), or to ``None`` when OpenAlex
    answered that it does not know it (404); a DOI whose request was not
    answered is left out, so its caller can tell a miss from a loss.
    ``on_answer(doi, work)`` is told each answered DOI as its answer arrives
    (a caller can use it before the last one is in).
    """

    async def one(doi: str) -> tuple[str, Mapping[str, Any] | None] | None:
        parsed = parsed_or_none(parse_doi, doi)
        if parsed is None:
            return None
        params: dict[str, str | int] = {"select": TERMS_SELECT}
        if api_key is not None:
            params["api_key"] = api_key
        try:
            response = await http.get(
                SINGLE_URL + doi_path(parsed), params=params, rate=Rate.OPENALEX
            )
        except UpstreamUnavailable:
            return None
        if response.status_code == 404:
            return doi, None
        if response.status_code != 200:
            return None
        try:
            body = json.loads(response.content)
        except ValueError:
            return None
        if not isinstance(body, Mapping) or work_ids(body) is None:
            return None
        return doi, dict(body)

    async def told(doi: str) -> tuple[str, Mapping[str, Any] | None] | None:
        answer = await one(doi)
        if answer is not None and on_answer is not None:
            on_answer(*answer)
        return answer

    answers = await asyncio.gather(*(told(d) for d in dict.fromkeys(dois)))
    return {a[0]: a[1] for a in answers if a is not None}


def openalex_files(work: Mapping[str, Any]) -> tuple[File, ...]:
    """Return the work's best OA PDF as a BODY ``application/pdf`` File (at most one).

    ``best_oa_location.pdf_url`` when it is an http(s) URL and not a landing
    page; the File's source is ``openalex``.
    """
    best = work.get("best_oa_location")
    url = best.get("pdf_url") if isinstance(best, Mapping) else None
    if not is_web_url(url) or is_landing_page(str(url)):
        return ()
    return (File(kind=FileKind.BODY, source="openalex", media_type=PDF, uri=str(url).strip()),)


class OpenAlexFileSource:
    """File source ``openalex``: the best open-access PDF OpenAlex knows for a DOI.

    The same link Unpaywall gives (both are served from one pipeline since
    2025), read from the answer the frame's bulk works filter primed; when no
    answer is held it asks the free singleton lookup. A DOI a bulk filter
    answered without a work lists nothing and costs no request.
    """

    name: str = "openalex"
    kinds: frozenset[FileKind] = frozenset({FileKind.BODY})

    def __repr__(self) -> str:
        return "OpenAlexFileSource()"

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> tuple[File, ...]:
        """Return the best-OA PDF File for the article's DOI (empty when none)."""
        if article_ids.doi is None:
            return ()
        api_key = _usable_key(credentials)
        held = await held_work(http, article_ids.doi, api_key=api_key)
        if held.state == "unknown":
            return ()
        work = held.work
        if work is None:
            work = await fetch_single_work(http, article_ids.doi, api_key=api_key)
        return openalex_files(work) if work is not None else ()

    async def fetch_file(
        self,
        file: File,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Download a listed PDF (redirects followed, no credentials), or ``None``."""
        return await download_file(http, file)

    def download_url(
        self, file: File, *, credentials: Mapping[str, object] | None = None
    ) -> str | None:
        """Return the URL that downloads ``file`` (redirects followed, no key), or ``None``."""
        return download_url(file)


def _usable_key(credentials: Mapping[str, object] | None) -> str | None:
    return usable_credential(credentials, "openalex_api_key")
