"""``df.lit.run()``: every asked step for each id bundle in one pass.

Chained calls (``df.lit.resolve().lit.fetch_bodies().lit.list_files()
.lit.licences()``) run each step over the whole frame before the next one
starts, so the hosts of different steps are never busy at the same time.
:func:`run` gives all the asked steps to the same runner at once
(:func:`~litfetch_df.frame.engine.runner.run_steps`):

1. ``resolve`` (when asked): the batch pre-pass, exactly as
   :func:`~litfetch_df.frame.engine.pipeline.resolve` (on a resolved frame it retries
   only the abandoned rows);
2. one pass over the distinct id bundles: each unit, in its own
   ``session.scope()``, does the asked steps in turn (body ladder, file-set,
   licence from the body's bytes else Unpaywall, relations), so a record the
   steps share is fetched once, through the scope's cache, and with many
   units in flight every host has work at the same time.

On a first run (the default resolver, no ``out_dir``) the two overlap: a row
whose ids the resolution will not change any more starts its steps at once,
while the others still resolve (ADR 0022).

The result has the columns, dtypes and values of the chained calls (in their
order: bodies, file-set, licences, relations), with each step judged on its
own: a step's error column says ``abandoned: …`` only for a failure of that
step's own requests. Calling :func:`run` again on the result retries, per
step, exactly the rows that step abandoned.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from typing import Any, Final

import pandas as pd

from ...files import FileKind
from ...operations.types import BatchResolver, Fetcher, FileSource
from ..io.outputs import open_out
from .context import CallContext, CallOptions, call_context
from .cost import plan_costs
from .plan import parse_ids
from .runner import EarlyRows, UnitStep, run_steps
from .spent import planned_by_host, record_requests, sent_since
from .steps.bodies import BodiesStep
from .steps.files import FilesStep
from .steps.licences import LicencesStep
from .steps.related import RelatedStep
from .steps.resolve import resolve_frame

__all__ = ["DEFAULT_STEPS", "STEPS", "parse_steps", "run"]

STEPS: Final[tuple[str, ...]] = ("resolve", "bodies", "files", "licences", "related")
"""Every step :func:`run` knows, in the order it always runs them."""

DEFAULT_STEPS: Final[tuple[str, ...]] = ("resolve", "bodies", "files", "licences")
"""The steps :func:`run` does when none are named."""


def parse_steps(steps: str | Iterable[str]) -> tuple[str, ...]:
    """Return the asked steps in run order; a string may name several, comma-separated.

    Raises :class:`ValueError` for an unknown step (naming the valid ones) or
    when no step is named.
    """
    if isinstance(steps, str):
        items: list[object] = [part.strip() for part in steps.split(",") if part.strip()]
    else:
        items = list(steps)
    unknown = [item for item in items if item not in STEPS]
    if unknown:
        shown = ", ".join(repr(item) for item in unknown)
        raise ValueError(f"unknown step {shown}; the steps are {', '.join(STEPS)}")
    if not items:
        raise ValueError(f"no step given; the steps are {', '.join(STEPS)}")
    return tuple(step for step in STEPS if step in items)


def _unit_steps(
    names: Sequence[str],
    ctx: CallContext,
    *,
    fetchers: Sequence[Fetcher] | None,
    sources: Sequence[FileSource] | None,
    kind: FileKind | None,
    out_dir: str | os.PathLike[str] | None,
) -> list[UnitStep]:
    credentials = dict(ctx.options.credentials)
    built: list[UnitStep] = []
    for name in names:
        if name == "bodies":
            out = open_out(out_dir) if out_dir is not None else None
            built.append(BodiesStep(fetchers, credentials, out))
        elif name == "files":
            built.append(FilesStep(sources, kind, credentials))
        elif name == "licences":
            built.append(LicencesStep(caller="run", credentials=credentials))
        elif name == "related":
            built.append(RelatedStep())
    return built


async def run(
    frame: pd.DataFrame,
    *,
    steps: str | Iterable[str] = DEFAULT_STEPS,
    fetchers: Sequence[Fetcher] | None = None,
    sources: Sequence[FileSource] | None = None,
    kind: FileKind | None = None,
    resolver: BatchResolver | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    force: bool = False,
    config: CallOptions | None = None,
) -> pd.DataFrame:
    """Run ``steps`` over ``frame`` in one pass; return the frame the chained calls give.

    ``steps`` (any order, or a comma-separated string) from :data:`STEPS`.
    ``resolve`` runs first as the batch pre-pass (``resolver``); the others in
    one pass over the distinct id bundles (see the module docstring).
    ``fetchers`` and ``out_dir`` are the bodies step's, ``sources`` and
    ``kind`` the file-set's, ``force`` applies to every step. Once this call
    has resolved, the steps read the canonical id columns it wrote (column
    names given in ``config`` are for the resolve step); without ``resolve``
    the ids are read as they stand.
    """
    wanted = parse_steps(steps)
    async with call_context(config or {}, frame, "run") as ctx:
        # The plan is priced before the first request so the frame can show it beside
        # what was sent (attrs, summary()): a plan that drifts from the run is visible.
        planned = _planned(frame, wanted, ctx)
        before = ctx.session.requests_by_host
        base = frame
        per_row = [step for step in wanted if step != "resolve"]
        # The steps that read OpenAlex's access terms ask its works filter about every DOI;
        # the resolution asks the same filter about the DOIs short of a PMID or PMCID. It
        # then selects the terms too and keeps the works, so no DOI is asked about twice.
        works: dict[str, dict[str, Any] | None] | None = (
            {} if resolver is None and {"files", "licences"} & set(per_row) else None
        )
        if per_row and "resolve" in wanted and _resolves_afresh(frame, resolver, force, out_dir):
            # A first run: each row's steps start once its ids are final (ADR 0022).
            steps_ = _unit_steps(
                per_row, ctx, fetchers=fetchers, sources=sources, kind=kind, out_dir=out_dir
            )
            out = await _resolve_and_run(frame, ctx, steps_, force, works)
            ctx = ctx.reading_canonical()
            record_requests(out, planned, sent_since(before, ctx.session.requests_by_host))
            return ctx.stamp(out)
        if "resolve" in wanted:
            base = await resolve_frame(base, ctx, resolver, force, openalex_works=works)
            ctx = ctx.reading_canonical()
        if not per_row:
            out = base.copy(deep=False) if base is frame else base
        else:
            steps_ = _unit_steps(
                per_row, ctx, fetchers=fetchers, sources=sources, kind=kind, out_dir=out_dir
            )
            out = await run_steps(base, ctx, steps_, force=force, desc="run", openalex_works=works)
        record_requests(out, planned, sent_since(before, ctx.session.requests_by_host))
        return ctx.stamp(out)


def _resolves_afresh(
    frame: pd.DataFrame,
    resolver: BatchResolver | None,
    force: bool,
    out_dir: str | os.PathLike[str] | None,
) -> bool:
    """Whether rows may start their steps while the others resolve: every step afresh.

    The default resolver only (it tells which bundles are final), no step
    re-running (its plan reads the resolved frame's earlier cells), and no
    bodies written to a directory (their names are reserved over the whole frame).
    """
    if resolver is not None or out_dir is not None:
        return False
    columns = {"resolve_error", "body_error", "files_error", "licence_error", "related_error"}
    return force or not (columns & set(frame.columns))


async def _resolve_and_run(
    frame: pd.DataFrame,
    ctx: CallContext,
    steps: Sequence[UnitStep],
    force: bool,
    works: dict[str, dict[str, Any] | None] | None,
) -> pd.DataFrame:
    """Resolve ``frame`` while the steps run over the rows whose ids are already final."""
    told: asyncio.Queue[tuple[list[int], pd.DataFrame] | None] = asyncio.Queue()

    def tell(rows: list[int], resolved: pd.DataFrame) -> None:
        told.put_nowait((rows, resolved))

    async def resolving() -> pd.DataFrame:
        try:
            return await resolve_frame(frame, ctx, None, force, openalex_works=works, on_final=tell)
        finally:
            told.put_nowait(None)

    total = sum(not ids.is_empty() for ids in parse_ids(frame, ctx.explicit).bundles)
    resolution = asyncio.create_task(resolving())
    try:
        early = EarlyRows(told, resolution, total)
        return await run_steps(
            frame,
            ctx.reading_canonical(),
            steps,
            force=force,
            desc="run",
            openalex_works=works,
            early=early,
        )
    except BaseException as exc:
        task = asyncio.current_task()
        if not isinstance(exc, asyncio.CancelledError) and not (task and task.cancelling()):
            # The pass failed, not the call: the resolution's requests already answered
            # are read and kept (a re-run asks them no more); what it asks next fails.
            await asyncio.gather(resolution, return_exceptions=True)
        raise
    finally:
        if not resolution.done():
            resolution.cancel()
        await asyncio.gather(resolution, return_exceptions=True)


def _planned(frame: pd.DataFrame, wanted: Sequence[str], ctx: CallContext) -> dict[str, int]:
    """The requests per host :func:`~litfetch_df.frame.engine.cost.plan_costs` expects of it."""
    session = ctx.session
    plan = plan_costs(
        frame,
        wanted,
        credentials=ctx.options.credentials,
        contact=bool(session.contact),
        ledger=session.quota,
        id_columns=ctx.explicit,
    )
    return planned_by_host(plan)
