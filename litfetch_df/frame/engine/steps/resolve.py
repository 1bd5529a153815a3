"""The resolve step: the batch pre-pass that fills the canonical id columns.

Distinct bundles are sent to a batch resolver in chunks of
:data:`RESOLVE_CHUNK`; every row gets its bundle merged with what the
resolver found. A chunk given up leaves its rows with the ids they had and
``abandoned: …`` in ``resolve_error``; resolving the returned frame again
sends only those rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, Final, Protocol, cast

import pandas as pd

from ....ids import ArticleIds
from ....operations.resolution import tells_final
from ....operations.types import BatchResolver
from ....session import Session
from ...io.columns import CANONICAL
from ...io.table import previous, with_columns
from ..context import CallContext
from ..errors import compact, row_error
from ..options import Options
from ..outcome import INTERRUPTED, Outcome, join, short
from ..plan import Plan, is_resolved, plan_step, units_of
from ..runner import run_keyed

__all__ = ["RESOLVE_CHUNK", "ensure_resolved", "resolve_frame"]

RESOLVE_CHUNK: Final = 1000
"""Distinct bundles per batch-resolver call: a multiple of every bundled resolver's cap."""

_DTYPES: Final = {**{k: "string" for k in CANONICAL}, "resolve_error": "string"}

_Found = tuple[dict[ArticleIds, ArticleIds], set[ArticleIds], str]
"""One chunk's answer: merged ids per key, the keys given up, and why."""


def _default_batch_resolver(
    options: Options, works: MutableMapping[str, dict[str, Any] | None] | None
) -> BatchResolver:
    from ....operations.resolution import default_batch_resolver

    key = options.credentials.get("openalex_api_key")
    return default_batch_resolver(openalex_api_key=str(key) if key else None, openalex_works=works)


async def resolve_frame(
    frame: pd.DataFrame,
    ctx: CallContext,
    resolver: BatchResolver | None,
    force: bool,
    *,
    openalex_works: MutableMapping[str, dict[str, Any] | None] | None = None,
    on_final: Callable[[list[int], pd.DataFrame], None] | None = None,
) -> pd.DataFrame:
    """Return ``frame`` with its ids resolved in batches (``resolver``, else the default).

    ``openalex_works`` (the default resolver only): where each DOI's OpenAlex work
    with its access terms goes as the resolution reads it, for later steps.
    ``on_final``: told, while the rest still resolve, the rows whose ids are
    final, with those rows as the returned frame will hold them; only on a
    first resolution of at most :data:`RESOLVE_CHUNK` distinct bundles by a
    resolver that tells them (:func:`~litfetch_df.operations.resolution.tells_final`,
    as the default one does), else never.
    """
    plan = plan_step(frame, ctx.explicit, "resolve_error", force)
    units = units_of(plan)
    first = units.first
    keys = list(first)
    chunks = [keys[i : i + RESOLVE_CHUNK] for i in range(0, len(keys), RESOLVE_CHUNK)]
    batch = (
        resolver
        if resolver is not None
        else (_default_batch_resolver(ctx.options, openalex_works) if keys else None)
    )
    tell = (
        _teller(frame, plan, first, units.row_key, on_final)
        if on_final is not None and tells_final(batch) and len(chunks) == 1 and not plan.rerun
        else None
    )

    async def work(http: Session, index: int) -> _Found:
        assert batch is not None
        members = chunks[index]
        if tell is not None:
            told = functools.partial(tell, members)
            chained = cast(_TellingResolver, batch)
            resolved, abandoned = await chained([first[k] for k in members], http, on_final=told)
        else:
            resolved, abandoned = await batch([first[k] for k in members], http)
        if len(resolved) != len(members):
            raise ValueError(
                f"batch resolver returned {len(resolved)} results for {len(members)} inputs"
            )
        reason = short(compact(http.failures[0])) if http.failures else "no answer after retries"
        return (
            {k: first[k].merge(r) for k, r in zip(members, resolved, strict=True)},
            {members[i] for i in abandoned if 0 <= i < len(members)},
            reason,
        )

    chunk_rows = {i: sum(units.counts[k] for k in chunk) for i, chunk in enumerate(chunks)}
    outcomes = await run_keyed(
        ctx,
        chunk_rows,
        work,
        "resolve",
        empty=lambda _: False,
        partial=lambda done: _resolved(frame, plan, first, units.row_key, chunks, done),
    )
    return _resolved(frame, plan, first, units.row_key, chunks, outcomes)


