"""Unpaywall asked ahead: each DOI OpenAlex does not know, asked once that is known.

Unpaywall has no bulk form. The licences step asks it one DOI at a time, for
each DOI whose OpenAlex work (read by the resolution's works filter, or by the
steps' terms lookup) is missing or states no terms
(:func:`~litfetch_df.frame.engine.steps.licences.asserted_terms`). Asked from its unit,
such a question waited for the unit's bodies and file-set steps and the bulk
lookups they wait for, and Unpaywall, which publishes no rate, starts slowly:
at 300 ms of latency a table's last rows waited for its last DOIs. This lookup
asks exactly those questions as soon as the pass starts (for the works the
resolution read) or the terms lookup has answered (for the others), and primes
each unit's request with the answer, so the step reads it without a request
of its own (ADR 0022).

It asks only what the step would, so no request is added: it leaves to the step
a DOI whose OpenAlex work states terms, a DOI whose OpenAlex answer was lost
(the step tries the singleton lookup first), a DOI whose Unpaywall day the
quota ledger says is spent (the step reads the held answers first), and every
DOI when there is no contact to send or the session is offline. An answer
that is not final (a 429 or 5xx after every retry) primes nothing; a request
given up primes its failure, with the reason the unit's own request would
have noted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ...ids import ArticleIds, doi_path
from ...session import Session
from ...sources.common import GetRequest, usable_credential
from ...sources.openalex import HeldWork, held_work, openalex_access, terms_key
from ...sources.unpaywall import UNPAYWALL_URL, unpaywall_email, unpaywall_spent
from ...store.primed import is_deterministic
from ...wire.http import QuotaDeferred, Rate, UpstreamUnavailable, get_logger
from .primed_answers import fail, respond
from .primed_keys import PrimedKeys

__all__ = ["prime_unpaywall"]

log = get_logger(__name__)


async def prime_unpaywall(
    session: Session,
    bundles: Sequence[ArticleIds],
    credentials: Mapping[str, object],
    keys: PrimedKeys,
    *,
    terms: asyncio.Future[Any] | None = None,
    works: Mapping[str, Mapping[str, Any] | None] | None = None,
    asked: set[str] | None = None,
) -> None:
    """Ask Unpaywall about the bundles' DOIs the licences step will ask it about; prime them.

    ``terms``: the steps' OpenAlex terms lookup, still running (``None``: none
    runs); a DOI whose terms it has not primed yet waits for it. ``works``: the
    OpenAlex works the resolution read, by terms key, to judge by before they are
    primed (a pass's rows that start while the rest resolve). ``asked``: the DOIs
    already judged (by an earlier call of the same pass), left out; those of
    this call are added.
    """
    address = unpaywall_email(session)
    if address is None or session.offline:
        return
    api_key = usable_credential(credentials, "openalex_api_key")
    # Bundles that hold one DOI ask one request (their units' requests are the same).
    sharing: dict[str, list[ArticleIds]] = {}
    for ids in bundles:
        if ids.doi is not None and (asked is None or ids.doi not in asked):
            sharing.setdefault(ids.doi, []).append(ids)
    if asked is not None:
        asked.update(sharing)

    def answer(doi: str, key: str) -> None:
        for ids in sharing[doi]:
            keys.add(ids, key)

    async def one(doi: str) -> None:
        async with session.scope() as scope:
            if works is not None:
                # Judged by the work the resolution read (the caller names only those).
                key = terms_key(sharing[doi][0])
                work = works[key.wire] if key is not None else None
                held = HeldWork("known", work) if work is not None else HeldWork("unknown")
            else:
                held = await held_work(scope, doi, api_key=api_key)
            if held.state == "not held" and terms is not None:
                await asyncio.wait({terms})
                held = await held_work(scope, doi, api_key=api_key)
            if held.state == "not held":
                return  # the step asks the singleton lookup first
            if held.work is not None and not openalex_access(held.work).is_empty():
                return  # the step reads OpenAlex's terms
            if unpaywall_spent(scope, doi):
                return  # the step reads the held answers first
            try:
                url = UNPAYWALL_URL + doi_path(doi)
            except ValueError:
                return  # no request for an invalid DOI
            request = GetRequest(url, {"email": address}, None, Rate.UNPAYWALL)
            try:
                response = await request.send(scope)
            except QuotaDeferred:
                return  # the step meets the spent day itself, unsent
            except UpstreamUnavailable as exc:
                reason = scope.failures[0] if scope.failures else str(exc)
                answer(doi, fail(session, request, reason))
                return
        if not is_deterministic(response.status_code):
            return
        headers = (("content-type", response.headers.get("content-type", "application/json")),)
        answer(doi, respond(session, request, response.status_code, response.content, headers))

    log.debug("asking Unpaywall ahead about up to %d DOIs", len(sharing))
    await asyncio.gather(*(one(doi) for doi in sharing))
