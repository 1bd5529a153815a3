"""The one runner every ``.lit`` step goes through.

A chained call (``df.lit.fetch_bodies()``) is :func:`run_steps` with one
step; ``df.lit.run()`` is the same runner with several. One
:class:`~litfetch_df.Session` serves the whole frame, so per-host pacing and
the connection pool are shared by every row. For each call the runner:

1. plans every step over the frame (:mod:`~litfetch_df.frame.engine.plan`): which
   rows it works on, grouped into units by id bundle, each distinct bundle
   done once and its answer fanned back to every row that carries it;
2. starts the bulk lookups (:mod:`~litfetch_df.frame.engine.bulk`) of every service
   the steps can be primed from, each over the bundles of the steps that need
   it, and starts the units at once: a request a running lookup may answer
   waits until its own answer is primed, or the lookup is done
   (:mod:`~litfetch_df.frame.engine.gates`);
3. runs each unit in its own ``session.scope()``, ``concurrency`` units at a
   time, doing the steps in turn, so a record two steps read is fetched once
   through the scope's cache and, with many units in flight, every host has
   work at the same time; each step is judged on its own requests;
4. fills each step's columns (:mod:`~litfetch_df.frame.engine.fill`), in step order.

In ``run()``'s first pass over a frame the resolution is still going when the
runner starts (:class:`~litfetch_df.frame.engine.unit_pass.EarlyRows`): a row whose
ids are final starts its steps at once, and the bulk lookups, which need every
bundle, start when the resolution is over (ADR 0022).

A step is a value (:class:`UnitStep`): its columns and dtypes, its error
column, what it reads of the cells earlier steps leave, its bulk lookups, the
work for one unit and how a result becomes cells. Interrupted, the runner
offers the frame of the units finished so far, the others abandoned, so a
re-run of it works exactly those rows.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Awaitable, Callable, Hashable, Mapping, MutableMapping, Sequence
from typing import Any, ClassVar, TypeVar

import pandas as pd

from ...ids import ArticleIds
from ...session import Session
from ...wire.http import Http
from ..io.columns import ParsedIds
from ..io.table import previous
from . import bulk
from .bridge import offer_partial
from .context import CallContext
from .fill import fill
from .gates import UnitHttp
from .outcome import INTERRUPTED, Outcome, Partial, attempt, is_none
from .plan import Plan, parse_ids, plan_step, units_of
from .progress import Progress
from .unit_pass import (
    LIVE_UNITS_PER_SLOT,
    EarlyRows,
    Pass,
    Planned,
    UnitResult,
    Work,
    told_works,
    wanted_of,
    works_of,
)

__all__ = [
    "LIVE_UNITS_PER_SLOT",
    "EarlyRows",
    "Job",
    "UnitStep",
    "progress_bar",
    "run_keyed",
    "run_steps",
    "run_units",
]

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")


@dataclasses.dataclass(frozen=True, slots=True)
class Job:
    """What one step's work gets for one unit (or one group of a unit's rows).

    ``ids``: the bundle of the group's first row. ``cells``: that row's cells
    of the step's :attr:`~UnitStep.reads`, as they stand once the earlier
    steps of this call are done. ``scratch``: what earlier steps of the same
    unit left for later ones (say, body bytes just written to disk); it is
    dropped with the unit. ``before``: for a step that
    :attr:`~UnitStep.resumes`, the row's own cells from an earlier run of the
    step when this call re-runs it (empty otherwise: the step starts afresh).
    """

    ids: ArticleIds
    cells: Mapping[str, object] = dataclasses.field(default_factory=dict)
    scratch: dict[str, object] = dataclasses.field(default_factory=dict)
    before: Mapping[str, object] = dataclasses.field(default_factory=dict)


class UnitStep:
    """A per-bundle step, as the runner needs it. Subclasses are frozen dataclasses.

    Class attributes: ``name`` (as :func:`~litfetch_df.frame.engine.onepass.run`
    names it), ``error_column``, ``desc`` (its progress bar when called on
    its own), ``reads`` (columns of earlier steps its work reads per row; an
    earlier step's error column reads as its unit's error, untagged) and
    ``resumes`` (whether a re-run's work reads the row's own earlier cells,
    :attr:`Job.before`, to ask only what the earlier run did not get).

    A work may return its value wrapped in
    :class:`~litfetch_df.frame.engine.outcome.Partial` to say which sources it gave
    up; otherwise any request its unit gave up makes a found value partial.
    """

    name: ClassVar[str]
    error_column: ClassVar[str]
    desc: ClassVar[str]
    reads: ClassVar[tuple[str, ...]] = ()
    resumes: ClassVar[bool] = False

    @property
    def dtypes(self) -> Mapping[str, str]:
        """The step's output columns and their dtypes, its error column last."""
        raise NotImplementedError

    def services(self) -> frozenset[bulk.Service]:
        """The bulk lookups that answer this step's per-article requests in advance."""
        return frozenset()

    def services_for(self, before: Mapping[str, object]) -> frozenset[bulk.Service]:
        """The bulk lookups a re-run of a row needs, given its cells from the earlier run.

        Asked only of a step that :attr:`resumes`, for the rows it does again;
        the default is every one of :meth:`services`.
        """
        return self.services()

    def prepare(self, plan: Plan, ctx: CallContext) -> None:
        """Look at the step's plan before any unit runs (reserve names, warn once)."""

    def keep_earlier(self, plan: Plan, earlier: Callable[[str], Sequence[object]]) -> None:
        """On a re-run, see what the rows not redone keep (``earlier(column)``: its cells)."""

    def token(self, cells: Mapping[str, object]) -> Hashable:
        """Group a unit's rows by what they read: rows with equal tokens share one work."""
        return None

    def resume_token(self, before: Mapping[str, object]) -> Hashable:
        """Group a re-run's rows by what they hold from the earlier run (see ``resumes``)."""
        return None

    async def work(self, http: Http, job: Job) -> Any | Partial[Any]:
        """The step's work for one group of a unit's rows; returns its value."""
        raise NotImplementedError

    def cells(self, value: Any) -> Mapping[str, object]:
        """The row cells of a (non-``None``) value, by column name."""
        raise NotImplementedError

    def empty(self, value: Any) -> bool:
        """Whether ``value`` found nothing (then a failed request abandons the row)."""
        return value is None

    def label(self, value: Any) -> str | None:
        """A short tag for the progress bar's per-source counts, if any."""
        return None


