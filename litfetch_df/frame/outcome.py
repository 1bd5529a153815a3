"""How one unit of a step ended, and how that reads in an error cell.

A unit ends in one of three ways:

* an answer (possibly "nothing serves it": a value the step calls empty,
  without an error);
* abandoned: the answer is empty and the unit's scope recorded a request
  given up after every retry (or the transport failed outright); the row
  gets ``"abandoned: <reason>"``, and running the step again on the returned
  frame retries exactly those rows;
* an error from the code itself (``"error: <type>: <message>"``), logged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Final, Generic, TypeVar

from .._http import UpstreamUnavailable, get_logger, redact_text
from ..session import Session
from .errors import compact

__all__ = [
    "INTERRUPTED",
    "Outcome",
    "attempt",
    "is_abandoned",
    "is_none",
    "join",
    "short",
]

log = get_logger(__name__)

R = TypeVar("R")


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome(Generic[R]):
    """How one unit of work ended: a value, or an error message (``abandoned: …`` retries)."""

    value: R | None = None
    error: str | None = None


INTERRUPTED: Final[Outcome[Any]] = Outcome(error="abandoned: interrupted before this row was done")
"""The outcome of a row whose unit had not finished when the call was interrupted.

Abandoned, so a re-run of the partial frame works exactly those rows.
"""


def is_abandoned(error: object) -> bool:
    """Return whether an error-column cell marks a row worth retrying."""
    if not isinstance(error, str):
        return False
    return any(part.strip().startswith("abandoned") for part in error.split(";"))


def is_none(value: object) -> bool:
    """Return whether ``value`` is ``None`` (the default test of an empty answer)."""
    return value is None


def short(text: str, limit: int = 160) -> str:
    """Return ``text`` on one line, credentials redacted, cut to ``limit`` characters."""
    text = " ".join(redact_text(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def join(*parts: str | None) -> str | None:
    """Return the non-empty ``parts`` joined by ``"; "``, or ``None`` when there are none."""
    kept = [p for p in parts if p]
    return "; ".join(kept) if kept else None


async def attempt(
    scope: Session,
    call: Callable[[], Awaitable[R]],
    empty: Callable[[R], bool],
    *,
    since: int = 0,
) -> Outcome[R]:
    """Await ``call`` and tell how it ended, judging abandonment from ``scope``'s failures.

    Only the failures recorded from index ``since`` on count: a scope that
    serves several steps in turn judges each step by its own requests.
    """
    try:
        value = await call()
    except UpstreamUnavailable as exc:
        return Outcome(error=f"abandoned: {short(compact(str(exc)))}")
    except Exception as exc:
        log.warning("unit failed: %s: %s", type(exc).__name__, short(str(exc)))
        return Outcome(error=f"error: {type(exc).__name__}: {short(compact(str(exc)))}")
    failures = scope.failures[since:]
    if empty(value) and failures:
        return Outcome(error=f"abandoned: {short(compact(failures[0]))}")
    return Outcome(value=value)
