"""The bulk lookups, one primer per service, and which per-article requests each answers.

A primer asks its service about many articles at once (through the recipe
in :mod:`litfetch_df.sources.bulk_recipe`) and primes the session with the
answer each per-article request would have got (or with the failure, when
the lookup was given up), so the units cost no request to that service. See
:mod:`litfetch_df.frame.engine.bulk` for when each service is primed and
docs/adr/0005-bulk-priming.md for the design.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import httpx

from ...ids import ArticleIds, parse_doi, parse_pmcid
from ...session import Session
from ...sources.bulk_recipe import Settled
from ...sources.common import GetRequest, usable_credential
from ...sources.crossref import CROSSREF_WORKS_URL, crossref_work_request
from ...sources.crossref_batch import crossref_batch_each
from ...sources.europe_pmc import EUROPE_PMC_REST, full_text_request
from ...sources.europe_pmc_search import (
    SEARCH_URL,
    EuropePmcHolding,
    holdings,
    pmcid_search_request,
)
from ...sources.openalex import (
    TERMS_SELECT,
    WORKS_URL,
    list_budget_spent,
    single_works,
    terms_key,
    works_request,
    works_with_terms,
)
from ...sources.semantic_scholar import (
    S2_PAPER_URL,
    s2_paper_request,
)
from ...sources.semantic_scholar_batch import s2_batch_each
from ...sources.springer import (
    SPRINGER_META_URL,
    SPRINGER_OA_JATS_URL,
    springer_meta_request,
    springer_oa_request,
)
from ...sources.springer_batch import (
    springer_batch_each,
    springer_batch_key,
)
from ...sources.springer_oa_batch import single_answer, springer_oa_pages
from ...sources.unpaywall import UNPAYWALL_URL
from ...store.answers import Recalled
from ...wire.http import BulkHttp, get_logger
from .ahead import prime_unpaywall
from .primed_answers import (
    JSON_HEADERS,
    Answer,
    fail,
    json_bytes,
    prime_held_works,
    prime_settled,
    prime_work,
    respond,
)
from .primed_keys import PrimedKeys

__all__ = ["HELD_LOOKUPS", "PRIMERS", "Service", "may_prime", "prime_held_works"]

log = get_logger(__name__)

_S2_FIELDS: Final = "openAccessPdf"
"""The field the per-article file source asks Semantic Scholar for."""

_TEXT: Final = (("content-type", "text/plain;charset=utf-8"),)


class Service(enum.Enum):
    """A service whose per-article requests can be primed from a bulk lookup."""

    SEMANTIC_SCHOLAR = "semantic_scholar"
    CROSSREF = "crossref"
    SPRINGER_META = "springer_meta"
    EUROPE_PMC_FULL_TEXT = "europe_pmc_full_text"
    SPRINGER_OPEN_ACCESS = "springer_open_access"
    OPENALEX_TERMS = "openalex_terms"
    UNPAYWALL = "unpaywall"
    """No bulk form: the questions the licences step will ask, asked ahead (see ``ahead``)."""


_PRIMED_URLS: Final[Mapping[Service, str]] = {
    Service.SEMANTIC_SCHOLAR: S2_PAPER_URL,
    Service.CROSSREF: CROSSREF_WORKS_URL,
    Service.SPRINGER_META: SPRINGER_META_URL,
    Service.EUROPE_PMC_FULL_TEXT: f"{EUROPE_PMC_REST}/PMC",
    Service.SPRINGER_OPEN_ACCESS: SPRINGER_OA_JATS_URL,
    Service.OPENALEX_TERMS: WORKS_URL,
    Service.UNPAYWALL: UNPAYWALL_URL,
}


HELD_LOOKUPS: Final[Mapping[Service, str]] = {
    Service.SEMANTIC_SCHOLAR: "Semantic Scholar batch",
    Service.EUROPE_PMC_FULL_TEXT: "Europe PMC search",
    Service.OPENALEX_TERMS: "OpenAlex works",
}
"""The lookups whose answers are also read where held (service_terms), by the name their
failure reason ends with (``"<why> (Europe PMC search)"``)."""


def _reason(failures: Sequence[str], what: str) -> str:
    """Why a lookup's given-up ids were lost: its first failure, and which lookup it was."""
    return f"{failures[0] if failures else 'no answer after retries'} ({what})"


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


class _ChunkScopes:
    """The Http a streamed bulk lookup asks through: each request in a scope of its own.

    One scope for the whole lookup would hold every chunk's response until the
    last chunk is in; a scope per request lets each go once its chunk is
    primed. The reasons of the requests given up are collected in
    :attr:`failures`, in the order they end, as one scope would note them.
    Per-id records go to the session (a :class:`~litfetch_df.store.answers.RecordMemo`).
    """

    def __init__(self, session: Session) -> None:
        self._session = session
        self.failures: list[str] = []

    @property
    def contact(self) -> str | None:
        """The session's contact email."""
        return self._session.contact

    async def get(self, url: str, **kwargs: Any) -> httpx.Response:
        """The session's GET, in a scope of its own."""
        async with self._session.scope() as scope:
            try:
                return await scope.get(url, **kwargs)
            finally:
                self.failures.extend(scope.failures)

    async def post(self, url: str, **kwargs: Any) -> httpx.Response:
        """The session's POST, in a scope of its own."""
        async with self._session.scope() as scope:
            try:
                return await scope.post(url, **kwargs)
            finally:
                self.failures.extend(scope.failures)

    def recall_record(self, kind: str, key: str) -> Recalled | None:
        """The session's stored answer about one id (see :meth:`Session.recall_record`)."""
        return self._session.recall_record(kind, key)

    def keep_record(self, kind: str, key: str, value: Any, *, secrets: Sequence[str] = ()) -> None:
        """Store an answer about one id in the session (see :meth:`Session.keep_record`)."""
        self._session.keep_record(kind, key, value, secrets=secrets)


