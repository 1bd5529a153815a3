"""Per-host limiters that learn: how fast, and how many at once, each host is asked.

Every host gets a :class:`HostLimiter`, whether or not its limit is published.
A host with a published limit starts at it and never goes faster; a host
without one starts conservatively and adapts (design: ADR 0007):

* each request reserves the next start slot, one interval (``1 / rate``) after
  the previous one, and holds one of the host's in-flight places;
* a throttling answer (429, 503, or a domain's own "slow down" status) cuts the
  rate in half once per episode, remembers 80 % of the rate that provoked it as
  a learned ceiling (up to 90 % when that rate had held for seconds before the
  throttle), and pauses the whole host until the later of its ``Retry-After``
  and a back-off of its own; queued requests then take fresh slots after the
  pause, one interval apart, so the host never sees a burst;
* clean answers raise the rate step by step up to the learned ceiling, and
  only after a long clean stretch probe a little above it; before its first
  throttle a host is paced past twice its start only once a hundred requests
  have been asked of it (a throttle is the price of finding its limit);
* limits the host announces (Crossref's ``X-Rate-Limit-Limit`` /
  ``-Interval``; ``X-RateLimit-Remaining`` / ``-Reset`` and the unprefixed
  ``RateLimit-*``) lower the ceiling or hold the host until the window resets
  (a bucket refilling within a second frees one place per ``1 / limit`` s);
* a wait longer than the retry budget is obeyed, never shortened: the host is
  *parked* and every request to it fails at once with :class:`HostParked`
  until the wait is over, so the rest of a table goes on.

(About 800 lines, over the project's 650, with more tuning constants than it should
have: the limiter issue replaces it with a one-page module; see
docs/adr/0007-adaptive-host-limiter.md.)
"""

from __future__ import annotations

import asyncio
import collections
import logging
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ._clock import Clock
from ._http import (
    SANE_WAIT,
    Rate,
    RetryPolicy,
    UpstreamUnavailable,
    parse_retry_after,
    sane_seconds,
)

log = logging.getLogger("litfetch_df.limiter")

