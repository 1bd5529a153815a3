"""One pass of units over a frame: its bulk lookups, its slots, its progress.

:func:`~litfetch_df.frame.engine.runner.run_steps` plans the steps and hands each unit
(:class:`Work`) to a :class:`Pass`, which starts the bulk lookups the steps ask
for, holds a unit's request back while a lookup that may answer it runs
(:mod:`~litfetch_df.frame.engine.gates`), keeps ``concurrency`` units working at once
and at most :data:`LIVE_UNITS_PER_SLOT` times as many started, collects each
unit's outcomes and unprimes its answers when it is done. A pass may start
units before its lookups (:meth:`Pass.hold`): their requests wait as for a
running lookup until :meth:`Pass.start_lookups`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

import pandas as pd

from ...ids import ArticleIds
from ...session import Session
from ...sources.openalex import terms_key
from ..io.columns import bundle_key
from . import bulk
from .context import CallContext
from .gates import Gates, Slot, UnitHttp
from .outcome import Outcome
from .plan import parse_ids
from .progress import Progress

if TYPE_CHECKING:
    from .plan import Plan, Units
    from .runner import UnitStep

__all__ = [
    "LIVE_UNITS_PER_SLOT",
    "EarlyRows",
    "Pass",
    "Planned",
    "UnitResult",
    "Work",
    "told_works",
    "wanted_of",
    "works_of",
]


class _Labels(Protocol):
    def label(self, value: Any) -> str | None: ...


class _Own(Protocol):
    def own(self, step: int, row: int) -> dict[str, object]: ...


LIVE_UNITS_PER_SLOT: Final = 4
"""Units started and not yet finished, per unit of ``concurrency``, waiting ones included."""

UnitResult = list[dict[int, Outcome[Any]]]
"""Per step of the call, the outcome of each of the unit's rows the step worked on."""


@dataclasses.dataclass(frozen=True, slots=True)
class Work:
    """One unit: its key, every row any step does for it, and per step its (row, bundle)s."""

    key: ArticleIds
    rows: list[int]
    per_step: list[list[tuple[int, ArticleIds]]]


class Pass:
    """The bulk lookups and units of one pass: ``concurrency`` units working at once.

    A unit's outcomes are added to ``results`` (per step, by row) once all its
    steps are done, and the answers primed for it alone are unprimed then; the
    rest at :meth:`close`.
    """

    def __init__(
        self, ctx: CallContext, steps: Sequence[_Labels], results: UnitResult, bar: Progress
    ) -> None:
        self.steps = steps
        self._session = ctx.session
        self._credentials = dict(ctx.options.credentials)
        self._results = results
        self._bar = bar
        self._gates = Gates()
        self._keys = bulk.PrimedKeys(self._session)
        self._keys.on_add = self._gates.primed
        self._held: list[asyncio.Future[Any]] = []
        self._unpaywall_asked: set[str] = set()  # the DOIs Unpaywall was asked ahead about
        concurrency = max(1, ctx.options.concurrency)
        self._slots = asyncio.Semaphore(concurrency)
        # A unit waiting for a lookup gives its slot away, so without a second bound every
        # unit of the table would be started (and held, with its scope and cells) while a
        # slow lookup runs. This bounds the units started and not finished, parked included.
        self._live = asyncio.Semaphore(concurrency * LIVE_UNITS_PER_SLOT)

    def hold(self, services: frozenset[bulk.Service]) -> None:
        """Hold requests ``services`` may answer until :meth:`start_lookups` runs."""
        for service in services:
            waiting = asyncio.get_running_loop().create_future()
            self._held.append(waiting)
            self._gates.add(service, waiting)

    def start_lookups(
        self,
        wanted: Mapping[bulk.Service, Mapping[ArticleIds, None]],
        openalex_works: MutableMapping[str, dict[str, Any] | None] | None,
    ) -> None:
        """Start every lookup ``wanted`` asks for, each service at its own pace.

        Only a unit's request a lookup may answer waits for it (see UnitHttp).
        """
        session, credentials, keys = self._session, self._credentials, self._keys
        started: dict[bulk.Service, asyncio.Task[list[str]]] = {}
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
                if service is bulk.Service.UNPAYWALL:
                    # Asked ahead once OpenAlex's terms say which DOIs it does not know.
                    terms = started.get(bulk.Service.OPENALEX_TERMS)
                    lookup = bulk.prime_ahead(
                        session,
                        bundles,
                        credentials=credentials,
                        into=keys,
                        terms=terms,
                        asked=self._unpaywall_asked,
                    )
                else:
                    lookup = bulk.prime(
                        session, bundles, {service}, credentials=credentials, into=keys
                    )
                started[service] = asyncio.create_task(lookup)
                self._gates.add(service, started[service])
        for waiting in self._held:
            if not waiting.done():
                waiting.set_result([])

    def ask_ahead(
        self, bundles: Sequence[ArticleIds], works: Mapping[str, dict[str, Any] | None]
    ) -> None:
        """Ask Unpaywall ahead about those of ``bundles`` whose OpenAlex work ``works`` holds.

        For the units that start while the rest resolve: ``works`` is what the
        resolution read so far, by terms key (each judged now; the others are
        asked ahead with the lookups).
        """
        known: dict[str, dict[str, Any] | None] = {}
        chosen: list[ArticleIds] = []
        for ids in bundles:
            key = terms_key(ids)
            if key is not None and key.wire in works and ids.doi not in self._unpaywall_asked:
                known[key.wire] = works[key.wire]
                chosen.append(ids)
        if not chosen:
            return
        lookup = bulk.prime_ahead(
            self._session,
            chosen,
            credentials=self._credentials,
            into=self._keys,
            works=known,
            asked=self._unpaywall_asked,
        )
        self._gates.add(bulk.Service.UNPAYWALL, asyncio.create_task(lookup))

    async def start(
        self,
        group: asyncio.TaskGroup,
        work: Work,
        unit: Callable[[UnitHttp, Session, Work], Awaitable[UnitResult]],
    ) -> None:
        """Start ``work`` in ``group`` once a slot (and a live unit's place) is free."""
        await self._live.acquire()
        await self._slots.acquire()
        group.create_task(self._one(work, Slot(self._slots), unit))

    async def _one(
        self,
        work: Work,
        slot: Slot,
        unit: Callable[[UnitHttp, Session, Work], Awaitable[UnitResult]],
    ) -> None:
        try:
            async with self._session.scope() as scope:
                found = await unit(UnitHttp(scope, self._gates, slot), scope, work)
        finally:
            slot.release()
            self._live.release()
        # Its primed answers have had their last use (unless another unit shares them).
        self._keys.release(work.key)
        for per_step, mine in zip(self._results, found, strict=True):
            per_step.update(mine)
        outcomes = [o for per_step in found for o in per_step.values()]
        tag = None
        if self.steps:
            first = next((found[0][i] for i in work.rows if i in found[0]), None)
            if first is not None and first.value is not None:
                tag = self.steps[0].label(first.value)
        self._bar.advance(
            len(work.rows), label=tag, error=any(o.error is not None for o in outcomes)
        )

    async def close(self) -> None:
        """Close the bar, stop the lookups still running, unprime what is left."""
        self._bar.close()
        try:
            await self._gates.close()  # no lookup may prime anything after the unprime below
        finally:
            self._session.unprime(self._keys)


