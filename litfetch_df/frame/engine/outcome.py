"""How one unit of a step ended, and how that reads in an error cell.

A unit ends in one of four ways:

* an answer (possibly "nothing serves it": a value the step calls empty,
  without an error);
* partial: an answer, while a source that might have added to it was given
  up after every retry; the row keeps what was found and gets
  ``"partial: <source> abandoned: <reason>"`` (one such part per source
  given up, joined by ``"; "``), and running the step again on the returned
  frame asks again (only the given-up sources, where the step can);
* abandoned: the answer is empty and the unit's scope recorded a request
  given up after every retry (or the transport failed outright); the row
  gets ``"abandoned: <reason>"``, and running the step again on the returned
  frame retries exactly those rows;
* an error from the code itself (``"error: <type>: <message>"``), logged.

A step's work says which sources it gave up by returning its value wrapped
in :class:`Partial`; for a step that does not, any request its unit gave up
makes a found answer partial, naming the request's host.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, Generic, TypeVar

from ...session import Session
from ...store.quota import QuotaDeferred
from ...wire.http import UpstreamUnavailable, get_logger, redact_text
from ...wire.transfer import NotServed
from .errors import compact, untagged

__all__ = [
    "INTERRUPTED",
    "RESOLVE",
    "GivenUp",
    "Outcome",
    "Partial",
    "attempt",
    "given_up_in",
    "ids_incomplete",
    "is_abandoned",
    "is_deferred",
    "is_none",
    "is_partial",
    "join",
    "partial_text",
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


@dataclasses.dataclass(frozen=True, slots=True)
class GivenUp:
    """A source given up for one unit: its name, and why (the request that failed)."""

    source: str
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Partial(Generic[R]):
    """A step's value with the sources given up while finding it.

    ``complete``: whether ``given_up`` accounts for every request the work
    gave up; when not, :func:`attempt` adds those of the unit's scope.
    """

    value: R
    given_up: tuple[GivenUp, ...] = ()
    complete: bool = True


def _parts(error: object) -> list[str]:
    if not isinstance(error, str):
        return []
    return [part.strip() for part in error.split(";")]


def is_abandoned(error: object) -> bool:
    """Return whether an error-column cell marks a row worth retrying.

    Abandoned, partial, or deferred (a quota was spent: the row is done again once it
    resets).
    """
    return any(part.startswith(("abandoned", "partial", "deferred")) for part in _parts(error))


def is_deferred(error: object) -> bool:
    """Return whether an error-column cell says a spent quota deferred the row."""
    return any(part.startswith("deferred") for part in _parts(error))


def _given_up(reason: str) -> str:
    """The error of a unit given up for ``reason``: deferred stays deferred, else abandoned."""
    text = short(compact(reason))
    return text if text.startswith("deferred: ") else f"abandoned: {text}"


def is_partial(error: object) -> bool:
    """Return whether an error-column cell marks a partial row (something found, a source lost)."""
    parts = _parts(error)
    return any(p.startswith("partial") for p in parts) and not any(
        p.startswith("abandoned") for p in parts
    )


_PARTIAL: Final = re.compile(r"^partial: (.+?) (?:abandoned: (.*)|(deferred: .*))$", re.DOTALL)


def _partial_part(g: GivenUp) -> str:
    reason = short(compact(g.reason))
    # A spent quota says so: "partial: <host> deferred: <host> daily quota, resets in …".
    if reason.startswith("deferred: "):
        return f"partial: {g.source} {reason}"
    return f"partial: {g.source} abandoned: {reason}"


def partial_text(given_up: Sequence[GivenUp]) -> str | None:
    """The error text of a partial answer: one ``partial: <source> abandoned: <reason>`` each.

    A source a spent quota held back reads ``partial: <source> deferred: <reason>``.
    """
    return join(*(_partial_part(g) for g in given_up))


def given_up_in(error: object) -> tuple[GivenUp, ...]:
    """The sources a partial error cell names as given up (:func:`partial_text` read back)."""
    found: list[GivenUp] = []
    for part in _parts(untagged(error) if isinstance(error, str) else error):
        m = _PARTIAL.match(part)
        if m:
            found.append(GivenUp(m.group(1), m.group(2) if m.group(3) is None else m.group(3)))
    return tuple(found)


RESOLVE: Final = "resolve"
"""The "source" a partial cell names when the row's ids were not all resolved.

