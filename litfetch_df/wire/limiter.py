"""Per-host limiters: how fast, and how many at once, each host is asked (ADR 0007).

Every host gets a :class:`HostLimiter`, shared by all requests of a session:

* **Pacing.** A request takes an in-flight place, then the next start slot, one
  interval (``1 / rate``) after the previous one. In flight follows from pace and
  latency (Little's law): about ``2 · rate · srtt + 1`` places, within what the
  host publishes or announces, so a long round trip never caps the pace.
* **Slow start by rounds.** From the first request the pace doubles per round of
  pressed traffic (a round ends when a request sent at the current pace, held
  back by it, comes back clean) until the first throttle or the ceiling.
* **A throttle** (429, 503, a domain's "slow down") is met once per episode. A
  refusal while the announced window still has room, or past the most requests a
  clean answer was sent with, is a concurrency limit: in flight is cut, until a request of
  the same episode refutes it (refused within that cap, counting only the requests the
  host served): then the pace is cut after all, to what the host proved. Otherwise
  the pace goes back to the last pace that held (the previous round's, or half a
  settled pace), never below what the host has provably admitted, and the whole
  host is held for the later of its ``Retry-After`` and a back-off. Afterwards the
  pace settles between the fastest clean pace and the slowest throttled one,
  probing halfway up (on a ratio scale) only once the calm since the hold ended makes the expected
  gain (at even odds) cover a failure's hold, and not while the host has drawn a
  429 per PROBE_EVERY requests; each failed probe in a row doubles the wait.
* **What a host says is obeyed.** ``Retry-After`` (seconds or HTTP date) holds the
  whole host; a wait past the retry budget *parks* it, and every request fails at
  once with :class:`HostParked` until the wait is over. The rate-limit headers
  (read by :mod:`litfetch_df.wire.rate_headers`) set ceilings and count what is left of
  a window. A published limit is a hard ceiling, never probed past; a host nobody
  publishes for gets the politeness ceiling of :data:`litfetch_df.limits.UNLISTED`.
  A request's own kind may have a tighter published ceiling (:class:`Ceiling`, from
  :mod:`litfetch_df.limits`: Springer Nature Basic's 100 a minute, Crossref's lists at
  3/s): its slot keeps to that too, the per-minute figure as a window of 60 s.

Eight tuning constants, each with its reason below. The other numbers are the rules
themselves, not tuning: slow start and the back-off double, a probe bisects (at the
geometric mean), and its odds of holding are taken as even.

The rules are this module; the queue, slots, holds and parking they drive are
:mod:`litfetch_df.wire.limiter_slots`, the value types :mod:`litfetch_df.wire.limiter_values`,
the header parsing :mod:`litfetch_df.wire.rate_headers`; see
docs/adr/0007-adaptive-host-limiter.md.

(About 580 lines, over the project's 550: the rules of one host's pace, each with the
reason it is there, read best in one place; the evidence windows a pace is proved by are
:class:`~litfetch_df.wire.limiter_values.Evidence`.)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping

from ..limits import UNLISTED
from .clock import Clock
from .http import Rate, RetryPolicy, sane_seconds
from .limiter_slots import Slots
from .limiter_values import (
    Ceiling,
    Evidence,
    HostLimit,
    HostParked,
    Lessons,
    LimiterState,
    Plan,
    Ticket,
    ceiling_for,
    min_cap,
)
from .rate_headers import BUDGET_HEADER_HOSTS, SCALABLE_HOSTS, is_pace_signal, read_limits

log = logging.getLogger("litfetch_df.limiter")

__all__ = [
    "BUDGET_HEADER_HOSTS",
    "SCALABLE_HOSTS",
    "Ceiling",
    "HostLimit",
    "HostLimiter",
    "HostParked",
    "Lessons",
    "LimiterFactory",
    "LimiterState",
    "Plan",
    "Ticket",
    "ceiling_for",
    "is_pace_signal",
    "plan_for",
]

# -- the tuning constants (ADR 0007 gives the bench they were tuned on) ---------------------

START_RATE = 5.0
"""Requests/s of a host's first round when nothing is published: a quarter of the
politeness ceiling, so slow start reaches it in two rounds (two round trips)."""

CUT = 0.5
"""After a throttle the pace goes back to this share of the pace that drew it: the
previous round's, which held (slow start doubles), as TCP halves its window."""

