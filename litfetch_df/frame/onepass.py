"""One pass over a frame: every asked step for each id bundle at once (``df.lit.run``).

Chained calls (``df.lit.resolve().lit.fetch_bodies().lit.list_files()
.lit.licences()``) run each step over the whole frame before the next one
starts, so the hosts of different steps are never busy at the same time, and
a record two steps read (Unpaywall's, for the file-set and the licence) is
asked for twice. :func:`run` does the same work in one pass:

1. ``resolve`` (when asked): the batch pre-pass, exactly as
   :func:`~litfetch_df.frame.pipeline.resolve` (on a resolved frame it retries
   only the abandoned rows);
2. the bulk lookups of every service the other asked steps can be primed
   from (see :mod:`litfetch_df.frame.bulk`) start at once, each over the
   bundles of the steps that need it;
3. one pass over the distinct id bundles: each unit, in its own
   ``session.scope()``, does the asked steps in turn (body ladder, file-set,
   licence from the body's bytes else Unpaywall, relations), so a record
   the steps share is fetched once, through the scope's cache, and with many
   units in flight every host has work at the same time. A request to a host
   whose bulk lookup is still running waits for it (and gives its unit's
   concurrency slot to another unit meanwhile), so the pass need not wait for
   the slowest bulk lookup to begin.

The result has the columns, dtypes and values of the chained calls (in their
order: bodies, file-set, licences, relations), with each step judged on its
own: a step's error column says ``abandoned: …`` only for a failure of that
step's own requests. Calling :func:`run` again on the result retries, per
step, exactly the rows that step abandoned.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, Final

import httpx
import pandas as pd

from .._http import Rate
from ..files import Blob, File, FileKind
from ..ids import ArticleIds
from ..metadata import Related, SourceMetadata
from ..operations.types import BatchResolver, Fetcher, FileSource
from ..session import Session
from . import bulk
from .bridge import offer_partial
from .columns import ParsedIds
from .outdir import OutDir
from .pipeline import (
    _FILES_DTYPES,
    _LICENCE_DTYPES,
    _RELATED_DTYPES,
    INTERRUPTED,
    CallOptions,
    Outcome,
    _attempt,
    _Bodies,
    _body_cells,
    _body_label,
    _context,
    _Ctx,
    _Files,
    _files_cells,
    _fill,
    _is_none,
    _licence_body,
    _licence_cells,
    _licence_empty,
    _licence_work,
    _LicenceInput,
    _none_found,
    _parse_ids,
    _Plan,
    _plan,
    _previous,
    _progress,
    _related_cells,
    _related_work,
    _resolve,
    _text,
    _units,
    _warn_without_contact,
    _Written,
)

__all__ = ["DEFAULT_STEPS", "STEPS", "parse_steps", "run"]

STEPS: Final[tuple[str, ...]] = ("resolve", "bodies", "files", "licences", "related")
"""Every step :func:`run` knows, in the order it always runs them."""

DEFAULT_STEPS: Final[tuple[str, ...]] = ("resolve", "bodies", "files", "licences")
"""The steps :func:`run` does when none are named."""

_ERROR_COLUMN: Final[Mapping[str, str]] = {
    "bodies": "body_error",
    "files": "files_error",
    "licences": "licence_error",
    "related": "related_error",
}

_BODY_COLUMNS: Final = ("body", "body_path", "body_media_type", "body_source")
"""What the licence step reads of a row's body."""


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


# -- holding requests back until a bulk lookup is in ----------------------------------------------


class _Gates:
    """The bulk lookups still running, and which per-article requests wait for them."""

    def __init__(self) -> None:
        self._lookups: list[tuple[bulk.Service, asyncio.Task[list[str]]]] = []

    def add(self, service: bulk.Service, task: asyncio.Task[list[str]]) -> None:
        """Hold requests ``service`` may prime until ``task`` (its lookup) is done."""
        self._lookups.append((service, task))

    def blocking(self, url: str) -> set[asyncio.Task[list[str]]]:
        """Return the unfinished lookups a request to ``url`` should wait for."""
        return {t for s, t in self._lookups if not t.done() and bulk.may_prime(s, url)}

    async def close(self) -> None:
        """Stop the lookups still running (the pass ended early) and wait for them."""
        tasks = [t for _, t in self._lookups]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


