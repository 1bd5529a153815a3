"""Access terms asserted by Unpaywall for an article's DOI (``resolve_access``)."""

from __future__ import annotations

from .._http import Http
from ..ids import ArticleIds
from ..metadata import SourceMetadata
from ..sources.unpaywall import fetch_unpaywall_record, unpaywall_access

__all__ = ["resolve_access"]


async def resolve_access(
    http: Http, article_ids: ArticleIds, *, email: str | None = None
) -> SourceMetadata:
    """Return Unpaywall's licence and OA status for the article, ``basis='unpaywall'``.

    ``licence`` is the raw ``best_oa_location.license``, ``access`` the raw
    ``oa_status`` (a closed article gives ``access='closed'``). The email is
    ``email``, else the session contact; with neither no request is made.
    Returns an empty :class:`SourceMetadata` without a DOI, when the lookup
    fails, or when Unpaywall has no record. Inside a scope this shares its
    request with :class:`~litfetch_df.sources.unpaywall.UnpaywallFileSource`.
    """
    if article_ids.doi is None:
        return SourceMetadata()
    record = await fetch_unpaywall_record(http, article_ids.doi, email=email)
    return unpaywall_access(record) if record is not None else SourceMetadata()
