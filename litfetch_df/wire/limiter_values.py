"""The limiter's value types: what a caller knows, where a host starts, what it was granted.

:class:`HostLimit` (``Session(host_limits=…)``), :class:`Plan` (a host's start and hard
ceilings), :class:`Ceiling` (the published per-kind / per-minute ceiling of one request,
from :mod:`litfetch_df.limits`), :class:`Ticket` (one grant), :class:`Lessons` (what a
limiter learned, for a later session), :class:`LimiterState` (a snapshot) and
:class:`HostParked`. Shared by :mod:`litfetch_df.wire.limiter`, the session and the Dask
coordinator; the rules that use them are in :mod:`litfetch_df.wire.limiter` (ADR 0007).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..limits import limits_for, request_kind, tier_of
from .http import UpstreamUnavailable

__all__ = [
    "Ceiling",
    "Evidence",
    "HostLimit",
    "HostParked",
    "Lessons",
    "LimiterState",
    "Plan",
    "Ticket",
    "ceiling_for",
    "min_cap",
]


class HostParked(UpstreamUnavailable):
    """A host asked to wait longer than the retry budget allows: its requests fail at once.

    The message names the host and the wait (``<host> asked to wait <n> s``),
    which is what a row's error column shows, so a re-run picks the row up.
    """


@dataclass(frozen=True, slots=True)
class HostLimit:
    """What the caller knows of one host's limit, for ``Session(host_limits=…)``.

    ``rate`` is the most requests per second the host accepts and ``in_flight``
    the most at once (``None``: not known). A known number is a hard ceiling the
    limiter starts at and never exceeds; an unknown one is learned.
    """

    rate: float | None = None
    in_flight: int | None = None

    def __post_init__(self) -> None:
        if self.rate is not None and not (self.rate > 0 and math.isfinite(self.rate)):
            raise ValueError(f"rate must be a positive number of requests/s, got {self.rate!r}")
        if self.in_flight is not None and self.in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, got {self.in_flight!r}")


@dataclass(frozen=True, slots=True)
class Plan:
    """Where a host's limiter starts and the hard ceilings it never passes.

    ``max_rate`` is ``inf`` and ``max_in_flight`` ``0`` when unbounded; ``serial``
    spaces each request from the previous *answer* (a host taking one at a time).
    """

    start_rate: float
    max_rate: float
    max_in_flight: int
    serial: bool = False

    @property
    def bounded(self) -> bool:
        """Whether the plan sets any limit (a rate ceiling or an in-flight cap)."""
        return math.isfinite(self.max_rate) or self.max_in_flight != 0


def min_cap(a: int, b: int) -> int:
    """The tighter of two in-flight caps, where ``0`` means unbounded."""
    if not a:
        return b
    if not b:
        return a
    return min(a, b)


@dataclass(frozen=True, slots=True)
class Ticket:
    """One granted request: the pacing it was sent under, to judge its answer by."""

    rate: float
    in_flight: int
    epoch: int
    """The throttle episode it was sent in: one reaction per episode."""
    pressed: bool = field(default=False, kw_only=True)
    """It waited for its start slot: the pace, not the demand, set when it went."""
    crowded: bool = field(default=False, kw_only=True)
    """It waited for an in-flight place: the cap, not the demand, held it back."""
    sent: float = field(default=-math.inf, kw_only=True)
    """When it went (the limiter's clock); ``-inf`` when not known."""
    round: int = field(default=0, kw_only=True)
    """The slow-start round (pace generation) it was sent in."""
    on_wire: int = field(default=0, kw_only=True)
    """Requests of this limiter unanswered as it went (it included)."""


Window = tuple[float, int, float]
"""A stretch of clean sends: (its start, the clean sends in it, the last of them)."""

_EMPTY: Window = (math.inf, 0, -math.inf)


@dataclass(slots=True)
class Evidence:
    """The clean sends that prove a rate: the window since the last hold ended, and the
    one before that hold (sent until ``held_at``). A window never spans a hold: its idle
    time proves nothing, and the bucket refills during it.
    """

    window: Window = _EMPTY
    before: Window = _EMPTY
    held_at: float = -math.inf

    def open(self, slot: float) -> None:
        """A request goes at ``slot``: the first since a hold opens a window."""
        if math.isinf(self.window[0]):
            self.window = (slot, 0, slot)

    def close(self, now: float) -> None:
        """The host is held from ``now``: the window, once it proves anything, is kept."""
        if self.window[1] > 1:
            self.before, self.held_at = self.window, now
        self.window = _EMPTY

    def count(self, sent: float) -> None:
        """A request sent at ``sent`` came back clean."""
        self.window = _counted(self.window, sent)
        if sent < self.held_at:
            self.before = _counted(self.before, sent)

    def proven(self, burst: float) -> float:
        """The fastest rate provably admitted if the host allows a burst of ``burst`` s."""
        return max(count / (last - start + burst) for start, count, last in self._windows())

    def achieved(self) -> float:
        """The fastest rate admitted over a window, its burst included (``inf``: unknown)."""
        rates = [
            (n - 1) / (last - start) for start, n, last in self._windows() if n > 1 and last > start
        ]
        return max(rates) if rates else math.inf

    def _windows(self) -> list[Window]:
        # The window since the last hold, once it holds evidence; until then the one before.
        for window in (self.window, self.before):
            if window[1] > 1:
                return [window]
        return [w for w in (self.window, self.before) if w[1]] or [(0.0, 0, 0.0)]


def _counted(window: Window, sent: float) -> Window:
    """``window`` with one more clean answer, if the request was sent inside it."""
    start, count, last = window
    return (start, count + 1, max(last, sent)) if sent >= start else window


@dataclass(frozen=True, slots=True)
class Lessons:
    """What a limiter learned of its host, for a later session to start from.

    The pace and in-flight cap it reached, the slowest pace that drew a throttle
    (``learned``, ``inf`` when none did) and the in-flight cap a throttle taught
    (``learned_cap``, ``0`` when none), whether it was still in slow start, and
    how long it waits after a throttle before probing.
    """

    rate: float
    cap: int
    learned: float
    learned_cap: int
    slow_start: bool
    probe_after: float
    misses: int = 0
    """Failed probes in a row: each doubles the calm the next probe waits for."""


@dataclass(frozen=True, slots=True)
class LimiterState:
    """A snapshot of one host's limiter (see :attr:`Session.limits`)."""

    host: str
    rate: float
    ceiling: float
    in_flight_cap: int
    requests: int
    throttled: int
    paused_for: float
    parked: str | None


@dataclass(frozen=True, slots=True)
class Ceiling:
    """A published ceiling of one kind of request to a host: never probed past.

    ``per_second`` spaces the requests of the ``pool`` (``1 / per_second`` apart);
    ``per_minute`` is a window: at most that many of the pool's requests in any 60 s
    (a sliding window, so a host counting the clock's minutes never refuses either).
    Rows of one host and tier with the same figures share a pool: the limits table
    writes one throttle for every endpoint (Europe PMC's 10/s and 500/min, Springer
    Nature Basic's 100/min) as the same figures on each kind's row, and separate pools
    (Crossref's single records and lists) as different ones.
    """

    pool: str
    per_second: float | None = None
    per_minute: int | None = None


def ceiling_for(host: str, path: str, params: Mapping[str, object] | None = None) -> Ceiling | None:
    """The published ceiling of a request to ``host`` at ``path``, or ``None``.

    The row of :data:`litfetch_df.limits.LIMITS` for the request's kind and the tier its
    parameters select (:func:`litfetch_df.limits.tier_of`); a host without such a row
    (one publishing nothing, or a tier the request cannot be placed in) has none, and is
    paced by its :class:`~litfetch_df.wire.http.Rate` and what the limiter learns.
    """
    name = host.lower()
    kind = request_kind(name, path, {k: str(v) for k, v in (params or {}).items()})
    tier = tier_of(name, params)
    for row in limits_for(name):
        if row.kind == kind and row.tier in (tier, "any") and row.published:
            if row.per_second is None and row.per_minute is None:
                return None
            per_minute = None if row.per_minute is None else math.floor(row.per_minute)
            return Ceiling(
                f"{row.tier}/{row.per_second}/{row.per_minute}", row.per_second, per_minute
            )
    return None