class _Slot:
    """One unit's share of the pass's concurrency, given up while it waits for a bulk lookup.

    ``concurrency`` bounds the units that are working; a unit waiting for a
    lookup is not working, so it lets another unit start meanwhile and takes a
    slot back once the lookup is in.
    """

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self._slots = slots
        self._held = True  # the pass acquired it before starting the unit
        self._waiting = 0
        self._taking = asyncio.Lock()

    async def wait_for(self, lookups: set[asyncio.Task[list[str]]]) -> None:
        """Wait until ``lookups`` are done, holding no slot meanwhile."""
        self._waiting += 1
        self.release()
        try:
            await asyncio.wait(lookups)
        finally:
            self._waiting -= 1
        async with self._taking:
            # The unit's other requests may still be waiting: the last one takes the slot.
            if not self._held and self._waiting == 0:
                await self._slots.acquire()
                self._held = True

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        if self._held:
            self._held = False
            self._slots.release()


class _UnitHttp:
    """A unit's scope as the ``Http`` its steps ask through, holding gated requests back.

    Requests, pacing, caching and failures are the scope's; only a request a
    running bulk lookup may answer waits for that lookup first.
    """

    def __init__(self, scope: Session, gates: _Gates, slot: _Slot) -> None:
        self._scope = scope
        self._gates = gates
        self._slot = slot

    @property
    def contact(self) -> str | None:
        """The session's contact email."""
        return self._scope.contact

    async def _gate(self, url: str) -> None:
        lookups = self._gates.blocking(url)
        if lookups:
            await self._slot.wait_for(lookups)

    async def get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        """The scope's GET, once no running bulk lookup may answer it."""
        await self._gate(url)
        return await self._scope.get(
            url, params=params, headers=headers, rate=rate, follow_redirects=follow_redirects
        )

    async def post(
        self,
        url: str,
        *,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
    ) -> httpx.Response:
        """The scope's POST, once no running bulk lookup may answer it."""
        await self._gate(url)
        return await self._scope.post(url, json=json, params=params, headers=headers, rate=rate)


# -- the plan of a pass ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _StepPlan:
    """One per-row step of the pass: its rows, its units and each unit's bundle."""

    plan: _Plan
    first: dict[ArticleIds, ArticleIds]
    row_key: list[ArticleIds]
    todo: frozenset[int]


def _step_plan(
    base: pd.DataFrame, ctx: _Ctx, step: str, force: bool, parsed: ParsedIds
) -> _StepPlan:
    plan = _plan(base, ctx, _ERROR_COLUMN[step], force, parsed)
    _, first, row_key = _units(plan)
    return _StepPlan(plan, first, row_key, frozenset(plan.todo))


@dataclasses.dataclass(frozen=True, slots=True)
class _BodyColumns:
    """A row's body cells as the bodies step leaves them, for the licence step to read."""

    prior: Mapping[str, list[object]]
    written: frozenset[str]
    redone: frozenset[int]

    def cells(self, i: int, value: Blob | _Written | None) -> dict[str, object]:
        """Row ``i``'s body cells; ``value`` is its unit's body when this pass fetched it."""
        out = {c: self.prior[c][i] for c in _BODY_COLUMNS}
        if i in self.redone:
            fresh = _body_cells(value) if value is not None else {}
            for c in self.written:
                out[c] = fresh.get(c)
        return out


def _body_columns(
    base: pd.DataFrame, bodies: _StepPlan | None, dtypes: Mapping[str, str]
) -> _BodyColumns:
    if bodies is None:
        return _BodyColumns(
            {c: _previous(base, c) for c in _BODY_COLUMNS}, frozenset(), frozenset()
        )
    written = frozenset(c for c in _BODY_COLUMNS if c in dtypes)
    # As _fill builds them: a written column starts from the frame only on a re-run.
    blank: list[object] = [None] * len(base)
    prior = {
        c: (_previous(base, c) if c not in written or bodies.plan.rerun else list(blank))
        for c in _BODY_COLUMNS
    }
    return _BodyColumns(prior, written, bodies.todo)


@dataclasses.dataclass
class _UnitResult:
    """What one unit found, per step (licences per row: rows may hold different bodies)."""

    body: Outcome[Blob | _Written] | None = None
    files: Outcome[tuple[File, ...]] | None = None
    licences: dict[int, Outcome[SourceMetadata]] = dataclasses.field(default_factory=dict)
    related: Outcome[tuple[Related, ...]] | None = None

    def errors(self) -> bool:
        """Whether any step of the unit ended with an error."""
        found = [self.body, self.files, self.related, *self.licences.values()]
        return any(o is not None and o.error is not None for o in found)


