"""A step's columns, built from its units' outcomes.

A row the step worked on gets the cells of its unit's value and its error;
a row it did not work on keeps what an earlier run of the step left (on a
re-run) or gets NA. A row that found nothing while its ids were left
unresolved (its resolution was abandoned) is abandoned too, not absent:
with the missing ids the step might have found something, so a re-run
retries it. One that found something that way is partial (``partial:
resolve abandoned: <reason>``): the missing ids might have found more (a
PMCID-only row lacks the DOI Unpaywall is asked by), so a re-run does it
again, afresh, with the ids resolved by then.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from ..io.table import previous, with_columns
from .errors import row_error, untagged
from .outcome import RESOLVE, GivenUp, Outcome, ids_incomplete, is_none, join, partial_text, short
from .plan import Plan

__all__ = ["fill"]


def fill(
    frame: pd.DataFrame,
    plan: Plan,
    row_outcome: Callable[[int], Outcome[Any] | None],
    cells: Callable[[Any], Mapping[str, object]],
    dtypes: Mapping[str, str],
    error_column: str,
    empty: Callable[[Any], bool] = is_none,
) -> pd.DataFrame:
    """Return ``frame`` with the step's columns (``dtypes``) filled from each row's outcome.

    ``row_outcome(i)`` is row ``i``'s outcome, ``None`` to leave the row as it
    was; ``cells`` turns a value into the row's cells (never called with ``None``).
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
        c: (previous(frame, c) if plan.rerun else [None] * n) for c in names
    }
    errors: list[object] = previous(frame, error_column) if plan.rerun else list(plan.parse_errors)
    for i in plan.todo:
        outcome = row_outcome(i)
        if outcome is None:
            continue
        row = cells(outcome.value) if outcome.value is not None else {}
        for c in names:
            values[c][i] = row.get(c)
        reason = plan.unresolved[i] if plan.unresolved else None
        error = outcome.error if reason is None else _unresolved(outcome, reason, empty)
        errors[i] = join(plan.parse_errors[i], row_error(error, plan.bundles[i]))
    values[error_column] = errors
    return with_columns(frame, values, dtypes)


def _unresolved(outcome: Outcome[Any], reason: str, empty: Callable[[Any], bool]) -> str | None:
    """The error of a row whose resolution was abandoned (``reason``: its resolve cell)."""
    error = outcome.error
    if error is not None and not error.startswith("partial"):
        return error  # abandoned or failed on its own account: retried or reported as it is
    cause = _abandoned_part(reason)
    if outcome.value is None or empty(outcome.value):
        return error or f"abandoned: ids not resolved ({short(cause)})"
    if ids_incomplete(error):
        return error  # a later step read it from a body found with the same ids
    return join(partial_text([GivenUp(RESOLVE, cause)]), error)


def _abandoned_part(cell: str) -> str:
    """The reason of a resolve cell's ``abandoned: …`` part (after any ``invalid …`` part)."""
    parts = [p.strip() for p in untagged(cell).split(";")]
    found = next((p for p in parts if p.startswith("abandoned")), untagged(cell))
    return found.removeprefix("abandoned: ")
