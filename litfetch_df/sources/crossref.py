"""Crossref works API: one DOI-keyed work record, read by three consumers.

The Elsevier link locator, the TDM file source (:class:`CrossrefFileSource`)
and the relations lookup all call :func:`fetch_crossref_work`, which always
issues the identical request for a DOI, so inside one :meth:`Session.scope`
the record is fetched once. The mapping from a record to files
(:func:`crossref_tdm_files`) and to relations (:func:`crossref_relations`) is
kept apart from the request so bulk lookups (``/works?filter=doi:…``) can reuse
it on each item.

This module also holds the small helpers the plain-URL file sources share:
:func:`json_object`, :func:`usable_credential`, :func:`is_web_url` and
:func:`download_file`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx

from .._http import Http, Rate, get_logger, redact_url
from ..files import Blob, File, FileKind
from ..ids import ArticleIds, doi_key, doi_path, parse_doi
from ..metadata import Related, RelationType

__all__ = [
    "CROSSREF_WORKS_URL",
    "CrossrefFileSource",
    "GetRequest",
    "crossref_relations",
    "crossref_tdm_files",
    "crossref_work_request",
    "crossref_work_url",
    "download_file",
    "fetch_crossref_work",
    "is_web_url",
    "json_object",
    "usable_credential",
]

log = get_logger(__name__)

CROSSREF_WORKS_URL: Final = "https://api.crossref.org/works/"
"""Base of the single-work endpoint; the path-encoded DOI follows it."""

_NAME: Final = "crossref_tdm"

# Crossref relation type -> how the related DOI relates to the work asked about.
_RELATIONS: Final[Mapping[str, RelationType]] = {
    "has-preprint": RelationType.PREPRINT,
    "is-preprint-of": RelationType.PUBLISHED,
}


# -- shared helpers ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, eq=False)
class GetRequest:
    """Every part of a GET a per-article source issues: what :meth:`Session.get` receives.

    The request builders (:func:`crossref_work_request`,
    :func:`~.semantic_scholar.s2_paper_request`,
    :func:`~.springer.springer_meta_request`) return one, and the sources send
    exactly it, so a table-level caller can name the very request (its
    :func:`~litfetch_df.session.request_key`) a source is about to make.
    ``params`` and ``headers`` may hold a credential: the repr shows their
    names only.
    """

    url: str
    params: Mapping[str, str | int] | None
    headers: Mapping[str, str] | None
    rate: Rate

    def __repr__(self) -> str:
        params = sorted(self.params or {})
        headers = sorted(self.headers or {})
        return f"GetRequest({self.url!r}, params={params}, headers={headers}, rate={self.rate})"

    async def send(self, http: Http) -> httpx.Response:
        """Issue this GET through ``http`` and return the response (errors propagate)."""
        return await http.get(self.url, params=self.params, headers=self.headers, rate=self.rate)


def json_object(response: httpx.Response) -> dict[str, Any] | None:
    """Return the response body as a JSON object, or ``None`` if it is not one.

    An HTML error page served with 200, a truncated body or a JSON array all
    give ``None``; the caller treats that as a definitive error and declines.
    """
    try:
        data = json.loads(response.content)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both derive from it
        return None
    return data if isinstance(data, dict) else None


def usable_credential(credentials: Mapping[str, object] | None, key: str) -> str | None:
    """Return ``credentials[key]`` stripped, or ``None`` unless it is a non-blank string."""
    if not credentials:
        return None
    value = credentials.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    return value.strip()


def is_web_url(value: object) -> bool:
    """Return whether ``value`` is an absolute ``http``/``https`` URL with a host."""
    if not isinstance(value, str) or not value.strip():
        return False
    try:
        url = httpx.URL(value.strip())
    except (httpx.InvalidURL, TypeError, ValueError):
        return False
    return url.scheme in ("http", "https") and bool(url.host)


async def download_file(http: Http, file: File) -> Blob | None:
    """Download ``file.uri`` (redirects followed, no credential headers) as a :class:`Blob`.

    Returns ``None`` when the file has no usable URL, on any final status
    other than 200, and on a transport failure (logged). The Blob carries the
    very ``file`` it was asked for.
    """
    if file.uri is None or not is_web_url(file.uri):
        return None
    try:
        response = await http.get(file.uri, follow_redirects=True, rate=Rate.DEFAULT)
    except httpx.HTTPError as exc:
        log.warning("download of %s failed: %s", redact_url(file.uri), type(exc).__name__)
        return None
    if response.status_code != 200:
        log.info("download of %s gave HTTP %d", redact_url(file.uri), response.status_code)
        return None
    return Blob(file=file, content=response.content)


# -- the request ---------------------------------------------------------------------------


def crossref_work_url(doi: str) -> str:
    """Return the single-work URL for ``doi``; raises :class:`ValueError` for an unsafe DOI."""
    return CROSSREF_WORKS_URL + doi_path(doi)


def crossref_work_request(doi: str, contact: str | None) -> GetRequest:
    """Return the single-work GET for ``doi``: ``mailto=<contact>`` when a contact is set.

    Paced at :attr:`Rate.CROSSREF`. Raises :class:`ValueError` for an invalid
    or path-escaping DOI.
    """
    return GetRequest(
        url=crossref_work_url(doi),
        params={"mailto": contact} if contact else None,
        headers=None,
        rate=Rate.CROSSREF,
    )


async def fetch_crossref_work(http: Http, doi: str) -> dict[str, Any] | None:
    """Return Crossref's work record (the response's ``message`` object) for ``doi``.

    ``GET https://api.crossref.org/works/<doi>`` with ``mailto=<http.contact>``
    when a contact is set, paced at :attr:`Rate.CROSSREF`. Returns ``None``
    for an invalid or path-escaping DOI (no request is made), a 404 or other
    non-200, a body that is not a JSON object with a ``message`` object, and a
    transport failure after retries.
    """
    try:
        request = crossref_work_request(doi, http.contact)
    except ValueError:
        log.warning("Crossref: not looking up an invalid DOI %r", doi)
        return None
    try:
        response = await request.send(http)
    except httpx.HTTPError as exc:
        log.warning("Crossref lookup for %s failed: %s", doi, type(exc).__name__)
        return None
    if response.status_code == 404:
        log.debug("Crossref has no work for %s", doi)
        return None
    if response.status_code != 200:
        log.warning("Crossref lookup for %s gave HTTP %d", doi, response.status_code)
        return None
    body = json_object(response)
    message = body.get("message") if body is not None else None
    if not isinstance(message, dict):
        log.warning("Crossref answered %s with something that is not a work record", doi)
        return None
    return message


# -- pure mappings -------------------------------------------------------------------------


def crossref_tdm_files(record: Mapping[str, Any]) -> tuple[File, ...]:
    """Return one BODY :class:`File` per text-mining link of a Crossref work record.

    Only ``link[]`` entries whose ``intended-application`` is ``text-mining``
    and whose ``URL`` is an http(s) URL count; ``media_type`` is the link's
    ``content-type`` (``None`` when missing or ``unspecified``). Order follows
    the record; repeated entries appear once.
    """
    links = record.get("link")
    if not isinstance(links, list):
        return ()
    files: list[File] = []
    for link in links:
        if not isinstance(link, dict) or link.get("intended-application") != "text-mining":
            continue
        url = link.get("URL")
        if not is_web_url(url):
            continue
        content_type = link.get("content-type")
        media_type = (
            content_type.strip()
            if isinstance(content_type, str)
            and content_type.strip()
            and content_type.strip() != "unspecified"
            else None
        )
        file = File(kind=FileKind.BODY, source=_NAME, media_type=media_type, uri=str(url).strip())
        if file not in files:
            files.append(file)
    return tuple(files)


def crossref_relations(record: Mapping[str, Any]) -> tuple[Related, ...]:
    """Return the preprint / published relations a Crossref work record asserts.

    ``relation.has-preprint`` entries give :attr:`RelationType.PREPRINT`,
    ``relation.is-preprint-of`` entries :attr:`RelationType.PUBLISHED`. Only
    ``id-type == "doi"`` entries whose id parses as a DOI count (a
    ``https://doi.org/…`` form is normalised); duplicates on (relation,
    case-folded DOI) and self-references are dropped, first seen kept.
    """
    relation = record.get("relation")
    if not isinstance(relation, dict):
        return ()
    own = record.get("DOI")
    own_key = doi_key(own) if isinstance(own, str) else None
    found: list[Related] = []
    seen: set[tuple[RelationType, str]] = set()
    for name, kind in _RELATIONS.items():
        entries = relation.get(name)
        if not isinstance(entries, list):
            continue
        for entry in entries:
            if not isinstance(entry, dict) or entry.get("id-type") != "doi":
                continue
            try:
                doi = parse_doi(entry.get("id"))
            except ValueError:
                continue
            key = (kind, doi_key(doi))
            if key in seen or key[1] == own_key:
                continue
            seen.add(key)
            found.append(Related(kind, ArticleIds(doi=doi)))
    return tuple(found)


# -- the file source -----------------------------------------------------------------------


class CrossrefFileSource:
    """File source ``crossref_tdm``: the text-mining links of the DOI's Crossref record.

    Needs a DOI. Listed links may need publisher entitlement to download; a
    refused download returns ``None`` from :meth:`fetch_file`.
    """

    name: str = _NAME

    def __repr__(self) -> str:
        return "CrossrefFileSource()"

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> tuple[File, ...]:
        """Return the TDM link Files of the article's Crossref record (empty without a DOI)."""
        if article_ids.doi is None:
            return ()
        record = await fetch_crossref_work(http, article_ids.doi)
        return crossref_tdm_files(record) if record is not None else ()

    async def fetch_file(
        self,
        file: File,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Download a listed link (redirects followed, no credentials), or ``None``."""
        return await download_file(http, file)