# -- running keyed work ------------------------------------------------------------------------


async def run_units(
    units: Mapping[K, int],
    work: Callable[[Session, K], Awaitable[R]],
    *,
    session: Session,
    concurrency: int,
    progress: Progress,
    empty: Callable[[R], bool] = is_none,
    label: Callable[[R], str | None] = lambda _: None,
    into: dict[K, Outcome[R]] | None = None,
) -> dict[K, Outcome[R]]:
    """Run ``work(scope, key)`` once per key, ``concurrency`` at a time, each in its own scope.

    ``units`` maps each key to the number of rows that share it (for the
    progress count). Returns every key's :class:`Outcome`, collected in
    ``into`` when given (so a caller still holds the finished ones after a
    cancellation). Cancellation (an interrupt) stops the workers and propagates.
    """
    results: dict[K, Outcome[R]] = {} if into is None else into
    queue = iter(units.items())

    async def worker() -> None:
        for key, rows in queue:  # one shared iterator: each key is taken exactly once
            async with session.scope() as scope:
                outcome = await attempt(scope, functools.partial(work, scope, key), empty)
            results[key] = outcome
            tag = label(outcome.value) if outcome.value is not None else None
            progress.advance(rows, label=tag, error=outcome.error is not None)

    async with asyncio.TaskGroup() as group:
        for _ in range(max(1, min(concurrency, len(units)))):
            group.create_task(worker())
    return results


def progress_bar(ctx: CallContext, total: int, desc: str) -> Progress:
    """The call's progress bar over ``total`` rows (shown when its options say so)."""
    return Progress(total, desc=desc, enabled=ctx.options.progress)


async def run_keyed(
    ctx: CallContext,
    units: Mapping[K, int],
    work: Callable[[Session, K], Awaitable[R]],
    desc: str,
    *,
    empty: Callable[[R], bool] = is_none,
    label: Callable[[R], str | None] = lambda _: None,
    partial: Callable[[Mapping[K, Outcome[R]]], pd.DataFrame] | None = None,
) -> dict[K, Outcome[R]]:
    """:func:`run_units` on the call's session and concurrency, under a progress bar ``desc``.

    If the run is cancelled (an interrupt), ``partial`` builds the step's frame
    from the outcomes finished so far, for a synchronous caller to keep
    (:func:`~litfetch_df.frame.engine.bridge.offer_partial`).
    """
    results: dict[K, Outcome[R]] = {}
    with progress_bar(ctx, sum(units.values()), desc) as bar:
        try:
            await run_units(
                units,
                work,
                session=ctx.session,
                concurrency=ctx.options.concurrency,
                progress=bar,
                empty=empty,
                label=label,
                into=results,
            )
        except asyncio.CancelledError:
            if partial is not None:
                offer_partial(lambda: partial(dict(results)))
            raise
    return results


# -- the per-bundle steps ----------------------------------------------------------------------


