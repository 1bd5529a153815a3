"""Which rows a step works on, and how they group into units.

Rows are grouped by their id bundle (DOIs compared case-insensitively, see
:func:`~litfetch_df.frame.io.columns.bundle_key`): each distinct bundle is one
unit of work, and its answer goes to every row that carries it. On a frame
that holds the step's error column already (an earlier run), only the rows
that column marks abandoned are planned again, unless ``force``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Hashable, Mapping
from typing import Final

import pandas as pd

from ...ids import ArticleIds
from ..io.columns import IdColumns, ParsedIds, bundle_key, detect_id_columns, parse_rows
from ..io.table import previous
from .outcome import is_abandoned, join

__all__ = ["Plan", "Units", "is_resolved", "parse_ids", "plan_step", "units_of"]


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    """Which rows a step works on: every row's bundle and parse errors, the rows to do."""

    bundles: tuple[ArticleIds, ...]
    parse_errors: tuple[str | None, ...]
    todo: tuple[int, ...]
    rerun: bool
    # Per row, why its ids may be incomplete: the abandoned resolve_error, if any.
    unresolved: tuple[str | None, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Units:
    """A plan's rows grouped by bundle key: rows per key, first bundle per key, key per row."""

    counts: dict[ArticleIds, int]
    first: dict[ArticleIds, ArticleIds]
    row_key: tuple[ArticleIds, ...]
    todo: frozenset[int]


def is_resolved(frame: pd.DataFrame) -> bool:
    """Return whether the batch pre-pass has run on this frame (it has ``resolve_error``)."""
    return "resolve_error" in frame.columns


def parse_ids(frame: pd.DataFrame, explicit: Mapping[str, Hashable | None]) -> ParsedIds:
    """Parse ``frame``'s id columns (found by name, or named in ``explicit``)."""
    columns: IdColumns = detect_id_columns(frame.columns, dict(explicit))
    return parse_rows(frame, columns)


def plan_step(
    frame: pd.DataFrame,
    explicit: Mapping[str, Hashable | None],
    error_column: str,
    force: bool,
    parsed: ParsedIds | None = None,
) -> Plan:
    """Plan a step over ``frame``; ``parsed`` is its id columns already parsed, if at hand."""
    if parsed is None:
        parsed = parse_ids(frame, explicit)
    rerun = error_column in frame.columns and not force
    before = previous(frame, error_column) if rerun else []
    todo = tuple(
        i
        for i, ids in enumerate(parsed.bundles)
        if not ids.is_empty() and (not rerun or is_abandoned(before[i]))
    )
    unresolved: tuple[str | None, ...] = ()
    errors = parsed.errors
    if error_column != "resolve_error" and "resolve_error" in frame.columns:
        resolve_errors = previous(frame, "resolve_error")
        unresolved = tuple(
            e if isinstance(e, str) and is_abandoned(e) else None for e in resolve_errors
        )
        # The resolved columns hold only the valid ids, so the invalid ones the resolve
        # step reported would vanish from this step's column: carry them over.
        errors = tuple(
            _with_invalid(own, _invalid_part(e))
            for own, e in zip(errors, resolve_errors, strict=True)
        )
    return Plan(parsed.bundles, errors, todo, rerun, unresolved)


def units_of(plan: Plan, keys: dict[ArticleIds, ArticleIds] | None = None) -> Units:
    """Group ``plan``'s rows to do by bundle key, in row order.

    ``keys`` (bundle to key) is filled and reused, so the plans of one call's
    steps share one key object per bundle instead of one per step.
    """
    keys = {} if keys is None else keys
    counts: dict[ArticleIds, int] = {}
    first: dict[ArticleIds, ArticleIds] = {}
    row_key: list[ArticleIds] = [ArticleIds()] * len(plan.bundles)
    for i in plan.todo:
        bundle = plan.bundles[i]
        key = keys.get(bundle)
        if key is None:
            key = keys[bundle] = bundle_key(bundle)
        row_key[i] = key
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, plan.bundles[i])
    return Units(counts, first, tuple(row_key), frozenset(plan.todo))


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
    return join(invalid, own)
