"""Access terms (:class:`SourceMetadata`) and relations (:class:`Related`) values."""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Final, NamedTuple

from .ids import ArticleIds

__all__ = [
    "OA_STATUSES",
    "Related",
    "RelationType",
    "SourceMetadata",
    "is_open_licence_url",
    "normalise_oa_status",
]

_OPEN_URL = re.compile(
    r"^https?://(?:www\.)?creativecommons\.org/(?:licen[cs]es|publicdomain)/", re.IGNORECASE
)


OA_STATUSES: Final = ("gold", "hybrid", "bronze", "green", "closed")
"""Every open-access status a service classification is normalised to."""

_OA_ALIASES: Final = {"diamond": "gold"}


def normalise_oa_status(raw: object) -> str | None:
    """Return ``raw`` as one of :data:`OA_STATUSES`, or ``None`` when it is not a known status.

    Case and surrounding blanks are ignored (Semantic Scholar writes
    ``HYBRID``); ``diamond`` gives ``gold``. Anything else (``open-access``,
    an unknown word, a non-string) gives ``None``.
    """
    if not isinstance(raw, str):
        return None
    text = raw.strip().lower()
    text = _OA_ALIASES.get(text, text)
    return text if text in OA_STATUSES else None


def is_open_licence_url(value: str) -> bool:
    """Return whether ``value`` is a Creative Commons licence or public-domain tool URL."""
    return _OPEN_URL.match(value.strip()) is not None


@dataclasses.dataclass(frozen=True, slots=True)
class SourceMetadata:
    """Raw licence / open-access terms and where they came from.

    ``licence`` is raw (a CC URL, a JATS license-type or licence text);
    ``access`` is raw (``'open-access'``, an Unpaywall ``oa_status``);
    ``basis`` is ``'artifact'`` (read from the bytes) or ``'unpaywall'`` (asserted):
    where ``licence`` came from, or ``access`` when no licence is known.
    ``access_basis`` is set only when ``access`` came from somewhere else than
    ``basis`` (the bytes state a licence, Unpaywall the open-access status).
    ``oa_status`` is a service's classification normalised to ``gold``,
    ``hybrid``, ``bronze``, ``green`` or ``closed`` (see
    :mod:`litfetch_df.frame.engine.oa_status`), kept even when ``access`` holds the
    body's own ``'open-access'``; ``None`` when no service classified the article.
    """

    licence: str | None = None
    access: str | None = None
    basis: str | None = None
    access_basis: str | None = None
    oa_status: str | None = None

    @property
    def access_from(self) -> str | None:
        """Where ``access`` came from: ``access_basis``, else ``basis``; ``None`` without access."""
        if self.access is None:
            return None
        return self.access_basis or self.basis

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