class _Reads:
    """A row's cells of given columns as they stand once the earlier steps of the call are done."""

    def __init__(
        self, base: pd.DataFrame, steps: Sequence[UnitStep], reruns: Sequence[bool]
    ) -> None:
        self._base = base
        self._steps = steps
        self._reruns = reruns
        self._prior: dict[tuple[int, str], list[object]] = {}
        self._writers: dict[tuple[int, str], int | None] = {}

    def _writer(self, step: int, name: str) -> int | None:
        # The last step before ``step`` that writes column ``name`` (looked up once per pair).
        key = (step, name)
        if key not in self._writers:
            self._writers[key] = next(
                (t for t in range(step - 1, -1, -1) if name in self._steps[t].dtypes), None
            )
        return self._writers[key]

    def _before(self, writer: int | None, name: str) -> list[object]:
        # As fill() leaves a column: a step's own column starts afresh unless it re-runs.
        key = (-1 if writer is None else writer, name)
        if key not in self._prior:
            fresh = writer is not None and not self._reruns[writer]
            self._prior[key] = [None] * len(self._base) if fresh else previous(self._base, name)
        return self._prior[key]

    def cells(
        self, step: int, row: int, names: Sequence[str], found: UnitResult
    ) -> dict[str, object]:
        """Row ``row``'s cells of ``names`` for step ``step``; ``found``: its unit so far."""
        out: dict[str, object] = {}
        for name in names:
            writer = self._writer(step, name)
            # The writer worked on the row in this unit iff it left the row an outcome.
            if writer is not None and row in found[writer]:
                outcome = found[writer][row]
                if name == self._steps[writer].error_column:
                    out[name] = outcome.error
                    continue
                value = outcome.value
                out[name] = (
                    self._steps[writer].cells(value).get(name) if value is not None else None
                )
            else:
                out[name] = self._before(writer, name)[row]
        return out

    def own(self, step: int, row: int) -> dict[str, object]:
        """Row ``row``'s own cells of step ``step`` from an earlier run (it re-runs)."""
        if not self._reruns[step]:
            return {}
        return {name: self._before(None, name)[row] for name in self._steps[step].dtypes}


async def _unit(
    steps: Sequence[UnitStep], reads: _Reads, http: UnitHttp, scope: Session, work: Work
) -> UnitResult:
    """Do ``work``'s steps in turn in ``scope``; each judged on its own requests."""
    found: UnitResult = [{} for _ in steps]
    scratch: dict[str, object] = {}
    for s, step in enumerate(steps):
        groups: dict[Hashable, tuple[Job, list[int]]] = {}
        for i, bundle in work.per_step[s]:
            cells = reads.cells(s, i, step.reads, found) if step.reads else {}
            before = reads.own(s, i) if step.resumes else {}
            token = (step.token(cells), step.resume_token(before) if before else None)
            if token not in groups:
                groups[token] = (Job(bundle, cells, scratch, before), [])
            groups[token][1].append(i)
        for job, members in groups.values():
            outcome = await attempt(
                scope,
                functools.partial(step.work, http, job),
                step.empty,
                since=len(scope.failures),  # earlier failures are other steps'
                partial=True,
            )
            for i in members:
                found[s][i] = outcome
    return found


async def run_steps(
    base: pd.DataFrame,
    ctx: CallContext,
    steps: Sequence[UnitStep],
    *,
    force: bool,
    desc: str,
    parsed: ParsedIds | None = None,
    openalex_works: MutableMapping[str, dict[str, Any] | None] | None = None,
    early: EarlyRows | None = None,
) -> pd.DataFrame:
    """Run ``steps`` over ``base``, each distinct bundle once; return it with their columns.

    ``force`` redoes every row (otherwise a frame holding a step's error
    column is a re-run of that step: only its abandoned rows are done again).
    ``openalex_works``: OpenAlex works (with access terms) the call already read,
    by lower-cased DOI; the bundles they cover are not asked about again (it is
    emptied once they are primed, so a long table does not keep them).
    ``early``: ``base`` is still being resolved (a first run, every step
    afresh); the units of the rows it tells final start at once, the bulk
    lookups and the other units once the resolved frame is in (ADR 0022).
    """
    if early is not None:
        return await _run_early(base, ctx, steps, force, desc, openalex_works, early)
    planned = _plan(base, ctx, steps, force, parsed)
    reads = _Reads(base, [p.step for p in planned], [p.plan.rerun for p in planned])
    # Per step, the outcome of each row of a finished unit: one flat map per step, not a
    # list of small maps per unit (which cost a table of 20,000 bundles some 15 MB).
    results: UnitResult = [{} for _ in planned]
    works = works_of(planned)
    bar = progress_bar(ctx, sum(len(w.rows) for w in works), desc)
    run = Pass(ctx, [p.step for p in planned], results, bar)
    unit = functools.partial(_unit, steps, reads)
    try:
        try:
            run.start_lookups(wanted_of(planned, reads), openalex_works)
            async with asyncio.TaskGroup() as group:
                for work in works:
                    await run.start(group, work, unit)
        finally:
            await run.close()
    except asyncio.CancelledError:
        done = [dict(per_step) for per_step in results]
        offer_partial(lambda: _assemble(base, planned, done, missing=INTERRUPTED))
        raise
    return _assemble(base, planned, results)


