"""Answers held in memory or on disk, served again as :class:`httpx.Response` objects.

A primed answer, an answer kept in the memo and a persistent cache entry are
all :class:`~litfetch_df.store.answers.CachedResponse` values; a source reads
each as the response it would have got (:class:`Replayed`). :func:`entry_of`
is the other way: the part of a network answer that may be kept.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx

from ..wire.http import is_secret_header, redact_url
from .answers import CachedResponse

__all__ = ["HOP_HEADERS", "Replayed", "entry_of"]

# The stored content is already decoded, so its transfer framing must not be replayed.
HOP_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding", "set-cookie"})


class Replayed(httpx.Response):
    """A response served from memory or the cache; its request is built only if asked for.

    Parsing the stored URL into an ``httpx.Request`` is most of the cost of a
    replayed answer, and the bundled sources never look at it.
    """

    def __init__(
        self, entry: CachedResponse, method: str, url: Callable[[], str] | None = None
    ) -> None:
        # Given as a stream, then marked read: the content is already whole and decoded,
        # so running it through httpx's decoders (what content= does) is wasted work.
        super().__init__(
            status_code=entry.status_code,
            headers=list(entry.headers),
            stream=httpx.ByteStream(entry.content),
        )
        self._content = entry.content
        self.is_stream_consumed = True
        self.is_closed = True
        self._replayed_from: tuple[str, str | Callable[[], str]] = (
            method,
            entry.url if url is None else url,
        )

    @property  # type: ignore[override]
    def request(self) -> httpx.Request:
        if self._request is None:
            method, url = self._replayed_from
            self._request = httpx.Request(method, url if isinstance(url, str) else url())
        return self._request

    @request.setter
    def request(self, value: httpx.Request) -> None:
        self._request = value


def entry_of(response: httpx.Response) -> CachedResponse:
    """What of a read network answer may be kept: no secret header, no framing, redacted URL."""
    return CachedResponse(
        status_code=response.status_code,
        headers=tuple(
            (k, v)
            for k, v in response.headers.items()
            if not is_secret_header(k) and k.lower() not in HOP_HEADERS
        ),
        content=response.content,
        url=redact_url(response.url),
    )