__all__ = [
    "HostLimit",
    "HostLimiter",
    "HostParked",
    "Lessons",
    "LimiterFactory",
    "LimiterState",
    "plan_for",
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
    the most at once (``None``: not known). A known number is a ceiling the
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
class _Plan:
    """Where a host's limiter starts and the ceilings it never passes."""

    start_rate: float
    max_rate: float  # inf: no ceiling
    start_in_flight: int  # 0: unbounded
    max_in_flight: int  # 0: unbounded
    serial: bool = False  # one at a time, spaced from the previous *answer*


# A host nobody publishes a limit for starts here and learns upwards.
UNKNOWN_START_RATE = 2.0
UNKNOWN_MAX_RATE = 20.0
UNKNOWN_START_IN_FLIGHT = 1
UNKNOWN_MAX_IN_FLIGHT = 8

# Hosts built to take thousands of requests a second from one client (Amazon S3
# serves the PMC bucket): unpaced until they say otherwise (S3 answers 503 SlowDown).
SCALABLE_HOSTS: frozenset[str] = frozenset({"pmc-oa-opendata.s3.amazonaws.com"})

# After a throttle the rate is cut to this share of the rate that provoked it ...
CUT = 0.5
# ... and the learned ceiling is this share of it (room for the overshoot a burst allowance
# hides: the host admits a burst above its rate before it throttles).
LEARNED_SHARE = 0.8
# ... or this share, after a host that asks for HARSH_WAIT seconds or more.
LEARNED_SHARE_HARSH = 0.75
HARSH_WAIT = 5.0
# The throttled pace is taken as at least this share of the pace granted at the time: the
# pace measured over the recent sends lags far behind a fast slow start ...
PACE_SHARE = 0.7
# ... or this share, when the recent sends measured under RAMP_LAG of the pace granted: the
# throttle came early in a ramp, at the first paces past a limit that allows no burst (a
# host allowing a burst lets the pace sit above its limit until the burst is spent, and
# the measured pace catches up meanwhile). ADR 0007, fourth addendum.
PACE_SHARE_EARLY = 0.85
RAMP_LAG = 0.6
# A throttle at a pace the host had just answered cleanly PROVEN_ANSWERS times in a row (each
# at STEADY_LEVEL of it or faster) found a limit below that pace by no more than a burst
# allowance spread over the time the pace held: assuming a burst of at most BURST_SECONDS
# of the limit, the ceiling keeps up to STEADY_SHARE of that pace.
STEADY_SHARE = 0.9
STEADY_LEVEL = 0.95
BURST_SECONDS = 1.0
# Sends remembered to tell how long a pace held: at 20/s, more than the 9 s that earn STEADY_SHARE.
PACE_MEMORY = 256
# Rate gained per clean answer: before the first throttle, and below a learned ceiling.
SLOW_START_STEP = 0.5
RECOVERY_STEP = 0.25
# A learned ceiling is raised by PROBE_GAIN after PROBE_ANSWERS clean answers at it,
# and no sooner than PROBE_AFTER seconds after the last throttle.
PROBE_ANSWERS = 100
PROBE_AFTER = 20.0
PROBE_GAIN = 1.05
# After a throttle that came with a wait of HARSH_WAIT seconds or more, probing waits this long.
PROBE_AFTER_HARSH = 300.0
# No host is ever paced slower than this many requests per second (see _floor).
FLOOR_RATE = 0.5
# A pace is *proven* once this many requests in a row, each held back by the pace, were
# answered cleanly at it or faster; a later throttle never cuts the ceiling below half
# of it, nor the pace below a quarter (see _floor).
PROVEN_ANSWERS = 15
# An exhausted window that resets within this many seconds frees one place per 1/limit s
# (when the host announces its limit) rather than only at the reset (see _read_announced).
SHORT_WINDOW = 1.0
# A host's in-flight cap grows only after this many requests per throttle it has drawn
# with more than one request out (and one), so that finding a concurrency limit costs at
# most 1% of its requests.
CAP_EVIDENCE = 100
# ... and for a host that starts below its ceiling, the learned ceiling keeps this share of
# that start: throttles at a pace judged safe for any host are failures, not a limit.
START_SHARE = 0.75
# The pace that provoked a throttle is measured over this many of the host's latest sends.
MEASURED_SENDS = 32
# Seconds after a cut during which further throttles only wait (they answer requests
# paced before the cut could take effect).
COOLDOWN = 1.0


BUDGET_HEADER_HOSTS = frozenset({"api.openalex.org"})
"""Hosts whose ``X-RateLimit-*`` count a daily budget of one request kind (OpenAlex's list
calls), not a rate window: holding the host on them would stop its free singletons too."""


def plan_for(host: str, rate: Rate, known: HostLimit | None = None) -> _Plan:
    """Return the starting point and ceilings for ``host`` first asked at ``rate``.

    ``known`` (from ``Session(host_limits=…)``) overrides what the library
    knows; a published :class:`Rate` is trusted; anything else is learned.
    """
    if known is not None and (known.rate is not None or known.in_flight is not None):
        base = plan_for(host, rate)
        max_rate = known.rate if known.rate is not None else base.max_rate
        max_in_flight = known.in_flight if known.in_flight is not None else base.max_in_flight
        return _Plan(
            known.rate if known.rate is not None else min(base.start_rate, max_rate),
            max_rate,
            _min_cap(base.start_in_flight, max_in_flight)
            if known.in_flight is None
            else known.in_flight,
            max_in_flight,
            base.serial,
        )
    if rate.published:
        cap = rate.max_in_flight
        return _Plan(rate.per_second, rate.per_second, cap, cap, serial=cap == 1)
    if host in SCALABLE_HOSTS:
        return _Plan(math.inf, math.inf, 0, 0)
    # An unpublished guess of the library's own (Rate.EUROPE_PMC, Rate.UNPAYWALL) is a
    # ceiling, not a starting point: the guess may be too fast for the real host.
    max_rate = min(UNKNOWN_MAX_RATE, rate.per_second) if rate.min_interval else UNKNOWN_MAX_RATE
    max_in_flight = rate.max_in_flight or UNKNOWN_MAX_IN_FLIGHT
    return _Plan(
        min(UNKNOWN_START_RATE, max_rate),
        max_rate,
        min(UNKNOWN_START_IN_FLIGHT, max_in_flight),
        max_in_flight,
    )


def _min_cap(a: int, b: int) -> int:
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
    pressed: bool = field(default=False, kw_only=True)
    """It waited for its start slot: the pace, not the demand, set when it went."""
    crowded: bool = field(default=False, kw_only=True)
    """It waited for an in-flight place: the cap, not the demand, held it back."""
    sent: float = field(default=-math.inf, kw_only=True)
    """When it went (the limiter's clock); ``-inf`` when not known."""


@dataclass(frozen=True, slots=True)
class Lessons:
    """What a limiter learned of its host, for a later session to start from.

    The pace and in-flight cap it reached, the ceilings it learned, whether it
    was still in slow start, and how long it waits before probing above its
    ceiling (longer after a host answered a throttle with a long wait).
    """

    rate: float
    cap: int
    learned: float
    learned_cap: int
    slow_start: bool
    probe_after: float


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


class HostLimiter:
    """The adaptive pacing of one host; shared by every request a session sends it."""

    def __init__(self, host: str, plan: _Plan, clock: Clock, policy: RetryPolicy) -> None:
        self.host = host
        self.plan = plan
        self._clock = clock
        self._policy = policy
        self._max_wait = policy.max_wait
        self.rate = plan.start_rate
        self._learned = plan.max_rate
        self._announced = math.inf
        self.cap = plan.start_in_flight
        self._learned_cap = plan.max_in_flight
        self._slow_start = plan.start_rate < plan.max_rate or plan.start_in_flight != (
            plan.max_in_flight
        )
        self._next = -math.inf
        self._last_grant = -math.inf
        self._last_end = -math.inf
        self._paused_until = -math.inf
        self._parked_until = -math.inf
        self._parked_reason = ""
        self._window_end = -math.inf
        self._window_left = 0
        self._epoch = 0
        self._last_cut = -math.inf
        self._probe_after = PROBE_AFTER
        self._streak = 0
        self._clean = 0
        self._at_ceiling = 0
        self._proven = 0.0
        # Throttles drawn with more than one request out: the only ones a concurrency
        # limit can explain, and what a place more must be earned against.
        self._crowd_throttles = 0
        self._streak_rates: collections.deque[float] = collections.deque(maxlen=PROVEN_ANSWERS)
        self._holding = 0  # requests holding an in-flight place (sent or about to be)
        self._asking = 0  # requests inside acquire(): the demand not yet granted
        self._sending = 0  # requests on the wire
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._recent: collections.deque[float] = collections.deque(maxlen=MEASURED_SENDS)
        # (start slot, pace granted) of the latest sends: how long a pace held (see _held_for).
        self._paces: collections.deque[tuple[float, float]] = collections.deque(maxlen=PACE_MEMORY)
        self.requests = 0
        self.throttled = 0

    # -- granting --------------------------------------------------------------------------

    async def acquire(self) -> Ticket:
        """Wait for an in-flight place and the next start slot; return the grant.

        Raises :class:`HostParked` while the host is parked.
        """
        self._adopt_loop()
        self._check_parked()
        self._asking += 1
        try:
            queued = await self._enter()
            try:
                slot, pressed = await self._wait_slot()
            except BaseException:
                self._leave()
                raise
        finally:
            self._asking -= 1
        self._sending += 1
        self.requests += 1
        self._last_grant = slot
        self._recent.append(slot)
        self._paces.append((slot, self.rate))
        if self._window_end > slot:
            self._window_left -= 1
        # The cap held it back only if the pace would not have held it anyway.
        crowded = queued and not pressed
        return Ticket(
            self.rate, self._sending, self._epoch, pressed=pressed, crowded=crowded, sent=slot
        )

    def release(self, ticket: Ticket) -> None:
        """Give back the place ``ticket`` held (its answer arrived, or it failed)."""
        self._sending = max(0, self._sending - 1)
        self._last_end = self._clock.now()
        self._leave()

    async def _wait_slot(self) -> tuple[float, bool]:
        """Wait for the next start slot; return it and whether the pace (not a pause) set it."""
        clock = self._clock
        pressed: bool | None = None
        while True:
            now = clock.now()
            slot = max(now, self._next, self._paused_until)
            if self.plan.serial:
                slot = max(slot, self._last_end + self._interval())
            if self._window_left <= 0 and self._window_end > slot:
                slot = self._window_end
            if pressed is None:
                # Judged once, on arrival: a pause or an exhausted window says nothing about
                # whether the pace is too slow, the spacing behind other requests does.
                held = max(now, self._paused_until)
                if self._window_left <= 0:
                    held = max(held, self._window_end)
                pressed = slot > held
            # Reserved before awaiting, so concurrent callers line up one interval apart.
            self._next = slot + self._interval()
            if slot > now:
                await clock.sleep(slot - now)
            self._check_parked()
            if self._paused_until <= slot and not (
                self._window_left <= 0 and self._window_end > slot
            ):
                # Slots are reserved ahead; when a busy event loop woke the previous
                # request late, this one keeps a whole interval from when that one really
                # went, so a lag never turns two slots into a burst (a host that allows no
                # burst answers it with a 429).
                # Checked again after each wait: another request may have gone meanwhile.
                while (late := self._last_grant + self._interval() - clock.now()) > 0:
                    await clock.sleep(late)
                    self._check_parked()
                return max(slot, clock.now()), pressed
            # A pause began while this request waited: queue again behind it.

    def _interval(self) -> float:
        return 0.0 if math.isinf(self.rate) else 1.0 / self.rate

    async def _enter(self) -> bool:
        """Take an in-flight place; return whether the request had to queue for it."""
        if not self._waiters and (not self.cap or self._holding < self.cap):
            self._holding += 1
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        try:
            await future
        except BaseException:
            if future.done() and not future.cancelled():
                self._leave()  # granted just as it was cancelled: hand the place on
            else:
                future.cancel()
            raise
        try:
            self._check_parked()  # parked while this request queued for its place
        except HostParked:
            self._leave()
            raise
        return True

    def _leave(self) -> None:
        self._holding = max(0, self._holding - 1)
        self._wake()

    def _wake(self) -> None:
        while self._waiters and (not self.cap or self._holding < self.cap):
            future = self._waiters.popleft()
            if future.done():
                continue
            self._holding += 1
            future.set_result(None)

    def _adopt_loop(self) -> None:
        # A session may be re-entered on a new event loop (the notebook bridge runs
        # each call on its own); whatever the old loop left queued is gone with it.
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._loop = loop
            self._waiters.clear()
            self._holding = 0
            self._sending = 0
            self._asking = 0

    # -- parking ---------------------------------------------------------------------------

    @property
    def parked(self) -> str | None:
        """Why the host is parked (``<host> asked to wait <n> s``), or ``None``."""
        return self._parked_reason if self._parked_until > self._clock.now() else None

    def _check_parked(self) -> None:
        reason = self.parked
        if reason is not None:
            raise HostParked(reason)

    def _park(self, wait: float) -> str:
        # Callers pass sane waits only; this guard keeps a reason printable whatever.
        wait = min(wait, SANE_WAIT) if wait == wait else SANE_WAIT
        now = self._clock.now()
        self._parked_until = max(self._parked_until, now + wait)
        self._paused_until = max(self._paused_until, self._parked_until)
        self._parked_reason = f"{self.host} asked to wait {math.ceil(wait)} s"
        # Queued requests fail now instead of sleeping out the wait.
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_exception(HostParked(self._parked_reason))
                future.exception()  # its owner may be gone: mark it retrieved
        return self._parked_reason

    def _hold(self, wait: float) -> str | None:
        """Pause the host for ``wait`` seconds, or park it if that is past the budget."""
        if wait > self._max_wait:
            return self._park(wait)
        self._paused_until = max(self._paused_until, self._clock.now() + wait)
        return None

    # -- learning --------------------------------------------------------------------------

    def observe(
        self,
        ticket: Ticket,
        status: int,
        headers: Mapping[str, str],
        *,
        throttled: bool,
        retry: bool = False,
    ) -> str | None:
        """Learn from the answer to ``ticket``; return the park reason if it parked the host.

        ``retry`` says the request was throttled before: throttled again, it tells
        more about that resource than about the host's pace, so it only waits.
        """
        parked = self._read_announced(headers, ticket.sent)
        if throttled:
            self.throttled += 1
            if ticket.in_flight > 1:
                self._crowd_throttles += 1
            asked = None
            if status in (429, 503):
                asked = parse_retry_after(headers.get("retry-after"), now=self._clock.wall())
            if asked is not None and asked > self._max_wait:
                return self._park(asked)
            own = 0.0
            # One cut per episode: the throttles of requests sent before the last cut, or
            # within its cool-down, tell nothing new about the pace; they only wait.
            if (
                not retry
                and ticket.epoch == self._epoch
                and self._clock.now() - self._last_cut >= COOLDOWN
            ):
                self._cut(ticket, harsh=asked is not None and asked >= HARSH_WAIT)
                self._streak += 1
                own = min(self._policy.max_delay, self._backoff_base() * 2.0 ** (self._streak - 1))
            return self._hold(max(own, asked or 0.0)) or parked
        if status < 500:
            self._grow(ticket)
        return parked

    def _backoff_base(self) -> float:
        # At least two intervals at the new rate, so the host's bucket has room again.
        return max(self._policy.base_delay, 2.0 * self._interval())

    def _measured_rate(self) -> float:
        """Starts per second over the recent sends (``inf`` when too few to tell)."""
        recent = self._recent
        if len(recent) < 4:
            return math.inf
        span = recent[-1] - recent[0]
        return (len(recent) - 1) / span if span > 0 else math.inf

    def _held_for(self, ticket: Ticket) -> float:
        """Seconds the pace of ``ticket`` held before it was throttled, 0 if it did not hold.

        It held if the latest PROVEN_ANSWERS answers, each held back by the pace, came
        back clean at STEADY_LEVEL of it or faster; the time is counted from the first
        send of the stretch granted at that level. A host that already throttled more
        than once in CAP_EVIDENCE requests is not given the benefit of the doubt.
        """
        rates = self._streak_rates
        level = STEADY_LEVEL * ticket.rate
        if (
            not math.isfinite(ticket.rate)
            or len(rates) < PROVEN_ANSWERS
            or min(rates) < level
            or self.requests < CAP_EVIDENCE * self._epoch
            or not self._paces
        ):
            return 0.0
        last = self._paces[-1][0]
        since = last
        for slot, rate in reversed(self._paces):
            if rate < level:
                break
            since = slot
        return last - since

    def _cut(self, ticket: Ticket, *, harsh: bool = False) -> None:
        # The pace that provoked the throttle: what was measured over the recent sends, which
        # lags behind a pace still rising, but no less than a share of the pace granted.
        measured = self._measured_rate()
        provoked = min(ticket.rate, measured)
        held = self._held_for(ticket)
        if math.isfinite(ticket.rate):
            early = measured < RAMP_LAG * ticket.rate
            provoked = max(provoked, (PACE_SHARE_EARLY if early else PACE_SHARE) * ticket.rate)
        if math.isinf(provoked):
            provoked = UNKNOWN_MAX_RATE
        floor = self._floor()
        # A host that punishes a throttle with a long wait is worth a wider margin.
        share = LEARNED_SHARE_HARSH if harsh else LEARNED_SHARE
        learned = provoked * share
        if held > 0:
            # The pace held for `held` seconds before the host's allowance ran out: the limit
            # is at least pace * held / (held + burst), for a burst of BURST_SECONDS at most.
            learned = max(learned, ticket.rate * min(STEADY_SHARE, held / (held + BURST_SECONDS)))
        # A pace the host has answered cleanly many times over is not what this throttle
        # is about: throttles that keep coming far below it are failures (random 429s and
        # 503s), and must not ratchet the ceiling down to the floor one by one.
        self._learned = max(self._learned_floor(), learned)
        self._streak_rates.clear()
        self.rate = max(floor, provoked * CUT)
        if ticket.in_flight > 1:
            # One throttle cannot tell a rate limit from a concurrency limit, and the pace
            # already answers the first: never learn a cap below two from it (a host that
            # takes one at a time throttles again, and the pace falls until answers no
            # longer overlap).
            self._learned_cap = _min_cap(self._learned_cap, max(2, ticket.in_flight - 1))
            self.cap = max(1, min(self.cap or ticket.in_flight, ticket.in_flight) // 2)
        self._slow_start = False
        self._epoch += 1
        self._last_cut = self._clock.now()
        # Probing above the ceiling costs one throttle when it finds the limit: after a
        # host that answers a throttle with a long wait, that costs too much to do often.
        self._probe_after = PROBE_AFTER_HARSH if harsh else PROBE_AFTER
        self._clean = 0
        self._at_ceiling = 0

    def _floor(self) -> float:
        """The slowest this host is ever paced: a quarter of where it started, 0.5/s at least.

        A host that still throttles at that pace is failing rather than limiting,
        and its pauses (Retry-After, back-off) slow it further anyway.
        """
        start = self.plan.start_rate
        floor = FLOOR_RATE if math.isinf(start) else max(FLOOR_RATE, start / 4)
        return max(floor, self._proven / 4)

    def _learned_floor(self) -> float:
        """The lowest a throttle sets the learned ceiling: half the proven pace, and for a
        host that started below its ceiling, most of that start (judged safe for any host).

        A host that keeps throttling there is failing, not limiting: each throttle still
        cuts the pace and holds the host, but the ceiling the pace recovers to stays.
        """
        floor = max(self._floor(), self._proven / 2)
        plan = self.plan
        if math.isfinite(plan.start_rate) and plan.start_rate < plan.max_rate:
            floor = max(floor, START_SHARE * plan.start_rate)
        return floor

    def _earned_rate(self) -> float:
        """The fastest slow start may pace a host before a throttle would be affordable.

        Slow start finds a host's limit by passing it, which costs one throttle. That
        is worth it only for a host with at least CAP_EVIDENCE requests asked or waiting
        (one throttle in a hundred); a host asked less often (a few dozen articles of one
        publisher) stays within twice its start, where a drawn limit is rarely crossed.
        """
        demand = self.requests + self._asking
        if demand >= CAP_EVIDENCE or math.isinf(self.plan.start_rate):
            return math.inf
        return self.plan.start_rate * (1.0 + demand / CAP_EVIDENCE)

    def _ceiling(self) -> float:
        return min(self.plan.max_rate, self._learned, self._announced)

    def _grow(self, ticket: Ticket) -> None:
        self._streak = 0
        # Only a limit that held a request back is raised: a host asked less often than
        # its pace allows keeps its pace, so a burst of demand later cannot meet a pace
        # that was never tried against the host.
        if ticket.pressed:
            self._grow_pace(ticket)
        if ticket.crowded:
            self._grow_cap()

    def _grow_pace(self, ticket: Ticket) -> None:
        if math.isfinite(ticket.rate):
            self._streak_rates.append(ticket.rate)
            if len(self._streak_rates) == PROVEN_ANSWERS:
                self._proven = max(self._proven, min(self._streak_rates))
        ceiling = self._ceiling()
        if self._slow_start:
            ceiling = min(ceiling, self._earned_rate())
        if self.rate < ceiling:
            step = SLOW_START_STEP if self._slow_start else RECOVERY_STEP
            self.rate = min(ceiling, self.rate + step)
        elif (
            self._learned < self.plan.max_rate
            and self._clock.now() - self._last_cut >= self._probe_after
        ):
            self._at_ceiling += 1
            if self._at_ceiling >= PROBE_ANSWERS:
                self._learned = min(self.plan.max_rate, self._learned * PROBE_GAIN)
                if self._learned_cap and self._learned_cap != self.plan.max_in_flight:
                    self._learned_cap = _min_cap(self.plan.max_in_flight, self._learned_cap + 1)
                self._at_ceiling = 0

    def _grow_cap(self) -> None:
        cap_ceiling = _min_cap(self._learned_cap, self.plan.max_in_flight)
        # A place more is the one growth a host may punish at once (a host taking one
        # request at a time answers the second with a 429): it is tried only once a throttle
        # would cost at most one in CAP_EVIDENCE of the requests this host has answered,
        # counting the throttles that came with more than one request out.
        earned = self.requests >= CAP_EVIDENCE * (self._crowd_throttles + 1)
        if earned and self.cap and (not cap_ceiling or self.cap < cap_ceiling):
            self._clean += 1
            if self._clean >= 2 * self.cap:
                self.cap += 1
                self._clean = 0
                self._wake()

    def _read_announced(self, headers: Mapping[str, str], sent: float) -> str | None:
        # Crossref: "X-Rate-Limit-Limit: 50" per "X-Rate-Limit-Interval: 1s".
        limit = _number(headers.get("x-rate-limit-limit"))
        interval = _seconds(headers.get("x-rate-limit-interval"))
        if limit and interval:
            self._announced = max(FLOOR_RATE, limit / interval)
            if self.rate > self._ceiling():
                self.rate = self._ceiling()
        for prefix in ("x-ratelimit-", "ratelimit-"):
            if prefix == "x-ratelimit-" and self.host in BUDGET_HEADER_HOSTS:
                continue  # a daily budget, not a window: the quota ledger reads it per kind
            remaining = _number(headers.get(prefix + "remaining"))
            reset = _number(headers.get(prefix + "reset"))
            if remaining is None or reset is None:
                continue
            # A reset far beyond any window length is an epoch time, not a delay.
            wait = reset - self._clock.wall() if reset > 1e8 else reset
            if wait <= 0:
                continue
            if sane_seconds(wait, prefix + "reset") is None:
                continue
            limit = _number(headers.get(prefix + "limit"))
            if remaining > 0 and wait <= SHORT_WINDOW and limit and limit > 0:
                # A bucket full again within a second gives its places back one by one, not
                # all at the reset: "1 left, reset in 1" from a small burst would otherwise
                # hold the host to one request a second whatever its limit.
                continue
            if remaining <= 0 and wait <= SHORT_WINDOW and limit and limit > 0:
                # A window of a second or less, counted in whole seconds: a token bucket
                # with no burst to spare says "0 left, reset in 1" after every request, and
                # one place frees after 1/limit s, not after the rounded-up second. Waiting
                # the whole second would pace such a host at 1/s whatever its limit.
                wait = min(wait, 1.0 / limit)
                if math.isfinite(sent):
                    # The host counted the request as it arrived, and the next one arrives as
                    # far after it is sent: the place frees 1/limit s after this request
                    # went, not after its answer came back (a round trip more per request).
                    wait = sent + wait - self._clock.now()
                    if wait <= 0:
                        continue
            now = self._clock.now()
            self._window_end = now + wait
            # Requests already on the wire count against what is left.
            self._window_left = int(remaining) - max(0, self._sending)
            if remaining <= 0:
                return self._hold(wait)
        return None

    # -- reporting -------------------------------------------------------------------------

    def lessons(self) -> Lessons:
        """Return what this limiter learned of its host (see :meth:`resume`)."""
        return Lessons(
            rate=self.rate,
            cap=self.cap,
            learned=self._learned,
            learned_cap=self._learned_cap,
            slow_start=self._slow_start,
            probe_after=self._probe_after,
        )

    def resume(self, lessons: Lessons) -> None:
        """Start from what an earlier limiter of the same host learned (a fresh limiter only).

        The ceilings never rise above this limiter's own plan, and probing above
        the learned ceiling waits its full delay from now, as after a throttle.
        """
        plan = self.plan
        self._learned = min(plan.max_rate, lessons.learned)
        self._learned_cap = _min_cap(plan.max_in_flight, lessons.learned_cap)
        self.rate = min(self._ceiling(), max(self._floor(), lessons.rate))
        cap_ceiling = _min_cap(self._learned_cap, plan.max_in_flight)
        self.cap = _min_cap(cap_ceiling, lessons.cap) if lessons.cap else cap_ceiling
        self._slow_start = lessons.slow_start
        self._probe_after = lessons.probe_after
        if not lessons.slow_start:
            self._last_cut = self._clock.now()

    def state(self) -> LimiterState:
        """Return a snapshot of this host's pacing."""
        now = self._clock.now()
        return LimiterState(
            host=self.host,
            rate=self.rate,
            ceiling=self._ceiling(),
            in_flight_cap=self.cap,
            requests=self.requests,
            throttled=self.throttled,
            paused_for=max(0.0, self._paused_until - now),
            parked=self.parked,
        )


LimiterFactory = Callable[[str, _Plan, Clock, RetryPolicy], HostLimiter]
"""Builds the limiter of one host from its name, plan, clock and retry policy.

:class:`HostLimiter` itself is the default. ``Session(limiter_factory=…)``
plugs in another, e.g. one that also asks a coordinator shared by several
processes (``litfetch_df.dask``); it must return a :class:`HostLimiter` (or a
subclass) because the session calls ``acquire``, ``release``, ``observe``
and ``state`` on it.
"""


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        log.warning("ignoring a rate-limit header value that is not a number")
        return None
    if not math.isfinite(number) or number < 0:
        log.warning("ignoring a rate-limit header value %r", number)
        return None
    return number


def _seconds(value: str | None) -> float | None:
    """Read ``1s``, ``500ms``, ``2m`` or a bare number of seconds."""
    if value is None:
        return None
    match = _DURATION.match(value)
    if match is None:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}[(match.group(2) or "s").lower()]
    seconds = float(match.group(1)) * scale
    if sane_seconds(seconds, "rate-limit interval") is None:
        return None
    return seconds if seconds > 0 else None
