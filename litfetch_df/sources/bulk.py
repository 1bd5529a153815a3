"""Bulk lookups for whole-table work, and the map from a file source to its bulk form.

The recipe every bulk lookup follows (:class:`BulkResult`, :class:`BulkKey`,
:func:`bulk_lookup`, :func:`chunk_answer`, ...) lives in :mod:`.bulk_recipe`
and is re-exported here. This module adds :func:`bulk_file_lister`, which sits
above the per-service bulk modules (:mod:`.semantic_scholar_batch`,
:mod:`.crossref_batch`, :mod:`.springer_batch`): they import the recipe, this
module imports them, and no import runs the other way.
"""

from __future__ import annotations

from .bulk_recipe import (
    BulkFileLister,
    BulkKey,
    BulkLookup,
    BulkResult,
    ChunkLookup,
    bulk_lookup,
    chunk_answer,
    chunked,
    distinct_keys,
    ids_by_key,
)
from .crossref import CrossrefFileSource
from .crossref_batch import crossref_batch_files
from .semantic_scholar import SemanticScholarFileSource
from .semantic_scholar_batch import s2_batch_files
from .springer import SpringerFileSource
from .springer_batch import springer_batch_files

__all__ = [
    "BulkFileLister",
    "BulkKey",
    "BulkLookup",
    "BulkResult",
    "ChunkLookup",
    "bulk_file_lister",
    "bulk_lookup",
    "chunk_answer",
    "chunked",
    "distinct_keys",
    "ids_by_key",
]


def bulk_file_lister(source: object) -> BulkFileLister | None:
    """Return the bulk form of a bundled file source, or ``None`` when it has none.

    Only the exact bundled classes map (:class:`SemanticScholarFileSource`,
    :class:`CrossrefFileSource`, :class:`SpringerFileSource`); a subclass may
    have changed ``list_files`` and keeps its per-article path. The bulk form's
    ``values[i] or ()`` equals that source's ``list_files`` for element ``i``.
    """
    table: dict[type, BulkFileLister] = {
        SemanticScholarFileSource: s2_batch_files,
        CrossrefFileSource: crossref_batch_files,
        SpringerFileSource: springer_batch_files,
    }
    return table.get(type(source))