async def _run_early(
    base: pd.DataFrame,
    ctx: CallContext,
    steps: Sequence[UnitStep],
    force: bool,
    desc: str,
    openalex_works: MutableMapping[str, dict[str, Any] | None] | None,
    early: EarlyRows,
) -> pd.DataFrame:
    """:func:`run_steps` while ``base`` resolves: the rows told final start first."""
    results: UnitResult = [{} for _ in steps]
    run = Pass(ctx, list(steps), results, progress_bar(ctx, early.total, desc))
    # Until the lookups start, a request one of them may answer waits as for a running one.
    services: frozenset[bulk.Service] = frozenset().union(*(s.services() for s in steps))
    run.hold(services)
    # Unpaywall is asked ahead for a DOI OpenAlex does not know as soon as its row starts.
    ahead = openalex_works if bulk.Service.UNPAYWALL in services else None
    first_unit = functools.partial(_unit, steps, _Reads(base, steps, [False] * len(steps)))
    started: set[int] = set()
    resolved: pd.DataFrame | None = None
    planned: list[Planned] = []
    try:
        try:
            async with asyncio.TaskGroup() as group:
                ready: asyncio.Queue[Work | None] = asyncio.Queue()

                async def told() -> None:
                    # Taken as told (Unpaywall asked ahead at once), started as slots free.
                    while (batch := await early.told.get()) is not None:
                        works = told_works(*batch, ctx, len(steps))
                        if ahead:
                            run.ask_ahead([w.per_step[0][0][1] for w in works], ahead)
                        for work in works:
                            ready.put_nowait(work)
                    ready.put_nowait(None)

                async def start_told() -> None:
                    while (work := await ready.get()) is not None:
                        started.update(work.rows)
                        await run.start(group, work, first_unit)

                group.create_task(told())
                feeding = group.create_task(start_told())
                # Shielded: a failing unit stops the pass, not the resolution (its caller decides).
                resolved = await asyncio.shield(early.resolution)
                planned = _plan(resolved, ctx, steps, force, None)
                reads = _Reads(resolved, steps, [p.plan.rerun for p in planned])
                run.start_lookups(wanted_of(planned, reads), openalex_works)
                await feeding
                unit = functools.partial(_unit, steps, reads)
                for work in works_of(planned, frozenset(started)):
                    await run.start(group, work, unit)
        finally:
            await run.close()
    except asyncio.CancelledError:
        if resolved is not None and planned:
            done = [dict(per_step) for per_step in results]
            frame = resolved
            offer_partial(lambda: _assemble(frame, planned, done, missing=INTERRUPTED))
        raise
    return _assemble(resolved, planned, results)


def _plan(
    base: pd.DataFrame,
    ctx: CallContext,
    steps: Sequence[UnitStep],
    force: bool,
    parsed: ParsedIds | None,
) -> list[Planned]:
    """Plan each step over ``base`` and let it look at its plan (prepare, keep earlier cells)."""
    if parsed is None:
        parsed = parse_ids(base, ctx.explicit)  # every step reads the same id columns
    planned: list[Planned] = []
    keys: dict[ArticleIds, ArticleIds] = {}
    for step in steps:
        plan = plan_step(base, ctx.explicit, step.error_column, force, parsed)
        planned.append(Planned(step, plan, units_of(plan, keys)))
    for p in planned:
        p.step.prepare(p.plan, ctx)
        if p.plan.rerun:
            p.step.keep_earlier(p.plan, functools.partial(previous, base))
    return planned


def _assemble(
    base: pd.DataFrame,
    planned: Sequence[Planned],
    results: UnitResult,
    *,
    missing: Outcome[Any] | None = None,
) -> pd.DataFrame:
    """Add each step's columns in step order, each from its own outcomes (by step, by row).

    A row whose unit has not finished gets ``missing`` (``None``: left as it was).
    """
    out = base
    for s, p in enumerate(planned):

        def row_outcome(i: int, s: int = s) -> Outcome[Any] | None:
            return results[s].get(i, missing)

        out = fill(
            out, p.plan, row_outcome, p.step.cells, p.step.dtypes, p.step.error_column, p.step.empty
        )
    return out
