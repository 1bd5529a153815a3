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
from typing import Any, ClassVar, Final, TypeVar

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
from .gates import Gates, Slot, UnitHttp
from .outcome import INTERRUPTED, Outcome, Partial, attempt, is_none
from .plan import Plan, Units, parse_ids, plan_step, units_of
from .progress import Progress

__all__ = [
    "LIVE_UNITS_PER_SLOT",
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


@dataclasses.dataclass(frozen=True, slots=True)
class _Planned:
    step: UnitStep
    plan: Plan
    units: Units


LIVE_UNITS_PER_SLOT: Final = 4
"""Units started and not yet finished, per unit of ``concurrency``, waiting ones included."""

_UnitResult = list[dict[int, Outcome[Any]]]
"""Per step of the call, the outcome of each of the unit's rows the step worked on."""


class _Reads:
    """A row's cells of given columns as they stand once the earlier steps of the call are done."""

    def __init__(self, base: pd.DataFrame, planned: Sequence[_Planned]) -> None:
        self._base = base
        self._planned = planned
        self._prior: dict[tuple[int, str], list[object]] = {}
        self._writers: dict[tuple[int, str], int | None] = {}

    def _writer(self, step: int, name: str) -> int | None:
        # The last step before ``step`` that writes column ``name`` (looked up once per pair).
        key = (step, name)
        if key not in self._writers:
            self._writers[key] = next(
                (t for t in range(step - 1, -1, -1) if name in self._planned[t].step.dtypes),
                None,
            )
        return self._writers[key]

    def _before(self, writer: int | None, name: str) -> list[object]:
        # As fill() leaves a column: a step's own column starts afresh unless it re-runs.
        key = (-1 if writer is None else writer, name)
        if key not in self._prior:
            fresh = writer is not None and not self._planned[writer].plan.rerun
            self._prior[key] = [None] * len(self._base) if fresh else previous(self._base, name)
        return self._prior[key]

    def cells(
        self, step: int, row: int, names: Sequence[str], found: _UnitResult
    ) -> dict[str, object]:
        """Row ``row``'s cells of ``names`` for step ``step``; ``found``: its unit so far."""
        out: dict[str, object] = {}
        for name in names:
            writer = self._writer(step, name)
            if writer is not None and row in self._planned[writer].units.todo:
                outcome = found[writer].get(row)
                if name == self._planned[writer].step.error_column:
                    out[name] = outcome.error if outcome is not None else None
                    continue
                value = outcome.value if outcome is not None else None
                out[name] = (
                    self._planned[writer].step.cells(value).get(name) if value is not None else None
                )
            else:
                out[name] = self._before(writer, name)[row]
        return out

    def own(self, step: int, row: int) -> dict[str, object]:
        """Row ``row``'s own cells of step ``step`` from an earlier run (it re-runs)."""
        planned = self._planned[step]
        if not planned.plan.rerun:
            return {}
        return {name: self._before(None, name)[row] for name in planned.step.dtypes}


async def run_steps(
    base: pd.DataFrame,
    ctx: CallContext,
    steps: Sequence[UnitStep],
    *,
    force: bool,
    desc: str,
    parsed: ParsedIds | None = None,
    openalex_works: MutableMapping[str, dict[str, Any] | None] | None = None,
) -> pd.DataFrame:
    """Run ``steps`` over ``base``, each distinct bundle once; return it with their columns.

    ``force`` redoes every row (otherwise a frame holding a step's error
    column is a re-run of that step: only its abandoned rows are done again).
    ``openalex_works``: OpenAlex works (with access terms) the call already read,
    by lower-cased DOI; the bundles they cover are not asked about again (it is
    emptied once they are primed, so a long table does not keep them).
    """
    if parsed is None:
        parsed = parse_ids(base, ctx.explicit)  # every step reads the same id columns
    planned: list[_Planned] = []
    keys: dict[ArticleIds, ArticleIds] = {}
    for step in steps:
        plan = plan_step(base, ctx.explicit, step.error_column, force, parsed)
        planned.append(_Planned(step, plan, units_of(plan, keys)))
    del keys
    for p in planned:
        p.step.prepare(p.plan, ctx)
        if p.plan.rerun:
            p.step.keep_earlier(p.plan, functools.partial(previous, base))

    # Units in row order; each counts the rows any step does for it.
    rows_of: dict[ArticleIds, list[int]] = {}
    for i in sorted(set().union(*(p.units.todo for p in planned))):
        key = next(p.units.row_key[i] for p in planned if i in p.units.todo)
        rows_of.setdefault(key, []).append(i)

    reads = _Reads(base, planned)
    # Per step, the outcome of each row of a finished unit: one flat map per step, not a
    # list of small maps per unit (which cost a table of 20,000 bundles some 15 MB).
    results: _UnitResult = [{} for _ in planned]

    async def unit(http: UnitHttp, scope: Session, key: ArticleIds) -> _UnitResult:
        found: _UnitResult = [{} for _ in planned]
        scratch: dict[str, object] = {}
        for s, p in enumerate(planned):
            rows = [i for i in rows_of[key] if i in p.units.todo]
            groups: dict[Hashable, tuple[Job, list[int]]] = {}
            for i in rows:
                cells = reads.cells(s, i, p.step.reads, found) if p.step.reads else {}
                before = reads.own(s, i) if p.step.resumes else {}
                token = (p.step.token(cells), p.step.resume_token(before) if before else None)
                if token not in groups:
                    groups[token] = (Job(p.plan.bundles[i], cells, scratch, before), [])
                groups[token][1].append(i)
            for job, members in groups.values():
                outcome = await attempt(
                    scope,
                    functools.partial(p.step.work, http, job),
                    p.step.empty,
                    since=len(scope.failures),  # earlier failures are other steps'
                    partial=True,
                )
                for i in members:
                    found[s][i] = outcome
        return found

    # The bulk lookups each step asks for, over the bundles that need them: a step that
    # resumes may need fewer for a row it re-runs (a file-set missing one source only).
    wanted: dict[bulk.Service, dict[ArticleIds, None]] = {}
    for s, p in enumerate(planned):
        services = p.step.services()
        if not services:
            continue
        if not (p.plan.rerun and p.step.resumes):
            for service in services:
                wanted.setdefault(service, {}).update(dict.fromkeys(p.units.first.values()))
            continue
        for i in sorted(p.units.todo):
            bundle = p.units.first[p.units.row_key[i]]
            for service in p.step.services_for(reads.own(s, i)) & services:
                wanted.setdefault(service, {})[bundle] = None

    try:
        held = {} if openalex_works is None else openalex_works
        await _run_units_gated(ctx, rows_of, planned, unit, results, desc, wanted, held)
    except asyncio.CancelledError:
        done = [dict(per_step) for per_step in results]
        offer_partial(lambda: _assemble(base, planned, done, missing=INTERRUPTED))
        raise
    return _assemble(base, planned, results)


async def _run_units_gated(
    ctx: CallContext,
    rows_of: Mapping[ArticleIds, list[int]],
    planned: Sequence[_Planned],
    unit: Callable[[UnitHttp, Session, ArticleIds], Awaitable[_UnitResult]],
    results: _UnitResult,
    desc: str,
    wanted: Mapping[bulk.Service, Mapping[ArticleIds, None]],
    openalex_works: MutableMapping[str, dict[str, Any] | None],
) -> None:
    """Start the bulk lookups, then every unit, ``concurrency`` working at once; unprime.

    A unit's outcomes are added to ``results`` (per step, by row) once all
    its steps are done, and
    the answers primed for it alone are unprimed then; the rest at the end.
    """
    session = ctx.session
    credentials = dict(ctx.options.credentials)
    gates = Gates()
    keys = bulk.PrimedKeys(session)
    keys.on_add = gates.primed
    slots = asyncio.Semaphore(max(1, ctx.options.concurrency))
    # A unit waiting for a lookup gives its slot away, so without a second bound every unit
    # of the table would be started (and held, with its scope and cells) while a slow lookup
    # runs. This bounds the units started and not finished, parked ones included.
    live = asyncio.Semaphore(max(1, ctx.options.concurrency) * LIVE_UNITS_PER_SLOT)
    bar = progress_bar(ctx, sum(len(r) for r in rows_of.values()), desc)
    lead = planned[0] if planned else None

    async def one(key: ArticleIds, slot: Slot, rows: Sequence[int]) -> None:
        try:
            async with session.scope() as scope:
                found = await unit(UnitHttp(scope, gates, slot), scope, key)
        finally:
            slot.release()
            live.release()
        # Its primed answers have had their last use (unless another unit shares them).
        keys.release(key)
        for per_step, mine in zip(results, found, strict=True):
            per_step.update(mine)
        outcomes = [o for per_step in found for o in per_step.values()]
        tag = None
        if lead is not None:
            first = next((found[0][i] for i in rows if i in found[0]), None)
            if first is not None and first.value is not None:
                tag = lead.step.label(first.value)
        bar.advance(len(rows), label=tag, error=any(o.error is not None for o in outcomes))

    try:
        # Every lookup starts now, each service at its own pace; the units start at once
        # too, and only a request a lookup may answer waits for it (see UnitHttp).
        for service in bulk.Service:
            if service in wanted:
                bundles = list(wanted[service])
                if service is bulk.Service.OPENALEX_TERMS and openalex_works:
                    # The resolution's works filter read these already: primed, not asked.
                    held = bulk.prime_held(session, bundles, openalex_works, credentials, keys)
                    bundles = [b for i, b in enumerate(bundles) if i not in held]
                    openalex_works.clear()
                    if not bundles:
                        continue
                lookup = bulk.prime(session, bundles, {service}, credentials=credentials, into=keys)
                gates.add(service, asyncio.create_task(lookup))
        async with asyncio.TaskGroup() as group:
            for key, rows in rows_of.items():
                await live.acquire()
                await slots.acquire()
                group.create_task(one(key, Slot(slots), rows))
    finally:
        bar.close()
        try:
            await gates.close()  # no lookup may prime anything after the unprime below
        finally:
            session.unprime(keys)


def _assemble(
    base: pd.DataFrame,
    planned: Sequence[_Planned],
    results: _UnitResult,
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
