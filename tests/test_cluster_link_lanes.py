"""Waiting calls to the coordinator never take the connections its reports need.

A Dask actor's calls travel over the caller's connection pool, each holding a
connection until the coordinator answers, and an ``acquire`` is answered only
once a report frees a place. With more requests waiting than the pool has
connections, the reports could never be sent: Dask at N=20,000 stalled so,
for good (ADR 0022). Here the actor is a stand-in that holds one of a few
connections per call, in one process on a virtual clock; the fake's log and
the coordinator's lease count judge.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("dask")  # litfetch_df.dask is the optional [dask] extra

from litfetch_df import HostLimit, RetryPolicy, Session
from litfetch_df.dask.lanes import POOL, Lanes, lanes_for
from litfetch_df.dask.limiter import ClusterLimiter, LoopLink, limiter_factory
from tests.fake_upstream import FakeResponse, FakeUpstream
from tests.virtual_clock import VirtualClock

HOST = "api.unpaywall.org"
RETRY = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)
LEASE = 60.0  # virtual seconds: without lanes the stall ends only as leases run out


class _PooledActor:
    """A coordinator reached as a Dask actor is: every call, reports too, holds one of
    ``connections`` (``distributed``'s connection pool) until the coordinator returns."""

    def __init__(self, coordinator: ClusterLimiter, connections: int) -> None:
        self._coordinator = coordinator
        self._pool = asyncio.Semaphore(connections)

    def __getattr__(self, method: str) -> Any:
        async def call(*args: Any) -> Any:
            async with self._pool:
                return await getattr(self._coordinator, method)(*args)

        return call


@pytest.fixture
def fake(fake: FakeUpstream) -> FakeUpstream:
    """The fake upstream, answering in process on the virtual clock (client_factory(clock=))."""
    fake.route(HOST, r"/v2/.+", FakeResponse(200, {"doi": "x", "is_oa": False}))
    return fake


async def _ask_at_once(
    fake: FakeUpstream, n: int, connections: int, lanes: Lanes | None
) -> tuple[ClusterLimiter, float]:
    """``n`` requests at once through a pool of ``connections``; the coordinator, time taken."""
    clock = VirtualClock()
    coordinator = ClusterLimiter(clock=clock, lease=LEASE)
    actor = _PooledActor(coordinator, connections)
    link = LoopLink(actor, asyncio.get_running_loop(), lanes)
    session = Session(
        client_factory=fake.client_factory(clock=clock),
        retry=RETRY,
        clock=clock,
        host_limits={HOST: HostLimit(rate=20.0, in_flight=2)},
        limiter_factory=limiter_factory(link),
    )

    async def ask() -> None:
        async with session:
            await asyncio.gather(*(session.get(f"https://{HOST}/v2/10.1/{i}") for i in range(n)))

    start = clock.now()
    await clock.run(ask())
    return coordinator, clock.now() - start


async def test_waiting_acquires_leave_the_pool_to_the_reports(fake: FakeUpstream) -> None:
    # Twelve requests, two places, a pool of four: two wait in the lane, two are out.
    coordinator, took = await _ask_at_once(fake, 12, connections=4, lanes=Lanes(2, 2))
    assert fake.count(HOST) == 12
    assert await coordinator.reclaimed() == 0  # every place came back by its report
    assert took < 2.0  # twelve at 20 a second, not a lease's wait
    assert await coordinator.held() == {}


async def test_without_lanes_waiting_acquires_starve_the_reports(fake: FakeUpstream) -> None:
    # The control, as before the lanes: the acquires queue for the pool ahead of the
    # reports, hold every connection while they wait for a place, and the granted
    # requests' reports never get one: only the leases running out give the places back.
    coordinator, took = await _ask_at_once(fake, 12, connections=4, lanes=Lanes(12, 12))
    assert fake.count(HOST) == 12
    assert await coordinator.reclaimed() > 0
    assert took >= LEASE


async def test_the_default_lanes_leave_a_workers_pool_room(fake: FakeUpstream) -> None:
    # As a worker meets it: more requests at once than its pool has connections.
    coordinator, _ = await _ask_at_once(fake, POOL + 40, connections=POOL, lanes=None)
    assert fake.count(HOST) == POOL + 40
    assert await coordinator.reclaimed() == 0


async def test_the_links_made_on_one_loop_share_its_lanes() -> None:
    # Every partition of a worker reaches the coordinator through that worker's one pool.
    loop = asyncio.get_running_loop()
    assert lanes_for(loop) is lanes_for(loop)
    first = LoopLink(ClusterLimiter(), loop)
    second = LoopLink(ClusterLimiter(), loop)
    assert first._lanes is second._lanes is lanes_for(loop)


def test_a_lane_is_at_least_one_wide() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Lanes(0, 4)
