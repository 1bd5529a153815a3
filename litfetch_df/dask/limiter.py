"""One politeness budget for many processes: a coordinator every worker's session asks.

A :class:`~litfetch_df.Session` paces each host with a
:class:`~litfetch_df.wire.limiter.HostLimiter` of its own, so two processes would
each ask a host at its full rate. Here the pacing of a rate-limited host lives
in one place for the whole cluster (design: docs/adr/0013-cluster-limiter.md):

* :class:`ClusterLimiter` is the coordinator. It holds one ``HostLimiter`` per
  coordinated host and grants every request of every worker a start slot and
  an in-flight place, on its own clock; throttles reported by any worker cut
  the rate, pause or park the host for all of them. On a Dask cluster it runs
  as an actor on one worker; without one, on a background event loop.
* :class:`ClusterHostLimiter` is what a worker's session uses for a coordinated
  host (plug it in with :func:`limiter_factory`): the coordinator alone paces
  it (no second slow start per partition); the worker asks it before each
  send, reports the answer back in one message, and parks the host locally
  when an answer asks for a wait past the budget.
* Hosts with no client limit (the PMC bucket on S3, file-download hosts) are
  not coordinated: each session paces them alone, so they scale with workers.
* :class:`LoopLink` carries a worker's calls to the coordinator; the calls it
  awaits wait in lanes (:mod:`~litfetch_df.dask.lanes`) so that its reports,
  which free the places those calls wait for, always get through.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from ..wire.clock import Clock, SystemClock
from ..wire.http import RetryPolicy
from ..wire.limiter import (
    Ceiling,
    HostLimiter,
    HostParked,
    LimiterFactory,
    LimiterState,
    Plan,
    Ticket,
)
from .lanes import Lanes, lanes_for

__all__ = [
    "COORDINATED_HOSTS",
    "DEFAULT_LEASE",
    "ClusterHostLimiter",
    "ClusterLimiter",
    "Link",
    "LocalLink",
    "LoopLink",
    "limiter_factory",
]

log = logging.getLogger(__name__)

COORDINATED_HOSTS: Final[frozenset[str]] = frozenset(
    {
        "pmc.ncbi.nlm.nih.gov",
        "www.ebi.ac.uk",
        "api.openalex.org",
        "api.crossref.org",
        "api.unpaywall.org",
        "api.semanticscholar.org",
        "api.elsevier.com",
        "api.springernature.com",
        "api.biorxiv.org",
    }
)
"""The API hosts of the bundled sources: one budget per host for the whole cluster.

Absent on purpose: the PMC bucket (Amazon S3 takes thousands of requests a
second) and the hosts files are downloaded from.
"""

_RemoteTicket = tuple[float, int, int, bool, bool, float, int, int]
"""A coordinator's grant as it travels: the ticket's rate, in-flight count, epoch, whether
it was pressed and crowded, when it was sent (coordinator clock), its round (see
:class:`Ticket`), and its lease id."""


def _ticket(remote: _RemoteTicket) -> Ticket:
    rate, in_flight, epoch, pressed, crowded, sent, round_, _ = remote
    # The send time travels too: a short announced window counts from the send.
    return Ticket(rate, in_flight, epoch, pressed=pressed, crowded=crowded, sent=sent, round=round_)


def _remote(ticket: Ticket, lease: int) -> _RemoteTicket:
    return (
        ticket.rate,
        ticket.in_flight,
        ticket.epoch,
        ticket.pressed,
        ticket.crowded,
        ticket.sent,
        ticket.round,
        lease,
    )


DEFAULT_LEASE: Final = 600.0
"""Seconds (coordinator clock) a granted place is held without news before it is taken back.