async def _step(
    scope: Session, call: Callable[[], Awaitable[Any]], empty: Callable[[Any], bool]
) -> Outcome[Any]:
    # The scope's failures before this step belong to the unit's earlier steps.
    return await _attempt(scope, call, empty, since=len(scope.failures))


# -- the pass ----------------------------------------------------------------------------------


async def _pass(
    base: pd.DataFrame,
    ctx: _Ctx,
    steps: Sequence[str],
    *,
    fetchers: Sequence[Fetcher] | None,
    sources: Sequence[FileSource] | None,
    kind: FileKind | None,
    out_dir: str | os.PathLike[str] | None,
    force: bool,
) -> pd.DataFrame:
    credentials = dict(ctx.options.credentials)
    parsed = _parse_ids(base, ctx)  # every step reads the same id columns: parse them once
    plans = {step: _step_plan(base, ctx, step, force, parsed) for step in steps}
    body_step = _Bodies(fetchers, credentials, OutDir(out_dir) if out_dir is not None else None)
    if body_step.out is not None and "bodies" in plans:
        body_step.out.reserve_bodies(plans["bodies"].plan.bundles)  # names in row order
    files_step = _Files(sources, kind, credentials)
    bodies, files = plans.get("bodies"), plans.get("files")
    licences, related = plans.get("licences"), plans.get("related")
    body_columns = _body_columns(base, bodies, body_step.dtypes)

    if (
        licences is not None
        and ctx.session.contact is None
        and any(licences.plan.bundles[i].doi for i in licences.plan.todo)
    ):
        _warn_without_contact("run")

    # Units in row order; each counts the rows any step does for it.
    rows_of: dict[ArticleIds, list[int]] = {}
    for i in sorted(set().union(*(p.todo for p in plans.values()))):
        key = next(p.row_key[i] for p in plans.values() if i in p.todo)
        rows_of.setdefault(key, []).append(i)
    licence_rows: dict[ArticleIds, list[int]] = {}
    if licences is not None:
        for i in licences.plan.todo:
            licence_rows.setdefault(licences.row_key[i], []).append(i)

    async def unit(http: _UnitHttp, scope: Session, key: ArticleIds) -> _UnitResult:
        found = _UnitResult()
        blob: Blob | None = None
        if bodies is not None and key in bodies.first:
            ids = bodies.first[key]

            async def fetch_body() -> Blob | _Written | None:
                nonlocal blob
                blob = await body_step.fetch(http, ids)
                return await body_step.keep(ids, blob)

            found.body = await _step(scope, fetch_body, _is_none)
        if files is not None and key in files.first:
            file_ids = files.first[key]
            found.files = await _step(scope, lambda: files_step.work(http, file_ids), _none_found)
        if licences is not None and key in licences.first:
            found.licences = await _licence_unit(
                http, scope, licences, licence_rows[key], body_columns, found.body, blob
            )
        if related is not None and key in related.first:
            related_ids = related.first[key]
            found.related = await _step(
                scope, lambda: _related_work(http, related_ids), _none_found
            )
        return found

    results: dict[ArticleIds, _UnitResult] = {}
    try:
        await _run_pass(ctx, rows_of, plans, unit, credentials, body_step, files_step, results)
    except asyncio.CancelledError:
        done = dict(results)
        offer_partial(lambda: _assemble(base, plans, done, body_step.dtypes, missing=INTERRUPTED))
        raise
    return _assemble(base, plans, results, body_step.dtypes)


async def _licence_unit(
    http: _UnitHttp,
    scope: Session,
    licences: _StepPlan,
    rows: Sequence[int],
    body_columns: _BodyColumns,
    body: Outcome[Blob | _Written] | None,
    blob: Blob | None,
) -> dict[int, Outcome[SourceMetadata]]:
    """The licence step for one unit's rows, grouped by the body each row holds (as chained)."""
    value = body.value if body is not None else None
    groups: dict[Hashable, _LicenceInput] = {}
    token_of: dict[int, Hashable] = {}
    for i in rows:
        cells = body_columns.cells(i, value)
        token, held = _licence_body(cells["body"], cells["body_path"])
        if isinstance(value, _Written) and held == value.path and blob is not None:
            held = blob  # the bytes just written are still in memory: no need to read them back
        token_of[i] = token
        if token not in groups:
            groups[token] = _LicenceInput(
                licences.plan.bundles[i],
                held,
                _text(cells["body_media_type"]),
                _text(cells["body_source"]),
            )
    outcomes: dict[Hashable, Outcome[SourceMetadata]] = {}
    for token, item in groups.items():
        outcomes[token] = await _step(
            scope, functools.partial(_licence_work, http, item), _licence_empty
        )
    return {i: outcomes[token_of[i]] for i in rows}


