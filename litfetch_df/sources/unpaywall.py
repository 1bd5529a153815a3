"""Unpaywall: one DOI-keyed record, read for the best open-access PDF and for access terms.

:class:`UnpaywallFileSource` and :func:`litfetch_df.operations.access.resolve_access`
both call :func:`fetch_unpaywall_record` with the same email, so inside one
:meth:`Session.scope` the record is fetched once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import httpx

from ..files import PDF, Blob, File, FileKind
from ..ids import ArticleIds, doi_path
from ..metadata import SourceMetadata
from ..wire.http import Http, Rate, get_logger
from .common import (
    download_file,
    download_url,
    fetch_json_object,
    is_web_url,
    usable_credential,
    usable_text,
)
from .landing import is_landing_page

__all__ = [
    "UNPAYWALL_URL",
    "UnpaywallFileSource",
    "fetch_unpaywall_record",
    "unpaywall_access",
    "unpaywall_email",
    "unpaywall_files",
    "unpaywall_spent",
]

log = get_logger(__name__)

UNPAYWALL_URL: Final = "https://api.unpaywall.org/v2/"
"""Base of the v2 record endpoint; the path-encoded DOI follows it."""

_NAME: Final = "unpaywall"


def unpaywall_email(http: Http, email: str | None = None) -> str | None:
    """Return the email to send: ``email`` if non-blank, else the session contact, else ``None``."""
    return usable_text(email) or usable_text(http.contact)


async def fetch_unpaywall_record(
    http: Http, doi: str, *, email: str | None = None
) -> dict[str, Any] | None:
    """Return Unpaywall's v2 record for ``doi``, or ``None``.

    The email is ``email`` when given, else ``http.contact``; with neither, no
    request is made (Unpaywall requires one). Paced at :attr:`Rate.UNPAYWALL`.
    ``None`` also for an invalid or path-escaping DOI (no request), a 404
    (unknown DOI), a 422 (rejected email), any other non-200, a body that is
    not a JSON object, and a transport failure after retries.
    """
    address = unpaywall_email(http, email)
    if address is None:
        log.debug("Unpaywall skipped: no email (pass email= or set Session(contact=...))")
        return None
    try:
        url = UNPAYWALL_URL + doi_path(doi)
    except ValueError:
        log.warning("Unpaywall: not looking up an invalid DOI %r", doi)
        return None
    send = http.get(url, params={"email": address}, rate=Rate.UNPAYWALL)
    return await fetch_json_object(send, f"Unpaywall lookup for {doi}", logger=log)


def unpaywall_spent(http: Http, doi: str, *, email: str | None = None) -> bool:
    """Whether ``http``'s quota ledger says Unpaywall's day is spent (no request is sent).

    Read before asking, so a step can take what other services already said
    instead of meeting the refusal. ``False`` when ``http`` keeps no ledger,
    has no email to send, or ``doi`` is not a valid DOI (no request would go out).
    """
    ledger = getattr(http, "quota", None)
    spent = getattr(ledger, "spent", None)
    address = unpaywall_email(http, email)
    if spent is None or address is None:
        return False
    try:
        path = httpx.URL(UNPAYWALL_URL + doi_path(doi)).path
    except ValueError:
        return False
    return bool(spent(httpx.URL(UNPAYWALL_URL).host, path, {"email": address}))


def _best_location(record: Mapping[str, Any]) -> Mapping[str, Any]:
    best = record.get("best_oa_location")
    return best if isinstance(best, dict) else {}


def unpaywall_files(record: Mapping[str, Any]) -> tuple[File, ...]:
    """Return the record's best-OA-location PDF as a BODY ``application/pdf`` File (at most one).

    A closed article (``best_oa_location: null``) or a location without an
    http(s) ``url_for_pdf`` gives ``()``, and so does a ``url_for_pdf`` that is
    a DOI-resolver or landing-page URL.
    """
    url = _best_location(record).get("url_for_pdf")
    if not is_web_url(url):
        return ()
    if is_landing_page(str(url)):
        log.debug("unpaywall: url_for_pdf is a landing page, not a PDF; not listed")
        return ()
    return (File(kind=FileKind.BODY, source=_NAME, media_type=PDF, uri=str(url).strip()),)


def unpaywall_access(record: Mapping[str, Any]) -> SourceMetadata:
    """Return the record's access terms: raw ``best_oa_location.license`` and ``oa_status``.

    ``basis='unpaywall'`` when either is present; an empty
    :class:`SourceMetadata` when neither is.
    """
    licence = usable_text(_best_location(record).get("license"))
    access = usable_text(record.get("oa_status"))
    if licence is None and access is None:
        return SourceMetadata()
    return SourceMetadata(licence=licence, access=access, basis="unpaywall")


class UnpaywallFileSource:
    """File source ``unpaywall``: the best open-access PDF Unpaywall knows for a DOI.

    ``email`` overrides the session contact for this source; without either
    the source makes no request and lists nothing.
    """

    name: str = _NAME
    kinds: frozenset[FileKind] = frozenset({FileKind.BODY})

    def __init__(self, *, email: str | None = None, after_openalex: bool = False) -> None:
        self.email = email
        # In a frame, OpenAlex's bulk answer holds the same best-OA link for every DOI it
        # knows; Unpaywall is then asked only for the others.
        self.after_openalex = after_openalex

    def __repr__(self) -> str:
        extra = ", after_openalex=True" if self.after_openalex else ""
        return f"UnpaywallFileSource(email={self.email!r}{extra})"

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> tuple[File, ...]:
        """Return the best-OA PDF File for the article's DOI (empty when none).

        With ``after_openalex``, a DOI whose OpenAlex work the session holds lists
        nothing here (:class:`~litfetch_df.sources.openalex.OpenAlexFileSource` lists
        the same link) and costs no request. When the quota ledger says Unpaywall's
        day is spent, a DOI whose Semantic Scholar paper answer the session holds
        lists nothing here either (that source lists its open-access PDF); only
        the others meet the spent day, unsent, and are deferred.
        """
        if article_ids.doi is None:
            return ()
        if self.after_openalex:
            from .openalex import held_work

            api_key = usable_credential(credentials, "openalex_api_key")
            if (await held_work(http, article_ids.doi, api_key=api_key)).state == "known":
                return ()
        if unpaywall_spent(http, article_ids.doi, email=self.email):
            from .semantic_scholar import held_paper

            if await held_paper(http, article_ids, credentials) is not None:
                # Semantic Scholar's held answer stands in (its source lists its PDF):
                # a spent day is not met where another service already said.
                return ()
        record = await fetch_unpaywall_record(http, article_ids.doi, email=self.email)
        return unpaywall_files(record) if record is not None else ()

    async def fetch_file(
        self,
        file: File,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        """Download a listed PDF (redirects followed, no credentials), or ``None``."""
        return await download_file(http, file)

    def download_url(
        self, file: File, *, credentials: Mapping[str, object] | None = None
    ) -> str | None:
        """Return the URL that downloads ``file`` (redirects followed, no key), or ``None``."""
        return download_url(file)