Five times the default deadline of one attempt (4 x the 30 s timeout, ADR 0010):
a live worker reports every request long before; a dead one never does.
"""


@dataclass(frozen=True, slots=True)
class _Lease:
    host: str
    ticket: Ticket
    expires: float


class ClusterLimiter:
    """The coordinator: the pacing of every coordinated host, for all workers at once.

    Its methods are coroutines so that, as a Dask actor, they all run on the
    event loop of the worker that holds it (one thread touches the limiters).
    ``clock`` is the clock its pacing reads (tests pass a virtual one).

    Every grant is a lease of ``lease`` seconds on that clock: a place whose
    request is neither finished nor released by then (its worker was killed,
    or lost the connection) is given back, so a dead worker cannot hold a
    host's in-flight places for ever. A report that arrives after its lease
    ran out still teaches the limiter, but frees nothing twice.
    """

    def __init__(self, clock: Clock | None = None, lease: float = DEFAULT_LEASE) -> None:
        if not lease > 0:
            raise ValueError(f"lease must be positive, got {lease!r}")
        self._clock = clock if clock is not None else SystemClock()
        self._lease = lease
        self._hosts: dict[str, HostLimiter] = {}
        self._granted: dict[str, list[float]] = {}
        # Granted places not yet given back, in grant order (so, with one lease length,
        # in expiry order); the reaper takes back those whose lease ran out.
        self._leases: dict[int, _Lease] = {}
        self._next_lease = 0
        self._reaper: asyncio.Task[None] | None = None
        self._reclaimed = 0

    def _limiter(self, host: str, plan: Plan, policy: RetryPolicy) -> HostLimiter:
        limiter = self._hosts.get(host)
        if limiter is None:
            # The first worker to ask brings the plan; every worker builds it the same way.
            limiter = HostLimiter(host, plan, self._clock, policy)
            self._hosts[host] = limiter
        return limiter

    async def acquire(
        self, host: str, plan: Plan, policy: RetryPolicy, ceiling: Ceiling | None = None
    ) -> _RemoteTicket | str:
        """Wait for ``host``'s next slot and place; return the grant, or why it is parked.

        ``ceiling``: the published ceiling of the request's kind, kept cluster-wide.
        """
        limiter = self._limiter(host, plan, policy)
        try:
            ticket = await limiter.acquire(ceiling)
        except HostParked as parked:
            return str(parked)
        now = self._clock.now()
        self._granted.setdefault(host, []).append(now)
        lease = self._next_lease
        self._next_lease += 1
        self._leases[lease] = _Lease(host, ticket, now + self._lease)
        if self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap())
        return _remote(ticket, lease)

    def _settle(self, host: str, grant: _RemoteTicket) -> Ticket:
        """Give back the place of ``grant`` unless its lease already ran out; return its ticket."""
        ticket = _ticket(grant)
        held = self._leases.pop(grant[-1], None)
        if held is not None:
            self._hosts[held.host].release(held.ticket)
        if not self._leases and self._reaper is not None:
            self._reaper.cancel()  # nothing left to watch; the next grant starts another
            self._reaper = None
        return ticket

    async def _reap(self) -> None:
        """Take back the places whose lease ran out, as their expiry comes on the clock."""
        while self._leases:
            first = next(iter(self._leases))
            wait = self._leases[first].expires - self._clock.now()
            if wait > 0:
                await self._clock.sleep(wait)
                continue
            lost = self._leases.pop(first)
            self._hosts[lost.host].release(lost.ticket)
            self._reclaimed += 1
            log.warning(
                "a request to %s held its place past its lease (%.0f s): given back",
                lost.host,
                self._lease,
            )
        self._reaper = None

    async def release(self, host: str, ticket: _RemoteTicket) -> None:
        """Give back the place of a request that got no answer to learn from."""
        if host in self._hosts:
            self._settle(host, ticket)

    async def finish(
        self,
        host: str,
        ticket: _RemoteTicket,
        status: int,
        headers: Mapping[str, str],
        throttled: bool,
        retry: bool,
    ) -> str | None:
        """Give back the place of an answered request and learn from the answer.

        Returns why the host is parked, if the answer parked it.
        """
        limiter = self._hosts.get(host)
        if limiter is None:
            return None
        granted = self._settle(host, ticket)
        return limiter.observe(granted, status, headers, throttled=throttled, retry=retry)

    async def states(self) -> dict[str, LimiterState]:
        """Return a snapshot of each coordinated host's pacing."""
        return {host: limiter.state() for host, limiter in self._hosts.items()}

    async def granted(self) -> dict[str, list[float]]:
        """Return, per host, the coordinator-clock times of every slot it granted."""
        return {host: list(times) for host, times in self._granted.items()}

    async def held(self) -> dict[str, int]:
        """Return, per host, how many granted places are out (leased, not yet given back)."""
        counts: dict[str, int] = {}
        for lease in self._leases.values():
            counts[lease.host] = counts.get(lease.host, 0) + 1
        return counts

    async def reclaimed(self) -> int:
        """Return how many granted places were taken back because their lease ran out."""
        return self._reclaimed

    async def close(self) -> None:
        """Stop watching leases (the places still out stay out)."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None


class Link(Protocol):
    """How a worker reaches the coordinator: an awaited call and a one-way message."""

    async def call(self, method: str, *args: Any) -> Any:
        """Run ``method`` on the coordinator and return its result."""
        ...

    def send(self, method: str, *args: Any) -> None:
        """Run ``method`` on the coordinator without waiting for it."""
        ...


class LocalLink:
    """A link to a :class:`ClusterLimiter` on the caller's own event loop (one process)."""

    def __init__(self, coordinator: ClusterLimiter) -> None:
        self._coordinator = coordinator
        self._pending: set[asyncio.Task[Any]] = set()

    async def call(self, method: str, *args: Any) -> Any:
        """Await ``method`` on the coordinator."""
        result: Any = await getattr(self._coordinator, method)(*args)
        return result

    def send(self, method: str, *args: Any) -> None:
        """Schedule ``method`` on the coordinator (the task is kept until it ends)."""
        task = asyncio.get_running_loop().create_task(self.call(method, *args))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)