async def _run_pass(
    ctx: _Ctx,
    rows_of: Mapping[ArticleIds, list[int]],
    plans: Mapping[str, _StepPlan],
    unit: Callable[[_UnitHttp, Session, ArticleIds], Awaitable[_UnitResult]],
    credentials: Mapping[str, object],
    body_step: _Bodies,
    files_step: _Files,
    results: dict[ArticleIds, _UnitResult],
) -> None:
    """Prime, then run every unit, ``concurrency`` working at once, into ``results``; unprime.

    A unit's result is added once all its steps are done.
    """
    session = ctx.session
    wanted: dict[bulk.Service, dict[ArticleIds, None]] = {}
    services = {
        "bodies": body_step.services(),
        "files": files_step.services(),
        "related": bulk.for_related(),
        "licences": bulk.for_licences(),
    }
    for step, plan in plans.items():
        for service in services.get(step, frozenset()):
            wanted.setdefault(service, {}).update(dict.fromkeys(plan.first.values()))

    keys: list[str] = []
    gates = _Gates()
    slots = asyncio.Semaphore(max(1, ctx.options.concurrency))
    bar = _progress(ctx, sum(len(r) for r in rows_of.values()), "run")

    async def one(key: ArticleIds, slot: _Slot, rows: int) -> None:
        try:
            async with session.scope() as scope:
                found = await unit(_UnitHttp(scope, gates, slot), scope, key)
        finally:
            slot.release()
        results[key] = found
        value = found.body.value if found.body is not None else None
        bar.advance(rows, label=_body_label(value), error=found.errors())

    try:
        # Every lookup starts now, each service at its own pace; the units start at once
        # too, and only a request a lookup may answer waits for it (see _UnitHttp).
        for service in bulk.Service:
            if service in wanted:
                lookup = bulk.prime(
                    session, list(wanted[service]), {service}, credentials=credentials, into=keys
                )
                gates.add(service, asyncio.create_task(lookup))
        async with asyncio.TaskGroup() as group:
            for key, rows in rows_of.items():
                await slots.acquire()
                group.create_task(one(key, _Slot(slots), len(rows)))
    finally:
        bar.close()
        try:
            await gates.close()  # no lookup may prime anything after the unprime below
        finally:
            session.unprime(keys)


def _assemble(
    base: pd.DataFrame,
    plans: Mapping[str, _StepPlan],
    results: Mapping[ArticleIds, _UnitResult],
    body_dtypes: Mapping[str, str],
    *,
    missing: Outcome[Any] | None = None,
) -> pd.DataFrame:
    """Add each step's columns in the chained order, each from its own outcomes.

    A row whose unit has no result gets ``missing`` (``None``: left as it was).
    """
    out = base
    specs: list[tuple[str, Callable[[_UnitResult, int], Outcome[Any] | None], Any, Any, Any]] = [
        ("bodies", lambda r, i: r.body, _body_cells, body_dtypes, _is_none),
        ("files", lambda r, i: r.files, _files_cells, _FILES_DTYPES, _none_found),
        (
            "licences",
            lambda r, i: r.licences.get(i),
            _licence_cells,
            _LICENCE_DTYPES,
            _licence_empty,
        ),
        ("related", lambda r, i: r.related, _related_cells, _RELATED_DTYPES, _none_found),
    ]
    for step, pick, cells, dtypes, empty in specs:
        plan = plans.get(step)
        if plan is None:
            continue

        def row_outcome(
            i: int,
            plan: _StepPlan = plan,
            pick: Callable[[_UnitResult, int], Outcome[Any] | None] = pick,
        ) -> Outcome[Any] | None:
            found = results.get(plan.row_key[i])
            return pick(found, i) if found is not None else missing

        out = _fill(out, plan.plan, row_outcome, cells, dtypes, _ERROR_COLUMN[step], empty)
    return out


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
    async with _context(config or {}, frame, "run") as ctx:
        base = frame
        if "resolve" in wanted:
            base = await _resolve(base, ctx, resolver, force)
            ctx = dataclasses.replace(ctx, explicit={})
        per_row = [step for step in wanted if step != "resolve"]
        if not per_row:
            return ctx.stamp(base.copy(deep=False) if base is frame else base)
        out = await _pass(
            base,
            ctx,
            per_row,
            fetchers=fetchers,
            sources=sources,
            kind=kind,
            out_dir=out_dir,
            force=force,
        )
        return ctx.stamp(out)
