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
* OpenAlex (:attr:`Service.OPENALEX_TERMS`): ``filter=doi:a|b|…`` (100 DOIs,
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
they could not get primes nothing for the requests they spare, and its
articles are asked as before; the answers read only where held (the
one-PMCID search, OpenAlex's one-DOI filter) are primed with the failure, so
a reader knows what it lost.

Primed answers live for one step (:func:`primed` removes them on exit) and
never reach the persistent cache; the bulk responses themselves are cached
like any other request, and their answers per id too (ADR 0012), so a bulk
lookup asks only about ids it has no live answer for.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any

from ...ids import ArticleIds
from ...operations.types import Fetcher, FileSource
from ...session import Session
from ...sources.common import usable_credential
from ...sources.crossref import CrossrefFileSource
from ...sources.elsevier import ElsevierFetcher
from ...sources.europe_pmc import EuropePmcFetcher
from ...sources.openalex import OpenAlexFileSource
from ...sources.semantic_scholar import (
    SemanticScholarFileSource,
)
from ...sources.springer import (
    SpringerFetcher,
    SpringerFileSource,
)
from ...wire.http import get_logger
from .ahead import prime_unpaywall
from .primed_keys import PrimedKeys
from .primers import HELD_LOOKUPS, PRIMERS, Service, may_prime, prime_held_works

__all__ = [
    "PrimedKeys",
    "Service",
    "for_fetchers",
    "for_file_sources",
    "for_licences",
    "for_related",
    "for_service_terms",
    "lost_terms_lookups",
    "may_prime",
    "prime",
    "prime_ahead",
    "prime_held",
    "primed",
]

log = get_logger(__name__)

_ENABLED = True
"""Private switch: ``False`` makes :func:`prime` a no-op (to compare with the per-article path)."""

_PRIMERS = PRIMERS  # tests replace a primer here


def for_file_sources(sources: Sequence[FileSource] | None) -> frozenset[Service]:
    """Return the services to prime for ``list_files`` with ``sources`` (``None``: the defaults).

    Only the exact bundled classes count (a subclass may ask differently):
    :class:`SemanticScholarFileSource`, :class:`CrossrefFileSource`,
    :class:`SpringerFileSource`.
    """
    if sources is None:
        from ...operations.fileset import default_file_sources

        sources = default_file_sources()
    table: Mapping[type, Service] = {
        SemanticScholarFileSource: Service.SEMANTIC_SCHOLAR,
        CrossrefFileSource: Service.CROSSREF,
        SpringerFileSource: Service.SPRINGER_META,
        OpenAlexFileSource: Service.OPENALEX_TERMS,
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
    OpenAccess when it holds a :class:`SpringerFetcher` and its key is usable
    (OR pages of 20).
    """
    if fetchers is None:
        from ...operations.ladder import default_fetchers

        fetchers = default_fetchers()
    kinds = {type(f) for f in fetchers}
    services: set[Service] = set()
    if EuropePmcFetcher in kinds:
        services.add(Service.EUROPE_PMC_FULL_TEXT)
    if ElsevierFetcher in kinds and usable_credential(credentials, "elsevier_api_key") is not None:
        services.add(Service.CROSSREF)
    if SpringerFetcher in kinds and usable_credential(credentials, "springer_api_key") is not None:
        services.add(Service.SPRINGER_OPEN_ACCESS)
    return frozenset(services)


def for_licences() -> frozenset[Service]:
    """Return the services to prime for ``licences``: OpenAlex's works (OA status, licence,
    a hundred DOIs a request; Unpaywall is asked only for the DOIs it does not know, and
    asked ahead, :mod:`~litfetch_df.frame.engine.ahead`) and Crossref, whose ``license[]`` is the
    last resort for a licence."""
    return frozenset({Service.OPENALEX_TERMS, Service.CROSSREF, Service.UNPAYWALL})


def for_service_terms(contact: str | None) -> frozenset[Service]:
    """Return the services to prime for :func:`~litfetch_df.operations.service_terms.service_terms`.

    Semantic Scholar (its batch answer holds ``openAccessPdf.status`` and
    ``.license``; 500 ids a request) and Europe PMC search (``isOpenAccess``;
    100 PMCIDs a request, the lookup the bodies step makes anyway). OpenAlex
    (``open_access``, ``best_oa_location``; 100 DOIs a request), with or
    without a ``contact``: its classification is Unpaywall's, served in bulk.
    """
    return frozenset(
        {Service.SEMANTIC_SCHOLAR, Service.EUROPE_PMC_FULL_TEXT, Service.OPENALEX_TERMS}
    )


def lost_terms_lookups(error: object) -> frozenset[Service]:
    """Return the held-answer lookups (:func:`for_service_terms`) an error cell says were lost.

    A licence row whose held Semantic Scholar, Europe PMC or OpenAlex answer
    was given up says so in its ``licence_error`` (the lookup's reason ends
    ``(<lookup name>)``); a re-run must make that lookup again for the row,
    since the licences step alone asks only Crossref in bulk.
    """
    if not isinstance(error, str):
        return frozenset()
    return frozenset(s for s, name in HELD_LOOKUPS.items() if f"({name})" in error)


def for_related() -> frozenset[Service]:
    """Return the services to prime for ``related``: Crossref (bioRxiv stays per article)."""
    return frozenset({Service.CROSSREF})


def prime_held(
    session: Session,
    bundles: Sequence[ArticleIds],
    works: Mapping[str, Mapping[str, object] | None],
    credentials: Mapping[str, object],
    keys: PrimedKeys,
) -> set[int]:
    """Prime the bundles' OpenAlex terms from works the call read already; return which.

    Those bundles need no OpenAlex terms lookup of their own. Primes nothing
    when the private switch is off.
    """
    if not _ENABLED:
        return set()
    return prime_held_works(session, bundles, works, credentials, keys)


async def prime_ahead(
    session: Session,
    bundles: Sequence[ArticleIds],
    *,
    credentials: Mapping[str, object] | None = None,
    into: PrimedKeys,
    terms: asyncio.Future[Any] | None = None,
    works: Mapping[str, Mapping[str, Any] | None] | None = None,
    asked: set[str] | None = None,
) -> list[str]:
    """Ask Unpaywall ahead for ``bundles`` (:mod:`~litfetch_df.frame.engine.ahead`), after terms.

    ``terms`` is the call's OpenAlex terms lookup, if one runs: a DOI it has not
    primed yet waits for it; ``works`` and ``asked`` as
    :func:`~litfetch_df.frame.engine.ahead.prime_unpaywall` takes them. As :func:`prime`
    otherwise (the private switch, a failure logged and left to the per-article
    path); returns the primed keys.
    """
    if _ENABLED and bundles:
        creds = dict(credentials or {})
        try:
            await prime_unpaywall(
                session, bundles, creds, into, terms=terms, works=works, asked=asked
            )
        except Exception as exc:  # an optimisation must never cost the step its answers
            log.warning("asking Unpaywall ahead failed (%s); asking per unit", type(exc).__name__)
    return list(into)


async def prime(
    session: Session,
    bundles: Sequence[ArticleIds],
    services: Iterable[Service],
    *,
    credentials: Mapping[str, object] | None = None,
    into: list[str] | PrimedKeys | None = None,
) -> list[str]:
    """Run the bulk lookups of ``services`` for ``bundles`` and prime ``session`` with them.

    The services (different hosts) are asked at once; each paces itself
    through the session, and primes each chunk's answers as soon as it is in.
    Returns the primed request keys (for :meth:`~litfetch_df.Session.unprime`),
    added to ``into`` as they are primed when given (so an interrupted call
    leaves nothing unaccounted for); a :class:`PrimedKeys` also ties each
    key to the bundle it answers, so a runner can unprime a unit's answers
    when the unit is done. Does nothing with no bundles or no services, or
    when the private switch is off. A service whose priming fails
    unexpectedly is logged and left to the per-article path.
    """
    keys = into if isinstance(into, PrimedKeys) else PrimedKeys(session, into)
    chosen = [s for s in Service if s in frozenset(services)]
    if not _ENABLED or not bundles or not chosen:
        return list(keys)
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
    return list(keys)


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
