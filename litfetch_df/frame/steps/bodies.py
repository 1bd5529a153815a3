"""The bodies step: walk the fetcher ladder once per id bundle, keep the Blob or write it."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final

from ..._http import Http
from ...files import Blob
from ...ids import ArticleIds
from ...operations.types import Fetcher
from .. import bulk
from ..context import CallContext
from ..engine import Job, UnitStep
from ..outdir import OutDir
from ..plan import Plan

__all__ = ["BODY_COLUMNS", "BodiesStep", "Written"]

BODY_COLUMNS: Final = ("body", "body_path", "body_media_type", "body_source")
"""What a later step (the licences') reads of a row's body."""

_IN_MEMORY: Final = {
    "body": "object",
    "body_source": "string",
    "body_media_type": "string",
    "body_size": "Int64",
    "body_error": "string",
}
_ON_DISK: Final = {
    "body_path": "string",
    "body_source": "string",
    "body_media_type": "string",
    "body_size": "Int64",
    "body_error": "string",
}

# What the step leaves in a unit's scratch for the licences step: the bytes it just
# wrote, so they need not be read back from disk.
WRITTEN_PATH: Final = "bodies.written_path"
WRITTEN_BLOB: Final = "bodies.written_blob"


@dataclasses.dataclass(frozen=True, slots=True)
class Written:
    """A body written under ``out_dir``: where, from which source, its type and size."""

    path: str
    source: str
    media_type: str | None
    size: int


@dataclasses.dataclass(frozen=True, slots=True)
class BodiesStep(UnitStep):
    """Fetch each bundle's body through ``fetchers`` (``None``: the default ladder).

    With ``out`` the body is written there and the row holds ``body_path``;
    otherwise the row holds the :class:`Blob` in ``body``.
    """

    name: ClassVar[str] = "bodies"
    error_column: ClassVar[str] = "body_error"
    desc: ClassVar[str] = "fetch_bodies"

    fetchers: Sequence[Fetcher] | None
    credentials: Mapping[str, object]
    out: OutDir | None = None

    def __post_init__(self) -> None:
        if self.fetchers is None:
            # Built once per call and shared by its units (the bundled fetchers hold no
            # state), instead of once per unit inside the ladder.
            from ...operations.ladder import default_fetchers

            object.__setattr__(self, "fetchers", default_fetchers())

    @property
    def dtypes(self) -> Mapping[str, str]:
        """The step's columns: ``body`` in memory, or ``body_path`` with an ``out_dir``."""
        return _ON_DISK if self.out is not None else _IN_MEMORY

    def services(self) -> frozenset[bulk.Service]:
        """The bulk lookups that answer this step's per-article requests in advance."""
        # With an Elsevier key, that rung looks every DOI it reaches up in Crossref:
        # one list request per 100 DOIs answers those lookups in advance.
        return bulk.for_fetchers(self.fetchers, self.credentials)

    def prepare(self, plan: Plan, ctx: CallContext) -> None:
        """Reserve every row's body name in row order, not in completion order."""
        if self.out is not None:
            self.out.reserve_bodies(plan.bundles)

    async def fetch(self, http: Http, ids: ArticleIds) -> Blob | None:
        """Walk the fetcher ladder for ``ids`` (no per-row resolver: the pre-pass resolved)."""
        from ...operations.ladder import fetch_body

        return await fetch_body(
            http, ids, resolver=None, fetchers=self.fetchers, credentials=self.credentials
        )

    async def work(self, http: Http, job: Job) -> Blob | Written | None:
        """Fetch the body; with ``out``, write it and return where (bytes left in scratch)."""
        blob = await self.fetch(http, job.ids)
        if blob is None or self.out is None:
            return blob
        path = self.out.body_path(job.ids, blob.file.media_type)
        # Disk writes leave the event loop free for the other units' requests.
        written = await asyncio.to_thread(self.out.write, path, blob.content)
        job.scratch[WRITTEN_PATH] = str(written)
        job.scratch[WRITTEN_BLOB] = blob
        return Written(str(written), blob.file.source, blob.file.media_type, len(blob.content))

    def cells(self, value: Any) -> Mapping[str, object]:
        """A body's row cells."""
        if isinstance(value, Blob):
            return {
                "body": value,
                "body_source": value.file.source,
                "body_media_type": value.file.media_type,
                "body_size": len(value.content),
            }
        return {
            "body_path": value.path,
            "body_source": value.source,
            "body_media_type": value.media_type,
            "body_size": value.size,
        }

    def label(self, value: Any) -> str | None:
        """The source that served the body."""
        if isinstance(value, Blob):
            return value.file.source
        return value.source if isinstance(value, Written) else None
