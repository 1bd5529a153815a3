"""The row pipeline: every accessor step as an async function over a DataFrame.

One :class:`~litfetch_df.Session` serves the whole frame, so per-host pacing
and the connection pool are shared by every row. Rows are grouped into units
by their id bundle (DOIs compared case-insensitively): each distinct bundle is
processed once, inside its own ``session.scope()``, and its answer is fanned
back to every row that carries it. Up to ``concurrency`` units are in flight
at once; how fast each host is asked stays the session's decision.

Each unit ends in one of three ways, reported per row:

* an answer (possibly "nothing serves it": NA without an error);
* abandoned: the result is empty and the unit's scope recorded a request
  given up after every retry (or the transport failed outright); the row
  gets NA and ``"abandoned: <reason>"`` in the step's error column, and
  running the step again on the returned frame retries exactly those rows;
* an error from the code itself (``"error: <type>: <message>"``), logged.

An invalid identifier never becomes a request: it is reported in the error
column (``"invalid doi: 'foo'"``) and the row keeps its other valid ids.

Before a step's units run, :mod:`litfetch_df.frame.bulk` asks the services
with a bulk form (Semantic Scholar, Crossref, Springer Meta) about every
bundle of the step at once and primes the session with the per-article
answers, so the units cost no request to those hosts (see
docs/adr/0005-bulk-priming.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import re
import threading
import warnings
import weakref
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Hashable,
    Mapping,
    Sequence,
)
from pathlib import Path
from typing import Any, Final, Generic, TypedDict, TypeVar, cast

import numpy as np
import pandas as pd

from .._http import Http, UpstreamUnavailable, get_logger, redact_text
from ..files import Blob, File, FileKind
from ..ids import ArticleIds
from ..metadata import Related, RelationType, SourceMetadata
from ..operations.types import BatchResolver, Fetcher, FileSource
from ..session import Session
from . import bulk
from .bridge import offer_partial
from .cells import file_set
from .cells import relations as relations_cell
from .columns import (
    CANONICAL,
    IdColumns,
    ParsedIds,
    bundle_key,
    detect_id_columns,
    parse_rows,
)
from .errors import compact, row_error, untagged
from .licence_family import licence_family
from .oa_status import service_oa_status
from .options import Options, effective, get_options
from .outdir import OutDir
from .progress import Progress
from .provenance import Provenance, from_attrs, of_session, stamp, warn_going_online

__all__ = [
    "FILE_COLUMNS",
    "CallOptions",
    "Outcome",
    "fetch_bodies",
    "fetch_files",
    "files",
    "is_abandoned",
    "is_resolved",
    "licences",
    "list_files",
    "related",
    "relations",
    "resolve",
    "run_units",
]

log = get_logger(__name__)

K = TypeVar("K", bound=Hashable)
R = TypeVar("R")
T = TypeVar("T")

RESOLVE_CHUNK: Final = 1000
"""Distinct bundles per batch-resolver call: a multiple of every bundled resolver's cap."""

FILE_COLUMNS: Final[tuple[str, ...]] = (
    "kind",
    "source",
    "media_type",
    "uri",
    "filename",
    "size_bytes",
    "credential_key",
    "description",
)
"""The columns of the long file-set frame that describe one :class:`File`."""


class CallOptions(TypedDict, total=False):
    """Keyword configuration every ``.lit`` method accepts.

    ``session``: an open or not-yet-entered :class:`Session` to run on (its
    contact, cache and timeout then apply; on a session whose
    ``keyless_replay`` attribute is true, such as
    :func:`~litfetch_df.demo.demo_session`'s, the package-level credentials
    are ignored); ``contact``, ``credentials``,
    ``concurrency``, ``progress``, ``cache``, ``offline``, ``timeout``: see
    :class:`~litfetch_df.frame.options.Options`; ``pmid``, ``pmcid``,
    ``doi``, ``bookid``: the column holding that id kind, when its name is
    not recognised.
    """

    session: Session | None
    contact: str | None
    credentials: Mapping[str, object] | None
    concurrency: int | None
    progress: bool | None
    cache: str | os.PathLike[str] | None
    offline: bool | None
    timeout: float | None
    pmid: Hashable | None
    pmcid: Hashable | None
    doi: Hashable | None
    bookid: Hashable | None


_SESSION_LEVEL = ("contact", "cache", "offline", "timeout")


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome(Generic[R]):
    """How one unit of work ended: a value, or an error message (``abandoned: …`` retries)."""

    value: R | None = None
    error: str | None = None


def is_abandoned(error: object) -> bool:
    """Return whether an error-column cell marks a row worth retrying."""
    if not isinstance(error, str):
        return False
    return any(part.strip().startswith("abandoned") for part in error.split(";"))


