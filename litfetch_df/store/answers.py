"""What the session and a persistent response cache exchange, and the offline miss.

These names sit below both :mod:`litfetch_df.session` and
:mod:`litfetch_df.store.cache` (and the sources, which log an offline miss quietly),
so neither has to import the other to agree on them. They are re-exported from
:mod:`litfetch_df.session`, where callers have always found them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeGuard, runtime_checkable

from ..wire.http import UpstreamUnavailable, offers

__all__ = [
    "CachedResponse",
    "HeldAnswers",
    "NotInCache",
    "Recalled",
    "RecordMemo",
    "ResponseStore",
    "can_hold",
    "keeps_records",
]


class NotInCache(UpstreamUnavailable):
    """Raised in offline mode for a request the persistent cache cannot answer."""


@dataclass(frozen=True, slots=True)
class CachedResponse:
    """A stored response: enough to rebuild an :class:`httpx.Response`."""

    status_code: int
    headers: tuple[tuple[str, str], ...]
    content: bytes = field(repr=False)
    url: str


class ResponseStore(Protocol):
    """What a persistent response cache offers the session (see :mod:`litfetch_df.store.cache`)."""

    def load(self, key: str) -> CachedResponse | None:
        """Return the live entry stored under ``key``, or ``None``."""
        ...

    def save(self, key: str, entry: CachedResponse, *, secrets: Sequence[str] = ()) -> None:
        """Store ``entry`` under ``key``; every string in ``secrets`` is scrubbed first."""
        ...


@runtime_checkable
class HeldAnswers(Protocol):
    """An :class:`~litfetch_df.wire.http.Http` that can say what it already holds, without asking.

    :class:`~litfetch_df.Session` implements it: a request primed from a bulk
    lookup, or stored in the persistent cache, is *held*; anything else is not,
    and looking never sends a request, paces, or records a failure. Operations
    that must cost no request (reading facts a bulk lookup already fetched)
    ask through it.
    """

    async def held(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> CachedResponse | None:
        """Return the answer held for this GET (primed, else stored), or ``None``."""
        ...


@dataclass(frozen=True, slots=True)
class Recalled:
    """A per-id answer of a bulk lookup, found in the persistent cache.

    ``value`` is the JSON form of what the service said about the id, or
    ``None`` when it said it knows no such id (a miss is an answer too).
    """

    value: Any


@runtime_checkable
class RecordMemo(Protocol):
    """Where a bulk lookup keeps and finds its answers per id (a :class:`~litfetch_df.Session`).

    ``kind`` names the lookup and everything that shapes its answer (service,
    fields asked for); ``key`` is the id in the lookup's comparison form.
    """

    def recall_record(self, kind: str, key: str) -> Recalled | None:
        """Return the live stored answer about ``key``, or ``None`` when it must be asked."""
        ...

    def keep_record(self, kind: str, key: str, value: Any, *, secrets: Sequence[str] = ()) -> None:
        """Store what the service said about ``key`` (``None``: no such id)."""
        ...


def can_hold(http: object) -> TypeGuard[HeldAnswers]:
    """Whether ``http`` can say what it holds without asking (:class:`HeldAnswers`)."""
    return offers(http, "held")


def keeps_records(memo: object) -> TypeGuard[RecordMemo]:
    """Whether ``memo`` keeps a bulk lookup's answers per id (:class:`RecordMemo`)."""
    return offers(memo, "recall_record", "keep_record")