class _TellingResolver(Protocol):
    """The default batch resolver, which tells the bundles whose ids are final as it goes."""

    async def __call__(
        self,
        batch: Sequence[ArticleIds],
        http: Session,
        *,
        on_final: Callable[[list[int], list[ArticleIds]], None] | None = None,
    ) -> tuple[Sequence[ArticleIds], set[int]]: ...


def _teller(
    frame: pd.DataFrame,
    plan: Plan,
    first: Mapping[ArticleIds, ArticleIds],
    row_key: Sequence[ArticleIds],
    on_final: Callable[[list[int], pd.DataFrame], None],
) -> Callable[[Sequence[ArticleIds], list[int], list[ArticleIds]], None]:
    """Turn the chain's final bundles (by position in a chunk) into rows of the resolved frame."""
    rows_of: dict[ArticleIds, list[int]] = {}
    for i in plan.todo:
        rows_of.setdefault(row_key[i], []).append(i)

    def tell(members: Sequence[ArticleIds], done: list[int], found: list[ArticleIds]) -> None:
        rows: list[int] = []
        ids_of: dict[int, ArticleIds] = {}
        for position, ids in zip(done, found, strict=True):
            key = members[position]
            merged = first[key].merge(ids)
            for i in rows_of[key]:
                rows.append(i)
                ids_of[i] = plan.bundles[i].merge(merged)
        rows.sort()
        values: dict[str, list[object]] = {
            kind: [getattr(ids_of[i], kind) for i in rows] for kind in CANONICAL
        }
        # As _resolved() writes them: a row resolved in full keeps only its parse errors.
        values["resolve_error"] = [plan.parse_errors[i] for i in rows]
        on_final(rows, with_columns(frame.iloc[rows], values, _DTYPES))

    return tell


def _resolved(
    frame: pd.DataFrame,
    plan: Plan,
    first: Mapping[ArticleIds, ArticleIds],
    row_key: Sequence[ArticleIds],
    chunks: Sequence[Sequence[ArticleIds]],
    outcomes: Mapping[int, Outcome[_Found]],
) -> pd.DataFrame:
    """The resolve step's frame from its chunks' outcomes (a chunk not done: interrupted)."""
    per_key: dict[ArticleIds, Outcome[ArticleIds]] = {}
    for index, chunk in enumerate(chunks):
        outcome = outcomes.get(index, INTERRUPTED)
        if outcome.value is None:
            for k in chunk:
                per_key[k] = Outcome(value=first[k], error=outcome.error)
            continue
        merged, abandoned, reason = outcome.value
        for k in chunk:
            error = f"abandoned: {reason}" if k in abandoned else None
            per_key[k] = Outcome(value=merged[k], error=error)

    values: dict[str, list[object]] = {}
    for kind in CANONICAL:
        if plan.rerun and kind in frame.columns:
            values[kind] = previous(frame, kind)
        else:
            values[kind] = [getattr(b, kind) for b in plan.bundles]
    errors: list[object] = (
        previous(frame, "resolve_error") if plan.rerun else list(plan.parse_errors)
    )
    for i in plan.todo:
        outcome_k = per_key[row_key[i]]
        ids = plan.bundles[i].merge(outcome_k.value or ArticleIds())
        for kind in CANONICAL:
            values[kind][i] = getattr(ids, kind)
        errors[i] = join(plan.parse_errors[i], row_error(outcome_k.error, plan.bundles[i]))
    values["resolve_error"] = errors
    return with_columns(frame, values, _DTYPES)


async def ensure_resolved(
    frame: pd.DataFrame, ctx: CallContext, resolve_first: bool, resolver: BatchResolver | None
) -> tuple[pd.DataFrame, CallContext]:
    """Resolve ``frame`` first when asked; return it and the context its step reads ids with.

    A frame resolved before is taken as it is (``resolve()`` or ``run()``
    retries its abandoned rows). Once resolved, the canonical columns hold the
    resolved ids, so the step reads those rather than the columns named for
    the resolve step.
    """
    if not resolve_first:
        return frame, ctx
    if not is_resolved(frame):
        frame = await resolve_frame(frame, ctx, resolver, False)
    return frame, ctx.reading_canonical()