@dataclasses.dataclass(frozen=True, slots=True)
class EarlyRows:
    """Rows whose ids are final while the rest of the frame still resolves.

    ``told`` gets ``(rows, frame)`` for each batch of such rows (``frame``: those
    rows as the resolved frame will hold them), then ``None`` once the resolution
    is over; ``resolution`` gives the resolved frame. ``total``: the rows the
    steps will work on (for the progress bar).
    """

    told: asyncio.Queue[tuple[list[int], pd.DataFrame] | None]
    resolution: asyncio.Future[pd.DataFrame]
    total: int


def told_works(rows: list[int], frame: pd.DataFrame, ctx: CallContext, steps: int) -> list[Work]:
    """The units of rows told final (``frame``: those rows resolved), every step doing each."""
    parsed = parse_ids(frame, ctx.explicit)
    by_key: dict[ArticleIds, Work] = {}
    for i, bundle in zip(rows, parsed.bundles, strict=True):
        if bundle.is_empty():
            continue
        key = bundle_key(bundle)
        work = by_key.get(key)
        if work is None:
            work = by_key[key] = Work(key, [], [[] for _ in range(steps)])
        work.rows.append(i)
        for per_step in work.per_step:
            per_step.append((i, bundle))
    return list(by_key.values())


@dataclasses.dataclass(frozen=True, slots=True)
class Planned:
    """One step of a pass with its plan and units."""

    step: UnitStep
    plan: Plan
    units: Units


def works_of(planned: Sequence[Planned], skip: frozenset[int] = frozenset()) -> list[Work]:
    """The units of ``planned`` in row order (rows in ``skip`` left out: done already)."""
    rows_of: dict[ArticleIds, list[int]] = {}
    for i in sorted(set().union(*(p.units.todo for p in planned)) - skip):
        key = next(p.units.row_key[i] for p in planned if i in p.units.todo)
        rows_of.setdefault(key, []).append(i)
    return [
        Work(
            key,
            rows,
            [[(i, p.plan.bundles[i]) for i in rows if i in p.units.todo] for p in planned],
        )
        for key, rows in rows_of.items()
    ]


def wanted_of(
    planned: Sequence[Planned], reads: _Own
) -> dict[bulk.Service, dict[ArticleIds, None]]:
    """The bulk lookups each step asks for, over the bundles that need them.

    A step that resumes may need fewer for a row it re-runs (a file-set missing
    one source only).
    """
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
    return wanted