async def _stream(
    session: Session,
    run: Callable[[BulkHttp, Callable[[Settled[dict[str, Any]]], None]], Awaitable[None]],
    what: str,
    prime: Callable[[Settled[dict[str, Any]], Callable[[], str]], None],
) -> None:
    """Run one service's bulk lookup, priming each answer as its chunk comes in.

    A given-up chunk's reason is the first failure the lookup's requests
    noted (its own, or an earlier chunk's), with ``what`` the lookup was.
    """
    http = _ChunkScopes(session)

    def reason() -> str:
        return _reason(http.failures, what)

    await run(http, lambda settled: prime(settled, reason))


async def _prime_s2(
    session: Session,
    bundles: Sequence[ArticleIds],
    credentials: Mapping[str, object],
    keys: PrimedKeys,
) -> None:
    api_key = usable_credential(credentials, "semantic_scholar_api_key")

    def requests(ids: ArticleIds) -> list[GetRequest]:
        request = s2_paper_request(ids, fields=_S2_FIELDS, api_key=api_key)
        return [] if request is None else [request]

    def hit(record: dict[str, Any]) -> bytes:
        # The single-paper answer carries paperId and the fields asked for.
        return json_bytes({"paperId": record.get("paperId"), _S2_FIELDS: record.get(_S2_FIELDS)})

    def missing(request: GetRequest) -> Answer:
        paper = request.url.removeprefix(S2_PAPER_URL)
        return 404, json_bytes({"error": f"Paper with id {paper} not found"}), JSON_HEADERS

    def prime(settled: Settled[dict[str, Any]], reason: Callable[[], str]) -> None:
        prime_settled(session, settled, requests, bundles, hit, missing, reason, keys)

    await _stream(
        session,
        lambda http, each: s2_batch_each(bundles, http, each, api_key=api_key),
        HELD_LOOKUPS[Service.SEMANTIC_SCHOLAR],
        prime,
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
    keys: PrimedKeys,
) -> None:
    def requests(ids: ArticleIds) -> list[GetRequest]:
        return _crossref_requests(ids, session.contact)

    def hit(record: dict[str, Any]) -> bytes:
        return json_bytes({"status": "ok", "message-type": "work", "message": record})

    def prime(settled: Settled[dict[str, Any]], reason: Callable[[], str]) -> None:
        prime_settled(session, settled, requests, bundles, hit, lambda _: _NOT_FOUND, reason, keys)

    await _stream(
        session,
        lambda http, each: crossref_batch_each(bundles, http, each),
        "Crossref works list",
        prime,
    )


_NOT_FOUND: Final = (404, b"Resource not found.", _TEXT)
"""Crossref's answer for a DOI it does not know."""


async def _prime_springer(
    session: Session,
    bundles: Sequence[ArticleIds],
    credentials: Mapping[str, object],
    keys: PrimedKeys,
) -> None:
    api_key = usable_credential(credentials, "springer_meta_api_key")
    if api_key is None:
        return  # the per-article source makes no request without a key

    def requests(ids: ArticleIds) -> list[GetRequest]:
        batch_key = springer_batch_key(ids)
        return [] if batch_key is None else [springer_meta_request(batch_key.wire, api_key)]

    def hit(record: dict[str, Any]) -> bytes:
        return json_bytes({"records": [record], "facets": []})

    none = (200, json_bytes({"records": [], "facets": []}), JSON_HEADERS)

    def prime(settled: Settled[dict[str, Any]], reason: Callable[[], str]) -> None:
        prime_settled(session, settled, requests, bundles, hit, lambda _: none, reason, keys)

    await _stream(
        session,
        lambda http, each: springer_batch_each(bundles, http, each, credentials=credentials),
        "Springer Meta query",
        prime,
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
    keys: PrimedKeys,
) -> None:
    """Prime each Springer DOI's OpenAccess request from OR pages of 20 (issue 24).

    Every Springer Nature DOI is asked in pages
    (:func:`~litfetch_df.sources.springer_oa_batch.springer_oa_pages`); each
    article found becomes the one-article answer its per-article request would
    have had, a DOI a page answered without one the "none" answer. DOIs of pages
    not answered are left to the per-article request. (Meta is not asked first:
    at 20 DOIs a page, the pages its answer would spare cost less than the Meta
    pages themselves, which the file-set step asks anyway.)
    """
    api_key = usable_credential(credentials, "springer_api_key")
    if api_key is None:
        return
    asks: list[tuple[ArticleIds, str]] = []
    for ids in bundles:
        batch_key = springer_batch_key(ids)
        if batch_key is not None:
            asks.append((ids, batch_key.wire))
    if not asks:
        return
    async with session.scope() as scope:
        pages = await springer_oa_pages(scope, [wire for _, wire in asks], api_key)
    for ids, wire in asks:
        request = springer_oa_request(wire, api_key)
        article = pages.articles.get(wire.lower())
        if article is not None:
            keys.add(ids, respond(session, request, 200, single_answer(article), _XML))
        elif wire.lower() in pages.absent:
            keys.add(ids, respond(session, request, 200, _NO_OPEN_ACCESS, _XML))


