"""Springer Nature: the OpenAccess JATS API (body) and the Meta API (PDF link + OA flag).

Both APIs answer only for Springer Nature's own articles, so each source asks
only about DOIs :mod:`litfetch_df.publishers` attributes to Springer Nature
(any other DOI is simply not this rung's: no request, nothing failed).

Both APIs take the caller's key as the ``api_key`` query parameter, and each
product has its own key (``springer_api_key`` for OpenAccess,
``springer_meta_api_key`` for Meta). The key is sent only in that request: it
is never logged (the session redacts request URLs), never recorded in a
``File.uri``, never put in an exception message, and never sent to the PDF
host a Meta record points at.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import httpx

from ..files import INSTITUTIONAL, JATS_XML, PDF, Blob, File, FileKind
from ..ids import ArticleIds, parse_doi
from ..metadata import SourceMetadata
from ..publishers import Publisher, by_prefix, publisher_of
from ..safexml.parse import XmlError, local_name, parse_xml
from ..wire.http import Http, Rate, get_logger, url_with_query
from .common import (
    GetRequest,
    download_file,
    download_url,
    fetch_json_object,
    fetch_ok,
    usable_credential,
)
from .crossref import held_crossref_work

__all__ = [
    "SPRINGER_META_URL",
    "SPRINGER_OA_JATS_URL",
    "SpringerFetcher",
    "SpringerFileSource",
    "extract_article",
    "springer_meta_access",
    "springer_meta_files",
    "springer_meta_request",
    "springer_oa_request",
    "springer_serves",
]

log = get_logger(__name__)

SPRINGER_OA_JATS_URL: Final = "https://api.springernature.com/openaccess/jats"
"""Springer Nature OpenAccess JATS endpoint."""

SPRINGER_META_URL: Final = "https://api.springernature.com/meta/v2/json"
"""Springer Nature Meta API v2 (JSON) endpoint."""

_ARTICLE_OPEN = re.compile(rb"<article[\s>]")
_ARTICLE_CLOSE = b"</article>"
_XML_DECL = b"<?xml version='1.0' encoding='UTF-8'?>\n"


def _doi(article_ids: ArticleIds, source: str) -> str | None:
    if article_ids.doi is None:
        return None
    try:
        return parse_doi(article_ids.doi)
    except ValueError as exc:
        log.warning("%s: declined an invalid DOI: %s", source, exc)
        return None


def springer_serves(doi: str) -> bool:
    """Return whether a parsed ``doi`` is one Springer Nature's APIs can answer for.

    True for DOIs under a prefix registered to Springer Nature (see
    :mod:`litfetch_df.publishers`); the bundled sources ask about no other DOI.
    """
    return by_prefix(doi) is Publisher.SPRINGER_NATURE


async def _served(article_ids: ArticleIds, source: str, http: Http) -> str | None:
    """The bundle's parsed DOI when Springer Nature can answer for it, else ``None``.

    A Crossref record the run already holds for the DOI settles it (its
    ``member`` or ``publisher``: a journal that changed hands keeps its old
    prefix); otherwise the prefix does. Looking costs no request.
    """
    doi = _doi(article_ids, source)
    if doi is None:
        return None
    record = await held_crossref_work(http, doi)
    if publisher_of(doi, record) is not Publisher.SPRINGER_NATURE:
        return None
    return doi


def extract_article(envelope: bytes) -> bytes | None:
    """Cut the JATS ``<article>`` out of a Springer OpenAccess answer, without parsing it.

    The answer's DOCTYPE declares parameter entities, which a hardened parser
    refuses, so the article is sliced out as bytes: from the first ``<article``
    followed by whitespace or ``>`` (``<article-meta>`` cannot match) through
    the last ``</article>``, with a fresh XML declaration in front. Returns
    ``None`` when there is no complete article element.
    """
    start = _ARTICLE_OPEN.search(envelope)
    if start is None:
        return None
    end = envelope.rfind(_ARTICLE_CLOSE)
    if end < start.start():
        return None
    return _XML_DECL + envelope[start.start() : end + len(_ARTICLE_CLOSE)]


class SpringerFetcher:
    """Body fetcher for Springer Nature's OpenAccess JATS API.

    Needs ``credentials['springer_api_key']`` (an OpenAccess-product key);
    without a usable key, or for a DOI that is not Springer Nature's, it makes
    no request and returns ``None``. A hit is the
    sliced-out ``<article>`` with a ``<body>``, as ``application/jats+xml``;
    ``File.uri`` is the query URL without the key.
    """

    name: str = "springer_oa"
    requires: frozenset[str] = frozenset({"doi"})

    def __repr__(self) -> str:
        return "SpringerFetcher()"

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Return the open-access JATS article for the DOI, or ``None``."""
        key = usable_credential(credentials, "springer_api_key")
        if key is None:
            return None
        doi = await _served(article_ids, self.name, http)
        if doi is None:
            return None
        # The recorded location reproduces the request minus the key.
        uri = url_with_query(SPRINGER_OA_JATS_URL, {"q": f"doi:{doi}"})
        send = springer_oa_request(doi, key).send(http)
        response = await fetch_ok(send, f"{self.name}: {uri}", logger=log)
        if response is None:
            return None
        article = extract_article(response.content)
        if article is None or b"<body" not in article:
            log.debug("springer_oa: no open-access article with a body for %s", uri)
            return None
        try:
            # The slice must stand alone as a document; an entity the envelope
            # declared (or anything else that does not parse) is refused here.
            root = parse_xml(article)
        except XmlError as exc:
            log.warning("springer_oa: unusable article XML for %s: %s", uri, exc)
            return None
        if local_name(root) != "article":
            return None
        file = File(kind=FileKind.BODY, source=self.name, media_type=JATS_XML, uri=uri)
        return Blob(file=file, content=article)


