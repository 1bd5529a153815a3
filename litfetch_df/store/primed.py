"""Answers held in memory for exact requests: what the bulk lookups prime, by request key.

A table-level caller that asked a service about many articles at once knows
the answer to many per-article requests before they are made. It *primes*
them: each request, named by :func:`request_key` (a hash of every part of it),
gets a synthesized answer or a failure reason, and the session serves it
instead of the network (``Session.prime``). This module holds those answers
and the keys; the session decides when they are read.
"""

from __future__ import annotations

import hashlib
import json as jsonlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..wire.http import redact_text, url_with_query
from .answers import CachedResponse

__all__ = ["Primed", "PrimedAnswers", "is_deterministic", "request_key"]


def is_deterministic(status_code: int) -> bool:
    """Return whether a response with this status may be cached (2xx, 3xx, 4xx but 429)."""
    return status_code < 500 and status_code != 429


def request_key(
    method: str,
    url: str,
    params: Mapping[str, str | int] | None,
    headers: Mapping[str, str] | None,
    follow_redirects: bool,
    body: bytes | None,
) -> str:
    """Return the cache key of a request: a SHA-256 over its every part.

    Hashing keeps credentials (which are part of the request) out of any stored key.
    """
    material = jsonlib.dumps(
        [
            method.upper(),
            url,
            sorted((str(k), str(v)) for k, v in (params or {}).items()),
            sorted((k.lower(), v) for k, v in (headers or {}).items()),
            bool(follow_redirects),
            hashlib.sha256(body).hexdigest() if body else None,
        ],
        separators=(",", ":"),
    )
    return hashlib.sha256(material.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Primed:
    """A request answered from memory: a synthesized response, or a failure reason."""

    response: CachedResponse | None
    failure: str | None
    # The request as primed; its redacted URL is written only if a caller asks for it.
    url: str = ""
    # As pairs, not a dict: a table primes tens of thousands of these.
    params: tuple[tuple[str, str | int], ...] = ()

    def shown_url(self) -> str:
        """The primed request's URL with its query, credentials redacted."""
        return redact_text(url_with_query(self.url, dict(self.params)))


class PrimedAnswers:
    """The primed answers of a session and all its scopes, by request key."""

    def __init__(self) -> None:
        self._by_key: dict[str, Primed] = {}

    def prime(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, str | int] | None,
        headers: Mapping[str, str] | None,
        follow_redirects: bool,
        body: bytes | None,
        response: CachedResponse | None,
        failure: str | None,
    ) -> str:
        """Hold ``response`` or ``failure`` for the request; return its key.

        Exactly one of the two is given; a response must be deterministic (see
        :func:`is_deterministic`) and a failure becomes a one-line reason.
        """
        if (response is None) == (failure is None):
            raise ValueError("prime() takes exactly one of response= or failure=")
        if response is not None and not is_deterministic(response.status_code):
            raise ValueError(
                f"a primed response must be deterministic, not HTTP {response.status_code}; "
                "prime a failure= instead"
            )
        key = request_key(method, url, params, headers, follow_redirects, body)
        if response is not None:
            self._by_key[key] = Primed(response, None, url, tuple((params or {}).items()))
        else:
            reason = " ".join(str(failure).split()) or "no answer"
            self._by_key[key] = Primed(None, reason)
        return key

    def get(self, key: str) -> Primed | None:
        """The answer primed under ``key``, or ``None``."""
        return self._by_key.get(key)

    def forget(self, keys: Iterable[str]) -> None:
        """Drop the answers primed under ``keys``."""
        by_key = self._by_key
        for key in keys:
            by_key.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)
