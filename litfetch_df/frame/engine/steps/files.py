"""The file-set step: every source's files for one id bundle, as one ``files`` cell.

A source given up after its retries costs the row only that source's files:
the row keeps the others' and says ``partial: <source> abandoned: <reason>``
in ``files_error``; a re-run asks only the sources it names and merges their
files with the ones the row holds, in the order a call asking every source
gives. A row partial because its ids were not all resolved is listed afresh:
with the ids it has now, every source may answer otherwise.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, ClassVar, Final

from ....files import File, FileKind
from ....operations.types import FileSource
from ....wire.http import Http
from ...io.cells import file_set
from .. import bulk
from ..outcome import GivenUp, Partial, given_up_in, ids_incomplete, is_partial
from ..runner import Job, UnitStep

__all__ = ["FilesStep"]

_DTYPES: Final = {"files": "object", "n_files": "Int64", "files_error": "string"}


@dataclasses.dataclass(frozen=True, slots=True)
class FilesStep(UnitStep):
    """List each bundle's files from ``sources`` (``None``: the defaults), of ``kind`` if given."""

    name: ClassVar[str] = "files"
    error_column: ClassVar[str] = "files_error"
    desc: ClassVar[str] = "list_files"
    resumes: ClassVar[bool] = True

    sources: Sequence[FileSource] | None
    kind: FileKind | None
    credentials: Mapping[str, object]

    def __post_init__(self) -> None:
        if self.sources is None:
            # Built once per call and shared by its units (the bundled sources hold no state).
            from ....operations.fileset import bulk_first_file_sources

            object.__setattr__(self, "sources", bulk_first_file_sources())

    @property
    def dtypes(self) -> Mapping[str, str]:
        """``files`` (a tuple of File), ``n_files``, ``files_error``."""
        return _DTYPES

    def services(self) -> frozenset[bulk.Service]:
        """The bulk lookups that answer this step's per-article requests in advance."""
        # They answer the per-article requests of the sources that have a bulk form, so
        # the per-bundle work only asks the others; a source not asked for this kind
        # is not primed either.
        from ....operations.fileset import sources_for_kind

        chosen = self.sources if self.sources is not None else ()
        return bulk.for_file_sources(sources_for_kind(chosen, self.kind))

    def services_for(self, before: Mapping[str, object]) -> frozenset[bulk.Service]:
        """A partial row asks only the sources it lost again: only their bulk lookups."""
        error = before.get("files_error")
        if (
            not (is_partial(error) and isinstance(before.get("files"), tuple))
            or ids_incomplete(error)  # redone afresh once resolved: every source again
        ):
            return self.services()
        from ....operations.fileset import sources_for_kind

        lost = {g.source for g in given_up_in(error)}
        chosen = [s for s in (self.sources or ()) if s.name in lost]
        return bulk.for_file_sources(sources_for_kind(chosen, self.kind))

    def resume_token(self, before: Mapping[str, object]) -> Hashable:
        """Rows re-run alike when they hold the same files and the same partial error."""
        files = before.get("files")
        return (before.get("files_error"), tuple(files) if isinstance(files, tuple) else None)

    async def work(self, http: Http, job: Job) -> Partial[tuple[File, ...]]:
        """The union of every source's files for the bundle (on a partial row: the missing ones)."""
        from ....operations.fileset import list_files_tried

        only: frozenset[str] | None = None
        known: tuple[File, ...] = ()
        error = job.before.get("files_error")
        files = job.before.get("files")
        if is_partial(error) and not ids_incomplete(error) and isinstance(files, tuple):
            only = frozenset(g.source for g in given_up_in(error))
            known = tuple(f for f in files if isinstance(f, File))
        listing = await list_files_tried(
            http,
            job.ids,
            sources=self.sources,
            kind=self.kind,
            credentials=self.credentials,
            only=only,
            known=known,
        )
        lost = tuple(GivenUp(t.source, t.reason or "no answer") for t in listing.given_up)
        return Partial(listing.files, lost)

    def cells(self, value: Any) -> Mapping[str, object]:
        """The ``files`` and ``n_files`` cells."""
        return {"files": file_set(value), "n_files": len(value)}

    def empty(self, value: Any) -> bool:
        """No file found."""
        return len(value) == 0
