"""The protocols third-party code implements: fetchers, file sources, resolvers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from ..files import Blob, File
from ..ids import ArticleIds
from ..wire.http import Http

__all__ = ["BatchResolver", "Fetcher", "FileSource", "Resolver"]


@runtime_checkable
class Fetcher(Protocol):
    """One rung of the body ladder.

    ``requires`` names the :class:`ArticleIds` fields it needs; ``fetch``
    returns the body :class:`Blob` or ``None`` when this source cannot serve it.
    """

    name: str
    requires: frozenset[str]

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Return the article body, or ``None``."""
        ...


@runtime_checkable
class FileSource(Protocol):
    """A source of file-set entries (body renditions, supplementary material)."""

    name: str

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> tuple[File, ...]:
        """Return this source's files for the article (empty when none)."""
        ...

    async def fetch_file(
        self,
        file: File,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Download one file this source listed, or return ``None``."""
        ...


Resolver = Callable[[ArticleIds, Http], Awaitable[ArticleIds]]
"""Enrich one bundle: ``await resolver(ids, http)`` returns ``ids`` merged with what it found."""

BatchResolver = Callable[
    [Sequence[ArticleIds], Http], Awaitable[tuple[Sequence[ArticleIds], set[int]]]
]
"""Enrich a sequence in one pass; returns the aligned results and the abandoned indices."""
