"""The chained ``.lit`` calls: each step as an async function over a DataFrame.

Each function opens the call's context (:mod:`~litfetch_df.frame.engine.context`),
resolves the frame first unless told not to or it was resolved before
(:mod:`~litfetch_df.frame.engine.steps.resolve`), and hands its one step to the
runner (:func:`~litfetch_df.frame.engine.runner.run_steps`), the same runner
``df.lit.run()`` gives several steps to (:mod:`~litfetch_df.frame.engine.onepass`).
Rows are grouped by id bundle, each distinct bundle done once; each row ends
with an answer, ``NA`` for "nothing serves it", ``"abandoned: …"`` (a re-run
retries exactly those rows) or ``"error: …"`` in the step's error column. An
invalid identifier never becomes a request: it is reported in the error
column and the row keeps its other valid ids.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pandas as pd

from ...files import FileKind
from ...operations.types import BatchResolver, Fetcher, FileSource
from ..io.long import FILE_COLUMNS, files_long, is_listed, relations_long
from ..io.outputs import open_out
from .context import CallContext, CallOptions, call_context
from .outcome import Outcome, is_abandoned
from .plan import is_resolved
from .runner import UnitStep, run_steps, run_units
from .steps.bodies import BodiesStep
from .steps.downloads import download_files
from .steps.files import FilesStep
from .steps.licences import LicencesStep
from .steps.related import RelatedStep
from .steps.resolve import ensure_resolved, resolve_frame

__all__ = [
    "FILE_COLUMNS",
    "CallOptions",
    "Outcome",
    "fetch_bodies",
    "fetch_files",
    "files",
    "files_long",
    "is_abandoned",
    "is_listed",
    "is_resolved",
    "licences",
    "list_files",
    "related",
    "relations",
    "relations_long",
    "resolve",
    "run_units",
]


async def _one_step(
    frame: pd.DataFrame,
    ctx: CallContext,
    step: UnitStep,
    *,
    resolve: bool,
    resolver: BatchResolver | None,
    force: bool,
) -> pd.DataFrame:
    base, ctx = await ensure_resolved(frame, ctx, resolve, resolver)
    return await run_steps(base, ctx, [step], force=force, desc=step.desc)


async def resolve(
    frame: pd.DataFrame,
    *,
    resolver: BatchResolver | None = None,
    force: bool = False,
    config: CallOptions | None = None,
) -> pd.DataFrame:
    """Fill the canonical ``pmid``/``pmcid``/``doi``/``bookid`` columns by batch resolution.

    Returns a new frame; abandoned rows carry ``"abandoned: …"`` in
    ``resolve_error``. On a frame that was resolved before, only abandoned
    rows are sent again (``force=True`` redoes every row).
    """
    async with call_context(config or {}, frame, "resolve") as ctx:
        return ctx.stamp(await resolve_frame(frame, ctx, resolver, force))


async def fetch_bodies(
    frame: pd.DataFrame,
    *,
    fetchers: Sequence[Fetcher] | None = None,
    resolver: BatchResolver | None = None,
    resolve: bool = True,
    out_dir: str | os.PathLike[str] | None = None,
    force: bool = False,
    config: CallOptions | None = None,
) -> pd.DataFrame:
    """Walk the fetcher ladder for every row (``resolver=None`` per row); return a new frame.

    Runs the batch pre-pass first when the frame has not been resolved (unless
    ``resolve=False``; ``resolver`` is the batch resolver for it). Adds
    ``body`` (the :class:`Blob`), or ``body_path`` when ``out_dir`` is given,
    plus ``body_source``, ``body_media_type``, ``body_size``, ``body_error``.
    """
    async with call_context(config or {}, frame, "fetch_bodies") as ctx:
        step = BodiesStep(
            fetchers,
            dict(ctx.options.credentials),
            open_out(out_dir) if out_dir is not None else None,
        )
        out = await _one_step(frame, ctx, step, resolve=resolve, resolver=resolver, force=force)
        return ctx.stamp(out)


async def licences(
    frame: pd.DataFrame,
    *,
    resolver: BatchResolver | None = None,
    resolve: bool = True,
    force: bool = False,
    config: CallOptions | None = None,
) -> pd.DataFrame:
    """Add access terms per row: ``licence``, ``access``, ``oa_status``, bases, ``licence_error``.

    Read from the body bytes where the frame holds a body (``body`` or
    ``body_path``; basis ``'artifact'``), else — or for whatever the bytes leave
    out, typically the access status — asked of Unpaywall by DOI (basis
    ``'unpaywall'``; needs a contact). ``licence_basis`` says where the licence
    came from, ``access_basis`` where the access status came from.
    ``oa_status`` is Unpaywall's status for every row with a DOI, normalised
    (:mod:`~litfetch_df.frame.engine.oa_status`); NA when Unpaywall did not classify
    the article, since a body's own ``open-access`` names no colour.
    """
    async with call_context(config or {}, frame, "licences") as ctx:
        step = LicencesStep(credentials=dict(ctx.options.credentials))
        out = await _one_step(frame, ctx, step, resolve=resolve, resolver=resolver, force=force)
        return ctx.stamp(out)


async def _list_files(
    frame: pd.DataFrame,
    ctx: CallContext,
    *,
    sources: Sequence[FileSource] | None,
    kind: FileKind | None,
    resolver: BatchResolver | None,
    resolve: bool,
    force: bool,
) -> pd.DataFrame:
    step = FilesStep(sources, kind, dict(ctx.options.credentials))
    return await _one_step(frame, ctx, step, resolve=resolve, resolver=resolver, force=force)


async def list_files(
    frame: pd.DataFrame,
    *,
    sources: Sequence[FileSource] | None = None,
    kind: FileKind | None = None,
    resolver: BatchResolver | None = None,
    resolve: bool = True,
    force: bool = False,
    config: CallOptions | None = None,
) -> pd.DataFrame:
    """Add each row's file-set: ``files`` (a tuple of File), ``n_files``, ``files_error``."""
    async with call_context(config or {}, frame, "list_files") as ctx:
        out = await _list_files(
            frame,
            ctx,
            sources=sources,
            kind=kind,
            resolver=resolver,
            resolve=resolve,
            force=force,
        )
        return ctx.stamp(out)


