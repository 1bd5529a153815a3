"""Access terms from service answers already held: Semantic Scholar, OpenAlex, Europe PMC.

The licence step reads the body bytes first, then Unpaywall. Three more
services have said something about the article's terms in answers the frame
fetches in bulk anyway (ADR 0005): Semantic Scholar's paper batch
(``openAccessPdf.status`` and ``.license``), OpenAlex's works filter
(``open_access.oa_status``, ``best_oa_location.license``) and Europe PMC's
search (``isOpenAccess``). :func:`service_terms` fills what is still missing
from them, in :data:`SERVICE_ORDER`, and never asks for anything: it reads
only answers the session *holds* (primed from a bulk lookup, or stored in the
persistent cache; see :class:`~litfetch_df.store.answers.HeldAnswers`). An answer
that is not held is simply not read, so this step costs no request and
cannot fail a row.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from ..ids import ArticleIds, parse_pmcid
from ..metadata import SourceMetadata, normalise_oa_status
from ..sources.common import parsed_or_none, usable_credential
from ..sources.europe_pmc_search import holding_access, holdings_in, pmcid_search_request
from ..sources.openalex import (
    TERMS_SELECT,
    openalex_access,
    terms_key,
    work_ids,
    works_request,
)
from ..sources.semantic_scholar import TERMS_FIELDS, held_paper, s2_access
from ..store.answers import HeldAnswers, can_hold
from ..wire.http import Http

__all__ = ["S2_TERMS_FIELDS", "SERVICE_ORDER", "held_s2_paper", "service_terms"]

SERVICE_ORDER: Final = ("semantic_scholar", "openalex", "europe_pmc")
"""The order the services fill missing fields in (each is also the basis it is labelled with).

Semantic Scholar first: its batch is primed wherever files are listed and
it classifies the article (``GOLD`` … ``CLOSED``) and names a licence.
OpenAlex next: the same kind of classification (Unpaywall's, served in
bulk). Europe PMC last: it states only that an article is in its
open-access subset, no colour and no licence.
"""

S2_TERMS_FIELDS: Final = TERMS_FIELDS
"""The fields of the Semantic Scholar paper lookup read here (the one the frame primes)."""


async def held_s2_paper(
    http: Http | HeldAnswers, ids: ArticleIds, credentials: Mapping[str, object] | None = None
) -> dict[str, Any] | None:
    """Semantic Scholar's held paper answer (``fields=openAccessPdf``) for ``ids``, or ``None``.

    No request: ``None`` when ``http`` holds no such answer (or holds nothing).
    The files step's :class:`~litfetch_df.sources.semantic_scholar.SemanticScholarFileSource`
    and the terms read here share this one lookup
    (:func:`~litfetch_df.sources.semantic_scholar.held_paper`).
    """
    return await held_paper(http, ids, credentials)


async def _semantic_scholar(
    http: HeldAnswers,
    ids: ArticleIds,
    credentials: Mapping[str, object] | None,
    contact: str | None,
) -> SourceMetadata:
    record = await held_s2_paper(http, ids, credentials)
    return s2_access(record) if record is not None else SourceMetadata()


async def _openalex(
    http: HeldAnswers,
    ids: ArticleIds,
    credentials: Mapping[str, object] | None,
    contact: str | None,
) -> SourceMetadata:
    key = terms_key(ids)
    if key is None:
        return SourceMetadata()
    request = works_request(
        [key.wire],
        select=TERMS_SELECT,
        contact=contact,
        api_key=usable_credential(credentials, "openalex_api_key"),
    )
    body = await request.held_json(http)
    results = body.get("results") if isinstance(body, dict) else None
    for work in results if isinstance(results, list) else ():
        named = work_ids(work) if isinstance(work, dict) else None
        if named is not None and named[0] == key.key:
            return openalex_access(work)
    return SourceMetadata()


async def _europe_pmc(
    http: HeldAnswers,
    ids: ArticleIds,
    credentials: Mapping[str, object] | None,
    contact: str | None,
) -> SourceMetadata:
    pmcid = parsed_or_none(parse_pmcid, ids.pmcid) if ids.pmcid is not None else None
    if pmcid is None:
        return SourceMetadata()
    body = await pmcid_search_request([pmcid]).held_json(http)
    found = holdings_in(body, [pmcid]) if body is not None else None
    holding = found.get(pmcid) if found else None
    return holding_access(holding) if holding is not None else SourceMetadata()


_Reader = Callable[
    [HeldAnswers, ArticleIds, Mapping[str, object] | None, str | None],
    Awaitable[SourceMetadata],
]

_READERS: Final[Mapping[str, _Reader]] = {
    "semantic_scholar": _semantic_scholar,
    "openalex": _openalex,
    "europe_pmc": _europe_pmc,
}


def _complete(meta: SourceMetadata) -> bool:
    return meta.licence is not None and meta.access is not None and meta.oa_status is not None


def _fill(have: SourceMetadata, found: SourceMetadata) -> SourceMetadata:
    """``have`` with what it lacks taken from ``found``; every field ``have`` holds stays."""
    if found.is_empty():
        return have
    licence, basis = have.licence, have.basis
    if licence is None and found.licence is not None:
        licence, basis = found.licence, found.basis
    access, access_from = have.access, have.access_from
    if access is None and found.access is not None:
        access, access_from = found.access, found.basis
    if basis is None:
        # No licence from anywhere: the basis names where the access status came from.
        basis = access_from
    oa_status = have.oa_status or normalise_oa_status(found.access)
    return SourceMetadata(
        licence=licence,
        access=access,
        basis=basis,
        access_basis=access_from if access_from != basis else None,
        oa_status=oa_status,
    )


async def service_terms(
    http: Http,
    ids: ArticleIds,
    have: SourceMetadata,
    *,
    credentials: Mapping[str, object] | None = None,
) -> SourceMetadata:
    """Return ``have`` with its missing fields filled from service answers ``http`` already holds.

    ``have`` is what better sources gave (the body bytes, then Unpaywall);
    none of its fields is replaced. The services are read in
    :data:`SERVICE_ORDER`, each filling only what is still empty:

    * ``licence`` (basis ``'semantic_scholar'`` or ``'openalex'``): S2's
      ``openAccessPdf.license`` (raw, e.g. ``CCBY``), else OpenAlex's
      ``best_oa_location.license`` (raw, e.g. ``cc-by``; not for a
      ``submittedVersion`` location);
    * ``access`` (raw, labelled through ``basis`` / ``access_basis``): S2's
      ``openAccessPdf.status``, else OpenAlex's ``open_access.oa_status``,
      else ``'open-access'`` when Europe PMC's record says ``isOpenAccess: Y``;
    * ``oa_status``: the first of those classifications that normalises to
      ``gold`` … ``closed`` (Europe PMC's statement names no colour).

    Only held answers are read: the single-paper S2 lookup
    (``fields=openAccessPdf``), the one-DOI OpenAlex filter
    (:data:`~litfetch_df.sources.openalex.TERMS_SELECT`) and the one-PMCID
    Europe PMC search, as the frame primes them from its bulk lookups. An
    ``http`` that holds nothing (not a
    :class:`~litfetch_df.store.answers.HeldAnswers`) gives ``have`` back unchanged.
    ``credentials`` must be those the lookups were primed with (the S2 and
    OpenAlex keys are part of the request).
    """
    contact = http.contact
    if not can_hold(http) or _complete(have):
        return have
    for name in SERVICE_ORDER:
        have = _fill(have, await _READERS[name](http, ids, credentials, contact))
        if _complete(have):
            break
    return have
