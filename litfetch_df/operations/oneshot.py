"""One-shot conveniences: each opens an ephemeral :class:`Session` for a single call.

Hold a :class:`Session` instead when making more than one call: it pools the
connection and paces every host across calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from ..files import Blob, File, FileKind
from ..ids import ArticleIds
from ..metadata import Related, SourceMetadata
from ..session import Session

if TYPE_CHECKING:
    from .types import Fetcher, FileSource, Resolver

__all__ = ["fetch_body", "fetch_file", "list_files", "related_ids", "resolve_access"]


async def fetch_body(
    article_ids: ArticleIds,
    *,
    resolver: Resolver | None = None,
    fetchers: Sequence[Fetcher] | None = None,
    credentials: Mapping[str, object] | None = None,
) -> Blob | None:
    """Walk the fetcher ladder in a fresh session; return the first body, or ``None``."""
    async with Session() as session:
        return await session.fetch_body(
            article_ids, resolver=resolver, fetchers=fetchers, credentials=credentials
        )


async def list_files(
    article_ids: ArticleIds,
    *,
    sources: Sequence[FileSource] | None = None,
    kind: FileKind | None = None,
    credentials: Mapping[str, object] | None = None,
) -> tuple[File, ...]:
    """Enumerate the article's file-set in a fresh session."""
    async with Session() as session:
        return await session.list_files(
            article_ids, sources=sources, kind=kind, credentials=credentials
        )


async def fetch_file(
    file: File,
    *,
    sources: Sequence[FileSource] | None = None,
    credentials: Mapping[str, object] | None = None,
) -> Blob | None:
    """Download one :class:`File` in a fresh session; ``None`` when no source claims it."""
    async with Session() as session:
        return await session.fetch_file(file, sources=sources, credentials=credentials)


async def resolve_access(article_ids: ArticleIds, *, email: str | None = None) -> SourceMetadata:
    """Return Unpaywall's licence / OA status for the DOI, in a fresh session."""
    async with Session(contact=email) as session:
        return await session.resolve_access(article_ids, email=email)


async def related_ids(article_ids: ArticleIds) -> tuple[Related, ...]:
    """Return preprint / published counterparts of the article, in a fresh session."""
    async with Session() as session:
        return await session.related_ids(article_ids)
