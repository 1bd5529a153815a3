"""Access terms (:class:`SourceMetadata`) and relations (:class:`Related`) values."""

from __future__ import annotations

import dataclasses
import enum
from typing import NamedTuple

from .ids import ArticleIds

__all__ = ["Related", "RelationType", "SourceMetadata"]


@dataclasses.dataclass(frozen=True, slots=True)
class SourceMetadata:
    """Raw licence / open-access terms and where they came from.

    ``licence`` is raw (a CC URL, a JATS license-type or licence text);
    ``access`` is raw (``'open-access'``, an Unpaywall ``oa_status``);
    ``basis`` is ``'artifact'`` (read from the bytes) or ``'unpaywall'`` (asserted).
    """

    licence: str | None = None
    access: str | None = None
    basis: str | None = None

    def is_empty(self) -> bool:
        """Return whether neither a licence nor an access status is known."""
        return self.licence is None and self.access is None


class RelationType(enum.Enum):
    """How a related article relates to the one asked about."""

    PREPRINT = "preprint"
    PUBLISHED = "published"


class Related(NamedTuple):
    """A counterpart article: a single-DOI :class:`ArticleIds` tagged with its relation."""

    relation: RelationType
    ids: ArticleIds

    def __str__(self) -> str:
        """One short line for a table cell: ``'has preprint 10.1101/…'``, ``'published as …'``."""
        ids = self.ids
        shown = ids.doi or ids.pmcid or ids.pmid or ids.bookid or "?"
        if len(shown) > 40:
            shown = shown[:39] + "…"
        verb = "has preprint" if self.relation is RelationType.PREPRINT else "published as"
        return f"{verb} {shown}"