# The answer Europe PMC gives a full-text request for an article it holds no text of.
_NO_FULL_TEXT: Final = b"Not found"


async def _prime_europe_pmc(
    session: Session,
    bundles: Sequence[ArticleIds],
    credentials: Mapping[str, object],
    keys: PrimedKeys,
) -> None:
    async with session.scope() as scope:
        found = await holdings(bundles, scope)
        failures = list(scope.failures)
    primed: dict[str, list[str]] = {}
    for i, (ids, holding) in enumerate(zip(bundles, found.values, strict=True)):
        if ids.pmcid is None or (holding is None and i not in found.abandoned):
            continue  # silence asks as before
        pmcid = parse_pmcid(ids.pmcid)
        if pmcid in primed:
            # Primed already: this bundle's unit reads the same answers.
            for key in primed[pmcid]:
                keys.add(ids, key)
            continue
        if holding is None:
            # Given up: the full-text request is asked as before, but a reader of the
            # record's flags (service_terms) must learn it was lost, not read "nothing".
            why = _reason(failures, HELD_LOOKUPS[Service.EUROPE_PMC_FULL_TEXT])
            made = [fail(session, pmcid_search_request([pmcid]), why)]
        else:
            # The one-PMCID search, for readers of the record's flags (service_terms).
            answer = {"hitCount": 1, "resultList": {"result": [_lite_record(pmcid, holding)]}}
            search = pmcid_search_request([pmcid])
            made = [respond(session, search, 200, json_bytes(answer), JSON_HEADERS)]
            # Only a record that says "no full text" spares the full-text request.
            if holding.lacks_full_text:
                made.append(respond(session, full_text_request(pmcid), 404, _NO_FULL_TEXT, _TEXT))
        primed[pmcid] = made
        for key in made:
            keys.add(ids, key)


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
    keys: PrimedKeys,
) -> None:
    api_key = usable_credential(credentials, "openalex_api_key")
    async with session.scope() as scope:
        found = await works_with_terms(bundles, scope, api_key=api_key)
        failures = list(scope.failures)
    values: list[Mapping[str, Any] | None] = list(found.values)
    abandoned = set(found.abandoned)

    def prime(i: int, work: Mapping[str, Any] | None) -> None:
        # A work OpenAlex answered is primed, a miss as an empty answer (so Unpaywall is
        # asked only for DOIs OpenAlex does not know), and a failure (so a reader knows
        # it lost it and takes a detour).
        ids = bundles[i]
        key = terms_key(ids)
        if key is None:
            return
        request = works_request(
            [key.wire], select=TERMS_SELECT, contact=session.contact, api_key=api_key
        )
        if work is None and i in abandoned:
            why = _reason(failures, HELD_LOOKUPS[Service.OPENALEX_TERMS])
            keys.add(ids, fail(session, request, why))
            return
        prime_work(session, ids, request, work, keys)

    detoured: set[int] = set()
    if abandoned and list_budget_spent(session, api_key=api_key):
        # The list budget is spent: each DOI by the free singleton lookup instead, so the
        # steps read the same answers (and Unpaywall is still asked only where OpenAlex
        # does not know the DOI). Each answer is primed as it comes in: the units waiting
        # for it go on meanwhile instead of waiting for the last of some 100 a second.
        lost: dict[str, list[int]] = {}
        for i in sorted(abandoned):
            if (k := terms_key(bundles[i])) is not None:
                lost.setdefault(k.wire, []).append(i)

        def answered(wire: str, work: Mapping[str, Any] | None) -> None:
            for i in lost.get(wire, ()):
                abandoned.discard(i)
                detoured.add(i)
                values[i] = work
                prime(i, work)

        async with session.scope() as scope:
            await single_works(scope, list(lost), api_key=api_key, on_answer=answered)
    for i, work in enumerate(values):
        if i not in detoured:
            prime(i, work)


PRIMERS: Final = {
    Service.SEMANTIC_SCHOLAR: _prime_s2,
    Service.CROSSREF: _prime_crossref,
    Service.SPRINGER_META: _prime_springer,
    Service.EUROPE_PMC_FULL_TEXT: _prime_europe_pmc,
    Service.SPRINGER_OPEN_ACCESS: _prime_springer_open_access,
    Service.OPENALEX_TERMS: _prime_openalex_terms,
    Service.UNPAYWALL: prime_unpaywall,
}