BURST_SECONDS = 1.0
"""The largest burst a host is assumed to allow, in seconds of its rate. Any window of
``w`` seconds in which ``n`` requests were admitted then proves a rate of at least
``n / (w + BURST_SECONDS)``: a throttle never cuts below that. By the same token an
exhausted announced window resetting within this is a token bucket counted in whole
seconds: one place frees ``1 / limit`` s after the send, not at the rounded-up reset
(which would pace it at one request a second)."""

PROBE_EVERY = 100
"""Clean answers since the last throttle before a probe: a failed probe costs about one
429, so at most one per this many keeps a host's throttles near 1 % of its requests."""

ROUND_RTTS = 2.0
"""A slow-start round is judged clean only on a request sent this many round trips (at
most BURST_SECONDS) after its pace was set: earlier answers come while the host's burst
still covers an overshoot, and at 300 ms they doubled the pace past the limit. A pace a
window of a second announced is judged on its first answer: only the places are found."""

SRTT_GAIN = 0.125
"""Weight of each new round trip in the smoothed one (RFC 6298's 1/8)."""

HEADROOM = 2.0
"""In flight is allowed ``HEADROOM · rate · srtt + 1``: Little's law gives ``rate ·
srtt`` on average; twice that plus one absorbs slow answers without capping the pace."""

FLOOR_RATE = 0.5
"""No host is paced slower than this: one that still throttles there is failing, not
limiting, and its holds (Retry-After, back-off) slow it further anyway."""

# -- not tuning: the ceilings of a host nobody publishes for, from the limits table ----------

UNLISTED_RATE: float = UNLISTED.per_second or 20.0
UNLISTED_IN_FLIGHT: int = UNLISTED.in_flight or 8


def plan_for(host: str, rate: Rate, known: HostLimit | None = None) -> Plan:
    """Return the starting point and ceilings for ``host`` first asked at ``rate``.

    ``known`` (from ``Session(host_limits=…)``) overrides what the library knows;
    a published :class:`Rate` is a hard ceiling the host starts at; anything else
    starts at :data:`START_RATE` under the politeness ceiling and learns.
    """
    if known is not None and (known.rate is not None or known.in_flight is not None):
        base = plan_for(host, rate)
        max_rate = known.rate if known.rate is not None else base.max_rate
        start = known.rate if known.rate is not None else min(base.start_rate, max_rate)
        cap = known.in_flight if known.in_flight is not None else base.max_in_flight
        return Plan(start, max_rate, cap, serial=cap == 1 or base.serial)
    if rate.published:
        cap = rate.max_in_flight
        return Plan(rate.per_second, rate.per_second, cap, serial=cap == 1)
    if host in SCALABLE_HOSTS:
        return Plan(math.inf, math.inf, 0)
    # An unpublished guess of the library's own (Rate.UNPAYWALL) is a
    # ceiling, not a starting point: the guess may be too fast for the real host.
    max_rate = min(UNLISTED_RATE, rate.per_second)
    max_in_flight = min_cap(rate.max_in_flight, UNLISTED_IN_FLIGHT)
    # With no politeness ceiling at all (tests set UNLISTED_RATE to inf) there is nothing
    # to start below either.
    start = min(START_RATE, max_rate) if math.isfinite(UNLISTED_RATE) else max_rate
    return Plan(start, max_rate, max_in_flight)


