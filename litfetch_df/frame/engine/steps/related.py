"""The relations step: preprint and published counterparts of one id bundle."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from ....metadata import Related, RelationType
from ....wire.http import Http
from ...io.cells import relations as relations_cell
from .. import bulk
from ..runner import Job, UnitStep

__all__ = ["RelatedStep"]

_DTYPES: Final = {
    "related": "object",
    "n_related": "Int64",
    "preprint_doi": "string",
    "published_doi": "string",
    "related_error": "string",
}


def _first_doi(found: tuple[Related, ...], relation: RelationType) -> str | None:
    return next((r.ids.doi for r in found if r.relation is relation and r.ids.doi), None)


@dataclasses.dataclass(frozen=True, slots=True)
class RelatedStep(UnitStep):
    """Find each bundle's preprint / published counterparts (Crossref, bioRxiv)."""

    name: ClassVar[str] = "related"
    error_column: ClassVar[str] = "related_error"
    desc: ClassVar[str] = "related"

    @property
    def dtypes(self) -> Mapping[str, str]:
        """``related``, ``n_related``, ``preprint_doi``, ``published_doi``, ``related_error``."""
        return _DTYPES

    def services(self) -> frozenset[bulk.Service]:
        """Crossref relations for every DOI in list requests first; bioRxiv per article after."""
        return bulk.for_related()

    async def work(self, http: Http, job: Job) -> tuple[Related, ...]:
        """The bundle's relations: the held Crossref record first, bioRxiv for what it leaves."""
        from ....operations.relations import related_ids

        return await related_ids(http, job.ids, crossref_first=True)

    def cells(self, value: Any) -> Mapping[str, object]:
        """The relation cells, with the first preprint and published DOI picked out."""
        return {
            "related": relations_cell(value),
            "n_related": len(value),
            "preprint_doi": _first_doi(value, RelationType.PREPRINT),
            "published_doi": _first_doi(value, RelationType.PUBLISHED),
        }

    def empty(self, value: Any) -> bool:
        """No relation found."""
        return len(value) == 0
