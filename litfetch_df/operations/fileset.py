"""The file-set: list an article's files across sources, and download one of them.

``Session.list_files`` / ``Session.fetch_file`` / ``Session.fetch_file_to``
delegate here with the session as ``http``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import httpx

from ..files import PDF, Blob, File, FileKind, Saved
from ..ids import ArticleIds
from ..sources.common import failure_level, file_head_check
from ..sources.landing import is_landing_page
from ..store.atomic import write_atomic
from ..wire.http import RETRYABLE_STATUSES, Http, Rate, get_logger
from ..wire.transfer import Downloaded, NotServed, can_download
from .tried import Tried, Watched
from .types import FileSource

__all__ = [
    "Listing",
    "bulk_first_file_sources",
    "default_file_sources",
    "fetch_file",
    "fetch_file_to",
    "list_files",
    "list_files_tried",
    "merge_listings",
    "sources_for_kind",
]

log = get_logger(__name__)


def default_file_sources() -> tuple[FileSource, ...]:
    """Return the default file sources, in order.

    PMC OA bucket, Unpaywall, Semantic Scholar, Crossref TDM links, Springer
    Meta. Each is a no-op for an article it has no usable id (or credential) for.
    All but the PMC OA bucket list body renditions only (their ``kinds``).
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


def bulk_first_file_sources() -> tuple[FileSource, ...]:
    """Return the file sources a frame lists with: the defaults, OpenAlex before Unpaywall.

    The same sources as :func:`default_file_sources`, plus
    :class:`~litfetch_df.sources.openalex.OpenAlexFileSource` (the best-OA PDF
    from the works the frame's bulk filter fetched, a hundred DOIs a request),
    with Unpaywall asked only for the DOIs OpenAlex does not know.
    """
    from ..sources.openalex import OpenAlexFileSource
    from ..sources.unpaywall import UnpaywallFileSource

    out: list[FileSource] = []
    for source in default_file_sources():
        if type(source) is UnpaywallFileSource:
            out.append(OpenAlexFileSource())
            out.append(UnpaywallFileSource(after_openalex=True))
        else:
            out.append(source)
    return tuple(out)


async def _list_one(
    source: FileSource,
    http: Http,
    article_ids: ArticleIds,
    credentials: Mapping[str, object] | None,
) -> tuple[tuple[File, ...], Tried]:
    watched = Watched(http)
    try:
        files = tuple(await source.list_files(article_ids, credentials=credentials, http=watched))
    except httpx.HTTPError as exc:
        # One host failing must not cost the files the others found.
        log.log(failure_level(exc), "file source %s failed: %s", source.name, type(exc).__name__)
        return (), watched.tried(source.name, False, exc)
    return files, watched.tried(source.name, bool(files))


def sources_for_kind(
    sources: Sequence[FileSource], kind: FileKind | None
) -> tuple[FileSource, ...]:
    """Return the sources that can list files of ``kind`` (all of them for ``kind=None``).

    A source says what it can list with a ``kinds`` attribute (a set of
    :class:`FileKind`); one without it is asked for every kind. So a listing
    of supplementary material never asks Unpaywall, Semantic Scholar or
    Crossref, which only know body renditions.
    """
    if kind is None:
        return tuple(sources)
    return tuple(s for s in sources if kind in getattr(s, "kinds", frozenset(FileKind)))


def merge_listings(listings: Sequence[tuple[File, ...]]) -> tuple[File, ...]:
    """Return the listings' files with each URL once, naming every source that listed it.

    Listings are in source order; the first listing of a URL is kept (its
    ``source`` fetches it) and later sources' names go to ``also_listed_by``.
    Files without a URL are kept once each. A PDF whose URL is a DOI resolver
    or a landing page is dropped (logged): it would download HTML.
    """
    merged: dict[object, File] = {}
    for files in listings:
        for file in files:
            if file.media_type == PDF and file.uri is not None and is_landing_page(file.uri):
                log.debug("%s listed a landing page as a PDF; not listed", file.source)
                continue
            key: object = ("uri", file.uri) if file.uri is not None else file
            kept = merged.get(key)
            if kept is None:
                merged[key] = file
            elif file.source not in kept.listed_by:
                also = (*kept.also_listed_by, file.source)
                merged[key] = dataclasses.replace(kept, also_listed_by=also)
    return tuple(merged.values())


