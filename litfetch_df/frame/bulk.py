"""Bulk priming: whole-table lookups that answer the per-article requests in advance.

The frame runs each step per distinct id bundle through the per-article
operations (``Session.list_files``, ``related_ids``, ``fetch_body``). Some of
the services they ask answer many articles in one request (``upstream.md``
section 9), so before a step's per-bundle work :func:`primed` runs those bulk
lookups for every bundle of the step and *primes* the session (see
:meth:`~litfetch_df.Session.prime`): each per-article request a source is
about to make is answered from memory with the answer that request would get,
synthesized from the bulk answer:

* Semantic Scholar: ``POST /paper/batch`` (500 ids) primes each
  ``GET /paper/<id>?fields=openAccessPdf`` with a 200 single-paper body, or a
  404 for a ``null`` element;
* Crossref: ``GET /works?filter=doi:…`` (100 DOIs) primes each
  ``GET /works/<doi>`` with a 200 work envelope, or a 404
  ``Resource not found.`` for a DOI missing from the items;
* Springer Meta (with ``springer_meta_api_key``): ``q=doi:a OR doi:b`` primes
  each per-DOI query with a one-record answer, or an empty ``records`` list;
* Springer OpenAccess JATS (with both Springer keys): the same Meta OR
  queries prime the OpenAccess query of each article Meta calls subscription
  content (``openaccess: "false"``) with the API's "none" answer, since that
  API serves open-access articles only;
* Europe PMC full text: a search of 100 PMCIDs (``PMCID:a OR PMCID:b``) primes
  ``GET /PMC<n>/fullTextXML`` with its 404 for each article whose record says
  Europe PMC holds no full text (``inEPMC: "N"``); every article a record
  names also gets its one-PMCID search primed with that record's flags
  (read by :func:`~litfetch_df.operations.service_terms.service_terms`);
* OpenAlex (:attr:`Service.OPENALEX_TERMS`): ``filter=doi:a|b|…`` (50 DOIs,
  ``select`` :data:`~litfetch_df.sources.openalex.TERMS_SELECT`) primes each
  one-DOI filter with the work OpenAlex answered, and nothing otherwise.

The per-article code then runs unchanged, so each row's result is the one the
per-article path gives on the same upstream data, and a custom
:class:`~litfetch_df.operations.types.FileSource` keeps working as it did.

Absence is primed only where a bulk answer positively covered the article (a
well-formed answer to a request that named it). A chunk that was never
answered (transport failure, or a 429/5xx after every retry) primes a
*failure* for its articles: their per-article requests are given up at once
with the bulk request's reason, so the rows end ``abandoned: …`` and the next
call retries them, instead of falling back to hundreds of paced single
requests. A chunk answered with anything else (a 400, a body of the wrong
shape) primes nothing: its articles take the per-article path. The Europe PMC
search and the Meta queries for OpenAccess only ever spare requests: a chunk
they could not get primes nothing, and its articles are asked as before.

Primed answers live for one step (:func:`primed` removes them on exit) and
never reach the persistent cache; the bulk responses themselves are cached
like any other request, and their answers per id too (ADR 0011), so a bulk
lookup asks only about ids it has no live answer for.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .._http import get_logger
from ..ids import ArticleIds, parse_doi, parse_pmcid
from ..operations.types import Fetcher, FileSource
from ..session import CachedResponse, Session
from ..sources._common import GetRequest, usable_credential
from ..sources.bulk import BulkResult
from ..sources.crossref import CROSSREF_WORKS_URL, CrossrefFileSource, crossref_work_request
from ..sources.crossref_batch import crossref_batch_key, crossref_batch_records
from ..sources.elsevier import ElsevierFetcher
from ..sources.europe_pmc import EUROPE_PMC_REST, EuropePmcFetcher, full_text_request
from ..sources.europe_pmc_search import (
    SEARCH_URL,
    EuropePmcHolding,
    holdings,
    pmcid_search_request,
)
from ..sources.openalex import (
    TERMS_SELECT,
    WORKS_URL,
    terms_key,
    works_request,
    works_with_terms,
)
from ..sources.semantic_scholar import (
    S2_PAPER_URL,
    SemanticScholarFileSource,
    s2_paper_request,
)
from ..sources.semantic_scholar_batch import s2_batch_key, s2_batch_records
from ..sources.springer import (
    SPRINGER_META_URL,
    SPRINGER_OA_JATS_URL,
    SpringerFetcher,
    SpringerFileSource,
    springer_meta_request,
    springer_oa_request,
)
from ..sources.springer_batch import springer_batch_key, springer_batch_records

__all__ = [
    "Service",
    "for_fetchers",
    "for_file_sources",
    "for_related",
    "may_prime",
    "prime",
    "primed",
]

log = get_logger(__name__)

_ENABLED = True
"""Private switch: ``False`` makes :func:`prime` a no-op (to compare with the per-article path)."""

_S2_FIELDS: Final = "openAccessPdf"
"""The field the per-article file source asks Semantic Scholar for."""

_JSON: Final = (("content-type", "application/json"),)
_TEXT: Final = (("content-type", "text/plain;charset=utf-8"),)


class Service(enum.Enum):
    """A service whose per-article requests can be primed from a bulk lookup."""

    SEMANTIC_SCHOLAR = "semantic_scholar"
    CROSSREF = "crossref"
    SPRINGER_META = "springer_meta"
    EUROPE_PMC_FULL_TEXT = "europe_pmc_full_text"
    SPRINGER_OPEN_ACCESS = "springer_open_access"
    OPENALEX_TERMS = "openalex_terms"


def for_file_sources(sources: Sequence[FileSource] | None) -> frozenset[Service]:
    """Return the services to prime for ``list_files`` with ``sources`` (``None``: the defaults).

    Only the exact bundled classes count (a subclass may ask differently):
    :class:`SemanticScholarFileSource`, :class:`CrossrefFileSource`,
    :class:`SpringerFileSource`.
    """
    if sources is None:
        from ..operations.fileset import default_file_sources

        sources = default_file_sources()
    table: Mapping[type, Service] = {
        SemanticScholarFileSource: Service.SEMANTIC_SCHOLAR,
        CrossrefFileSource: Service.CROSSREF,
        SpringerFileSource: Service.SPRINGER_META,
    }
    return frozenset(table[type(s)] for s in sources if type(s) in table)


def for_fetchers(
    fetchers: Sequence[Fetcher] | None, credentials: Mapping[str, object] | None
) -> frozenset[Service]:
    """Return the services to prime for ``fetch_bodies`` with ``fetchers`` (``None``: the ladder).

    Only the exact bundled classes count (a subclass may ask differently):
    Europe PMC full text when the ladder holds an :class:`EuropePmcFetcher`
    (its misses are told in advance); Crossref when it holds an
    :class:`ElsevierFetcher` and ``credentials['elsevier_api_key']`` is usable
    (that rung looks up every DOI it reaches in Crossref); Springer
    OpenAccess when it holds a :class:`SpringerFetcher` and both Springer keys
    are usable (Meta tells which articles are subscription content).
    """
    if fetchers is None:
        from ..operations.ladder import default_fetchers

        fetchers = default_fetchers()
    kinds = {type(f) for f in fetchers}
    services: set[Service] = set()
    if EuropePmcFetcher in kinds:
        services.add(Service.EUROPE_PMC_FULL_TEXT)
    if ElsevierFetcher in kinds and usable_credential(credentials, "elsevier_api_key") is not None:
        services.add(Service.CROSSREF)
    if SpringerFetcher in kinds and all(
        usable_credential(credentials, name) is not None
        for name in ("springer_api_key", "springer_meta_api_key")
    ):
        services.add(Service.SPRINGER_OPEN_ACCESS)
    return frozenset(services)


def for_licences() -> frozenset[Service]:
    """Return the services to prime for ``licences``: Crossref, whose ``license[]`` is the
    last resort for a licence (Unpaywall stays per article: it has no bulk endpoint)."""
    return frozenset({Service.CROSSREF})


def for_service_terms(contact: str | None) -> frozenset[Service]:
    """Return the services to prime for :func:`~litfetch_df.operations.service_terms.service_terms`.

    Semantic Scholar (its batch answer holds ``openAccessPdf.status`` and
    ``.license``; 500 ids a request) and Europe PMC search (``isOpenAccess``;
    100 PMCIDs a request, the lookup the bodies step makes anyway). OpenAlex
    (``open_access``, ``best_oa_location``; 50 DOIs a request, against a
    small daily budget) only without a ``contact``: with one, Unpaywall
    classifies every DOI it knows, and OpenAlex's classification is
    Unpaywall's.
    """
    services = {Service.SEMANTIC_SCHOLAR, Service.EUROPE_PMC_FULL_TEXT}
    if contact is None:
        services.add(Service.OPENALEX_TERMS)
    return frozenset(services)


def for_related() -> frozenset[Service]:
    """Return the services to prime for ``related``: Crossref (bioRxiv stays per article)."""
    return frozenset({Service.CROSSREF})


_PRIMED_URLS: Final[Mapping[Service, str]] = {
    Service.SEMANTIC_SCHOLAR: S2_PAPER_URL,
    Service.CROSSREF: CROSSREF_WORKS_URL,
    Service.SPRINGER_META: SPRINGER_META_URL,
    Service.EUROPE_PMC_FULL_TEXT: f"{EUROPE_PMC_REST}/PMC",
    Service.SPRINGER_OPEN_ACCESS: SPRINGER_OA_JATS_URL,
    Service.OPENALEX_TERMS: WORKS_URL,
}


def may_prime(service: Service, url: str) -> bool:
    """Return whether a per-article request to ``url`` is one ``service``'s bulk lookup primes.

    A request that says ``True`` is worth holding back until that lookup is
    in: sent before, it would cost a request the lookup answers anyway.
    """
    if service is Service.EUROPE_PMC_FULL_TEXT:
        return url == SEARCH_URL or (
            url.startswith(_PRIMED_URLS[service]) and url.endswith("/fullTextXML")
        )
    return url.startswith(_PRIMED_URLS[service])


# -- priming -------------------------------------------------------------------------------------


def _respond(
    session: Session,
    request: GetRequest,
    status: int,
    content: bytes,
    headers: tuple[tuple[str, str], ...],
) -> str:
    entry = CachedResponse(status_code=status, headers=headers, content=content, url=request.url)
    return session.prime(
        "GET", request.url, params=request.params, headers=request.headers, response=entry
    )


def _json_bytes(obj: Any) -> bytes:
    return _COMPACT_JSON.encode(obj).encode()


# Built once: json.dumps with options builds a new encoder on each call.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def _fail(session: Session, request: GetRequest, reason: str) -> str:
    return session.prime(
        "GET", request.url, params=request.params, headers=request.headers, failure=reason
    )


@dataclass(frozen=True, slots=True)
class _Lookup:
    """One service's bulk answer for a step's bundles, and the reason a failure gives."""

    result: BulkResult[dict[str, Any]]
    reason: str

    def prime(
        self,
        session: Session,
        request: GetRequest,
        index: int,
        hit: Callable[[dict[str, Any]], bytes],
        missing: tuple[int, bytes, tuple[tuple[str, str], ...]],
        keys: list[str],
    ) -> None:
        """Prime ``request`` with what this lookup said about the bundle at ``index``.

        Abandoned: a failure. A record: ``hit(record)`` as a 200 JSON answer.
        No record, but a well-formed answer covered the bundle (now or from
        the persistent cache, see ``BulkResult.answered``): ``missing``
        (status, content, headers), the per-article "none". Otherwise nothing,
        and the per-article request goes out as usual. The primed request's
        key is appended to ``keys``.
        """
        record = self.result.values[index]
        if index in self.result.abandoned:
            keys.append(_fail(session, request, self.reason))
        elif record is not None:
            keys.append(_respond(session, request, 200, hit(record), _JSON))
        elif index in self.result.answered:
            status, content, headers = missing
            keys.append(_respond(session, request, status, content, headers))


async def _look_up(
    session: Session,
    run: Callable[[Session], Awaitable[BulkResult[dict[str, Any]]]],
    what: str,
) -> _Lookup:
    # A scope for its failures only: a lookup never asks one thing twice, and a scope that
    # kept its answers would hold every chunk's body until the lookup ends.
    async with session.scope(keep_answers=False) as scope:
        result = await run(scope)
        failures = scope.failures
    reason = f"{failures[0] if failures else 'no answer after retries'} ({what})"
    return _Lookup(result, reason)


async def _prime_s2(
    session: Session,
    bundles: Sequence[ArticleIds],
    credentials: Mapping[str, object],
    keys: list[str],
) -> None:
    api_key = usable_credential(credentials, "semantic_scholar_api_key")
    found = await _look_up(
        session,
        lambda http: s2_batch_records(bundles, http, api_key=api_key),
        "Semantic Scholar batch",
    )
    for i, ids in enumerate(bundles):
        request = s2_paper_request(ids, fields=_S2_FIELDS, api_key=api_key)
        batch_key = s2_batch_key(ids)
        if request is None or batch_key is None:
            continue
        missing = {"error": f"Paper with id {request.url.removeprefix(S2_PAPER_URL)} not found"}
        found.prime(
            session,
            request,
            i,
            # The single-paper answer carries paperId and the fields asked for.
            lambda record: _json_bytes(
                {"paperId": record.get("paperId"), _S2_FIELDS: record.get(_S2_FIELDS)}
            ),
            (404, _json_bytes(missing), _JSON),
            keys,
        )


def _crossref_requests(ids: ArticleIds, contact: str | None) -> list[GetRequest]:
    """The per-article work requests for a bundle: its DOI as held, and in canonical form.

    The file source and the Elsevier rung ask with the bundle's DOI, relations
    with the parsed one; in a parsed frame the two coincide.
    """
    if ids.doi is None:
        return []
    forms = [ids.doi]
    with contextlib.suppress(ValueError):
        forms.append(parse_doi(ids.doi))
    requests: list[GetRequest] = []
    seen: set[str] = set()
    for doi in forms:
        try:
            request = crossref_work_request(doi, contact)
        except ValueError:
            continue
        if request.url not in seen:
            seen.add(request.url)
            requests.append(request)
    return requests


async def _prime_crossref(
    session: Session,
    bundles: Sequence[ArticleIds],
    credentials: Mapping[str, object],
    keys: list[str],
) -> None:
    found = await _look_up(
        session,
        lambda http: crossref_batch_records(bundles, http),
        "Crossref works list",
    )
    for i, ids in enumerate(bundles):
        batch_key = crossref_batch_key(ids)
        if batch_key is None:
            continue
        for request in _crossref_requests(ids, session.contact):
            found.prime(
                session,
                request,
                i,
                lambda record: _json_bytes(
                    {"status": "ok", "message-type": "work", "message": record}
                ),
                (404, b"Resource not found.", _TEXT),
                keys,
            )


async def _prime_springer(
    session: Session,
    bundles: Sequence[ArticleIds],
    credentials: Mapping[str, object],
    keys: list[str],
) -> None:
    api_key = usable_credential(credentials, "springer_meta_api_key")
    if api_key is None:
        return  # the per-article source makes no request without a key
    found = await _look_up(
        session,
        lambda http: springer_batch_records(bundles, http, credentials=credentials),
        "Springer Meta query",
    )
    for i, ids in enumerate(bundles):
        batch_key = springer_batch_key(ids)
        if batch_key is None:
            continue
        found.prime(
            session,
            springer_meta_request(batch_key.wire, api_key),
            i,
            lambda record: _json_bytes({"records": [record], "facets": []}),
            (200, _json_bytes({"records": [], "facets": []}), _JSON),
            keys,
        )


# What the OpenAccess JATS API answers for a DOI it serves no open-access article for.
_NO_OPEN_ACCESS: Final = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<response><result><total>0</total>'
    b"<start>1</start><pageLength>10</pageLength><recordsDisplayed>0</recordsDisplayed>"
    b"</result><records/><facets/></response>\n"
)
_XML: Final = (("content-type", "application/xml"),)


async def _prime_springer_open_access(
    session: Session,
    bundles: Sequence[ArticleIds],
    credentials: Mapping[str, object],
    keys: list[str],
) -> None:
    api_key = usable_credential(credentials, "springer_api_key")
    if api_key is None or usable_credential(credentials, "springer_meta_api_key") is None:
        return
    async with session.scope() as scope:
        found = await springer_batch_records(bundles, scope, credentials=credentials)
    for ids, record in zip(bundles, found.values, strict=True):
        batch_key = springer_batch_key(ids)
        # Only a record that calls the article subscription content spares the request.
        if batch_key is None or record is None or record.get("openaccess") != "false":
            continue
        keys.append(
            _respond(
                session, springer_oa_request(batch_key.wire, api_key), 200, _NO_OPEN_ACCESS, _XML
            )
        )


# The answer Europe PMC gives a full-text request for an article it holds no text of.
_NO_FULL_TEXT: Final = b"Not found"


async def _prime_europe_pmc(
    session: Session,
    bundles: Sequence[ArticleIds],
    credentials: Mapping[str, object],
    keys: list[str],
) -> None:
    async with session.scope() as scope:
        found = await holdings(bundles, scope)
    primed: set[str] = set()
    for ids, holding in zip(bundles, found.values, strict=True):
        if holding is None or ids.pmcid is None:
            continue  # silence asks as before
        pmcid = parse_pmcid(ids.pmcid)
        if pmcid in primed:
            continue
        primed.add(pmcid)
        # The one-PMCID search, for readers of the record's flags (service_terms).
        answer = {"hitCount": 1, "resultList": {"result": [_lite_record(pmcid, holding)]}}
        keys.append(
            _respond(session, pmcid_search_request([pmcid]), 200, _json_bytes(answer), _JSON)
        )
        # Only a record that says "no full text" spares the full-text request.
        if holding.lacks_full_text:
            keys.append(_respond(session, full_text_request(pmcid), 404, _NO_FULL_TEXT, _TEXT))


def _lite_record(pmcid: str, holding: EuropePmcHolding) -> dict[str, str]:
    """A search ``lite`` record stating what the bulk answer said of one article."""
    record = {"pmcid": pmcid}
    for name, value in (
        ("isOpenAccess", holding.open_access),
        ("inEPMC", holding.in_epmc),
        ("inPMC", holding.in_pmc),
        ("hasPDF", holding.has_pdf),
    ):
        if value is not None:
            record[name] = "Y" if value else "N"
    return record


async def _prime_openalex_terms(
    session: Session,
    bundles: Sequence[ArticleIds],
    credentials: Mapping[str, object],
    keys: list[str],
) -> None:
    api_key = usable_credential(credentials, "openalex_api_key")
    async with session.scope() as scope:
        found = await works_with_terms(bundles, scope, api_key=api_key)
    for ids, work in zip(bundles, found.values, strict=True):
        key = terms_key(ids)
        # Only a work OpenAlex answered is primed; a miss or a failure leaves nothing held.
        if key is None or work is None:
            continue
        request = works_request(
            [key.wire], select=TERMS_SELECT, contact=session.contact, api_key=api_key
        )
        answer = {"meta": {"count": 1}, "results": [work]}
        keys.append(_respond(session, request, 200, _json_bytes(answer), _JSON))


_PRIMERS: Final = {
    Service.SEMANTIC_SCHOLAR: _prime_s2,
    Service.CROSSREF: _prime_crossref,
    Service.SPRINGER_META: _prime_springer,
    Service.EUROPE_PMC_FULL_TEXT: _prime_europe_pmc,
    Service.SPRINGER_OPEN_ACCESS: _prime_springer_open_access,
    Service.OPENALEX_TERMS: _prime_openalex_terms,
}


async def prime(
    session: Session,
    bundles: Sequence[ArticleIds],
    services: Iterable[Service],
    *,
    credentials: Mapping[str, object] | None = None,
    into: list[str] | None = None,
) -> list[str]:
    """Run the bulk lookups of ``services`` for ``bundles`` and prime ``session`` with them.

    The services (different hosts) are asked at once; each paces itself
    through the session. Returns the primed request keys (for
    :meth:`~litfetch_df.Session.unprime`), appended to ``into`` as they are
    primed when given (so an interrupted call leaves nothing unaccounted for).
    Does nothing with no bundles or no services, or when the private switch is
    off. A service whose priming fails unexpectedly is logged and left to the
    per-article path.
    """
    keys: list[str] = [] if into is None else into
    chosen = [s for s in Service if s in frozenset(services)]
    if not _ENABLED or not bundles or not chosen:
        return keys
    creds = dict(credentials or {})

    async def one(service: Service) -> None:
        try:
            await _PRIMERS[service](session, bundles, creds, keys)
        except Exception as exc:  # an optimisation must never cost the step its answers
            log.warning(
                "bulk lookup for %s failed (%s); asking per article",
                service.value,
                type(exc).__name__,
            )

    before = len(keys)
    await asyncio.gather(*(one(s) for s in chosen))
    log.debug(
        "primed %d per-article requests from bulk lookups (%s)",
        len(keys) - before,
        ", ".join(s.value for s in chosen),
    )
    return keys


@contextlib.asynccontextmanager
async def primed(
    session: Session,
    bundles: Sequence[ArticleIds],
    services: Iterable[Service],
    *,
    credentials: Mapping[str, object] | None = None,
) -> AsyncIterator[int]:
    """Prime ``session`` for the duration of a step (see :func:`prime`); yield how many.

    Every primed answer is removed on exit, also when the step fails or is
    cancelled.
    """
    keys: list[str] = []
    try:
        await prime(session, bundles, services, credentials=credentials, into=keys)
        yield len(keys)
    finally:
        session.unprime(keys)
