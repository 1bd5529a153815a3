"""A step's columns, built from its units' outcomes.

A row the step worked on gets the cells of its unit's value and its error;
a row it did not work on keeps what an earlier run of the step left (on a
re-run) or gets NA. A row that found nothing while its ids were left
unresolved (its resolution was abandoned) is abandoned too, not absent:
with the missing ids the step might have found something, so a re-run
retries it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from .errors import row_error, untagged
from .outcome import Outcome, is_none, join, short
from .plan import Plan
from .table import previous, with_columns

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
        error = outcome.error
        reason = plan.unresolved[i] if plan.unresolved else None
        if error is None and reason is not None and (outcome.value is None or empty(outcome.value)):
            cause = untagged(reason).removeprefix("abandoned: ")
            error = f"abandoned: ids not resolved ({short(cause)})"
        errors[i] = join(plan.parse_errors[i], row_error(error, plan.bundles[i]))
    values[error_column] = errors
    return with_columns(frame, values, dtypes)