class LoopLink:
    """A link to a coordinator living on another thread's event loop.

    ``target`` is a :class:`ClusterLimiter` or a Dask actor handle of one;
    ``loop`` is the loop its calls must be made from (the worker's own loop
    for an actor). Results come back to the caller's loop through a future.

    An awaited call (an ``acquire``, which waits for its host's place) first
    waits in its host's lane of ``lanes`` (by default those every link on
    ``loop`` shares), so waiting calls never take every connection of the pool
    an actor's calls travel by: the reports that free the places they wait for
    travel by it too (:mod:`~litfetch_df.dask.lanes`).
    """

    def __init__(
        self, target: Any, loop: asyncio.AbstractEventLoop, lanes: Lanes | None = None
    ) -> None:
        self._target = target
        self._loop = loop
        self._lanes = lanes if lanes is not None else lanes_for(loop)

    async def _run(self, method: str, args: tuple[Any, ...]) -> Any:
        result: Any = await getattr(self._target, method)(*args)
        return result

    async def _awaited(self, method: str, args: tuple[Any, ...]) -> Any:
        # The first argument of every coordinator method is the host.
        async with self._lanes.out(args[0] if args else method):
            return await self._run(method, args)

    async def call(self, method: str, *args: Any) -> Any:
        """Run ``method`` on the coordinator's loop (in its host's lane); await its result here."""
        future = asyncio.run_coroutine_threadsafe(self._awaited(method, args), self._loop)
        return await asyncio.wrap_future(future)

    def send(self, method: str, *args: Any) -> None:
        """Run ``method`` on the coordinator's loop; a failure is logged, not raised."""
        future = asyncio.run_coroutine_threadsafe(self._run(method, args), self._loop)
        future.add_done_callback(_log_failure)


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("the cluster limiter missed a report: %s", type(future.exception()).__name__)


@dataclass(frozen=True, slots=True)
class _ClusterTicket(Ticket):
    """A local grant together with the coordinator's grant for the same request."""

    remote: _RemoteTicket = (0.0, 0, 0, False, False, float("-inf"), 0, -1)


