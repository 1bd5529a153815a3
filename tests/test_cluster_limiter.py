"""The cluster limiter: several sessions, one politeness budget per rate-limited host.

Run in one process on a virtual clock: two sessions (standing for two workers)
share one :class:`ClusterLimiter`, and the fake's arrival log, on the same
clock, judges the pace. The Dask wiring is tested in ``test_dask_cluster.py``.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable
from typing import TypeVar

import pytest

pytest.importorskip("dask")  # litfetch_df.dask is the optional [dask] extra

from litfetch_df import HostLimit, HostParked, RetryPolicy, Session
from litfetch_df.dask.cluster import cluster_limiter
from litfetch_df.dask.limiter import (
    ClusterHostLimiter,
    ClusterLimiter,
    LocalLink,
    limiter_factory,
)
from litfetch_df.wire.http import Rate
from litfetch_df.wire.limiter import HostLimiter, Plan, plan_for
from tests.fake_upstream import FakeResponse, FakeUpstream
from tests.virtual_clock import VirtualClock

HOST = "api.unpaywall.org"
RATE = 10.0
RETRY = RetryPolicy(max_attempts=4, base_delay=0.001, max_delay=0.01)
T = TypeVar("T")


@pytest.fixture
def fake(fake: FakeUpstream) -> FakeUpstream:
    """The fake upstream, answering in process on the virtual clock (client_factory(clock=))."""
    fake.route(HOST, r"/v2/.+", FakeResponse(200, {"doi": "x", "is_oa": False}))
    return fake


def _sessions(
    fake: FakeUpstream, clock: VirtualClock, coordinator: ClusterLimiter | None
) -> list[Session]:
    factory = limiter_factory(LocalLink(coordinator)) if coordinator is not None else None
    return [
        Session(
            client_factory=fake.client_factory(clock=clock),
            retry=RETRY,
            clock=clock,
            host_limits={HOST: HostLimit(rate=RATE, in_flight=4)},
            limiter_factory=factory,
        )
        for _ in range(2)
    ]


async def _each_asks(sessions: list[Session], n: int, host: str = HOST) -> None:
    async def one(session: Session, i: int) -> None:
        await session.get(f"https://{host}/v2/10.1/{id(session)}-{i}")

    async def all_of(session: Session) -> None:
        async with session:
            await asyncio.gather(*(one(session, i) for i in range(n)))

    await asyncio.gather(*(all_of(s) for s in sessions))


def _arrivals(fake: FakeUpstream, host: str = HOST) -> list[float]:
    return sorted(r.at for r in fake.requests(host))


async def test_two_sessions_share_one_pace(fake: FakeUpstream) -> None:
    clock = VirtualClock()
    coordinator = ClusterLimiter(clock=clock)
    await clock.run(_each_asks(_sessions(fake, clock, coordinator), 15))
    times = _arrivals(fake)
    assert len(times) == 30
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 1 / RATE - 1e-9  # merged from both sessions: never faster than 10/s


async def test_without_the_coordinator_each_session_goes_at_full_rate(fake: FakeUpstream) -> None:
    # The control: the same two sessions, each with its own limiter, double the host's rate.
    clock = VirtualClock()
    await clock.run(_each_asks(_sessions(fake, clock, None), 15))
    times = _arrivals(fake)
    assert min(b - a for a, b in itertools.pairwise(times)) < 1 / RATE / 2


async def test_a_throttle_one_session_meets_pauses_the_other(fake: FakeUpstream) -> None:
    clock = VirtualClock()
    fake.fail_next(HOST, "/v2/10.1/", FakeResponse(429, {}, {"Retry-After": "3"}))
    coordinator = ClusterLimiter(clock=clock)
    await clock.run(_each_asks(_sessions(fake, clock, coordinator), 5))
    requests = sorted(fake.requests(HOST), key=lambda r: r.at)
    assert len(requests) == 11  # ten answers and the one 429
    first = requests[0].at  # the throttled one: the first ever sent
    later = [r.at for r in requests[1:]]
    # Nobody asked the host during the three seconds it asked for, whichever session.
    assert all(at >= first + 3.0 for at in later)
    state = (await coordinator.states())[HOST]
    assert state.throttled == 1
    assert state.rate < RATE  # the cut applies to the whole cluster


async def test_hosts_without_a_limit_are_not_coordinated() -> None:
    link = LocalLink(ClusterLimiter())
    build = limiter_factory(link)
    clock = VirtualClock()
    s3 = "pmc-oa-opendata.s3.amazonaws.com"
    assert type(build(s3, plan_for(s3, Rate.DEFAULT), clock, RETRY)) is HostLimiter
    downloads = "publisher.example.org"
    assert type(build(downloads, plan_for(downloads, Rate.DEFAULT), clock, RETRY)) is HostLimiter
    ncbi = "pmc.ncbi.nlm.nih.gov"
    limiter = build(ncbi, plan_for(ncbi, Rate.NCBI_UNKEYED), clock, RETRY)
    assert isinstance(limiter, ClusterHostLimiter)


async def test_a_host_parked_by_one_session_fails_at_once_in_the_other(fake: FakeUpstream) -> None:
    clock = VirtualClock()
    fake.fail_next(HOST, "/v2/10.1/", FakeResponse(429, {}, {"Retry-After": "600"}))
    coordinator = ClusterLimiter(clock=clock)
    first, second = _sessions(fake, clock, coordinator)

    async def run() -> None:
        async with first:
            with pytest.raises(HostParked, match="asked to wait"):
                await first.get(f"https://{HOST}/v2/10.1/a")
        async with second:
            with pytest.raises(HostParked, match="asked to wait"):
                await second.get(f"https://{HOST}/v2/10.1/b")

    await clock.run(run())
    assert fake.count(HOST) == 1  # the second session never reached the host


# -- leases: a killed worker's places come back ---------------------------------------------------

LEASE = 5.0


def _one_at_a_time() -> tuple[str, Plan]:
    return HOST, plan_for(HOST, Rate.DEFAULT, HostLimit(rate=RATE, in_flight=1))


async def _within(clock: VirtualClock, seconds: float, work: Awaitable[T]) -> T:
    """Await ``work``, failing if it is not done within ``seconds`` of virtual time."""
    task = asyncio.ensure_future(work)
    guard = asyncio.ensure_future(clock.sleep(seconds))
    await asyncio.wait({task, guard}, return_when=asyncio.FIRST_COMPLETED)
    guard.cancel()
    if not task.done():
        task.cancel()
        pytest.fail(f"still waiting after {seconds} s of virtual time")
    return task.result()


async def test_a_dead_workers_place_comes_back_when_its_lease_runs_out(fake: FakeUpstream) -> None:
    clock = VirtualClock()
    coordinator = ClusterLimiter(clock=clock, lease=LEASE)
    host, plan = _one_at_a_time()
    (live,) = _sessions(fake, clock, coordinator)[:1]

    async def run() -> None:
        # A worker is granted the host's only place, then killed: it never reports.
        await coordinator.acquire(host, plan, RETRY)
        granted_at = clock.now()
        async with live:
            await _within(clock, 60.0, live.get(f"https://{HOST}/v2/10.1/after-the-kill"))
        assert fake.requests(HOST)[0].at >= granted_at + LEASE

    await clock.run(run())
    assert await coordinator.reclaimed() == 1
    assert await coordinator.held() == {}
    assert fake.count(HOST) == 1


async def test_a_report_after_the_lease_frees_nothing_twice() -> None:
    clock = VirtualClock()
    coordinator = ClusterLimiter(clock=clock, lease=LEASE)
    host, plan = _one_at_a_time()
    times: dict[str, float] = {}

    async def run() -> None:
        slow = await coordinator.acquire(host, plan, RETRY)
        assert not isinstance(slow, str)
        # Its lease runs out; the next worker gets the place.
        nxt = await _within(clock, 60.0, coordinator.acquire(host, plan, RETRY))
        assert not isinstance(nxt, str)
        times["next"] = clock.now()
        # The slow one reports at last: learned from, but the place it held is gone already.
        await coordinator.finish(host, slow, 200, {}, False, False)

        async def third() -> None:
            await coordinator.acquire(host, plan, RETRY)
            times["third"] = clock.now()

        waiting = asyncio.ensure_future(third())
        await clock.sleep(1.0)
        assert not waiting.done()  # the place is still the second worker's
        await coordinator.finish(host, nxt, 200, {}, False, False)
        await _within(clock, 60.0, waiting)

    await clock.run(run())
    assert times["next"] >= 100.0 + LEASE
    assert times["third"] >= times["next"] + 1.0
    assert await coordinator.reclaimed() == 1  # the third one's lease is still running
    assert await coordinator.held() == {host: 1}
    await coordinator.close()


async def test_workers_that_report_in_time_keep_every_lease(fake: FakeUpstream) -> None:
    clock = VirtualClock()
    coordinator = ClusterLimiter(clock=clock, lease=LEASE)
    await clock.run(_each_asks(_sessions(fake, clock, coordinator), 15))
    assert fake.count(HOST) == 30
    assert await coordinator.reclaimed() == 0
    assert await coordinator.held() == {}


def test_a_lease_must_be_positive() -> None:
    with pytest.raises(ValueError, match="lease"):
        ClusterLimiter(lease=0)


class _Future:
    def __init__(self, key: str, made: object) -> None:
        self.key = key
        self.status = "finished"
        self._made = made

    def result(self) -> object:
        return self._made


class _Client:
    """What cluster_limiter asks of a distributed client: submit, and where a result lives."""

    def __init__(self) -> None:
        self.made: list[object] = []
        self.workers: dict[str, list[str]] = {}

    def submit(self, cls: type, *, lease: float, actor: bool, key: str) -> _Future:
        assert actor
        made = cls(lease=lease)
        self.made.append(made)
        self.workers[key] = ["tcp://worker-1"]
        return _Future(key, made)

    def who_has(self, futures: list[_Future]) -> dict[str, list[str]]:
        return {f.key: self.workers.get(f.key, []) for f in futures}


def test_a_coordinator_whose_worker_died_is_replaced() -> None:
    client = _Client()
    first = cluster_limiter(client, lease=30.0)
    assert cluster_limiter(client) is first  # one per client while its worker lives
    assert isinstance(first, ClusterLimiter) and first._lease == 30.0
    client.workers.clear()  # the worker holding it is gone: the scheduler knows no copy
    second = cluster_limiter(client)
    assert second is not first and len(client.made) == 2


async def test_the_coordinator_keeps_a_published_per_kind_ceiling_for_every_worker(
    fake: FakeUpstream,
) -> None:
    # Europe PMC publishes 10/s and 500 a minute for every endpoint (limits.py): two
    # workers asking through the coordinator keep both together, not each on its own.
    epmc = "www.ebi.ac.uk"
    fake.route(epmc, r"/europepmc/.+", FakeResponse(200, {"resultList": {"result": []}}))
    clock = VirtualClock()
    coordinator = ClusterLimiter(clock=clock)
    factory = limiter_factory(LocalLink(coordinator))
    sessions = [
        Session(
            client_factory=fake.client_factory(clock=clock),
            retry=RETRY,
            clock=clock,
            host_limits={epmc: HostLimit(in_flight=8)},
            limiter_factory=factory,
        )
        for _ in range(2)
    ]
    search = f"https://{epmc}/europepmc/webservices/rest/search"

    async def worker(session: Session, w: int) -> None:
        async with session:
            await asyncio.gather(
                *(session.get(search, params={"query": f"DOI:{w}-{k}"}) for k in range(300))
            )

    await clock.run(asyncio.gather(*(worker(s, w) for w, s in enumerate(sessions))))
    times = sorted(r.at for r in fake.requests(epmc))
    assert len(times) == 600
    assert min(b - a for a, b in itertools.pairwise(times)) >= 0.1 - 1e-9
    assert all(b - a >= 60.0 - 1e-9 for a, b in zip(times, times[500:], strict=False))
    await coordinator.close()
