"""The limiter's granting machinery: in-flight places, start slots, parking (ADR 0007).

:class:`Slots` is the base of :class:`litfetch_df.wire.limiter.HostLimiter`. A request
queues (FIFO) for an in-flight place, then for its start slot: one interval after the
previous send, after any hold or exhausted announced window, and within the published
ceiling of its kind (:class:`~litfetch_df.wire.limiter_values.Ceiling`). Only the head of
the queue waits, so a pace changed meanwhile applies to the very next request and a late
wake-up never makes a burst. A host that asks for a wait past the retry budget is
*parked*: its requests fail at once with :class:`HostParked`. What the pace (``rate``)
and the places (``cap``) are, and what a grant records (``_grant``), is the rules'
business (:mod:`litfetch_df.wire.limiter`).
"""

from __future__ import annotations

import asyncio
import collections
import math
from collections.abc import Mapping

from .clock import Clock
from .http import SANE_WAIT, RetryPolicy, parse_retry_after
from .limiter_values import Ceiling, HostParked, Plan, Ticket

__all__ = ["Slots"]

MINUTE = 60.0
"""The window of a per-minute ceiling, in seconds (not tuning: what a minute is)."""


class Slots:
    """The queue, slots, holds and parking of one host's limiter (see the module)."""

    rate: float
    """Requests per second the host is paced at (set by the rules)."""

    def __init__(self, host: str, plan: Plan, clock: Clock, policy: RetryPolicy) -> None:
        self.host = host
        self.plan = plan
        self.policy = policy
        self._clock = clock
        self.rate = plan.start_rate
        self._out: list[float] = []  # send times of the requests on the wire (capped hosts)
        self._last_grant = -math.inf
        self._last_end = -math.inf
        self._paused_until = -math.inf
        self._parked_until = -math.inf
        self._parked_reason = ""
        self._window_end = -math.inf  # an announced window's reset
        self._window_left = 0  # and what is left of it
        self._holding = 0  # requests holding an in-flight place (sent or about to be)
        self._sending = 0  # requests on the wire
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._slot_lock: asyncio.Lock | None = None  # made on the loop that uses it
        self._answered: collections.deque[asyncio.Future[None]] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        # Send times of each published per-kind pool within the last minute (see Ceiling).
        self._pools: dict[str, collections.deque[float]] = {}
        self.requests = 0

    @property
    def cap(self) -> int:
        """In-flight places now (``0``: unbounded); the rules decide."""
        raise NotImplementedError

    def _grant(self, slot: float, *, pressed: bool, crowded: bool) -> Ticket:
        """Record a request going at ``slot`` and return its ticket; the rules decide."""
        raise NotImplementedError

    async def acquire(self, ceiling: Ceiling | None = None) -> Ticket:
        """Wait for an in-flight place and the next start slot; return the grant.

        ``ceiling`` is the published ceiling of this request's kind (:func:`ceiling_for`):
        its slot also keeps to that. Raises :class:`HostParked` while the host is parked.
        """
        self._adopt_loop()
        self._check_parked()
        queued = await self._enter()
        try:
            slot, pressed = await self._wait_slot(ceiling)
        except BaseException:
            self._leave()
            raise
        if ceiling is not None:
            self._pools.setdefault(ceiling.pool, collections.deque()).append(slot)
        return self._grant(slot, pressed=pressed, crowded=queued and not pressed)

    def _pool_free(self, ceiling: Ceiling | None, now: float) -> float:
        """The earliest start a published per-kind ceiling allows (``-inf``: any)."""
        sent = self._pools.get(ceiling.pool) if ceiling is not None else None
        while sent and sent[0] <= now - MINUTE:
            sent.popleft()  # out of every window from now on
        if ceiling is None or not sent:
            return -math.inf
        free = sent[-1] + 1.0 / ceiling.per_second if ceiling.per_second else -math.inf
        if ceiling.per_minute and len(sent) >= ceiling.per_minute:
            # The window is full: the next place frees a minute after the oldest send in it.
            free = max(free, sent[-ceiling.per_minute] + MINUTE)
        return free

    def release(self, ticket: Ticket) -> None:
        """Give back the place ``ticket`` held (its answer arrived, or it failed)."""
        if ticket.sent in self._out:
            self._out.remove(ticket.sent)
        self._sending = max(0, self._sending - 1)
        self._last_end = self._clock.now()
        while self._answered:
            answered = self._answered.popleft()
            if not answered.done():
                answered.set_result(None)
        self._leave()

    async def _wait_slot(self, ceiling: Ceiling | None = None) -> tuple[float, bool]:
        """Wait for the next start slot; return it and whether the pace (not a pause) set it.

        One request at a time waits for its slot, the others queue behind it (FIFO), so a
        slot is only ever reserved one interval ahead: a pace raised or cut meanwhile
        applies to the very next request, and a lagging wake-up never makes a burst.
        """
        clock = self._clock
        if self._slot_lock is None:
            self._slot_lock = asyncio.Lock()
        # Queued behind another request that waits for the pace: the pace holds this one.
        queued = self._slot_lock.locked() and self._paused_until <= clock.now()
        async with self._slot_lock:
            pressed: bool | None = None
            while True:
                self._check_parked()
                now = clock.now()
                free = max(now, self._paused_until)
                if self._window_left <= 0 and self._window_end > free:
                    free = self._window_end
                slot = max(free, self._last_grant + self._interval())
                if self.plan.serial:
                    slot = max(slot, self._last_end + self._interval())
                if pressed is None:
                    pressed = queued or slot > free
                # A published per-kind ceiling holds the request too, but tests no pace.
                slot = max(slot, self._pool_free(ceiling, now))
                cap = self.cap
                if cap and self._sending >= cap:
                    # The cap fell below the places already taken (a concurrency throttle):
                    # the head of the queue waits for an answer before it goes.
                    answered: asyncio.Future[None] = asyncio.get_running_loop().create_future()
                    self._answered.append(answered)
                    await answered
                    continue
                if slot <= now:
                    return now, pressed
                await clock.sleep(slot - now)

    def _interval(self) -> float:
        return 0.0 if math.isinf(self.rate) else 1.0 / self.rate

    async def _enter(self) -> bool:
        """Take an in-flight place; return whether the request had to queue for it."""
        cap = self.cap
        if not self._waiters and (not cap or self._holding < cap):
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
        cap = self.cap
        while self._waiters and (not cap or self._holding < cap):
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
            self._out.clear()
            self._slot_lock = None
            self._answered.clear()

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

    def park_if_asked(self, status: int, headers: Mapping[str, str]) -> str | None:
        """Park the host if a throttling answer asks for a wait past the budget.

        Returns the park reason, or ``None`` when the wait (if any) is within it.
        """
        asked = self._asked(status, headers)
        if asked is not None and asked > self.policy.max_wait:
            return self._park(asked)
        return None

    def _asked(self, status: int, headers: Mapping[str, str]) -> float | None:
        if status not in (429, 503):
            return None
        return parse_retry_after(headers.get("retry-after"), now=self._clock.wall())
