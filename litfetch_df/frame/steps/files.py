"""The file-set step: every source's files for one id bundle, as one ``files`` cell."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from ..._http import Http
from ...files import File, FileKind
from ...operations.types import FileSource
from .. import bulk
from ..cells import file_set
from ..engine import Job, UnitStep

__all__ = ["FilesStep"]

_DTYPES: Final = {"files": "object", "n_files": "Int64", "files_error": "string"}


@dataclasses.dataclass(frozen=True, slots=True)
class FilesStep(UnitStep):
    """List each bundle's files from ``sources`` (``None``: the defaults), of ``kind`` if given."""

    name: ClassVar[str] = "files"
    error_column: ClassVar[str] = "files_error"
    desc: ClassVar[str] = "list_files"

    sources: Sequence[FileSource] | None
    kind: FileKind | None
    credentials: Mapping[str, object]

    def __post_init__(self) -> None:
        if self.sources is None:
            # Built once per call and shared by its units (the bundled sources hold no state).
            from ...operations.fileset import default_file_sources

            object.__setattr__(self, "sources", default_file_sources())

    @property
    def dtypes(self) -> Mapping[str, str]:
        """``files`` (a tuple of File), ``n_files``, ``files_error``."""
        return _DTYPES

    def services(self) -> frozenset[bulk.Service]:
        """The bulk lookups that answer this step's per-article requests in advance."""
        # They answer the per-article requests of the sources that have a bulk form, so
        # the per-bundle work only asks the others; a source not asked for this kind
        # is not primed either.
        from ...operations.fileset import sources_for_kind

        chosen = self.sources if self.sources is not None else ()
        return bulk.for_file_sources(sources_for_kind(chosen, self.kind))

    async def work(self, http: Http, job: Job) -> tuple[File, ...]:
        """The union of every source's files for the bundle."""
        from ...operations.fileset import list_files as list_article_files

        return await list_article_files(
            http, job.ids, sources=self.sources, kind=self.kind, credentials=self.credentials
        )

    def cells(self, value: Any) -> Mapping[str, object]:
        """The ``files`` and ``n_files`` cells."""
        return {"files": file_set(value), "n_files": len(value)}

    def empty(self, value: Any) -> bool:
        """No file found."""
        return len(value) == 0