def is_resolved(frame: pd.DataFrame) -> bool:
    """Return whether the batch pre-pass has run on this frame (it has ``resolve_error``)."""
    return "resolve_error" in frame.columns


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(redact_text(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _join(*parts: str | None) -> str | None:
    kept = [p for p in parts if p]
    return "; ".join(kept) if kept else None


def _is_none(value: object) -> bool:
    return value is None


def _no_label(value: object) -> str | None:
    return None


# -- the engine room -------------------------------------------------------------------------


async def _attempt(
    scope: Session,
    call: Callable[[], Awaitable[R]],
    empty: Callable[[R], bool],
    *,
    since: int = 0,
) -> Outcome[R]:
    """Await ``call`` and tell how it ended, judging abandonment from ``scope``'s failures.

    Only the failures recorded from index ``since`` on count: a scope that
    serves several steps in turn (see :mod:`litfetch_df.frame.onepass`)
    judges each step by its own requests.
    """
    try:
        value = await call()
    except UpstreamUnavailable as exc:
        return Outcome(error=f"abandoned: {_short(compact(str(exc)))}")
    except Exception as exc:
        log.warning("unit failed: %s: %s", type(exc).__name__, _short(str(exc)))
        return Outcome(error=f"error: {type(exc).__name__}: {_short(compact(str(exc)))}")
    failures = scope.failures[since:]
    if empty(value) and failures:
        return Outcome(error=f"abandoned: {_short(compact(failures[0]))}")
    return Outcome(value=value)


async def _run_one(
    session: Session,
    key: K,
    work: Callable[[Session, K], Awaitable[R]],
    empty: Callable[[R], bool],
) -> Outcome[R]:
    async with session.scope() as scope:
        return await _attempt(scope, lambda: work(scope, key), empty)


async def run_units(
    units: Mapping[K, int],
    work: Callable[[Session, K], Awaitable[R]],
    *,
    session: Session,
    concurrency: int,
    progress: Progress,
    empty: Callable[[R], bool] = _is_none,
    label: Callable[[R], str | None] = _no_label,
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
            outcome = await _run_one(session, key, work, empty)
            results[key] = outcome
            tag = label(outcome.value) if outcome.value is not None else None
            progress.advance(rows, label=tag, error=outcome.error is not None)

    async with asyncio.TaskGroup() as group:
        for _ in range(max(1, min(concurrency, len(units)))):
            group.create_task(worker())
    return results


@dataclasses.dataclass(frozen=True, slots=True)
class _Ctx:
    session: Session
    options: Options
    explicit: dict[str, Hashable | None]
    # The settings the step's frame records (see frame.provenance).
    provenance: Provenance = dataclasses.field(default_factory=Provenance)

    def stamp(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Record this call's session settings in ``frame.attrs``; return ``frame``."""
        return stamp(frame, self.provenance)


def _split(config: CallOptions) -> tuple[Session | None, Options, dict[str, Hashable | None]]:
    cfg: dict[str, Any] = dict(config)
    session = cfg.pop("session", None)
    explicit = {k: cfg.pop(k) for k in CANONICAL if k in cfg}
    if getattr(session, "keyless_replay", False):
        # The session answers from records made without keys (the demo's): a key from
        # the package options would only ask for answers they do not hold. Keys given to
        # this very call still apply.
        drop: dict[str, object] = {key: None for key in get_options().credentials}
        cfg["credentials"] = {**drop, **dict(cfg.get("credentials") or {})}
    if session is not None:
        clash = [k for k in _SESSION_LEVEL if cfg.get(k) is not None]
        if clash:
            raise ValueError(
                f"{', '.join(clash)} cannot be combined with session=: "
                "configure the Session itself (Session(contact=..., cache=..., ...))"
            )
    return session, effective(**cfg), explicit


# Unopened sessions a running call has opened for itself. A synchronous call runs on its
# own event loop in its own thread; another such call given the same session at the same
# time must not borrow it (its client belongs to the first call's loop) nor open it again.
_OPENED_BY_CALLS: weakref.WeakSet[Session] = weakref.WeakSet()
_OPENED_LOCK = threading.Lock()


def _inherit(
    config: CallOptions, frame: pd.DataFrame | None
) -> tuple[CallOptions, Provenance | None]:
    """Fill in the session settings ``frame`` was made with, where the call gives none.

    Returns the call's configuration to use and the frame's recorded settings.
    A frame made with a cache (or offline) gets a session with that cache, its
    TTL, contact and offline flag, unless the call names a session, a
    contact, a cache or ``offline`` itself; otherwise only a recorded contact
    fills a missing one.
    """
    inherited = from_attrs(frame.attrs) if frame is not None else None
    told = config.get("session") is not None or any(
        config.get(k) is not None for k in ("contact", "cache", "offline")
    )
    if inherited is None or told:
        return config, inherited
    cfg = cast(dict[str, Any], dict(config))
    if inherited.cache is not None or inherited.stays_offline:
        timeout = cfg.pop("timeout", None)
        cfg["session"] = inherited.session(timeout=timeout or get_options().timeout)
    elif inherited.contact is not None and get_options().contact is None:
        cfg["contact"] = inherited.contact
    return cast(CallOptions, cfg), inherited


@contextlib.asynccontextmanager
async def _context(
    config: CallOptions, frame: pd.DataFrame | None = None, method: str = ""
) -> AsyncIterator[_Ctx]:
    """The session and options of one call, from ``config``, ``frame.attrs`` and the defaults."""
    config, inherited = _inherit(config, frame)
    given, options, explicit = _split(config)
    session = given or Session(
        contact=options.contact,
        cache=options.cache,
        offline=options.offline,
        timeout=options.timeout,
    )
    made_offline = inherited is not None and inherited.stays_offline
    stays = session.offline or bool(getattr(session, "demo_world_session", False))
    if inherited is not None and made_offline and not stays:
        warn_going_online(inherited, method)
    ctx = _Ctx(session, options, explicit, of_session(session))
    if given is None:
        async with session:
            yield ctx
        return
    with _OPENED_LOCK:
        if given in _OPENED_BY_CALLS:
            raise RuntimeError(
                "this Session is in use by another .lit call running at the same time "
                "(another thread?); give each thread its own Session, or open one with "
                "'async with' and make the calls from that event loop"
            )
        borrowed = given.is_open
        if not borrowed:
            _OPENED_BY_CALLS.add(given)
    if borrowed:
        yield ctx
        return
    try:
        async with given:
            yield ctx
    finally:
        with _OPENED_LOCK:
            _OPENED_BY_CALLS.discard(given)


# -- small helpers for building columns ------------------------------------------------------


def _objects(values: Sequence[object]) -> np.ndarray[Any, Any]:
    # Built cell by cell so tuples stay tuples (a list of tuples would become 2-D).
    out = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        out[i] = v
    return out


def _column(values: Sequence[object], dtype: str, index: pd.Index[Any]) -> pd.Series[Any]:
    if dtype == "object":
        cleaned = [None if v is pd.NA else v for v in values]
        return pd.Series(_objects(cleaned), index=index, dtype=object)
    cleaned2 = [pd.NA if v is None else v for v in values]
    return pd.Series(pd.array(cleaned2, dtype=cast(Any, dtype)), index=index)


def _previous(frame: pd.DataFrame, column: str) -> list[object]:
    if column not in frame.columns:
        return [None] * len(frame)
    return [None if _na(v) else v for v in frame[column].tolist()]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _na(value: object) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and value != value


def _with_columns(
    frame: pd.DataFrame, values: Mapping[str, Sequence[object]], dtypes: Mapping[str, str]
) -> pd.DataFrame:
    new = {name: _column(values[name], dtypes[name], frame.index) for name in values}
    return frame.assign(**new)


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """Which rows a step works on and how they group into units."""

    bundles: tuple[ArticleIds, ...]
    parse_errors: tuple[str | None, ...]
    todo: tuple[int, ...]
    rerun: bool
    # Per row, why its ids may be incomplete: the abandoned resolve_error, if any.
    unresolved: tuple[str | None, ...] = ()


def _plan(
    frame: pd.DataFrame,
    ctx: _Ctx,
    error_column: str,
    force: bool,
    parsed: ParsedIds | None = None,
) -> _Plan:
    """Plan a step over ``frame``; ``parsed`` is its id columns already parsed, if at hand."""
    if parsed is None:
        parsed = _parse_ids(frame, ctx)
    rerun = error_column in frame.columns and not force
    previous = _previous(frame, error_column) if rerun else []
    todo = tuple(
        i
        for i, ids in enumerate(parsed.bundles)
        if not ids.is_empty() and (not rerun or is_abandoned(previous[i]))
    )
    unresolved: tuple[str | None, ...] = ()
    errors = parsed.errors
    if error_column != "resolve_error" and "resolve_error" in frame.columns:
        resolve_errors = _previous(frame, "resolve_error")
        unresolved = tuple(
            e if isinstance(e, str) and is_abandoned(e) else None for e in resolve_errors
        )
        # The resolved columns hold only the valid ids, so the invalid ones the resolve
        # step reported would vanish from this step's column: carry them over.
        errors = tuple(
            _with_invalid(own, _invalid_part(e))
            for own, e in zip(errors, resolve_errors, strict=True)
        )
    return _Plan(parsed.bundles, errors, todo, rerun, unresolved)


# The resolve step writes a row's parse errors first, then its outcome's error.
_INVALID_PREFIX: Final = re.compile(r"^(invalid .*?)(?:; (?:abandoned|error)\b.*)?$", re.DOTALL)


def _invalid_part(error: object) -> str | None:
    """The ``invalid <kind>: …`` part of a ``resolve_error`` cell, if any."""
    if not isinstance(error, str):
        return None
    m = _INVALID_PREFIX.match(error)
    return m.group(1) if m else None


def _with_invalid(own: str | None, invalid: str | None) -> str | None:
    if invalid is None or (own is not None and invalid in own):
        return own
    return _join(invalid, own)


def _parse_ids(frame: pd.DataFrame, ctx: _Ctx) -> ParsedIds:
    columns: IdColumns = detect_id_columns(frame.columns, ctx.explicit)
    return parse_rows(frame, columns)


def _units(
    plan: _Plan,
) -> tuple[dict[ArticleIds, int], dict[ArticleIds, ArticleIds], list[ArticleIds]]:
    """Group the plan's rows by bundle key: rows per key, first bundle per key, key per row."""
    counts: dict[ArticleIds, int] = {}
    first: dict[ArticleIds, ArticleIds] = {}
    row_key: list[ArticleIds] = [ArticleIds()] * len(plan.bundles)
    for i in plan.todo:
        key = bundle_key(plan.bundles[i])
        row_key[i] = key
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, plan.bundles[i])
    return counts, first, row_key


def _fill(
    frame: pd.DataFrame,
    plan: _Plan,
    row_outcome: Callable[[int], Outcome[Any] | None],
    cells: Callable[[Any], Mapping[str, object]],
    dtypes: Mapping[str, str],
    error_column: str,
    empty: Callable[[Any], bool] = _is_none,
) -> pd.DataFrame:
    """Build the step's columns: processed rows from their outcome, others kept or NA.

    A row that found nothing (``empty``) while its ids were left unresolved
    (its resolution was abandoned) is abandoned too, not absent: with the
    missing ids the step might have found something, so a re-run retries it.
    """
    n = len(frame)
    names = [c for c in dtypes if c != error_column]
    if error_column not in frame.columns:
        taken = [c for c in names if c in frame.columns]
        if taken:
            # Without the step's error column these are the caller's own columns, not an
            # earlier run of the step: say so rather than replace them silently.
            warnings.warn(
                f"column(s) {', '.join(map(repr, taken))} already in the frame are replaced "
                f"by this step's output (rename them to keep them; a frame holding "
                f"{error_column!r} counts as an earlier run of the step and is updated)",
                UserWarning,
                stacklevel=2,
            )
    values: dict[str, list[object]] = {
        c: (_previous(frame, c) if plan.rerun else [None] * n) for c in names
    }
    errors: list[object] = _previous(frame, error_column) if plan.rerun else list(plan.parse_errors)
    for i in plan.todo:
        outcome = row_outcome(i)
        if outcome is None:
            continue
        row = cells(outcome.value) if outcome.value is not None else {}
        for c in names:
            values[c][i] = row.get(c)
        error = outcome.error
        reason = plan.unresolved[i] if plan.unresolved else None
        if error is None and reason is not None and (outcome.value is None or empty(outcome.value)):
            cause = untagged(reason).removeprefix("abandoned: ")
            error = f"abandoned: ids not resolved ({_short(cause)})"
        errors[i] = _join(plan.parse_errors[i], row_error(error, plan.bundles[i]))
    values[error_column] = errors
    return _with_columns(frame, values, dtypes)


def _progress(ctx: _Ctx, total: int, desc: str) -> Progress:
    return Progress(total, desc=desc, enabled=ctx.options.progress)


async def _run(
    ctx: _Ctx,
    units: Mapping[K, int],
    work: Callable[[Session, K], Awaitable[R]],
    desc: str,
    *,
    empty: Callable[[R], bool] = _is_none,
    label: Callable[[R], str | None] = _no_label,
    partial: Callable[[Mapping[K, Outcome[R]]], pd.DataFrame] | None = None,
) -> dict[K, Outcome[R]]:
    """:func:`run_units` on the step's session and concurrency, under a progress bar ``desc``.

    If the run is cancelled (an interrupt), ``partial`` builds the step's frame
    from the outcomes finished so far, for a synchronous caller to keep
    (:func:`~litfetch_df.frame.bridge.offer_partial`).
    """
    results: dict[K, Outcome[R]] = {}
    with _progress(ctx, sum(units.values()), desc) as bar:
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


INTERRUPTED: Final[Outcome[Any]] = Outcome(error="abandoned: interrupted before this row was done")
"""The outcome of a row whose unit had not finished when the call was interrupted.

Abandoned, so a re-run of the partial frame works exactly those rows.
"""


async def _bundle_step(
    base: pd.DataFrame,
    plan: _Plan,
    ctx: _Ctx,
    work: Callable[[Session, ArticleIds], Awaitable[R]],
    cells: Callable[[Any], Mapping[str, object]],
    dtypes: Mapping[str, str],
    error_column: str,
    *,
    desc: str,
    services: frozenset[bulk.Service] = frozenset(),
    credentials: Mapping[str, object] | None = None,
    empty: Callable[[R], bool] = _is_none,
    label: Callable[[R], str | None] = _no_label,
) -> pd.DataFrame:
    """Run ``work`` once per distinct id bundle of ``plan`` and add the step's columns to ``base``.

    Bulk lookups for ``services`` prime the session first (see
    :mod:`litfetch_df.frame.bulk`); each unit then gets its bundle's first
    row's ids. A row's cells come from ``cells`` of its unit's value (never
    called with ``None``).
    """
    counts, first, row_key = _units(plan)

    async def unit(http: Session, key: ArticleIds) -> R:
        return await work(http, first[key])

    def build(done: Mapping[ArticleIds, Outcome[R]], missing: Outcome[Any] | None) -> pd.DataFrame:
        return _fill(
            base, plan, lambda i: done.get(row_key[i], missing), cells, dtypes, error_column, empty
        )

    async with bulk.primed(ctx.session, list(first.values()), services, credentials=credentials):
        outcomes = await _run(
            ctx,
            counts,
            unit,
            desc,
            empty=empty,
            label=label,
            partial=lambda done: build(done, INTERRUPTED),
        )
    return build(outcomes, None)


# -- resolve ----------------------------------------------------------------------------------


def _default_batch_resolver(options: Options) -> BatchResolver:
    from ..operations.resolution import default_batch_resolver

    key = options.credentials.get("openalex_api_key")
    return default_batch_resolver(openalex_api_key=str(key) if key else None)


_RESOLVE_DTYPES: Final = {**{k: "string" for k in CANONICAL}, "resolve_error": "string"}


async def _resolve(
    frame: pd.DataFrame, ctx: _Ctx, resolver: BatchResolver | None, force: bool
) -> pd.DataFrame:
    plan = _plan(frame, ctx, "resolve_error", force)
    counts, first, row_key = _units(plan)
    keys = list(first)
    chunks = [keys[i : i + RESOLVE_CHUNK] for i in range(0, len(keys), RESOLVE_CHUNK)]
    batch = (
        resolver
        if resolver is not None
        else (_default_batch_resolver(ctx.options) if keys else None)
    )

    async def work(
        http: Session, index: int
    ) -> tuple[dict[ArticleIds, ArticleIds], set[ArticleIds], str]:
        assert batch is not None
        members = chunks[index]
        resolved, abandoned = await batch([first[k] for k in members], http)
        if len(resolved) != len(members):
            raise ValueError(
                f"batch resolver returned {len(resolved)} results for {len(members)} inputs"
            )
        reason = _short(compact(http.failures[0])) if http.failures else "no answer after retries"
        return (
            {k: first[k].merge(r) for k, r in zip(members, resolved, strict=True)},
            {members[i] for i in abandoned if 0 <= i < len(members)},
            reason,
        )

    chunk_rows = {i: sum(counts[k] for k in chunk) for i, chunk in enumerate(chunks)}
    outcomes = await _run(
        ctx,
        chunk_rows,
        work,
        "resolve",
        empty=lambda _: False,
        partial=lambda done: _resolved_frame(frame, plan, first, row_key, chunks, done),
    )
    return _resolved_frame(frame, plan, first, row_key, chunks, outcomes)


def _resolved_frame(
    frame: pd.DataFrame,
    plan: _Plan,
    first: Mapping[ArticleIds, ArticleIds],
    row_key: Sequence[ArticleIds],
    chunks: Sequence[Sequence[ArticleIds]],
    outcomes: Mapping[int, Outcome[tuple[dict[ArticleIds, ArticleIds], set[ArticleIds], str]]],
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

    n = len(frame)
    values: dict[str, list[object]] = {}
    for kind in CANONICAL:
        if plan.rerun and kind in frame.columns:
            values[kind] = _previous(frame, kind)
        else:
            values[kind] = [getattr(b, kind) for b in plan.bundles]
    errors: list[object] = (
        _previous(frame, "resolve_error") if plan.rerun else list(plan.parse_errors)
    )
    for i in plan.todo:
        outcome_k = per_key[row_key[i]]
        ids = plan.bundles[i].merge(outcome_k.value or ArticleIds())
        for kind in CANONICAL:
            values[kind][i] = getattr(ids, kind)
        errors[i] = _join(plan.parse_errors[i], row_error(outcome_k.error, plan.bundles[i]))
    values["resolve_error"] = errors
    assert all(len(v) == n for v in values.values())
    return _with_columns(frame, values, _RESOLVE_DTYPES)


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
    async with _context(config or {}, frame, "resolve") as ctx:
        return ctx.stamp(await _resolve(frame, ctx, resolver, force))


async def _ensure_resolved(
    frame: pd.DataFrame, ctx: _Ctx, resolve_first: bool, resolver: BatchResolver | None
) -> tuple[pd.DataFrame, _Ctx]:
    """Resolve ``frame`` first when asked; return it and the context its step reads ids with.

    A frame resolved before is taken as it is (``resolve()`` or ``run()``
    retries its abandoned rows). Once resolved, the canonical columns hold the
    resolved ids, so the step reads those rather than the columns named for
    the resolve step.
    """
    if not resolve_first:
        return frame, ctx
    if not is_resolved(frame):
        frame = await _resolve(frame, ctx, resolver, False)
    return frame, dataclasses.replace(ctx, explicit={})


# -- bodies -----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Written:
    path: str
    source: str
    media_type: str | None
    size: int


_BODY_DTYPES: Final = {
    "body": "object",
    "body_source": "string",
    "body_media_type": "string",
    "body_size": "Int64",
    "body_error": "string",
}
_BODY_PATH_DTYPES: Final = {
    "body_path": "string",
    "body_source": "string",
    "body_media_type": "string",
    "body_size": "Int64",
    "body_error": "string",
}


@dataclasses.dataclass(frozen=True, slots=True)
class _Bodies:
    """How the bodies step fetches one bundle's body and turns it into cells."""

    fetchers: Sequence[Fetcher] | None
    credentials: Mapping[str, object]
    out: OutDir | None

    def __post_init__(self) -> None:
        if self.fetchers is None:
            # Built once per call and shared by its units (the bundled fetchers hold no
            # state), instead of once per unit inside the ladder.
            from ..operations.ladder import default_fetchers

            object.__setattr__(self, "fetchers", default_fetchers())

    @property
    def dtypes(self) -> Mapping[str, str]:
        """The step's columns: ``body`` in memory, or ``body_path`` with an ``out_dir``."""
        return _BODY_PATH_DTYPES if self.out is not None else _BODY_DTYPES

    async def fetch(self, http: Http, ids: ArticleIds) -> Blob | None:
        """Walk the fetcher ladder for ``ids`` (no per-row resolver: the pre-pass resolved)."""
        from ..operations.ladder import fetch_body

        return await fetch_body(
            http, ids, resolver=None, fetchers=self.fetchers, credentials=self.credentials
        )

    async def keep(self, ids: ArticleIds, blob: Blob | None) -> Blob | _Written | None:
        """Return the value the frame holds: the Blob, or where it was written in ``out``."""
        if blob is None or self.out is None:
            return blob
        path = self.out.body_path(ids, blob.file.media_type)
        # Disk writes leave the event loop free for the other units' requests.
        written = await asyncio.to_thread(self.out.write, path, blob.content)
        return _Written(str(written), blob.file.source, blob.file.media_type, len(blob.content))

    async def work(self, http: Http, ids: ArticleIds) -> Blob | _Written | None:
        """The step's unit of work: fetch, then keep."""
        return await self.keep(ids, await self.fetch(http, ids))

    def services(self) -> frozenset[bulk.Service]:
        """The bulk lookups that answer this step's per-article requests in advance."""
        # With an Elsevier key, that rung looks every DOI it reaches up in Crossref:
        # one list request per 100 DOIs answers those lookups in advance.
        return bulk.for_fetchers(self.fetchers, self.credentials)


def _body_label(value: Blob | _Written | None) -> str | None:
    if isinstance(value, Blob):
        return value.file.source
    return value.source if value is not None else None


def _body_cells(value: Blob | _Written) -> dict[str, object]:
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
    async with _context(config or {}, frame, "fetch_bodies") as ctx:
        base, ctx = await _ensure_resolved(frame, ctx, resolve, resolver)
        plan = _plan(base, ctx, "body_error", force)
        step = _Bodies(
            fetchers,
            dict(ctx.options.credentials),
            OutDir(out_dir) if out_dir is not None else None,
        )
        if step.out is not None:
            step.out.reserve_bodies(plan.bundles)  # names in row order, not completion order
        out = await _bundle_step(
            base,
            plan,
            ctx,
            step.work,
            _body_cells,
            step.dtypes,
            "body_error",
            desc="fetch_bodies",
            services=step.services(),
            credentials=step.credentials,
            label=_body_label,
        )
        return ctx.stamp(out)


# -- licences ---------------------------------------------------------------------------------

_LICENCE_DTYPES: Final = {
    "licence": "string",
    "licence_family": "string",
    "access": "string",
    "oa_status": "string",
    "licence_basis": "string",
    "access_basis": "string",
    "licence_error": "string",
}


def _extract(blob: Blob) -> SourceMetadata:
    from ..operations.licence import extract_source_metadata

    try:
        return extract_source_metadata(blob)
    except Exception as exc:  # unreadable bytes carry no licence; Unpaywall may still know
        log.debug("no licence from the body bytes: %s", type(exc).__name__)
        return SourceMetadata()


@dataclasses.dataclass(frozen=True, slots=True)
class _LicenceInput:
    """What one licence unit reads: the bundle, and the body bytes (or file) the row holds."""

    ids: ArticleIds
    body: Blob | str | None
    media_type: str | None
    source: str | None


def _licence_body(body: object, path: object) -> tuple[Hashable, Blob | str | None]:
    """Return a row's body for the licence step and a token naming it (rows share by token).

    A Blob in ``body`` wins, then a file at ``body_path``; neither gives ``(None, None)``.
    """
    if isinstance(body, Blob):
        return ("blob", id(body)), body
    if isinstance(path, str | os.PathLike):
        where = os.fspath(cast("str | os.PathLike[str]", path))
        return ("path", where), where
    return None, None


async def _licence_work(http: Http, item: _LicenceInput) -> SourceMetadata:
    """Terms from the body bytes; what they leave out, and the OA colour, from Unpaywall.

    Unpaywall is asked for every row with a DOI: besides any licence or access
    status the bytes leave out, it is the only source of the article's
    open-access colour (``oa_status``), which a body's ``open-access`` does not give.
    """
    body = item.body
    meta = SourceMetadata()
    if body is not None:
        if isinstance(body, Blob):
            blob = body
        else:
            content = await asyncio.to_thread(Path(body).read_bytes)
            file = File(FileKind.BODY, item.source or "file", media_type=item.media_type)
            blob = Blob(file, content)
        meta = await asyncio.to_thread(_extract, blob)
    if item.ids.doi is None:
        return meta
    from ..operations.access import fill_missing_terms, resolve_access

    asserted = await resolve_access(http, item.ids)
    merged = fill_missing_terms(meta, asserted)
    if merged.licence is None:
        merged = await _crossref_licence(http, item.ids.doi, merged)
    status = service_oa_status(asserted)
    return merged if status is None else dataclasses.replace(merged, oa_status=status)


async def _crossref_licence(http: Http, doi: str, meta: SourceMetadata) -> SourceMetadata:
    """Fill a missing licence from the DOI's Crossref ``license[]`` (basis ``'crossref'``).

    The last resort: neither the body nor Unpaywall named a licence. Crossref
    states what the publisher deposited, the version of record's licence first;
    it says nothing of access. The frame answers this request from its bulk
    Crossref lookup (100 DOIs a request), so it costs no per-row request.
    """
    from ..sources.crossref import crossref_licence, fetch_crossref_work

    record = await fetch_crossref_work(http, doi)
    found = crossref_licence(record) if record is not None else SourceMetadata()
    if found.licence is None:
        return meta
    return dataclasses.replace(meta, licence=found.licence, basis="crossref")


def _licence_cells(meta: SourceMetadata) -> dict[str, object]:
    if meta.is_empty():
        return {}
    return {
        "licence": meta.licence,
        "licence_family": licence_family(meta.licence),
        "access": meta.access,
        "oa_status": meta.oa_status,
        "licence_basis": meta.basis,
        "access_basis": meta.access_from,
    }


def _licence_label(meta: SourceMetadata) -> str | None:
    return meta.basis


def _licence_empty(meta: SourceMetadata) -> bool:
    return meta.is_empty()


def _warn_without_contact(method: str) -> None:
    warnings.warn(
        f"{method}(): no contact email is set, so Unpaywall cannot be asked; rows "
        "without licence-bearing body bytes get at most the licence the publisher "
        "deposited with Crossref, no access status, and oa_status stays NA. "
        "Pass contact='you@example.org' "
        "or set LITFETCH_DF_CONTACT.",
        UserWarning,
        stacklevel=3,
    )


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
    (:mod:`~litfetch_df.frame.oa_status`); NA when Unpaywall did not classify
    the article, since a body's own ``open-access`` names no colour.
    """
    async with _context(config or {}, frame, "licences") as ctx:
        base, ctx = await _ensure_resolved(frame, ctx, resolve, resolver)
        plan = _plan(base, ctx, "licence_error", force)
        bodies = _previous(base, "body")
        paths = _previous(base, "body_path")
        media = _previous(base, "body_media_type")
        sources = _previous(base, "body_source")

        counts: dict[Hashable, int] = {}
        payload: dict[Hashable, _LicenceInput] = {}
        row_key: dict[int, Hashable] = {}
        for i in plan.todo:
            token, body = _licence_body(bodies[i], paths[i])
            key = (bundle_key(plan.bundles[i]), token)
            row_key[i] = key
            counts[key] = counts.get(key, 0) + 1
            if key not in payload:
                payload[key] = _LicenceInput(
                    plan.bundles[i], body, _text(media[i]), _text(sources[i])
                )

        if ctx.session.contact is None and any(p.ids.doi for p in payload.values()):
            _warn_without_contact("licences")

        async def work(http: Session, key: Hashable) -> SourceMetadata:
            return await _licence_work(http, payload[key])

        def build(
            done: Mapping[Hashable, Outcome[SourceMetadata]], missing: Outcome[Any] | None
        ) -> pd.DataFrame:
            return _fill(
                base,
                plan,
                lambda i: done.get(row_key[i], missing),
                _licence_cells,
                _LICENCE_DTYPES,
                "licence_error",
                _licence_empty,
            )

        with_doi = list({p.ids: None for p in payload.values() if p.ids.doi}.keys())
        async with bulk.primed(ctx.session, with_doi, bulk.for_licences()):
            outcomes = await _run(
                ctx,
                counts,
                work,
                "licences",
                empty=_licence_empty,
                label=_licence_label,
                partial=lambda done: build(done, INTERRUPTED),
            )
        return ctx.stamp(build(outcomes, None))


# -- file-sets --------------------------------------------------------------------------------

_FILES_DTYPES: Final = {"files": "object", "n_files": "Int64", "files_error": "string"}


@dataclasses.dataclass(frozen=True, slots=True)
class _Files:
    """How the file-set step lists one bundle's files."""

    sources: Sequence[FileSource] | None
    kind: FileKind | None
    credentials: Mapping[str, object]

    def __post_init__(self) -> None:
        if self.sources is None:
            # Built once per call and shared by its units (the bundled sources hold no state).
            from ..operations.fileset import default_file_sources

            object.__setattr__(self, "sources", default_file_sources())

    async def work(self, http: Http, ids: ArticleIds) -> tuple[File, ...]:
        """The union of every source's files for ``ids``."""
        from ..operations.fileset import list_files as list_article_files

        return await list_article_files(
            http, ids, sources=self.sources, kind=self.kind, credentials=self.credentials
        )

    def services(self) -> frozenset[bulk.Service]:
        """The bulk lookups that answer this step's per-article requests in advance."""
        # They answer the per-article requests of the sources that have a bulk form, so
        # the per-bundle work only asks the others; a source not asked for this kind
        # is not primed either.
        from ..operations.fileset import sources_for_kind

        chosen = self.sources if self.sources is not None else ()
        return bulk.for_file_sources(sources_for_kind(chosen, self.kind))


def _files_cells(found: tuple[File, ...]) -> dict[str, object]:
    return {"files": file_set(found), "n_files": len(found)}


def _none_found(found: tuple[Any, ...]) -> bool:
    return len(found) == 0


async def _list_files(
    frame: pd.DataFrame,
    ctx: _Ctx,
    *,
    sources: Sequence[FileSource] | None,
    kind: FileKind | None,
    resolver: BatchResolver | None,
    resolve: bool,
    force: bool,
) -> pd.DataFrame:
    base, ctx = await _ensure_resolved(frame, ctx, resolve, resolver)
    plan = _plan(base, ctx, "files_error", force)
    step = _Files(sources, kind, dict(ctx.options.credentials))
    return await _bundle_step(
        base,
        plan,
        ctx,
        step.work,
        _files_cells,
        _FILES_DTYPES,
        "files_error",
        desc="list_files",
        services=step.services(),
        credentials=step.credentials,
        empty=_none_found,
    )


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
    async with _context(config or {}, frame, "list_files") as ctx:
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


def _ids_columns(frame: pd.DataFrame) -> dict[str, list[object]]:
    return {k: _previous(frame, k) for k in CANONICAL}


def _long(
    frame: pd.DataFrame,
    column: str,
    item_type: type[T],
    fields: Mapping[str, Callable[[T], object]],
    dtypes: Mapping[str, str],
) -> pd.DataFrame:
    """Return one row per ``item_type`` item of ``frame[column]``: the row's ids, then ``fields``.

    The index repeats the original row labels; a column's dtype is
    ``dtypes.get(name, "string")``.
    """
    ids = _ids_columns(frame)
    labels: list[Hashable] = []
    rows: dict[str, list[object]] = {c: [] for c in (*CANONICAL, *fields)}
    for pos, (label, found) in enumerate(zip(frame.index, frame[column].tolist(), strict=True)):
        if not isinstance(found, tuple | list):
            continue
        for item in found:
            if not isinstance(item, item_type):
                continue
            labels.append(label)
            for k in CANONICAL:
                rows[k].append(ids[k][pos])
            for name, read in fields.items():
                rows[name].append(read(item))
    # tupleize_cols=False: a flat index whose labels are tuples must not become a MultiIndex.
    index = pd.Index(labels, name=frame.index.name, dtype=frame.index.dtype, tupleize_cols=False)
    if isinstance(frame.index, pd.MultiIndex):
        index = (
            pd.MultiIndex.from_tuples(
                cast(list[tuple[Hashable, ...]], labels), names=frame.index.names
            )
            if labels
            else (frame.index[:0])
        )
    data = {c: _column(v, dtypes.get(c, "string"), index) for c, v in rows.items()}
    out = pd.DataFrame(data, index=index)
    out.attrs = dict(frame.attrs)  # the session settings travel to the long form too
    return out


# In FILE_COLUMNS order: the long frame's columns follow it.
_FILE_FIELDS: Final[Mapping[str, Callable[[File], object]]] = {
    "kind": lambda f: f.kind.value,
    "source": lambda f: f.source,
    "media_type": lambda f: f.media_type,
    "uri": lambda f: f.uri,
    "filename": lambda f: f.filename,
    "size_bytes": lambda f: f.size_bytes,
    "credential_key": lambda f: f.credential_key,
    "description": lambda f: f.description,
}


def is_listed(frame: pd.DataFrame) -> bool:
    """Return whether ``frame`` holds a file-set listing (see :func:`files`)."""
    if "files_error" in frame.columns:
        return True
    if "files" not in frame.columns:
        return False
    cells = [c for c in frame["files"].tolist() if not _na(c)]
    return all(isinstance(c, tuple) and all(isinstance(f, File) for f in c) for c in cells)


def files_long(frame: pd.DataFrame) -> pd.DataFrame:
    """Return the tidy file-set of a frame that has a ``files`` column: one row per File.

    The index repeats the original row labels; columns are the row's ids
    then :data:`FILE_COLUMNS`.
    """
    return _long(frame, "files", File, _FILE_FIELDS, {"size_bytes": "Int64"})


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


def _file_of_row(row: Mapping[str, object]) -> File:
    def text(name: str) -> str | None:
        value = row.get(name)
        return None if _na(value) else str(value)

    kind_text = text("kind")
    source = text("source")
    if kind_text is None or source is None:
        raise ValueError("a file row needs 'kind' and 'source'")
    size = row.get("size_bytes")
    return File(
        kind=FileKind(kind_text),
        source=source,
        media_type=text("media_type"),
        uri=text("uri"),
        filename=text("filename"),
        credential_key=text("credential_key"),
        size_bytes=None if _na(size) else int(size),  # type: ignore[call-overload]
        description=text("description"),
    )


_FETCH_DTYPES: Final = {"path": "string", "size": "Int64", "fetch_error": "string"}


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
    async with _context(config or {}, frame, "fetch_files") as ctx:
        if not {"kind", "source"} <= set(frame.columns):
            listed = await _list_files(
                frame, ctx, sources=sources, kind=kind, resolver=None, resolve=True, force=False
            )
            frame = files_long(listed)
        out = OutDir(out_dir)
        credentials = dict(ctx.options.credentials)
        rerun = "fetch_error" in frame.columns and not force
        previous = _previous(frame, "fetch_error") if rerun else []
        ids = _ids_columns(frame)
        records = frame.to_dict("records")
        n = len(frame)
        todo: list[int] = []
        parse_errors: list[str | None] = [None] * n
        row_key: dict[int, File] = {}
        counts: dict[File, int] = {}
        owner: dict[File, ArticleIds] = {}
        # Two sources often list the same URL for one article (a PDF Unpaywall and Semantic
        # Scholar both know): it is downloaded once, through the first, and shared.
        same_url: dict[tuple[ArticleIds, str], File] = {}
        for i, record in enumerate(records):
            # Every row, done or not, claims its file's name in row order, so a name is
            # decided by the listing, not by which download finished first, and a re-run
            # or force=True names every file as the first call did.
            wanted = not rerun or is_abandoned(previous[i])
            try:
                file = _file_of_row({str(k): v for k, v in record.items()})
                article = ArticleIds(
                    **{k: (str(ids[k][i]) if ids[k][i] is not None else None) for k in CANONICAL}
                )
            except (ValueError, TypeError) as exc:
                if wanted:
                    parse_errors[i] = f"invalid file: {_short(str(exc), 80)}"
                    todo.append(i)
                continue
            if file.uri is not None:
                file = same_url.setdefault((bundle_key(article), file.uri), file)
            owner.setdefault(file, article)
            with contextlib.suppress(ValueError):  # an unwritable name fails in work()
                out.file_path(owner[file], file)
            if not wanted:
                continue
            todo.append(i)
            row_key[i] = file
            counts[file] = counts.get(file, 0) + 1

        async def work(http: Session, file: File) -> tuple[str, int] | None:
            blob = await http.fetch_file(file, sources=sources, credentials=credentials)
            if blob is None:
                return None
            path = out.file_path(owner[file], file)
            written = await asyncio.to_thread(out.write, path, blob.content)
            return str(written), len(blob.content)

        plan = _Plan(
            bundles=tuple(ArticleIds() for _ in range(n)),
            parse_errors=tuple(parse_errors),
            todo=tuple(todo),
            rerun=rerun,
        )

        def cells(value: tuple[str, int]) -> dict[str, object]:
            return {"path": value[0], "size": value[1]}

        def build(
            done: Mapping[File, Outcome[tuple[str, int] | None]], missing: Outcome[Any] | None
        ) -> pd.DataFrame:
            def row_outcome(i: int) -> Outcome[Any] | None:
                if i in row_key:
                    return done.get(row_key[i], missing)
                return Outcome()

            return _fill(frame, plan, row_outcome, cells, _FETCH_DTYPES, "fetch_error")

        outcomes = await _run(
            ctx,
            counts,
            work,
            "fetch_files",
            label=lambda _: "written",
            partial=lambda done: build(done, INTERRUPTED),
        )
        return ctx.stamp(build(outcomes, None))


# -- relations --------------------------------------------------------------------------------

_RELATED_DTYPES: Final = {
    "related": "object",
    "n_related": "Int64",
    "preprint_doi": "string",
    "published_doi": "string",
    "related_error": "string",
}


async def _related_work(http: Http, ids: ArticleIds) -> tuple[Related, ...]:
    from ..operations.relations import related_ids

    return await related_ids(http, ids)


def _first_doi(found: tuple[Related, ...], relation: RelationType) -> str | None:
    return next((r.ids.doi for r in found if r.relation is relation and r.ids.doi), None)


def _related_cells(found: tuple[Related, ...]) -> dict[str, object]:
    return {
        "related": relations_cell(found),
        "n_related": len(found),
        "preprint_doi": _first_doi(found, RelationType.PREPRINT),
        "published_doi": _first_doi(found, RelationType.PUBLISHED),
    }


async def _related(
    frame: pd.DataFrame,
    ctx: _Ctx,
    *,
    resolver: BatchResolver | None,
    resolve: bool,
    force: bool,
) -> pd.DataFrame:
    base, ctx = await _ensure_resolved(frame, ctx, resolve, resolver)
    plan = _plan(base, ctx, "related_error", force)
    return await _bundle_step(
        base,
        plan,
        ctx,
        _related_work,
        _related_cells,
        _RELATED_DTYPES,
        "related_error",
        desc="related",
        # Crossref relations for every DOI in list requests first; bioRxiv stays per article.
        services=bulk.for_related(),
        empty=_none_found,
    )


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
    async with _context(config or {}, frame, "related") as ctx:
        return ctx.stamp(
            await _related(frame, ctx, resolver=resolver, resolve=resolve, force=force)
        )


_RELATION_FIELDS: Final[Mapping[str, Callable[[Related], object]]] = {
    "relation": lambda rel: rel.relation.value,
    "related_doi": lambda rel: rel.ids.doi,
}


def relations_long(frame: pd.DataFrame) -> pd.DataFrame:
    """Return one row per relation of a frame with a ``related`` column, keyed to its index."""
    return _long(frame, "related", Related, _RELATION_FIELDS, {})


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
