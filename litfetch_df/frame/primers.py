"""The bulk lookups, one primer per service, and which per-article requests each answers.

A primer asks its service about many articles at once (through the recipe
in :mod:`litfetch_df.sources.bulk_recipe`) and primes the session with the
answer each per-article request would have got (or with the failure, when
the lookup was given up), so the units cost no request to that service. See
:mod:`litfetch_df.frame.bulk` for when each service is primed and
docs/adr/0005-bulk-priming.md for the design.
"""

from __future__ import annotations

import contextlib
import enum
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from .._http import get_logger
from ..ids import ArticleIds, parse_doi, parse_pmcid
from ..session import CachedResponse, Session
from ..sources._common import GetRequest, usable_credential
from ..sources.bulk import BulkResult
from ..sources.crossref import CROSSREF_WORKS_URL, crossref_work_request
from ..sources.crossref_batch import crossref_batch_key, crossref_batch_records
from ..sources.europe_pmc import EUROPE_PMC_REST, full_text_request
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
    s2_paper_request,
)
from ..sources.semantic_scholar_batch import s2_batch_key, s2_batch_records
from ..sources.springer import (
    SPRINGER_META_URL,
    SPRINGER_OA_JATS_URL,
    springer_meta_request,
    springer_oa_request,
)
from ..sources.springer_batch import springer_batch_key, springer_batch_records

__all__ = ["HELD_LOOKUPS", "PRIMERS", "Service", "may_prime"]

log = get_logger(__name__)

V = TypeVar("V")

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


_PRIMED_URLS: Final[Mapping[Service, str]] = {
    Service.SEMANTIC_SCHOLAR: S2_PAPER_URL,
    Service.CROSSREF: CROSSREF_WORKS_URL,
    Service.SPRINGER_META: SPRINGER_META_URL,
    Service.EUROPE_PMC_FULL_TEXT: f"{EUROPE_PMC_REST}/PMC",
    Service.SPRINGER_OPEN_ACCESS: SPRINGER_OA_JATS_URL,
    Service.OPENALEX_TERMS: WORKS_URL,
}


HELD_LOOKUPS: Final[Mapping[Service, str]] = {
    Service.SEMANTIC_SCHOLAR: "Semantic Scholar batch",
    Service.EUROPE_PMC_FULL_TEXT: "Europe PMC search",
    Service.OPENALEX_TERMS: "OpenAlex works",
}
"""The lookups whose answers are also read where held (service_terms), by the name their
failure reason ends with (``"<why> (Europe PMC search)"``)."""


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
class _Lookup(Generic[V]):
    """One service's bulk answer for a step's bundles, and the reason a failure gives."""

    result: BulkResult[V]
    reason: str

    def prime(
        self,
        session: Session,
        request: GetRequest,
        index: int,
        hit: Callable[[V], bytes],
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
    run: Callable[[Session], Awaitable[BulkResult[V]]],
    what: str,
) -> _Lookup[V]:
    async with session.scope() as scope:
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
        HELD_LOOKUPS[Service.SEMANTIC_SCHOLAR],
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
    what = HELD_LOOKUPS[Service.EUROPE_PMC_FULL_TEXT]
    lookup = await _look_up(session, lambda http: holdings(bundles, http), what)
    found = lookup.result
    primed: set[str] = set()
    for i, (ids, holding) in enumerate(zip(bundles, found.values, strict=True)):
        if ids.pmcid is None or (holding is None and i not in found.abandoned):
            continue  # silence asks as before
        pmcid = parse_pmcid(ids.pmcid)
        if pmcid in primed:
            continue
        primed.add(pmcid)
        if holding is None:
            # Given up: the full-text request is asked as before, but a reader of the
            # record's flags (service_terms) must learn it was lost, not read "nothing".
            keys.append(_fail(session, pmcid_search_request([pmcid]), lookup.reason))
            continue
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
    lookup = await _look_up(
        session,
        lambda http: works_with_terms(bundles, http, api_key=api_key),
        HELD_LOOKUPS[Service.OPENALEX_TERMS],
    )
    found = lookup.result
    for i, (ids, work) in enumerate(zip(bundles, found.values, strict=True)):
        key = terms_key(ids)
        # A work OpenAlex answered is primed, and a failure (so a reader knows it lost
        # it); a miss leaves nothing held.
        if key is None or (work is None and i not in found.abandoned):
            continue
        request = works_request(
            [key.wire], select=TERMS_SELECT, contact=session.contact, api_key=api_key
        )
        if work is None:
            keys.append(_fail(session, request, lookup.reason))
            continue
        answer = {"meta": {"count": 1}, "results": [work]}
        keys.append(_respond(session, request, 200, _json_bytes(answer), _JSON))


PRIMERS: Final = {
    Service.SEMANTIC_SCHOLAR: _prime_s2,
    Service.CROSSREF: _prime_crossref,
    Service.SPRINGER_META: _prime_springer,
    Service.EUROPE_PMC_FULL_TEXT: _prime_europe_pmc,
    Service.SPRINGER_OPEN_ACCESS: _prime_springer_open_access,
    Service.OPENALEX_TERMS: _prime_openalex_terms,
}
