"""The answers a bulk lookup primes, built one per-article request at a time.

:mod:`~litfetch_df.frame.engine.primers` runs each service's lookup; this module turns
what a lookup said into primed answers (:meth:`~litfetch_df.Session.prime`),
each tied to the bundle it answers (:class:`~litfetch_df.frame.engine.primed_keys.PrimedKeys`):
a record as a 200 JSON answer, a miss as the service's own "none", a given-up
chunk as a failure. It also primes OpenAlex terms the call read already (the
resolution's works filter), so the steps' lookup skips those DOIs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from ...ids import ArticleIds
from ...session import CachedResponse, Session
from ...sources.bulk_recipe import Settled
from ...sources.common import GetRequest, usable_credential
from ...sources.openalex import TERMS_SELECT, terms_key, works_request
from .primed_keys import PrimedKeys

__all__ = [
    "JSON_HEADERS",
    "Answer",
    "fail",
    "json_bytes",
    "prime_held_works",
    "prime_settled",
    "prime_work",
    "respond",
]

JSON_HEADERS: Final = (("content-type", "application/json"),)
"""The headers of a primed JSON answer."""

Answer = tuple[int, bytes, tuple[tuple[str, str], ...]]
"""A primed answer: status, content, headers."""

# Built once: json.dumps with options builds a new encoder on each call.
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))


def json_bytes(obj: Any) -> bytes:
    """``obj`` as compact JSON bytes (the body of a primed answer)."""
    return _COMPACT_JSON.encode(obj).encode()


def respond(
    session: Session,
    request: GetRequest,
    status: int,
    content: bytes,
    headers: tuple[tuple[str, str], ...],
) -> str:
    """Prime ``request`` with this answer; return its key."""
    entry = CachedResponse(status_code=status, headers=headers, content=content, url=request.url)
    return session.prime(
        "GET", request.url, params=request.params, headers=request.headers, response=entry
    )


def fail(session: Session, request: GetRequest, reason: str) -> str:
    """Prime ``request`` as given up for ``reason``; return its key."""
    return session.prime(
        "GET", request.url, params=request.params, headers=request.headers, failure=reason
    )


def prime_settled(
    session: Session,
    settled: Settled[dict[str, Any]],
    requests: Callable[[ArticleIds], Sequence[GetRequest]],
    bundles: Sequence[ArticleIds],
    hit: Callable[[dict[str, Any]], bytes],
    missing: Callable[[GetRequest], Answer],
    reason: Callable[[], str],
    keys: PrimedKeys,
) -> None:
    """Prime every request of the bundles ``settled`` covers with what the lookup said.

    Abandoned: a failure (``reason()``). A record: ``hit(record)`` as a 200
    JSON answer, built once for all of them. No record, but a well-formed
    answer covered the bundle (now or from the persistent cache):
    ``missing(request)`` (status, content, headers), the per-article "none".
    Otherwise nothing, and the per-article request goes out as usual.
    """
    record = settled.value
    if settled.abandoned:
        why = reason()
        for i in settled.where:
            for request in requests(bundles[i]):
                keys.add(bundles[i], fail(session, request, why))
        return
    if record is None and not settled.answered:
        return
    found = None if record is None else (200, hit(record), JSON_HEADERS)
    for i in settled.where:
        for request in requests(bundles[i]):
            status, content, headers = found if found is not None else missing(request)
            keys.add(bundles[i], respond(session, request, status, content, headers))


def prime_work(
    session: Session,
    ids: ArticleIds,
    request: GetRequest,
    work: Mapping[str, Any] | None,
    keys: PrimedKeys,
) -> None:
    """Prime the one-DOI terms filter of ``ids`` with ``work`` (``None``: OpenAlex lacks it)."""
    answer = {
        "meta": {"count": 0 if work is None else 1},
        "results": [] if work is None else [work],
    }
    keys.add(ids, respond(session, request, 200, json_bytes(answer), JSON_HEADERS))


def prime_held_works(
    session: Session,
    bundles: Sequence[ArticleIds],
    works: Mapping[str, Mapping[str, Any] | None],
    credentials: Mapping[str, object],
    keys: PrimedKeys,
) -> set[int]:
    """Prime each bundle's OpenAlex terms from ``works`` the run already read; return which.

    ``works`` maps a lower-cased DOI to its work (``None``: OpenAlex answered
    without it), as the resolution's works filter left them. The bundles
    returned need no terms lookup of their own.
    """
    if not works:
        return set()
    api_key = usable_credential(credentials, "openalex_api_key")
    covered: set[int] = set()
    for i, ids in enumerate(bundles):
        key = terms_key(ids)
        if key is None or key.wire not in works:
            continue
        request = works_request(
            [key.wire], select=TERMS_SELECT, contact=session.contact, api_key=api_key
        )
        prime_work(session, ids, request, works[key.wire], keys)
        covered.add(i)
    return covered
