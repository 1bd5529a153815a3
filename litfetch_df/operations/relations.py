"""Preprint / published counterparts of an article (``related_ids``)."""

from __future__ import annotations

import asyncio

from ..ids import ArticleIds, doi_key, doi_path, is_preprint_doi, parse_doi
from ..metadata import Related, RelationType
from ..sources.biorxiv import biorxiv_published_doi
from ..sources.crossref import crossref_relations, fetch_crossref_work
from ..wire.http import Http, get_logger

__all__ = ["related_ids"]

log = get_logger(__name__)


async def _from_biorxiv(
    http: Http, doi: str, *, stop_at_known: bool = False
) -> tuple[Related, ...]:
    if not is_preprint_doi(doi):
        return ()
    published = await biorxiv_published_doi(http, doi, stop_at_known=stop_at_known)
    return (Related(RelationType.PUBLISHED, ArticleIds(doi=published)),) if published else ()


async def _from_crossref(http: Http, doi: str) -> tuple[Related, ...]:
    record = await fetch_crossref_work(http, doi)
    return crossref_relations(record) if record is not None else ()


def _settles(found: tuple[Related, ...]) -> bool:
    """Whether Crossref's relations already give the preprint's published version."""
    return any(r.relation is RelationType.PUBLISHED for r in found)


async def related_ids(
    http: Http, article_ids: ArticleIds, *, crossref_first: bool = False
) -> tuple[Related, ...]:
    """Return the article's preprint / published counterparts, keyed on its DOI.

    A bioRxiv/medRxiv preprint DOI is followed to its published version
    (details API, :attr:`RelationType.PUBLISHED`); the Crossref record gives
    ``has-preprint`` (:attr:`RelationType.PREPRINT`) and ``is-preprint-of``
    (:attr:`RelationType.PUBLISHED`) links. Each hit is a single-DOI
    :class:`ArticleIds`; duplicates on (relation, case-folded DOI) keep the
    first seen, bioRxiv before Crossref. Empty without a DOI, for a DOI that
    does not validate (no request is made), or when nothing links; a failing
    upstream contributes nothing.

    With ``crossref_first`` (the frame's relations step, whose session holds
    the Crossref records of the list requests already made) the Crossref
    record is read first and bioRxiv/medRxiv is asked only when it leaves
    the preprint's published version open (no ``is-preprint-of``); then the
    first server that knows the DOI ends the search. Without it, both are
    asked at once, as litfetch does.
    """
    if article_ids.doi is None:
        return ()
    try:
        doi = parse_doi(article_ids.doi)
        doi_path(doi)  # rejects a DOI that would escape its URL path, before any request
    except ValueError:
        log.warning("related_ids: not looking up an invalid DOI %r", article_ids.doi)
        return ()
    if crossref_first:
        crossref = await _from_crossref(http, doi)
        settled = _settles(crossref)
        biorxiv = () if settled else await _from_biorxiv(http, doi, stop_at_known=True)
    else:
        # Different hosts: ask both at once, then order bioRxiv first.
        biorxiv, crossref = await asyncio.gather(
            _from_biorxiv(http, doi), _from_crossref(http, doi)
        )
    own = doi_key(doi)
    seen: set[tuple[RelationType, str]] = set()
    found: list[Related] = []
    for related in (*biorxiv, *crossref):
        if related.ids.doi is None:
            continue
        key = (related.relation, doi_key(related.ids.doi))
        if key in seen or key[1] == own:
            continue
        seen.add(key)
        found.append(related)
    return tuple(found)
