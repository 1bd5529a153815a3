"""bioRxiv / medRxiv: the details API (preprint versions, published DOI) and the JATS host.

The details API is an ordinary keyless JSON API and goes through the session.
The JATS files sit behind Cloudflare's bot protection, which turns away
ordinary Python TLS fingerprints, so :class:`BiorxivFetcher` downloads them
with a pluggable callable; by default one built on ``curl_cffi`` browser
impersonation (the optional ``biorxiv`` extra), imported only when needed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from ..files import JATS_XML, Blob, File, FileKind
from ..ids import ArticleIds, doi_path, is_preprint_doi, parse_doi
from ..safexml.parse import root_name, safe_root_name
from ..wire.http import Http, Rate, get_logger, redact_url
from .common import fetch_json_object, web_url

__all__ = [
    "BIORXIV_DETAILS_URL",
    "SERVERS",
    "BiorxivFetcher",
    "Download",
    "biorxiv_published_doi",
    "fetch_biorxiv_collection",
    "latest_jatsxml",
    "latest_published",
]

log = get_logger(__name__)

BIORXIV_DETAILS_URL: Final = "https://api.biorxiv.org/details/"
"""Base of the details endpoint: ``<base><server>/<doi-path>``."""

SERVERS: Final = ("biorxiv", "medrxiv")
"""The preprint servers, in the order they are asked."""

_NAME: Final = "biorxiv"
_JATS_HOSTS: Final = ("biorxiv.org", "medrxiv.org")

Download = Callable[[str], Awaitable[bytes | None]]
"""Fetch a JATS URL's bytes (``None`` when it cannot)."""


def _preprint_path(doi: str) -> str | None:
    """Return the path-encoded DOI when it is a valid preprint DOI, else ``None``."""
    try:
        canonical = parse_doi(doi)
        path = doi_path(canonical)
    except ValueError:
        log.warning("bioRxiv: not looking up an invalid DOI %r", doi)
        return None
    return path if is_preprint_doi(canonical) else None


async def fetch_biorxiv_collection(
    http: Http, doi: str, server: str
) -> list[dict[str, Any]] | None:
    """Return the details API's ``collection`` (one entry per version, oldest first) on ``server``.

    ``None`` without a request for a DOI that is invalid, escapes its path or
    is not a bioRxiv/medRxiv preprint DOI (``10.1101/``, ``10.64898/``); also
    ``None`` for a non-200, a body that is not JSON, an empty collection ("no
    posts found") and a transport failure.
    """
    if server not in SERVERS:
        raise ValueError(f"unknown preprint server: {server!r}")
    path = _preprint_path(doi)
    if path is None:
        return None
    send = http.get(f"{BIORXIV_DETAILS_URL}{server}/{path}", rate=Rate.DEFAULT)
    body = await fetch_json_object(send, f"{server} details for {doi}", logger=log)
    if body is None:
        return None
    collection = body.get("collection")
    if not isinstance(collection, list):
        return None
    entries = [entry for entry in collection if isinstance(entry, dict)]
    return entries or None


def latest_jatsxml(collection: list[dict[str, Any]]) -> str | None:
    """Return the latest version's ``jatsxml`` URL when it is on a bioRxiv/medRxiv host."""
    if not collection:
        return None
    url = collection[-1].get("jatsxml")
    return url.strip() if isinstance(url, str) and _is_jats_url(url) else None


def latest_published(collection: list[dict[str, Any]]) -> str | None:
    """Return the published version's DOI from the latest entry.

    ``None`` when it is ``"NA"``, blank or not a valid DOI.
    """
    if not collection:
        return None
    value = collection[-1].get("published")
    if not isinstance(value, str) or value.strip().upper() in ("", "NA"):
        return None
    try:
        return parse_doi(value)
    except ValueError:
        return None


async def biorxiv_published_doi(http: Http, doi: str, *, stop_at_known: bool = False) -> str | None:
    """Return the DOI of the journal version of preprint ``doi``, or ``None``.

    Asks ``biorxiv`` first, then ``medrxiv``; the first published DOI wins.
    With ``stop_at_known`` a server that lists the DOI ends the search even
    when it names no published version (a preprint is posted on one server).
    ``None`` (without a request) for a DOI that is not a preprint DOI.
    """
    if _preprint_path(doi) is None:
        return None
    for server in SERVERS:
        collection = await fetch_biorxiv_collection(http, doi, server)
        published = latest_published(collection) if collection else None
        if published is not None or (stop_at_known and collection):
            return published
    return None


def _is_jats_url(url: object) -> bool:
    parsed = web_url(url)
    host = parsed.host.lower() if parsed is not None else ""
    return any(host == h or host.endswith("." + h) for h in _JATS_HOSTS)


def _curl_cffi_download(impersonate: str) -> Download | None:
    """Return a browser-impersonating download callable, or ``None`` if curl_cffi is absent."""
    try:
        from curl_cffi.requests import AsyncSession
    except ImportError:
        return None

    async def download(url: str) -> bytes | None:
        async with AsyncSession(impersonate=impersonate, timeout=30) as client:
            response = await client.get(url)
            if response.status_code != 200:
                log.info("bioRxiv JATS %s gave HTTP %d", redact_url(url), response.status_code)
                return None
            content = response.content
            return content if isinstance(content, bytes) else None

    return download


class BiorxivFetcher:
    """Body fetcher ``biorxiv`` for bioRxiv / medRxiv preprints (not on the default ladder).

    Finds the latest version's JATS through the details API, then downloads
    it with ``download`` (an async ``url -> bytes | None``). By default that is
    a ``curl_cffi`` client impersonating ``impersonate`` (a browser profile);
    when ``curl_cffi`` is not installed the fetcher declines with one log line.
    """

    name: str = _NAME
    requires: frozenset[str] = frozenset({"doi"})

    def __init__(self, *, impersonate: str = "chrome", download: Download | None = None) -> None:
        self.impersonate = impersonate
        self._download = download
        self._warned = False

    def __repr__(self) -> str:
        return f"BiorxivFetcher(impersonate={self.impersonate!r})"

    def _downloader(self) -> Download | None:
        if self._download is None:
            self._download = _curl_cffi_download(self.impersonate)
            if self._download is None and not self._warned:
                self._warned = True
                log.warning(
                    "BiorxivFetcher declines: curl_cffi is not installed "
                    "(pip install 'litfetch_df[biorxiv]' to fetch bioRxiv/medRxiv JATS)"
                )
        return self._download

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Return the latest version's JATS as an ``application/jats+xml`` Blob, or ``None``.

        Declines for a DOI that is not a preprint DOI, when neither server
        lists a JATS URL, when the download fails or is not a JATS ``article``,
        and (without a request) when no downloader is available.
        """
        doi = article_ids.doi
        if doi is None or _preprint_path(doi) is None:
            return None
        download = self._downloader()
        if download is None:
            return None
        for server in SERVERS:
            collection = await fetch_biorxiv_collection(http, doi, server)
            url = latest_jatsxml(collection) if collection else None
            if url is None:
                continue
            try:
                content = await download(url)
            except Exception as exc:  # a third-party client: any failure is a decline
                log.warning("bioRxiv JATS %s failed: %s", redact_url(url), type(exc).__name__)
                return None
            if not content or root_name(content) != "article" or safe_root_name(content) is None:
                log.info("bioRxiv JATS %s is not a JATS article", redact_url(url))
                return None
            file = File(kind=FileKind.BODY, source=_NAME, media_type=JATS_XML, uri=url)
            return Blob(file=file, content=content)
        return None