class SpringerFileSource:
    """File source for the Springer openURL PDF, found through the Meta API.

    Needs ``credentials['springer_meta_api_key']`` (a Meta-product key) and a
    Springer Nature DOI; without either it makes no request and returns ``()``. Lists at most
    one ``BODY`` PDF; a subscription article's file carries
    ``credential_key=INSTITUTIONAL``. ``fetch_file`` follows redirects and sends
    no key.
    """

    name: str = "springer"

    def __repr__(self) -> str:
        return "SpringerFileSource()"

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> tuple[File, ...]:
        """Return the article's PDF as a one-file tuple, or ``()``."""
        key = usable_credential(credentials, "springer_meta_api_key")
        if key is None:
            return ()
        doi = await _served(article_ids, self.name, http)
        if doi is None:
            return ()
        request = springer_meta_request(doi, key)
        # The URL as logged: the request minus the key.
        shown = url_with_query(SPRINGER_META_URL, {"q": f"doi:{doi}"})
        data = await fetch_json_object(request.send(http), f"{self.name}: {shown}", logger=log)
        if data is None:
            return ()
        record = _first_record(data)
        if record is None:
            log.debug("springer: no record for %s", shown)
            return ()
        return springer_meta_files(record, api_key=key, source=self.name)

    async def fetch_file(
        self,
        file: File,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Download ``file`` (following redirects, no key sent); ``None`` unless 200."""
        return await download_file(http, file)

    def download_url(
        self, file: File, *, credentials: Mapping[str, object] | None = None
    ) -> str | None:
        """Return the URL that downloads ``file`` (redirects followed, no key), or ``None``."""
        return download_url(file)


def springer_oa_request(doi: str, api_key: str) -> GetRequest:
    """Return the per-article OpenAccess JATS query for a parsed ``doi``: ``q=doi:<doi>``.

    Paced at :attr:`Rate.DEFAULT`; the key travels only in ``api_key``.
    """
    return GetRequest(
        url=SPRINGER_OA_JATS_URL,
        params={"q": f"doi:{doi}", "api_key": api_key},
        headers=None,
        rate=Rate.DEFAULT,
    )


def springer_meta_request(doi: str, api_key: str) -> GetRequest:
    """Return the per-article Meta query for a parsed ``doi``: ``q=doi:<doi>&api_key=<key>``.

    Paced at :attr:`Rate.DEFAULT`. The key travels only in this request's
    ``api_key`` parameter (the session redacts it from every log line).
    """
    return GetRequest(
        url=SPRINGER_META_URL,
        params={"q": f"doi:{doi}", "api_key": api_key},
        headers=None,
        rate=Rate.DEFAULT,
    )


def springer_meta_files(
    record: Mapping[str, Any], *, api_key: str | None = None, source: str = "springer"
) -> tuple[File, ...]:
    """Return a Meta API record's openURL PDF as a one-file tuple, or ``()``.

    The first ``url[]`` entry with ``format == "pdf"`` and an http(s) ``value``
    becomes a BODY ``application/pdf`` :class:`File` whose ``source`` is
    ``source``; ``credential_key`` is ``None`` when ``openaccess`` is the
    string ``"true"``, else :data:`INSTITUTIONAL`. No such entry gives ``()``,
    and so does a link that contains ``api_key`` (the key the request used), so
    an echoed key can never become a stored URI.
    """
    url = _pdf_url(record)
    if url is None:
        return ()
    if api_key and api_key in url:
        # Never let a key echoed by the API into a link become a stored URI.
        log.warning("springer: a PDF link echoed the API key; not listed")
        return ()
    open_access = record.get("openaccess") == "true"
    return (
        File(
            kind=FileKind.BODY,
            source=source,
            media_type=PDF,
            uri=url,
            credential_key=None if open_access else INSTITUTIONAL,
        ),
    )


def _first_record(data: Mapping[str, Any]) -> dict[str, Any] | None:
    records = data.get("records")
    if not isinstance(records, list) or not records or not isinstance(records[0], dict):
        return None
    return records[0]


def _pdf_url(record: Mapping[str, Any]) -> str | None:
    urls = record.get("url")
    if not isinstance(urls, list):
        return None
    for entry in urls:
        if not isinstance(entry, dict) or entry.get("format") != "pdf":
            continue
        value = entry.get("value")
        if isinstance(value, str) and value.strip():
            url = value.strip()
            try:
                scheme = httpx.URL(url).scheme
            except httpx.InvalidURL:
                continue
            if scheme in {"http", "https"}:
                return url
    return None


def springer_meta_access(record: Mapping[str, Any]) -> SourceMetadata:
    """Return the access status a Meta API record states, ``basis='springer'``.

    ``openaccess`` is the string ``"true"`` for open access (``access =
    "open-access"``) and ``"false"`` for a subscription article (``access =
    "closed"``); anything else states nothing. The record names no licence.
    """
    flag = record.get("openaccess")
    if flag == "true":
        return SourceMetadata(access="open-access", basis="springer")
    if flag == "false":
        return SourceMetadata(access="closed", basis="springer")
    return SourceMetadata()