class ClusterHostLimiter(HostLimiter):
    """A coordinated host's limiter in one worker's session: the coordinator paces it.

    Each request asks the coordinator for its slot and place (no local pacing, so
    a fresh partition's session adds no slow start of its own); the answer is
    reported to the coordinator in one message, so a throttle any worker meets
    slows every worker. Locally the host is only parked, when an answer asks for
    a wait past the retry budget, so its rows fail at once without asking.
    """

    def __init__(
        self, host: str, plan: Plan, clock: Clock, policy: RetryPolicy, link: Link
    ) -> None:
        super().__init__(host, plan, clock, policy)
        self._link = link
        # Released but not yet observed: the session releases a request's place just
        # before it observes the answer, and the two travel to the coordinator together.
        self._unreported: dict[int, _ClusterTicket] = {}

    async def acquire(self, ceiling: Ceiling | None = None) -> Ticket:
        """Wait for the coordinator's slot and place for this host; return the grant.

        ``ceiling`` (the request kind's published ceiling) is kept by the coordinator.
        Raises :class:`HostParked` when the host is parked here or cluster-wide.
        """
        if self.parked is not None:
            raise HostParked(self.parked)
        remote = await self._link.call("acquire", self.host, self.plan, self.policy, ceiling)
        if isinstance(remote, str):
            raise HostParked(remote)
        self.requests += 1
        granted = _ticket(tuple(remote))  # type: ignore[arg-type]
        return _ClusterTicket(
            granted.rate,
            granted.in_flight,
            granted.epoch,
            tuple(remote),
            pressed=granted.pressed,
            crowded=granted.crowded,
            sent=granted.sent,
            round=granted.round,
        )

    def release(self, ticket: Ticket) -> None:
        """Give back the coordinator's place with the answer's report (or alone, soon)."""
        if isinstance(ticket, _ClusterTicket):
            key = id(ticket)
            self._unreported[key] = ticket
            # No answer to observe (a transport failure): the place goes back on its own.
            asyncio.get_running_loop().call_soon(self._release_unreported, key)

    def _release_unreported(self, key: int) -> None:
        ticket = self._unreported.pop(key, None)
        if ticket is not None:
            self._link.send("release", self.host, ticket.remote)

    def observe(
        self,
        ticket: Ticket,
        status: int,
        headers: Mapping[str, str],
        *,
        throttled: bool,
        retry: bool = False,
    ) -> str | None:
        """Report the answer to the coordinator (with the release); park here if it asks."""
        parked: str | None = None
        if throttled:
            self.throttled += 1
            parked = self.park_if_asked(status, headers)
        if isinstance(ticket, _ClusterTicket):
            self._unreported.pop(id(ticket), None)
            self._link.send(
                "finish", self.host, ticket.remote, status, dict(headers), throttled, retry
            )
        return parked


def limiter_factory(link: Link, hosts: Collection[str] = COORDINATED_HOSTS) -> LimiterFactory:
    """Return a ``Session(limiter_factory=…)`` that coordinates ``hosts`` through ``link``.

    A host outside ``hosts``, or one whose plan sets no limit at all (no rate
    ceiling, no in-flight cap), gets a plain :class:`HostLimiter`.
    """
    chosen = frozenset(h.lower() for h in hosts)

    def build(host: str, plan: Plan, clock: Clock, policy: RetryPolicy) -> HostLimiter:
        if host.lower() in chosen and plan.bounded:
            return ClusterHostLimiter(host, plan, clock, policy, link)
        return HostLimiter(host, plan, clock, policy)

    return build


class BackgroundLoop:
    """An event loop on a daemon thread, for a coordinator shared by threads of one process."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="litfetch-dask-coordinator", daemon=True
        )
        self._thread.start()

    def run(self, factory: Callable[[], Awaitable[Any]]) -> Any:
        """Run a coroutine on the loop and wait for its result (from another thread)."""

        async def wrapper() -> Any:
            return await factory()

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result()

    def close(self) -> None:
        """Stop the loop and its thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)
        with contextlib.suppress(RuntimeError):
            self.loop.close()
