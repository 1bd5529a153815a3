"""The file-set: list an article's files across sources, and download one of them.

``Session.list_files`` / ``Session.fetch_file`` delegate here with the session
as ``http``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import httpx

from .._http import Http, get_logger
from ..files import Blob, File, FileKind
from ..ids import ArticleIds
from ..sources._common import failure_level
from .types import FileSource

__all__ = ["default_file_sources", "fetch_file", "list_files"]

log = get_logger(__name__)


def default_file_sources() -> tuple[FileSource, ...]:
    """Return the default file sources, in order.

    PMC OA bucket, Unpaywall, Semantic Scholar, Crossref TDM links, Springer
    Meta. Each is a no-op for an article it has no usable id (or credential) for.
    """
    # Imported here so building the module graph never drags in every source.
    from ..sources.crossref import CrossrefFileSource
    from ..sources.pmc_oa import PmcOaFetcher
    from ..sources.semantic_scholar import SemanticScholarFileSource
    from ..sources.springer import SpringerFileSource
    from ..sources.unpaywall import UnpaywallFileSource

    return (
        PmcOaFetcher(),
        UnpaywallFileSource(),
        SemanticScholarFileSource(),
        CrossrefFileSource(),
        SpringerFileSource(),
    )


async def _list_one(
    source: FileSource,
    http: Http,
    article_ids: ArticleIds,
    credentials: Mapping[str, object] | None,
) -> tuple[File, ...]:
    try:
        return tuple(await source.list_files(article_ids, credentials=credentials, http=http))
    except httpx.HTTPError as exc:
        # One host failing must not cost the files the others found.
        log.log(failure_level(exc), "file source %s failed: %s", source.name, type(exc).__name__)
        return ()


async def list_files(
    http: Http,
    article_ids: ArticleIds,
    *,
    sources: Sequence[FileSource] | None = None,
    kind: FileKind | None = None,
    credentials: Mapping[str, object] | None = None,
) -> tuple[File, ...]:
    """Return the union of every source's files for the article.

    The sources (default :func:`default_file_sources`) are different hosts, so
    they are asked concurrently; the result is still in source order, then in
    each source's own order, with repeated Files kept once. ``kind`` keeps only
    files of that kind. A source failing with an HTTP error is logged and
    contributes nothing.
    """
    chosen = tuple(sources) if sources is not None else default_file_sources()
    # Let every source finish before surfacing an unexpected error, so none is left running.
    results = await asyncio.gather(
        *(_list_one(source, http, article_ids, credentials) for source in chosen),
        return_exceptions=True,
    )
    per_source: list[tuple[File, ...]] = []
    for result in results:
        if isinstance(result, BaseException):
            raise result
        per_source.append(result)
    seen: set[File] = set()
    union: list[File] = []
    for files in per_source:
        for file in files:
            if kind is not None and file.kind is not kind:
                continue
            if file in seen:
                continue
            seen.add(file)
            union.append(file)
    return tuple(union)


async def fetch_file(
    http: Http,
    file: File,
    *,
    sources: Sequence[FileSource] | None = None,
    credentials: Mapping[str, object] | None = None,
) -> Blob | None:
    """Download ``file`` through the first source whose ``name`` is ``file.source``.

    Returns the :class:`Blob`, or ``None`` when no source claims the file, the
    source declines, or the download fails with an HTTP error (logged).
    """
    chosen = tuple(sources) if sources is not None else default_file_sources()
    for source in chosen:
        if source.name != file.source:
            continue
        try:
            return await source.fetch_file(file, credentials=credentials, http=http)
        except httpx.HTTPError as exc:
            log.log(
                failure_level(exc), "fetching a %s file failed: %s", file.source, type(exc).__name__
            )
            return None
    log.debug("no file source is named %r", file.source)
    return None
