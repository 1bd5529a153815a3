"""Access terms asserted by Unpaywall for an article's DOI (``resolve_access``)."""

from __future__ import annotations

from ..ids import ArticleIds
from ..metadata import SourceMetadata
from ..sources.unpaywall import fetch_unpaywall_record, unpaywall_access
from ..wire.http import Http

__all__ = ["fill_missing_terms", "resolve_access"]


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


def fill_missing_terms(stated: SourceMetadata, asserted: SourceMetadata) -> SourceMetadata:
    """Return ``stated`` with the fields it lacks taken from ``asserted``, each field's basis kept.

    ``stated`` is what the artifact says, ``asserted`` what a service says; a
    field ``stated`` has is never replaced. ``basis`` stays the licence's basis
    and ``access_basis`` names where ``access`` came from when that differs,
    so a row whose bytes state CC BY and whose status Unpaywall gave reads
    ``basis='artifact'``, ``access_basis='unpaywall'``.
    """
    if stated.is_empty():
        return asserted
    if asserted.is_empty():
        return stated
    licence: str | None
    basis: str | None
    if stated.licence is not None:
        licence, basis = stated.licence, stated.basis
    elif asserted.licence is not None:
        licence, basis = asserted.licence, asserted.basis
    else:
        licence, basis = None, stated.basis
    access: str | None
    access_from: str | None
    if stated.access is not None:
        access, access_from = stated.access, stated.access_from
    else:
        access, access_from = asserted.access, asserted.access_from
    return SourceMetadata(
        licence=licence,
        access=access,
        basis=basis,
        access_basis=access_from if access_from != basis else None,
    )