async def files(
    frame: pd.DataFrame,
    *,
    sources: Sequence[FileSource] | None = None,
    kind: FileKind | None = None,
    resolver: BatchResolver | None = None,
    resolve: bool = True,
    config: CallOptions | None = None,
) -> pd.DataFrame:
    """Return the tidy file-set, listing the files first unless the frame was listed before.

    A frame was listed when it holds the step's ``files_error`` column or a
    ``files`` column of :class:`File` tuples; a ``files`` column of the
    caller's own (say, file names as text) is not a listing, and is replaced
    (with a warning) by one.
    """
    if not is_listed(frame):
        frame = await list_files(
            frame, sources=sources, kind=kind, resolver=resolver, resolve=resolve, config=config
        )
    return files_long(frame)


async def fetch_files(
    frame: pd.DataFrame,
    out_dir: str | os.PathLike[str],
    *,
    sources: Sequence[FileSource] | None = None,
    kind: FileKind | None = None,
    force: bool = False,
    config: CallOptions | None = None,
) -> pd.DataFrame:
    """Download every file of a long file-set frame into ``out_dir``; return a new frame.

    Adds ``path`` (where the bytes were written), ``size`` and ``fetch_error``.
    A frame that is not yet long (no ``source``/``kind`` columns) is first
    turned into one with :func:`files`. Names are safe and collision-free:
    hostile upstream filenames cannot leave ``out_dir``.
    """
    async with call_context(config or {}, frame, "fetch_files") as ctx:
        if not {"kind", "source"} <= set(frame.columns):
            listed = await _list_files(
                frame, ctx, sources=sources, kind=kind, resolver=None, resolve=True, force=False
            )
            frame = files_long(listed)
        out = await download_files(frame, ctx, out_dir, sources=sources, force=force)
        return ctx.stamp(out)


async def related(
    frame: pd.DataFrame,
    *,
    resolver: BatchResolver | None = None,
    resolve: bool = True,
    force: bool = False,
    config: CallOptions | None = None,
) -> pd.DataFrame:
    """Add preprint / published counterparts: ``related``, ``n_related``, ``preprint_doi``,
    ``published_doi``, ``related_error``."""
    async with call_context(config or {}, frame, "related") as ctx:
        out = await _one_step(
            frame, ctx, RelatedStep(), resolve=resolve, resolver=resolver, force=force
        )
        return ctx.stamp(out)


async def relations(
    frame: pd.DataFrame,
    *,
    resolver: BatchResolver | None = None,
    resolve: bool = True,
    config: CallOptions | None = None,
) -> pd.DataFrame:
    """Return the long form of :func:`related`, computing it first when needed."""
    if "related" not in frame.columns:
        frame = await related(frame, resolver=resolver, resolve=resolve, config=config)
    return relations_long(frame)
