"""Semantic Scholar Graph API paper lookup: cross-referenced ids and the open-access PDF.

:class:`SemanticScholarResolver` reads ``externalIds``,
:class:`SemanticScholarFileSource` reads ``openAccessPdf``; both go through
:func:`fetch_s2_paper`. The record mappings (:func:`s2_article_ids`,
:func:`s2_pdf_files`) are pure so the batch endpoint can reuse them per item.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ..files import PDF, Blob, File, FileKind
from ..ids import RESOLVABLE, ArticleIds, doi_path, parse_doi, parse_pmcid, parse_pmid
from ..metadata import SourceMetadata
from ..store.answers import HeldAnswers, can_hold
from ..wire.http import Http, Rate, get_logger
from .common import (
    GetRequest,
    download_file,
    download_url,
    fetch_json_object,
    is_web_url,
    parsed_or_none,
    usable_credential,
    usable_text,
)
from .landing import is_landing_page

__all__ = [
    "S2_PAPER_URL",
    "TERMS_FIELDS",
    "SemanticScholarFileSource",
    "SemanticScholarResolver",
    "fetch_s2_paper",
    "held_paper",
    "s2_access",
    "s2_article_ids",
    "s2_paper_id",
    "s2_paper_request",
    "s2_pdf_files",
]

log = get_logger(__name__)

S2_PAPER_URL: Final = "https://api.semanticscholar.org/graph/v1/paper/"
"""Base of the single-paper endpoint; the paper id follows it."""

_NAME: Final = "semantic_scholar"
_CREDENTIAL: Final = "semantic_scholar_api_key"


def s2_paper_id(article_ids: ArticleIds) -> str | None:
    """Return the S2 paper id: ``DOI:<doi>``, else ``PMID:<pmid>``, else ``PMCID:<digits>``.

    The DOI is path-encoded; the PMCID loses its ``PMC`` prefix as S2
    documents. An id that does not validate (a DOI that would escape its URL
    path, say) is skipped in favour of the next; ``None`` when none is usable.
    """
    if article_ids.doi is not None:
        try:
            return "DOI:" + doi_path(article_ids.doi)
        except ValueError:
            log.warning("Semantic Scholar: skipping an invalid DOI %r", article_ids.doi)
    if article_ids.pmid is not None:
        try:
            return "PMID:" + parse_pmid(article_ids.pmid)
        except ValueError:
            log.warning("Semantic Scholar: skipping an invalid PMID %r", article_ids.pmid)
    if article_ids.pmcid is not None:
        try:
            return "PMCID:" + parse_pmcid(article_ids.pmcid).removeprefix("PMC")
        except ValueError:
            log.warning("Semantic Scholar: skipping an invalid PMCID %r", article_ids.pmcid)
    return None


def s2_paper_request(
    article_ids: ArticleIds, *, fields: str, api_key: str | None = None
) -> GetRequest | None:
    """Return the single-paper GET for the bundle with ``fields``, or ``None`` without a usable id.

    ``GET /graph/v1/paper/<s2_paper_id>?fields=<fields>``; with ``api_key`` a
    non-blank string it carries ``x-api-key`` and paces at
    :attr:`Rate.S2_KEYED`, else no header and :attr:`Rate.S2_UNKEYED`.
    """
    paper_id = s2_paper_id(article_ids)
    if paper_id is None:
        return None
    key = usable_text(api_key)
    return GetRequest(
        url=S2_PAPER_URL + paper_id,
        params={"fields": fields},
        headers={"x-api-key": key} if key else None,
        rate=Rate.S2_KEYED if key else Rate.S2_UNKEYED,
    )


TERMS_FIELDS: Final = "openAccessPdf"
"""The fields of the single-paper answer the bulk lookup primes and the access terms read."""


async def held_paper(
    http: Http | HeldAnswers, ids: ArticleIds, credentials: Mapping[str, object] | None = None
) -> dict[str, Any] | None:
    """Semantic Scholar's held paper answer (:data:`TERMS_FIELDS`) for ``ids``, or ``None``.

    No request: ``None`` when ``http`` holds no such answer (or holds nothing), or
    when the held answer is not a 200 JSON object.
    """
    if not can_hold(http):
        return None
    api_key = usable_credential(credentials, "semantic_scholar_api_key")
    request = s2_paper_request(ids, fields=TERMS_FIELDS, api_key=api_key)
    if request is None:
        return None
    record = await request.held_json(http)
    return record if isinstance(record, dict) else None


async def fetch_s2_paper(
    http: Http, article_ids: ArticleIds, *, fields: str, api_key: str | None = None
) -> dict[str, Any] | None:
    """Return the S2 paper record with ``fields`` for the bundle, or ``None``.

    Sends :func:`s2_paper_request`: ``x-api-key`` only when ``api_key`` is a
    non-blank string, paced at :attr:`Rate.S2_KEYED` then, else
    :attr:`Rate.S2_UNKEYED`. ``None`` without a usable id (no request), for a
    404, any other non-200 (a 429 that outlived the retries included), a body
    that is not a JSON object, and a transport failure.
    """
    request = s2_paper_request(article_ids, fields=fields, api_key=api_key)
    if request is None:
        return None
    what = f"Semantic Scholar lookup for {request.url.removeprefix(S2_PAPER_URL)}"
    return await fetch_json_object(request.send(http), what, logger=log)


def s2_pdf_files(record: Mapping[str, Any]) -> tuple[File, ...]:
    """Return the record's ``openAccessPdf.url`` as a BODY ``application/pdf`` File (at most one).

    ``openAccessPdf`` missing or ``null``, or a ``url`` that is empty or not
    http(s), gives ``()``; so does a DOI-resolver or landing-page URL (S2
    gives ``https://doi.org/<doi>`` for some articles), which is no PDF.
    """
    pdf = record.get("openAccessPdf")
    url = pdf.get("url") if isinstance(pdf, dict) else None
    if not is_web_url(url):
        return ()
    if is_landing_page(str(url)):
        log.debug("semantic_scholar: openAccessPdf.url is a landing page, not a PDF; not listed")
        return ()
    return (File(kind=FileKind.BODY, source=_NAME, media_type=PDF, uri=str(url).strip()),)


def s2_article_ids(record: Mapping[str, Any]) -> ArticleIds:
    """Return the ids in the record's ``externalIds``, normalised.

    ``DOI`` → doi, ``PubMed`` → pmid (an integer is stringified),
    ``PubMedCentral`` → ``PMC``-prefixed pmcid. Values that do not validate
    are left out.
    """
    external = record.get("externalIds")
    if not isinstance(external, dict):
        return ArticleIds()
    return ArticleIds(
        pmid=parsed_or_none(parse_pmid, external.get("PubMed")),
        pmcid=parsed_or_none(parse_pmcid, external.get("PubMedCentral")),
        doi=parsed_or_none(parse_doi, external.get("DOI")),
    )


class SemanticScholarFileSource:
    """File source ``semantic_scholar``: the open-access PDF S2 knows for the article.

    Keys on the DOI, else PMID, else PMCID. An optional key in
    ``credentials['semantic_scholar_api_key']`` goes to S2 only and raises the pace.
    """

    name: str = _NAME
    kinds: frozenset[FileKind] = frozenset({FileKind.BODY})

    def __repr__(self) -> str:
        return "SemanticScholarFileSource()"

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> tuple[File, ...]:
        """Return the ``openAccessPdf`` File (empty without an id or a PDF URL)."""
        record = await fetch_s2_paper(
            http,
            article_ids,
            fields="openAccessPdf",
            api_key=usable_credential(credentials, _CREDENTIAL),
        )
        return s2_pdf_files(record) if record is not None else ()

    async def fetch_file(
        self,
        file: File,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Download a listed PDF (redirects followed; the S2 key is not sent), or ``None``."""
        return await download_file(http, file)

    def download_url(
        self, file: File, *, credentials: Mapping[str, object] | None = None
    ) -> str | None:
        """Return the URL that downloads ``file`` (redirects followed, no key), or ``None``."""
        return download_url(file)


class SemanticScholarResolver:
    """Per-item resolver: ids cross-referenced through S2's ``externalIds``.

    ``await SemanticScholarResolver()(ids, http)`` returns ``ids`` merged with
    what S2 knows (a known id is never overwritten). A bundle with no usable
    DOI, PMID or PMCID, or one that already holds all three, costs no request.
    ``api_key`` is optional; with one the resolver paces at the keyed rate.
    """

    __slots__ = ("_api_key",)

    def __init__(self, *, api_key: str | None = None) -> None:
        self._api_key = usable_text(api_key)

    def __repr__(self) -> str:
        # Never show the key itself.
        return f"SemanticScholarResolver(api_key={'<set>' if self._api_key else None})"

    async def __call__(self, article_ids: ArticleIds, http: Http) -> ArticleIds:
        """Return ``article_ids`` with gaps filled from S2's ``externalIds``."""
        if article_ids.has(RESOLVABLE):
            return article_ids
        record = await fetch_s2_paper(
            http, article_ids, fields="externalIds", api_key=self._api_key
        )
        if record is None:
            return article_ids
        return article_ids.merge(s2_article_ids(record))


def s2_access(record: Mapping[str, Any]) -> SourceMetadata:
    """Return the access terms of an S2 paper record, ``basis='semantic_scholar'``.

    ``licence`` is ``openAccessPdf.license`` and ``access`` ``openAccessPdf.status``,
    both raw (``"CCBY"``, ``"HYBRID"``); a record with neither gives an empty
    :class:`SourceMetadata`. The status holds even when the PDF URL is a
    landing page.
    """
    pdf = record.get("openAccessPdf")
    if not isinstance(pdf, dict):
        return SourceMetadata()
    licence = usable_text(pdf.get("license"))
    access = usable_text(pdf.get("status"))
    if licence is None and access is None:
        return SourceMetadata()
    return SourceMetadata(licence=licence, access=access, basis="semantic_scholar")
