"""One open-access status per row, in one vocabulary: the ``oa_status`` column.

The raw ``access`` column mixes two vocabularies: a body's own statement
(JATS ``open-access``, Elsevier's ``openaccess`` flag) says only *that* an
article is open, while Unpaywall and OpenAlex classify *how* it is open
(``gold``, ``hybrid``, ``bronze``, ``green``) or say ``closed``. The colour
depends on the venue and on where the open copy sits, which the body does
not state, so only a service's classification gives ``oa_status``; a row
whose only access statement is the body's keeps ``oa_status`` NA rather than
an invented colour. ``diamond`` (a no-fee open-access journal, in newer
Unpaywall and OpenAlex answers) is a kind of gold and is counted as
``gold``; the raw word stays in ``access`` when that is where the status
came from.
"""

from __future__ import annotations

from typing import Final

from ...metadata import OA_STATUSES, SourceMetadata, normalise_oa_status

__all__ = ["OA_STATUSES", "SERVICE_BASES", "normalise_oa_status", "service_oa_status"]

SERVICE_BASES: Final = frozenset({"unpaywall", "openalex", "semantic_scholar"})
"""Bases whose ``access`` is a service's classification, not a body's statement."""


def service_oa_status(meta: SourceMetadata) -> str | None:
    """Return the normalised status in ``meta`` when a service (not a body) gave its ``access``."""
    if meta.access_from not in SERVICE_BASES:
        return None
    return normalise_oa_status(meta.access)
