"""Per-host pacing: spacing under concurrency, host independence, sharing across scopes,
Retry-After pauses and the in-flight bound.

Every test runs over an ``httpx.MockTransport`` on a :class:`VirtualClock`: time
moves only when every task waits on it, so the times asserted are exact and the
tests give the same answer on an idle laptop and on a loaded CI machine.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest

from litfetch_df import Rate, RetryPolicy, Session
from litfetch_df.wire import limiter as _limiter
from tests.virtual_clock import VirtualClock

EPMC = "www.ebi.ac.uk"
OPENALEX = "api.openalex.org"
CROSSREF = "api.crossref.org"
NCBI = "pmc.ncbi.nlm.nih.gov"
S2 = "api.semanticscholar.org"
EPS = 1e-9

Answer = Callable[[httpx.Request], "httpx.Response | None"]


@dataclass
class Sent:
    host: str
    path: str
    at: float
    ended: float = 0.0


@dataclass
class Upstream:
    """A MockTransport handler on the virtual clock: latency, scripted answers, a log."""

    clock: VirtualClock
    latency: float = 0.0
    scripts: dict[str, list[httpx.Response]] = field(default_factory=dict)
    sent: list[Sent] = field(default_factory=list)
    in_flight: dict[str, int] = field(default_factory=dict)
    peak: dict[str, int] = field(default_factory=dict)

    def fail_next(self, host: str, *responses: httpx.Response) -> None:
        self.scripts.setdefault(host, []).extend(responses)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        record = Sent(host, request.url.path, self.clock.now())
        self.sent.append(record)
        self.in_flight[host] = self.in_flight.get(host, 0) + 1
        self.peak[host] = max(self.peak.get(host, 0), self.in_flight[host])
        try:
            if self.latency:
                await self.clock.sleep(self.latency)
            script = self.scripts.get(host)
            if script:
                return script.pop(0)
            return httpx.Response(200, json={"ok": True})
        finally:
            self.in_flight[host] -= 1
            record.ended = self.clock.now()

    def times(self, host: str) -> list[float]:
        return sorted(s.at for s in self.sent if s.host == host)

    def session(self, retry: RetryPolicy | None = None) -> Session:
        def factory() -> httpx.AsyncClient:
            return httpx.AsyncClient(transport=httpx.MockTransport(self))

        return Session(
            client_factory=factory,
            retry=retry or RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0),
            clock=self.clock,
        )


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


def assert_spaced(times: list[float], interval: float) -> None:
    """Every two consecutive starts are at least ``interval`` apart."""
    assert times, "nothing was sent"
    for a, b in itertools.pairwise(times):
        assert b - a >= interval - EPS, (a, b)


def url(host: str, n: int) -> str:
    return f"https://{host}/p/{n}"


async def gather(clock: VirtualClock, calls: list[Awaitable[httpx.Response]]) -> list[int]:
    async def together() -> list[httpx.Response]:
        return await asyncio.gather(*calls)

    return [r.status_code for r in await clock.run(together())]


async def test_200_concurrent_callers_to_one_host_are_spaced(clock: VirtualClock) -> None:
    upstream = Upstream(clock)
    async with upstream.session() as s:
        statuses = await gather(
            clock, [s.get(url(NCBI, n), rate=Rate.NCBI_UNKEYED) for n in range(200)]
        )
    assert statuses == [200] * 200
    times = upstream.times(NCBI)
    assert len(times) == 200
    assert_spaced(times, Rate.NCBI_UNKEYED.min_interval)
    # and no slower than the rate either: the work is done as soon as pacing allows
    assert times[-1] - times[0] == pytest.approx(199 * Rate.NCBI_UNKEYED.min_interval)


async def test_published_rates_are_ceilings_that_clean_answers_never_pass(
    clock: VirtualClock,
) -> None:
    upstream = Upstream(clock)
    async with upstream.session() as s:
        await gather(clock, [s.get(url(OPENALEX, n), rate=Rate.OPENALEX) for n in range(300)])
        state = s.limits[OPENALEX]
    assert_spaced(upstream.times(OPENALEX), Rate.OPENALEX.min_interval)
    assert state.rate == Rate.OPENALEX.per_second


async def test_two_hosts_do_not_wait_on_each_other(clock: VirtualClock) -> None:
    upstream = Upstream(clock)
    async with upstream.session() as s:
        await gather(
            clock,
            [s.get(url(NCBI, n), rate=Rate.NCBI_UNKEYED) for n in range(3)]
            + [s.get(url(OPENALEX, n), rate=Rate.OPENALEX) for n in range(2)],
        )
    a = upstream.times(NCBI)
    b = upstream.times(OPENALEX)
    assert_spaced(a, Rate.NCBI_UNKEYED.min_interval)
    assert_spaced(b, Rate.OPENALEX.min_interval)
    # B is paced on its own clock: behind A's queue its second request would wait 0.68 s
    assert b[1] - b[0] == pytest.approx(Rate.OPENALEX.min_interval)
    assert b[1] < a[1]


async def test_pacing_is_shared_by_the_scopes_of_one_session(clock: VirtualClock) -> None:
    upstream = Upstream(clock)

    async def unit(s: Session, offset: int) -> None:
        async with s.scope() as sc:
            await asyncio.gather(
                *(sc.get(url(OPENALEX, offset + n), rate=Rate.OPENALEX) for n in range(4))
            )

    async with upstream.session() as s:
        await clock.run(asyncio.gather(unit(s, 0), unit(s, 100), unit(s, 200)))
    times = upstream.times(OPENALEX)
    assert len(times) == 12
    assert_spaced(times, Rate.OPENALEX.min_interval)


async def test_post_is_paced(clock: VirtualClock) -> None:
    upstream = Upstream(clock)
    batch = f"https://{S2}/graph/v1/paper/batch"
    async with upstream.session() as s:
        await gather(
            clock,
            [
                s.post(batch, json={"ids": [f"DOI:10.1000/{n}"]}, rate=Rate.S2_KEYED)
                for n in range(5)
            ],
        )
    times = upstream.times(S2)
    assert len(times) == 5
    assert_spaced(times, Rate.S2_KEYED.min_interval)


async def test_retries_are_paced_too(clock: VirtualClock) -> None:
    upstream = Upstream(clock)
    upstream.fail_next(OPENALEX, httpx.Response(500), httpx.Response(502))
    async with upstream.session() as s:  # back-off 0: only pacing separates the attempts
        assert await gather(clock, [s.get(url(OPENALEX, 1), rate=Rate.OPENALEX)]) == [200]
    times = upstream.times(OPENALEX)
    assert len(times) == 3
    assert_spaced(times, Rate.OPENALEX.min_interval)


async def test_retry_after_pauses_the_whole_host_and_the_queue_restarts_spaced(
    clock: VirtualClock,
) -> None:
    # the 429 comes back before the next slot (half an interval), so only the first left early
    latency = Rate.OPENALEX.min_interval / 2
    upstream = Upstream(clock, latency=latency)
    upstream.fail_next(OPENALEX, httpx.Response(429, headers={"Retry-After": "3"}))
    async with upstream.session() as s:
        queued = [s.get(url(OPENALEX, n), rate=Rate.OPENALEX) for n in range(8)]
        other = [s.get(url(NCBI, n), rate=Rate.NCBI_UNKEYED) for n in range(2)]
        statuses = await gather(clock, queued + other)
        state = s.limits[OPENALEX]
    assert statuses == [200] * 10
    first, *later = upstream.times(OPENALEX)
    assert len(later) == 8  # seven others and the retry
    # every request queued behind the 429, including those whose slot was reserved
    # before it arrived, waited out the pause ...
    pause_ends = first + latency + 3.0
    assert all(t >= pause_ends - EPS for t in later), [t - first for t in later]
    # ... and they restarted one interval apart at the cut rate, not as one burst
    # (never faster than the learned ceiling, a share of the pace that was throttled)
    assert_spaced(later, 1 / (Rate.OPENALEX.per_second * _limiter.CUT))
    assert state.throttled == 1
    # the other host was not paused
    assert max(upstream.times(NCBI)) < pause_ends


async def test_retry_after_on_the_last_attempt_still_pauses_the_host(clock: VirtualClock) -> None:
    upstream = Upstream(clock)
    upstream.fail_next(EPMC, httpx.Response(503, headers={"Retry-After": "5"}))
    async with upstream.session(RetryPolicy(max_attempts=1)) as s:
        assert await gather(clock, [s.get(url(EPMC, 1), rate=Rate.EUROPE_PMC)]) == [503]
        assert await gather(clock, [s.get(url(EPMC, 2), rate=Rate.EUROPE_PMC)]) == [200]
    first, second = upstream.times(EPMC)
    assert second - first >= 5.0 - EPS


async def test_max_in_flight_bounds_concurrency(clock: VirtualClock) -> None:
    upstream = Upstream(clock, latency=1.0)  # slow answers: only the in-flight cap binds
    async with upstream.session() as s:
        await gather(clock, [s.get(url(CROSSREF, n), rate=Rate.CROSSREF) for n in range(7)])
    assert len(upstream.times(CROSSREF)) == 7
    assert upstream.peak[CROSSREF] == Rate.CROSSREF.max_in_flight == 3


def test_a_session_can_be_reentered_on_a_new_event_loop() -> None:
    # The notebook bridge runs each call on a fresh loop with one Session; the
    # per-host in-flight gate must not stay bound to the first loop.
    clock = VirtualClock()
    upstream = Upstream(clock, latency=1.0)
    session = upstream.session()

    async def run() -> list[int]:
        async with session as s:
            return await gather(
                clock, [s.get(url(CROSSREF, n), rate=Rate.CROSSREF) for n in range(7)]
            )

    assert asyncio.run(run()) == [200] * 7
    assert asyncio.run(run()) == [200] * 7
    assert upstream.peak[CROSSREF] == 3


async def test_a_serial_host_counts_its_interval_from_the_previous_answer(
    clock: VirtualClock,
) -> None:
    """With one request in flight, a slow answer cannot squeeze the next arrival closer."""
    upstream = Upstream(clock, latency=0.3)
    async with upstream.session() as s:
        await gather(clock, [s.get(url(S2, n), rate=Rate.S2_UNKEYED) for n in range(5)])
    sent = sorted(upstream.sent, key=lambda x: x.at)
    assert len(sent) == 5
    for previous, this in itertools.pairwise(sent):
        assert this.at >= previous.ended + Rate.S2_UNKEYED.min_interval - EPS
