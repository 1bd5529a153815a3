"""Crossref works API: one DOI-keyed work record, read by three consumers.

The Elsevier link locator, the TDM file source (:class:`CrossrefFileSource`)
and the relations lookup all call :func:`fetch_crossref_work`, which always
issues the identical request for a DOI, so inside one :meth:`Session.scope`
the record is fetched once. The mapping from a record to files
(:func:`crossref_tdm_files`) and to relations (:func:`crossref_relations`) is
kept apart from the request so bulk lookups (``/works?filter=doi:…``) can reuse
it on each item.

:class:`GetRequest`, :func:`json_object`, :func:`usable_credential`,
:func:`is_web_url` and :func:`download_file` live in :mod:`._common` (shared by
every source) and are re-exported here, where they first lived.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..files import Blob, File, FileKind
from ..ids import ArticleIds, doi_key, doi_path, parse_doi
from ..metadata import Related, RelationType, SourceMetadata, is_open_licence_url
from ..store.answers import can_hold
from ..wire.http import Http, Rate, get_logger
from .common import (
    GetRequest,
    download_file,
    download_url,
    fetch_json_object,
    is_web_url,
    json_object,
    usable_credential,
    usable_text,
)

__all__ = [
    "CROSSREF_WORKS_URL",
    "CrossrefFileSource",
    "GetRequest",
    "crossref_licence",
    "crossref_relations",
    "crossref_tdm_files",
    "crossref_work_request",
    "crossref_work_url",
    "download_file",
    "fetch_crossref_work",
    "held_crossref_work",
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


async def held_crossref_work(http: Http, doi: str) -> dict[str, Any] | None:
    """Return the Crossref work record for ``doi`` that ``http`` already holds, or ``None``.

    Never sends a request: only an answer primed by a bulk lookup, kept in the
    session's memo or stored in the persistent cache counts (see
    :class:`~litfetch_df.store.answers.HeldAnswers`). ``None`` when ``http`` cannot say
    what it holds, the DOI is invalid, or nothing usable is held.
    """
    contact = http.contact
    if not can_hold(http):
        return None
    try:
        request = crossref_work_request(doi, contact)
    except ValueError:
        return None
    body = await request.held_json(http)
    message = body.get("message") if isinstance(body, dict) else None
    return message if isinstance(message, dict) else None


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
    body = await fetch_json_object(request.send(http), f"Crossref lookup for {doi}", logger=log)
    if body is None:
        return None
    message = body.get("message")
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
    kinds: frozenset[FileKind] = frozenset({FileKind.BODY})

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

    def download_url(
        self, file: File, *, credentials: Mapping[str, object] | None = None
    ) -> str | None:
        """Return the URL that downloads ``file`` (redirects followed, no key), or ``None``."""
        return download_url(file)


# Which text a licence covers, best first: the version of record is what a reader gets.
_CONTENT_VERSIONS: Final = ("vor", "am", "unspecified", "stm-asf", "tdm")


def crossref_licence(record: Mapping[str, Any]) -> SourceMetadata:
    """Return the licence a Crossref work record's ``license[]`` gives, ``basis='crossref'``.

    The version of record's licence first (``content-version`` ``vor``), then
    the accepted manuscript's, then any other; within one version a Creative
    Commons or public-domain URL before another URL. ``access`` stays ``None``:
    Crossref states licences, not access. No usable entry gives an empty
    :class:`SourceMetadata`. Start dates are not weighed.
    """
    entries = record.get("license")
    if not isinstance(entries, list):
        return SourceMetadata()
    found: list[tuple[int, int, int, str]] = []
    for position, entry in enumerate(entries):
        if not isinstance(entry, dict):
            continue
        url = usable_text(entry.get("URL"))
        if url is None:
            continue
        version = entry.get("content-version")
        rank = (
            _CONTENT_VERSIONS.index(version)
            if version in _CONTENT_VERSIONS
            else len(_CONTENT_VERSIONS)
        )
        found.append((rank, 0 if is_open_licence_url(url) else 1, position, url))
    if not found:
        return SourceMetadata()
    return SourceMetadata(licence=min(found)[3], basis="crossref")