class HostLimiter(Slots):
    """The adaptive pacing of one host; shared by every request a session sends it.

    The queue, slots, holds and parking are :class:`~litfetch_df.wire.limiter_slots.Slots`'.
    """

    def __init__(self, host: str, plan: Plan, clock: Clock, policy: RetryPolicy) -> None:
        super().__init__(host, plan, clock, policy)
        self._slow_start = plan.start_rate < plan.max_rate
        self._bad = math.inf  # the slowest pace that drew a throttle
        self._announced = math.inf  # a rate ceiling the host announced
        self._told = 0.0  # the pace a window of a second announces (0: none)
        self._announced_cap = 0  # an in-flight ceiling the host announced
        self._learned_cap = 0  # an in-flight cap a concurrency throttle taught
        self._most_clean = 0  # the most in flight a clean answer was sent with
        # A throttle read as a concurrency limit (and the cap before it) until refuted, and the
        # send times of its episode's throttled requests.
        self._suspect: tuple[Ticket, int] | None = None
        self._refused: list[float] = []
        self._srtt = 0.0  # smoothed round trip of clean answers (0: none yet)
        self._min_rtt = math.inf  # the shortest round trip seen
        self._best = 0.0  # the fastest pace ever proven (see _proven)
        self._settled = math.inf  # the pace before a probe: the last one that held
        self._held = plan.start_rate  # the pace before the last raise: the last that held
        self._round = 0
        self._round_start = -math.inf  # when the current pace was set
        self._epoch = 0
        self._quiet = 0.0  # what a failed probe would cost: the last throttle's hold (s)
        self._calm_since = -math.inf  # the last throttle or probe
        self._calm_answers = PROBE_EVERY  # clean answers since then
        self._probe_round = -1  # the round a probe opened
        self._misses = 0  # failed probes in a row: each doubles the calm the next one waits
        # Throttles the last episode drew (its first and those already on the wire): what
        # a failed probe costs in 429s, so a probe waits PROBE_EVERY clean answers per 429.
        self._episode = 1
        self._streak = 0  # throttle episodes in a row, for the back-off
        self._evidence = Evidence()  # the clean sends that prove a rate (see BURST_SECONDS)
        self.throttled = 0

    # -- ceilings --------------------------------------------------------------------------

    def _ceiling(self) -> float:
        """The hard rate ceiling: published, given, or announced by the host."""
        return min(self.plan.max_rate, self._announced)

    @property
    def cap(self) -> int:
        """In-flight places now (``0``: unbounded): Little's law within the ceilings."""
        hard = min_cap(min_cap(self.plan.max_in_flight, self._announced_cap), self._learned_cap)
        return min_cap(hard, self._little())

    def _little(self) -> int:
        """Places the pace needs at the smoothed round trip (``0``: not known yet)."""
        if self._srtt <= 0 or not math.isfinite(self.rate):
            return 0
        return math.ceil(HEADROOM * self.rate * self._srtt) + 1

    # -- granting --------------------------------------------------------------------------

    def _grant(self, slot: float, *, pressed: bool, crowded: bool) -> Ticket:
        self._sending += 1
        self.requests += 1
        self._last_grant = slot
        self._evidence.open(slot)
        if self._window_end > slot:
            self._window_left -= 1
        return Ticket(
            self.rate,
            self._at_host(slot),
            self._epoch,
            pressed=pressed,
            crowded=crowded,
            sent=slot,
            round=self._round,
            on_wire=self._sending,
        )

    def _at_host(self, slot: float) -> int:
        """How many requests the host is likely serving as this one arrives (it included).

        A request out for longer than the shortest round trip has most likely been
        answered already, its answer still on the way: counting it would make a host
        that serves one at a time look as if it had served two cleanly.
        """
        if self.cap == 0:
            return self._sending  # unbounded: nothing is learned from it
        out = self._out
        out.append(slot)
        return sum(1 for sent in out if sent > slot - self._min_rtt)

    # -- holding and parking ---------------------------------------------------------------

    def _hold(self, wait: float, *, pacing: bool = False) -> str | None:
        """Pause the host for ``wait`` seconds, or park it if that is past the budget.

        ``pacing``: an announced window's next place, not a throttle's hold.
        """
        if wait > self.policy.max_wait:
            return self._park(wait)
        until = self._clock.now() + wait
        if until > self._paused_until:
            self._paused_until = until
            # The bucket refills during a hold: what is sent after it proves a rate anew. An
            # announced window's next place within the assumed burst is pacing: the window
            # keeps its evidence (its proof allows a burst of that length).
            if not (pacing and wait < BURST_SECONDS):
                self._evidence.close(self._clock.now())
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
            asked = self._asked(status, headers)
            if asked is not None and asked > self.policy.max_wait:
                return self._park(asked)
            own = 0.0
            # One reaction per episode: a request sent before the last cut (or a retry)
            # tells nothing new about the pace; it only waits.
            if retry or ticket.epoch != self._epoch:
                self._episode += 1  # one more 429 a failed probe would cost
                if not retry:
                    self._refuted(ticket, refused=True)
                self._refused.append(ticket.sent)
            else:
                self._episode = 1
                self._refused = [ticket.sent]
                self._cut(ticket, crowded=self._has_room(ticket, headers))
                self._streak += 1
                base = max(self.policy.base_delay, 2.0 * self._interval())
                own = min(self.policy.max_delay, base * 2.0 ** (self._streak - 1))
                # What a failed probe costs: this hold (see _clean).
                self._quiet = max(own, asked or 0.0)
            held = self._hold(max(own, asked or 0.0))
            # The calm before a probe counts from the end of the hold: a hold proves nothing.
            self._calm_since = max(self._calm_since, self._paused_until)
            return held or parked
        if status < 500:
            self._clean(ticket)
        return parked

    def _proven(self) -> float:
        """The fastest rate the host has provably admitted (see BURST_SECONDS)."""
        return self._evidence.proven(BURST_SECONDS)

    def _has_room(self, ticket: Ticket, headers: Mapping[str, str]) -> bool:
        """Whether the host's own headers clear the pace of a throttle.

        A refusal with room left in its window, or of a request sent within the pace a
        one-second window announces, is not the pace's doing (a budget's X-RateLimit-*
        say nothing of the host's rate window).
        """
        if self.host in BUDGET_HEADER_HOSTS:
            return False
        told = read_limits(self.host, headers)
        return told.room or (told.per_second is not None and ticket.rate <= told.per_second)

    def _cut(self, ticket: Ticket, *, crowded: bool = False) -> None:
        if ticket.round == self._probe_round:
            self._misses += 1
            self._probe_round = -1
        self._epoch += 1
        self._calm_since = self._clock.now()
        self._calm_answers = 0
        self._slow_start = False
        self._suspect = None
        self._best = max(self._best, self._proven())
        if crowded:
            # Refused with room left in the announced window: a concurrency limit. One
            # place fewer than this request found on the wire (what clean answers were
            # sent with at most); the pace stays.
            self._learned_cap = max(1, min(self._most_clean, ticket.on_wire - 1))
            self._wake()
            return
        suspect = (ticket, self._learned_cap)
        if ticket.on_wire > max(1, self._most_clean) >= ticket.in_flight:
            # Another request was still out, but maybe answered already: either limit may
            # have refused it. Cap in flight where answers were clean, and cut the pace too.
            self._learned_cap = max(1, self._most_clean)
            if ticket.round != self._round or ticket.rate * self._srtt >= 2:
                # Sent at a pace a clean answer has since raised, or with two or more at the host
                # on every round trip anyway (a long one): not the pace, then (unless refuted).
                self._suspect = suspect
                self._wake()
                return
        elif ticket.in_flight > max(1, self._most_clean):
            # More at the host than any clean answer was sent with: a concurrency limit is
            # the likelier reading. Cap in flight where answers were clean (a later probe
            # adds a place back when the cap binds); the pace stays (unless refuted).
            self._learned_cap = max(1, self._most_clean)
            self._suspect = suspect
            self._wake()
            return
        self._cut_pace(ticket)

    def _refuted(self, ticket: Ticket, *, refused: bool = False) -> None:
        """Cut the pace after all if ``ticket`` (sent before a concurrency reading) refutes it.

        The episode's throttled requests hold no place at the host. Refused with no more at
        the host than the cap the reading set (counting all of ours still out), or clean with
        as many as the refused one can have found (counting those surely there): the host
        serves that many, the pace drew the throttle. Same episode: no new hold.
        """
        if self._suspect is None or ticket.epoch != self._suspect[0].epoch:
            return
        first, before = self._suspect
        out = sum(1 for sent in self._refused if ticket.sent - self._min_rtt < sent < ticket.sent)
        served = (ticket.on_wire if refused else ticket.in_flight) - out
        if served > self._learned_cap if refused else served < first.on_wire:
            return
        self._suspect = None
        self._learned_cap = before
        self._epoch += 1
        self._cut_pace(first, refuted=True)
        self._wake()

    def _cut_pace(self, ticket: Ticket, *, refuted: bool = False) -> None:
        achieved = self._evidence.achieved()
        measured = achieved if math.isfinite(achieved) else UNLISTED_RATE
        drew = ticket.rate if math.isfinite(ticket.rate) else measured
        self._bad = min(self._bad, drew)
        # Back to the last pace that held: half this one (the previous round's), unless the
        # host admitted less than that; never below what it provably admitted.
        # A throttle soon after a raise is its overshoot (a burst hides one for a second at
        # most); one after the pace held longer is the pace's own.
        fresh = (
            ticket.round == self._round
            and self._held < drew
            and ticket.sent < self._round_start + BURST_SECONDS + ROUND_RTTS * self._srtt
        )
        back = min(self._held if fresh else CUT * drew, achieved)
        within = self.throttled <= max(1, self.requests / PROBE_EVERY)
        if not (fresh or refuted) and within and math.isfinite(achieved):
            # The pace's own throttle within the 429 budget: the host's rate lies between what
            # it proved (a burst of a second) and achieved (none); a miss costs one 429: bisect.
            back = max(back, min(drew, math.sqrt(self._proven() * achieved)))
        if refuted:
            # The episode has cost two 429s or more, and a guess still over a drained bucket
            # would cost as many again: what it proved, but a proof of few answers half a CUT.
            back = min(back, max(self._proven(), math.sqrt(CUT) * back))
        # A host throttling far below a pace it once proved is failing, not limiting (random
        # 429s and 503s): those must not ratchet the pace down to the floor one by one.
        floor = max(FLOOR_RATE, CUT * self._best)
        self.rate = self._settled = min(self._ceiling(), max(floor, self._proven(), back))

    def _clean(self, ticket: Ticket) -> None:
        self._streak = 0
        self._calm_answers += 1
        now = self._clock.now()
        self._evidence.count(ticket.sent)
        if math.isfinite(ticket.sent):
            rtt = max(0.0, now - ticket.sent)
            self._srtt = rtt if self._srtt <= 0 else self._srtt + SRTT_GAIN * (rtt - self._srtt)
            self._min_rtt = min(self._min_rtt, rtt)
        self._most_clean = max(self._most_clean, ticket.in_flight)
        self._refuted(ticket)
        if not ticket.pressed or ticket.round != self._round:
            return  # only the pace that held a request back is tested by its answer
        ceiling = self._ceiling()
        if self._slow_start:
            if self.rate > self._told and ticket.sent < self._round_start + min(
                BURST_SECONDS, ROUND_RTTS * self._srtt
            ):
                return  # too early in its round to tell the pace from the host's burst
            # Double per round, but add at most one request in flight per round trip: a
            # long round trip shows an overshoot late, with many requests already out.
            step = 1.0 / self._srtt if self._srtt > 0 else self.rate
            self._advance(min(ceiling, self.rate + min(self.rate, step)))
            if self.rate >= ceiling:
                self._slow_start = False
        elif self.rate < ceiling:
            # A probe halfway to the slowest throttled pace on a ratio scale (their geometric
            # mean: paces double and halve), or double if none throttled,
            # once its expected gain (the time it would have saved over the calm stretch so
            # far, at even odds of holding) covers what its failure costs (one throttle and
            # its hold): rare after a long hold.
            target = min(
                ceiling,
                math.sqrt(self.rate * self._bad) if math.isfinite(self._bad) else 2 * self.rate,
            )
            calm = now - self._calm_since
            if self._round == self._probe_round:
                self._misses = 0  # the last probe's pace held all this while
            wait = 2**self._misses
            if (
                self._calm_answers >= PROBE_EVERY * wait * self._episode
                # and the host has drawn fewer than one 429 per PROBE_EVERY requests so far
                and self.requests >= PROBE_EVERY * self.throttled
                and (target / self.rate - 1) * calm >= 2 * self._quiet
            ):
                self._settled = self.rate
                if self._learned_cap and self._learned_cap <= self.rate * self._srtt:
                    # The cap, not the pace, holds the throughput: probe one place more only.
                    self._learned_cap += 1
                    self._round += 1
                    self._wake()
                else:
                    self._advance(target)
                self._probe_round = self._round
                self._calm_since = now
                self._calm_answers = 0

    def _advance(self, rate: float) -> None:
        if rate > self.rate:
            self._held = self.rate
            self.rate = rate
            self._round += 1
            self._round_start = self._clock.now()
            self._wake()

    def _read_announced(self, headers: Mapping[str, str], sent: float) -> str | None:
        told = read_limits(self.host, headers)
        for rate in told.rates:
            self._announce_rate(rate)
        if told.in_flight is not None:
            self._announced_cap = told.in_flight
        if told.per_second is not None:
            self._told = told.per_second
        for remaining, reset, quota in told.windows:
            if remaining is not None and reset is not None:
                held = self._count_window(remaining, reset, quota, sent)
                if held is not None:
                    return held
        return None

    def _announce_rate(self, rate: float) -> None:
        self._announced = max(FLOOR_RATE, rate)
        if self.rate > self._ceiling():
            self.rate = self._ceiling()

    def _count_window(
        self, remaining: float, reset: float, limit: float | None, sent: float
    ) -> str | None:
        # A reset far beyond any window length is an epoch time, not a delay.
        wait = reset - self._clock.wall() if reset > 1e8 else reset
        if wait <= 0 or sane_seconds(wait, "rate-limit reset") is None:
            return None
        if wait <= BURST_SECONDS and limit:
            if remaining > 0:
                # A bucket full again within a second gives places back one by one: "1 left,
                # reset in 1" after a small burst must not hold the host to 1/s.
                return None
            # "0 left, reset in 1" from a bucket with no burst to spare: one place frees
            # 1/limit s after this request went (the host counted it on arrival).
            wait = min(wait, 1.0 / limit)
            if math.isfinite(sent):
                wait = sent + wait - self._clock.now()
                if wait <= 0:
                    return None
        self._window_end = self._clock.now() + wait
        # Requests already on the wire count against what is left.
        self._window_left = int(remaining) - self._sending
        return self._hold(wait, pacing=True) if remaining <= 0 else None

    # -- reporting -------------------------------------------------------------------------

    def lessons(self) -> Lessons:
        """Return what this limiter learned of its host (see :meth:`resume`)."""
        return Lessons(
            rate=min(self.rate, self._settled),  # a probe in progress is not a lesson
            cap=self.cap,
            learned=self._bad,
            learned_cap=self._learned_cap,
            slow_start=self._slow_start,
            probe_after=self._quiet,
            misses=self._misses,
        )

    def resume(self, lessons: Lessons) -> None:
        """Start from what an earlier limiter of the same host learned (a fresh limiter only).

        Nothing rises above this limiter's own plan, and a probe waits its full
        quiet time from now, as after a throttle.
        """
        self._bad = lessons.learned
        self._learned_cap = min_cap(self.plan.max_in_flight, lessons.learned_cap)
        self.rate = min(self._ceiling(), max(FLOOR_RATE, lessons.rate))
        self._slow_start = lessons.slow_start and self.rate < self._ceiling()
        self._quiet = lessons.probe_after
        self._misses = lessons.misses
        if not self._slow_start:
            self._calm_since = self._clock.now()

    def state(self) -> LimiterState:
        """Return a snapshot of this host's pacing."""
        now = self._clock.now()
        return LimiterState(
            host=self.host,
            rate=self.rate,
            ceiling=min(self._ceiling(), self._bad),
            in_flight_cap=self.cap,
            requests=self.requests,
            throttled=self.throttled,
            paused_for=max(0.0, self._paused_until - now),
            parked=self.parked,
        )


LimiterFactory = Callable[[str, Plan, Clock, RetryPolicy], HostLimiter]
"""Builds the limiter of one host from its name, plan, clock and retry policy.

:class:`HostLimiter` itself is the default. ``Session(limiter_factory=…)``
plugs in another, e.g. one that asks a coordinator shared by several processes
(``litfetch_df.dask``); it must return a :class:`HostLimiter` (or a subclass)
because the session calls ``acquire``, ``release``, ``observe`` and ``state``.
"""
