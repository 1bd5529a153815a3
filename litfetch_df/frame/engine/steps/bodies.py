"""The bodies step: walk the fetcher ladder once per id bundle, keep the Blob or write it.

A body served by a lower rung because a higher one was given up after its
retries is kept, and ``body_error`` says ``partial: <rung> abandoned:
<reason>``; a re-run of the row asks only the rungs above the one that
served, and a body one of them serves replaces the kept one (its file too).
A row partial because its ids were not all resolved asks every rung again:
with the ids it has now a rung may serve that could not before, and the
body's name (chosen from the ids) may change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, Final

from ....files import Blob
from ....ids import ArticleIds
from ....operations.types import Fetcher
from ....wire.http import Http
from ...io.outputs import Out
from ...io.urlout import read_location, size_of
from .. import bulk
from ..context import CallContext
from ..offload import offload
from ..outcome import GivenUp, Partial, ids_incomplete, is_partial
from ..plan import Plan
from ..runner import Job, UnitStep

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
    resumes: ClassVar[bool] = True

    fetchers: Sequence[Fetcher] | None
    credentials: Mapping[str, object]
    out: Out | None = None

    def __post_init__(self) -> None:
        if self.fetchers is None:
            # Built once per call and shared by its units (the bundled fetchers hold no
            # state), instead of once per unit inside the ladder.
            from ....operations.ladder import default_fetchers

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
        """Reserve every row's body name in row order, not in completion order.

        Rows whose resolution was given up hold their ids provisionally.
        """
        if self.out is not None:
            late = [i for i, reason in enumerate(plan.unresolved) if reason is not None]
            self.out.reserve_bodies(plan.bundles, late)

    def keep_earlier(self, plan: Plan, earlier: Callable[[str], Sequence[object]]) -> None:
        """Hold the files of the rows not redone: a row redone never writes over them."""
        if self.out is None:
            return
        todo = frozenset(plan.todo)
        for i, path in enumerate(earlier("body_path")):
            if i not in todo and isinstance(path, str) and not plan.bundles[i].is_empty():
                self.out.hold_body(plan.bundles[i], path)

    def resume_token(self, before: Mapping[str, object]) -> Hashable:
        """Rows re-run alike when they hold the same body from the same rung."""
        body = before.get("body")
        return (
            before.get("body_error"),
            before.get("body_source"),
            before.get("body_path"),
            id(body) if body is not None else None,
        )

    async def work(self, http: Http, job: Job) -> Partial[Blob | Written | None]:
        """Fetch the body; with ``out``, write it and return where (bytes left in scratch).

        On a partial row, only the rungs above the one that served are asked
        (every rung when the row's ids were incomplete); when none serves, the
        row keeps its body.
        """
        from ....operations.ladder import fetch_body_tried

        error = job.before.get("body_error")
        kept = _kept(job.before) if is_partial(error) else None
        above = kept.file.source if isinstance(kept, Blob) else (kept.source if kept else None)
        if ids_incomplete(error):
            above = None
        walk = await fetch_body_tried(
            http,
            job.ids,
            resolver=None,  # the pre-pass resolved
            fetchers=self.fetchers,
            credentials=self.credentials,
            above=above,
        )
        lost = tuple(GivenUp(t.source, t.reason or "no answer") for t in walk.given_up)
        blob = walk.blob
        if blob is None:
            if isinstance(kept, Written) and self.out is not None:
                # Kept, but under the name the row's ids give now (they may have been
                # resolved since it was written): a run without faults names it so.
                kept = await offload(_renamed, self.out, job.ids, kept)
            return Partial(kept, lost)
        if self.out is None:
            return Partial(blob, lost)
        location = self.out.body_location(job.ids, blob.file.media_type)
        # Writes leave the event loop free for the other units' requests.
        written = await offload(self.out.write_to, location, blob.content)
        if isinstance(kept, Written) and kept.path != written:
            # The lower rung's body had another name (another type): it is replaced, not kept.
            await offload(self.out.remove, kept.path)
        job.scratch[WRITTEN_PATH] = written
        job.scratch[WRITTEN_BLOB] = blob
        return Partial(
            Written(written, blob.file.source, blob.file.media_type, len(blob.content)), lost
        )

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


def _renamed(out: Out, ids: ArticleIds, kept: Written) -> Written:
    """``kept`` moved to where ``out`` names the body of ``ids`` now (as it was if unreadable)."""
    location = out.body_location(ids, kept.media_type)
    if location == kept.path:
        return kept
    try:
        data = read_location(kept.path)
    except OSError:
        return kept  # gone or unreadable: the row keeps saying where it was
    written = out.write_to(location, data)
    out.remove(kept.path)
    return dataclasses.replace(kept, path=written)


def _kept(before: Mapping[str, object]) -> Blob | Written | None:
    """The body a row holds from an earlier run (a Blob, or a written file), if any."""
    body = before.get("body")
    if isinstance(body, Blob):
        return body
    path, source = before.get("body_path"), before.get("body_source")
    if isinstance(path, str) and isinstance(source, str):
        media = before.get("body_media_type")
        size = before.get("body_size")
        return Written(
            path,
            source,
            media if isinstance(media, str) else None,
            int(size) if isinstance(size, int) else size_of(path),
        )
    return None