@dataclasses.dataclass(frozen=True, slots=True)
class Listing:
    """An article's file-set and what each source asked did (:class:`Tried`, in source order)."""

    files: tuple[File, ...]
    tried: tuple[Tried, ...]

    @property
    def given_up(self) -> tuple[Tried, ...]:
        """The sources given up: their files may be missing from :attr:`files`."""
        return tuple(t for t in self.tried if t.given_up)


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
    each source's own order, each URL once with every source that listed it
    (:func:`merge_listings`). ``kind`` asks only the sources that can list
    that kind (:func:`sources_for_kind`) and keeps only files of that kind. A
    source failing with an HTTP error is logged and contributes nothing
    (:func:`list_files_tried` says which).
    """
    listing = await list_files_tried(
        http, article_ids, sources=sources, kind=kind, credentials=credentials
    )
    return listing.files


async def list_files_tried(
    http: Http,
    article_ids: ArticleIds,
    *,
    sources: Sequence[FileSource] | None = None,
    kind: FileKind | None = None,
    credentials: Mapping[str, object] | None = None,
    only: Collection[str] | None = None,
    known: Sequence[File] = (),
) -> Listing:
    """:func:`list_files`, also telling what each source did (a :class:`Listing`).

    ``only`` asks just the sources of those names (say, the ones an earlier
    call gave up) and takes every other source's files from ``known`` (that
    call's file-set): the result is the file-set a call asking every source
    would have given, with the same order and ``also_listed_by``. A source
    asked again and given up again keeps its files from ``known``.
    """
    chosen = sources_for_kind(
        tuple(sources) if sources is not None else default_file_sources(), kind
    )
    asked = [i for i, s in enumerate(chosen) if only is None or s.name in only]
    # Let every source finish before surfacing an unexpected error, so none is left running.
    results = await asyncio.gather(
        *(_list_one(chosen[i], http, article_ids, credentials) for i in asked),
        return_exceptions=True,
    )
    fresh: dict[int, tuple[tuple[File, ...], Tried]] = {}
    for i, result in zip(asked, results, strict=True):
        if isinstance(result, BaseException):
            raise result
        files, tried = result
        fresh[i] = (tuple(f for f in files if kind is None or f.kind is kind), tried)
    per_source: list[tuple[File, ...]] = []
    tried_all: list[Tried] = []
    for i, source in enumerate(chosen):
        if i in fresh:
            files, tried = fresh[i]
            if tried.given_up:
                files = (*_listed_by(known, source.name), *files)
            tried_all.append(tried)
        else:
            files = _listed_by(known, source.name)
        per_source.append(files)
    return Listing(merge_listings(per_source), tuple(tried_all))


def _listed_by(files: Sequence[File], source: str) -> tuple[File, ...]:
    """``source``'s own listing as far as merged ``files`` tell it (see :func:`list_files_tried`).

    A file kept from an earlier source stands in for this source's own entry
    of the same URL: :func:`merge_listings` then only adds this source's name
    to it, as it would have with the original entry.
    """
    out: list[File] = []
    for file in files:
        if source in file.listed_by:
            out.append(dataclasses.replace(file, source=source, also_listed_by=()))
    return tuple(out)


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
    chosen = tuple(sources) if sources is not None else bulk_first_file_sources()
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


async def fetch_file_to(
    http: Http,
    file: File,
    path: str | Path,
    *,
    sources: Sequence[FileSource] | None = None,
    credentials: Mapping[str, object] | None = None,
) -> Saved | None:
    """Download ``file`` into ``path`` through the first source named ``file.source``.

    Streamed to disk when both can: ``http`` a
    :class:`~litfetch_df.wire.transfer.Downloader` (a :class:`~litfetch_df.Session`
    is) and the source able to name the request (a ``download_url(file, *,
    credentials)`` method, which every bundled file source has). The answer
    is checked against the type it was listed as on its first KiB, and
    ``path`` changes only when the whole of it arrived. Otherwise the source's
    own ``fetch_file`` is awaited and its bytes written atomically.

    Returns :class:`~litfetch_df.Saved`, or ``None`` when no source claims the
    file, the source declines, the final status is not 200, or the download
    fails with an HTTP error (logged). Raises
    :class:`~litfetch_df.sources.common.UnexpectedFileType` for an answer that
    is not of the listed type (a login page for a PDF), as :func:`fetch_file` does.
    :func:`download_file_to` says why instead of returning ``None`` for a status.
    """
    try:
        return await download_file_to(http, file, path, sources=sources, credentials=credentials)
    except NotServed as exc:
        log.info("a %s download gave %s", file.source, exc)
        return None


async def download_file_to(
    http: Http,
    file: File,
    path: str | Path,
    *,
    sources: Sequence[FileSource] | None = None,
    credentials: Mapping[str, object] | None = None,
) -> Saved | None:
    """Like :func:`fetch_file_to`, but a final status other than 200 raises :class:`NotServed`.

    ``NotServed`` names the status and the host (``HTTP 404 from
    files.example.org``), so a row can tell "no such file" from "never
    tried". A status the session retried and gave up on (429, 5xx) still
    returns ``None``: the session recorded that failure, and a re-run asks again.
    """
    target = Path(path)
    chosen = tuple(sources) if sources is not None else bulk_first_file_sources()
    source = next((s for s in chosen if s.name == file.source), None)
    if source is None:
        log.debug("no file source is named %r", file.source)
        return None
    name_url = getattr(source, "download_url", None)
    try:
        if callable(name_url) and can_download(http):
            url = name_url(file, credentials=credentials)
            if url is None:
                return None
            done = await http.download_to(
                url,
                target,
                head_check=file_head_check(file.media_type),
                rate=Rate.DEFAULT,
                follow_redirects=True,
            )
            if done.path is None or done.sha256 is None:
                _not_served(done, url)
                return None
            return Saved(file=file, path=str(done.path), size=done.size, sha256=done.sha256)
        blob = await source.fetch_file(file, credentials=credentials, http=http)
    except httpx.HTTPError as exc:
        level = failure_level(exc)
        log.log(level, "fetching a %s file failed: %s", file.source, type(exc).__name__)
        return None
    if blob is None:
        return None
    await asyncio.to_thread(write_atomic, target, blob.content)
    digest = hashlib.sha256(blob.content).hexdigest()
    return Saved(file=file, path=str(target), size=len(blob.content), sha256=digest)


# Redirect statuses: one left as the final answer had no Location that could be followed.
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _not_served(done: Downloaded, url: str) -> None:
    """Raise :class:`NotServed` for a final status that is a verdict on the file."""
    status = done.status_code
    if status in RETRYABLE_STATUSES:
        return  # given up after every retry: the session's failure says so (abandoned)
    host = done.host or httpx.URL(url).host
    if status in _REDIRECTS:
        detail = " without a Location to follow"
    elif status == 204:
        detail = " (no content)"
    elif status < 300:
        detail = " (not 200)"
    else:
        detail = ""
    raise NotServed(status, host, detail)