``partial: resolve abandoned: <reason>``: the step found something with the
ids it had, but the row's resolution was given up, so an id that would have
brought more (a DOI for Unpaywall, a PMCID for the PMC bucket) was missing.
A re-run does such a row afresh, with the ids resolved by then.
"""


def ids_incomplete(error: object) -> bool:
    """Return whether a partial cell says the row's ids were not all resolved (:data:`RESOLVE`)."""
    return any(g.source == RESOLVE for g in given_up_in(error))


def _said(exc: BaseException) -> str:
    """An exception's message, or its type's name when it has none: a cell is never blank."""
    return str(exc).strip() or f"{type(exc).__name__} (no message)"


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


_FROM_HOST: Final = re.compile(r"\bfrom ([A-Za-z0-9.-]+\.[A-Za-z]{2,})\b")


def _failed_host(reason: str) -> str:
    """The host a session's failure reason names (``"… from api.crossref.org …"``)."""
    text = compact(reason)
    m = _FROM_HOST.search(text)
    if m:
        return m.group(1)
    hosts = re.findall(r"\b(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}\b", text)
    return hosts[0] if hosts else "a request"


async def attempt(
    scope: Session,
    call: Callable[[], Awaitable[R | Partial[R]]],
    empty: Callable[[R], bool],
    *,
    since: int = 0,
    partial: bool = False,
) -> Outcome[R]:
    """Await ``call`` and tell how it ended, judging abandonment from ``scope``'s failures.

    Only the failures recorded from index ``since`` on count: a scope that
    serves several steps in turn judges each step by its own requests. With
    ``partial``, a found answer while a request was given up is partial
    (see the module docstring); a :class:`Partial` value is always read.
    """
    try:
        found = await call()
    except QuotaDeferred as exc:
        return Outcome(error=f"deferred: {short(compact(str(exc)))}")
    except UpstreamUnavailable as exc:
        return Outcome(error=f"abandoned: {short(compact(_said(exc)))}")
    except NotServed as exc:
        # A verdict on the thing asked for (HTTP 404 from its host): said as is, not retried.
        return Outcome(error=short(str(exc)))
    except Exception as exc:
        log.warning("unit failed: %s: %s", type(exc).__name__, short(str(exc)))
        return Outcome(error=f"error: {type(exc).__name__}: {short(compact(_said(exc)))}")
    failures = scope.failures[since:]
    given_up: tuple[GivenUp, ...] = ()
    complete = not partial
    if isinstance(found, Partial):
        value: R = found.value
        given_up, complete = found.given_up, found.complete
    else:
        value = found
    if empty(value):
        reason = given_up[0].reason if given_up else (failures[0] if failures else None)
        # A spent quota the work met last is what stops the row (an earlier one may have
        # been detoured round): the row says that one.
        # A bulk lookup's reason ends "(<lookup>)"; a request refused itself is preferred.
        deferrals = [f for f in failures if f.startswith("deferred: ")]
        own = [f for f in deferrals if not f.endswith(")")]
        if not given_up and deferrals:
            reason = (own or deferrals)[-1]
        if reason is not None and not reason.strip():
            reason = "a request was given up (no reason given)"
        if reason is not None:
            return Outcome(error=_given_up(reason))
        return Outcome(value=value)
    if not complete:
        named = {g.source for g in given_up}
        for reason in failures:
            host = _failed_host(reason)
            if host not in named:
                named.add(host)
                given_up = (*given_up, GivenUp(host, reason))
    return Outcome(value=value, error=partial_text(given_up))
