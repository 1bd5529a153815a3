"""The adaptive per-host limiter: slow start by rounds, in flight by Little's law, one
reaction per throttle episode, rare probes, announced ceilings, parking on long waits.

All on a virtual clock over ``httpx.MockTransport``, with the limiter's real
starting points for hosts without a published limit (marker ``real_limits``).
"""

from __future__ import annotations

import asyncio
import itertools
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers .lit)
from litfetch_df import HostLimit, HostParked, Rate, RetryPolicy, Session
from litfetch_df.wire import limiter as _limiter
from tests.virtual_clock import VirtualClock

pytestmark = pytest.mark.real_limits

SPRINGER = "api.springernature.com"
EPMC = "www.ebi.ac.uk"
CROSSREF = "api.crossref.org"
S3 = "pmc-oa-opendata.s3.amazonaws.com"
UNPAYWALL = "api.unpaywall.org"
EPS = 1e-9
POLICY = RetryPolicy(max_attempts=3, base_delay=0.25, max_delay=4.0, max_wait=60.0)


@dataclass
class Bucket:
    """A host's undisclosed limit: ``rate`` per second with a ``burst`` (a GCRA), as real
    services enforce it; a request over it gets 429 (with ``retry_after`` if given)."""

    rate: float
    burst: int = 1
    retry_after: str | None = None
    tat: float = -math.inf  # theoretical arrival time of the next conforming request

    def admit(self, now: float) -> bool:
        interval = 1.0 / self.rate
        tat = max(self.tat, now)
        if tat - now > (self.burst - 1) * interval + EPS:
            return False
        self.tat = tat + interval
        return True


@dataclass
class Upstream:
    clock: VirtualClock
    latency: float = 0.05
    limits: dict[str, Bucket] = field(default_factory=dict)
    answer: Callable[[httpx.Request], httpx.Response | None] | None = None
    sent: list[tuple[str, float, int]] = field(default_factory=list)

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        now = self.clock.now()
        response: httpx.Response | None = None
        bucket = self.limits.get(host)
        if bucket is not None and not bucket.admit(now):
            headers = {"Retry-After": bucket.retry_after} if bucket.retry_after else {}
            response = httpx.Response(429, headers=headers)
        elif self.answer is not None:
            response = self.answer(request)
        response = response or httpx.Response(200, json={"ok": True})
        self.sent.append((host, now, response.status_code))
        await self.clock.sleep(self.latency)
        return response

    def times(self, host: str) -> list[float]:
        return [t for h, t, _ in self.sent if h == host]

    def throttled(self, host: str) -> int:
        return sum(1 for h, _, status in self.sent if h == host and status == 429)

    def session(self, **kwargs: object) -> Session:
        def factory() -> httpx.AsyncClient:
            return httpx.AsyncClient(transport=httpx.MockTransport(self))

        return Session(client_factory=factory, retry=POLICY, clock=self.clock, **kwargs)  # type: ignore[arg-type]


def url(host: str, n: int) -> str:
    return f"https://{host}/p/{n}"


async def run_all(clock: VirtualClock, calls: list[Awaitable[httpx.Response]]) -> list[int]:
    async def together() -> list[httpx.Response]:
        return await asyncio.gather(*calls)

    return [r.status_code for r in await clock.run(together())]


def gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(sorted(times))]


@pytest.mark.parametrize("latency", [0.05, 0.3, 0.5])
async def test_slow_start_doubles_the_pace_per_round_from_the_first_request(
    latency: float,
) -> None:
    # No demand gate and no "first hundred answers" phase: the first round goes at
    # START_RATE with several requests out, and each round of pressed traffic doubles the
    # pace until the politeness ceiling; in flight follows pace and round trip, within 8.
    clock = VirtualClock()
    upstream = Upstream(clock, latency=latency)
    n = 300
    async with upstream.session() as s:
        started = clock.now()
        await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
        wall = clock.now() - started
        state = s.limits[SPRINGER]
    times = upstream.times(SPRINGER)
    assert times[1] - times[0] == pytest.approx(1 / _limiter.START_RATE)
    # several out before the first answer came back (at 300 ms and 500 ms)
    assert sum(t < times[0] + latency for t in times) >= min(2, latency * _limiter.START_RATE)
    # (at a long round trip the pace grows by at most one request in flight per round, up
    # to what the in-flight ceiling lets through at that latency, at least)
    pace = min(_limiter.UNLISTED_RATE, _limiter.UNLISTED_IN_FLIGHT / latency)
    assert state.rate >= pace
    assert min(gaps(times)) >= 1 / _limiter.UNLISTED_RATE - EPS
    little = math.ceil(_limiter.HEADROOM * _limiter.UNLISTED_RATE * latency) + 1
    assert state.in_flight_cap == min(_limiter.UNLISTED_IN_FLIGHT, little)
    assert wall <= 1.2 * n / pace, wall  # latency never caps the pace


async def test_the_library_guess_for_unpaywall_is_a_ceiling_not_a_start() -> None:
    clock = VirtualClock()
    upstream = Upstream(clock)
    async with upstream.session() as s:
        await run_all(clock, [s.get(url(EPMC, n), rate=Rate.UNPAYWALL) for n in range(300)])
        state = s.limits[EPMC]
    times = upstream.times(EPMC)
    assert not Rate.UNPAYWALL.published
    assert times[1] - times[0] >= 1 / _limiter.START_RATE - EPS
    assert state.rate == min(Rate.UNPAYWALL.per_second, _limiter.UNLISTED_RATE)
    assert min(gaps(times)) >= 1 / min(Rate.UNPAYWALL.per_second, _limiter.UNLISTED_RATE) - EPS


async def test_europe_pmcs_published_rate_is_where_it_starts_and_never_passes() -> None:
    clock = VirtualClock()
    upstream = Upstream(clock)
    async with upstream.session() as s:
        await run_all(clock, [s.get(url(EPMC, n), rate=Rate.EUROPE_PMC) for n in range(300)])
        state = s.limits[EPMC]
    times = upstream.times(EPMC)
    assert Rate.EUROPE_PMC.published and Rate.EUROPE_PMC.per_second == 10.0
    # No slow start below a published rate: the second request goes one interval later.
    assert times[1] - times[0] <= Rate.EUROPE_PMC.min_interval + EPS
    assert state.rate == Rate.EUROPE_PMC.per_second
    assert min(gaps(times)) >= Rate.EUROPE_PMC.min_interval - EPS


@pytest.mark.parametrize(
    ("limit", "burst", "retry_after"),
    [(3.0, 1, None), (7.0, 3, "1"), (12.0, 6, None), (18.0, 2, "2")],
)
async def test_an_undisclosed_limit_is_found_with_few_429s(
    limit: float, burst: int, retry_after: str | None
) -> None:
    clock = VirtualClock()
    upstream = Upstream(clock, limits={SPRINGER: Bucket(limit, burst, retry_after)})
    n = 600
    async with upstream.session() as s:
        started = clock.now()
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
        wall = clock.now() - started
    assert statuses == [200] * n  # nothing given up
    throttled = upstream.throttled(SPRINGER)
    assert throttled <= 0.02 * n, throttled
    bound = n / limit
    assert wall <= 1.5 * bound + 5, (wall, bound)


def episodes(times: list[float]) -> list[list[float]]:
    """The 429s grouped into episodes: those within a second of the previous one."""
    groups: list[list[float]] = []
    for t in sorted(times):
        if groups and t - groups[-1][-1] < 1.0:
            groups[-1].append(t)
        else:
            groups.append([t])
    return groups


@pytest.mark.parametrize(("limit", "burst", "retry_after"), [(15.5, 11, "16"), (10.8, 8, "19")])
async def test_a_host_that_asks_for_long_waits_is_probed_rarely(
    limit: float, burst: int, retry_after: str
) -> None:
    # Each throttle costs the whole host a long wait: after the first, a probe above the
    # settled pace waits until the time it could have saved is worth that wait, so each
    # episode is one or two 429s and episodes are far apart.
    clock = VirtualClock()
    upstream = Upstream(clock, limits={SPRINGER: Bucket(limit, burst, retry_after)})
    n = 800
    async with upstream.session() as s:
        started = clock.now()
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
        wall = clock.now() - started
    assert statuses == [200] * n
    found = episodes([t for _, t, status in upstream.sent if status == 429])
    assert len(found) <= 3 and all(len(e) <= 2 for e in found), found
    hold = float(retry_after)
    assert all(b[0] - a[-1] >= hold for a, b in itertools.pairwise(found)), found
    assert wall <= 1.3 * n / limit + len(found) * hold, wall


async def test_a_limit_allowing_no_burst_met_early_in_a_ramp_keeps_most_of_its_pace() -> None:
    # A host that admits no burst throttles at the first paces past its limit: the pace goes
    # back to what the host admitted, not to a fixed share of the pace granted, and probes
    # up from there rarely (each failed probe costs its 15 s wait).
    clock = VirtualClock()
    limit = 8.2
    upstream = Upstream(clock, limits={SPRINGER: Bucket(limit, 1, "15")})
    n = 800
    async with upstream.session() as s:
        started = clock.now()
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
        wall = clock.now() - started
        state = s.limits[SPRINGER]
    assert statuses == [200] * n
    found = episodes([t for _, t, status in upstream.sent if status == 429])
    assert len(found) <= 3 and all(len(e) <= 2 for e in found), found
    assert 0.65 * limit <= state.rate <= limit, state
    # Three 15 s holds on a 98 s bound, and probes that wait for even odds of paying off.
    assert wall <= 2.05 * n / limit, wall


async def test_a_pace_that_held_before_its_throttle_is_kept_close_to_the_limit() -> None:
    # The pace sat at the 20/s ceiling for seconds before this host's burst allowance ran
    # out: the requests it admitted meanwhile prove a rate close to the limit (a burst of at
    # most BURST_SECONDS of it assumed), and the pace goes back there, not to half.
    clock = VirtualClock()
    limit = 17.9
    upstream = Upstream(clock, limits={SPRINGER: Bucket(limit, 11, "9")})
    n = 800
    async with upstream.session() as s:
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
        state = s.limits[SPRINGER]
    assert statuses == [200] * n
    assert upstream.throttled(SPRINGER) == 1
    assert 0.88 * limit <= state.rate <= limit, state
    assert state.ceiling == _limiter.UNLISTED_RATE  # the slowest throttled pace: the ceiling


async def test_a_lone_throttle_after_a_long_clean_stretch_keeps_the_pace() -> None:
    # Arrival jitter can get one request throttled at a pace the host has taken cleanly for
    # a minute: what the host admitted over that minute proves the pace, so most of it stays
    # (halving it, as after a throttle in a ramp, would be a loss for nothing).
    clock = VirtualClock()
    seen = itertools.count()
    before: list[float] = []

    def answer(request: httpx.Request) -> httpx.Response | None:
        if next(seen) == 700:
            before.append(s.limits[SPRINGER].rate)
            return httpx.Response(429, headers={"Retry-After": "15"})
        return None

    upstream = Upstream(clock, limits={SPRINGER: Bucket(8.2, 1, "15")}, answer=answer)
    n = 900
    async with upstream.session() as s:
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
        state = s.limits[SPRINGER]
    assert statuses == [200] * n
    assert before, before
    assert state.rate >= 0.75 * before[0], (state, before)


class TickingClock(VirtualClock):
    """A virtual clock that also moves a microsecond at every reading, as a real one does
    between two lines of code: a judgement made by comparing two readings must not flip."""

    def now(self) -> float:
        self._now += 1e-6
        return self._now


@pytest.mark.parametrize("clock_type", [VirtualClock, TickingClock])
async def test_a_host_asked_less_often_than_its_pace_keeps_its_pace(
    clock_type: type[VirtualClock],
) -> None:
    # Requests that never waited for their slot say nothing about a faster pace: an idle
    # host's limiter stays where it started, so a later burst cannot meet an untried pace.
    clock = clock_type()
    upstream = Upstream(clock, limits={SPRINGER: Bucket(4.4, 2)})
    async with upstream.session() as s:

        async def trickle() -> None:
            for k in range(40):
                await s.get(url(SPRINGER, k))
                await clock.sleep(1.0)  # one request a second: under the start

        await clock.run(trickle())
        idle = s.limits[SPRINGER]
        await run_all(clock, [s.get(url(SPRINGER, 100 + k)) for k in range(30)])
        busy = s.limits[SPRINGER]
    assert idle.rate == _limiter.START_RATE
    assert busy.rate != idle.rate  # the burst held requests back: the pace was tested
    assert upstream.throttled(SPRINGER) <= 6  # finding 4.4/s from 20/s, no Retry-After


@pytest.mark.parametrize("latency", [0.05, 0.3])
async def test_a_small_table_takes_little_longer_than_its_bound(latency: float) -> None:
    # Small tables are instant: 20 and 200 requests to a host that throttles nobody are
    # paced by the politeness ceiling within a few round trips, whatever the latency.
    for n in (20, 200):
        clock = VirtualClock()
        upstream = Upstream(clock, latency=latency)
        async with upstream.session() as s:
            started = clock.now()
            await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
            wall = clock.now() - started
        pace = min(_limiter.UNLISTED_RATE, _limiter.UNLISTED_IN_FLIGHT / latency)
        bound = n / pace + latency
        assert wall <= 1.3 * bound + 4 * latency, (n, wall, bound)


@pytest.mark.parametrize("clock_type", [VirtualClock, TickingClock])
async def test_in_flight_follows_pace_and_round_trip(clock_type: type[VirtualClock]) -> None:
    # Little's law: fast answers need few places at a pace, slow ones many; the cap is
    # about HEADROOM * rate * srtt + 1, within the politeness ceiling of 8.
    clock = clock_type()
    quick = Upstream(clock, latency=0.01)
    async with quick.session() as s:
        await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(200)])
        state = s.limits[SPRINGER]
        assert state.in_flight_cap == math.ceil(_limiter.HEADROOM * state.rate * 0.01) + 1
    slow = Upstream(clock, latency=0.5)
    async with slow.session() as s:
        await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(200)])
        assert s.limits[SPRINGER].in_flight_cap == _limiter.UNLISTED_IN_FLIGHT
    times = slow.times(SPRINGER)
    assert sum(t < times[0] + 0.5 for t in times) >= 2  # overlapping from the first round


async def test_random_throttles_do_not_ratchet_a_host_down_to_the_floor() -> None:
    # A flaky host: no rate limit at all, but about one answer in 20 is a 429 or a 503,
    # whatever the pace (the faults benchmark draws this). Each throttle still cuts the pace
    # and holds the host, but the ceiling the pace recovers to keeps most of the start and
    # half of any pace the host answered cleanly 15 times in a row. Before, each throttle
    # lowered the ceiling a notch until the host crawled at the 0.5/s floor.
    clock = VirtualClock()
    rng = random.Random(1)  # the unluckiest of seeds 0-4: the first throttle comes early

    def answer(request: httpx.Request) -> httpx.Response | None:
        if rng.random() >= 0.05:
            return None
        # a 503 that says when to come back is a throttle too (one without is a fault)
        return httpx.Response(429) if rng.random() < 0.5 else retry_now()

    def retry_now() -> httpx.Response:
        return httpx.Response(503, headers={"Retry-After": "0"})

    upstream = Upstream(clock, answer=answer)
    n = 1200
    async with upstream.session() as s:
        started = clock.now()
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
        wall = clock.now() - started
        state = s.limits[SPRINGER]
    assert statuses.count(200) >= n - 2  # a request throttled on every attempt may be lost
    assert state.throttled >= 40  # the host really did throttle all along
    assert state.rate >= _limiter.CUT * _limiter.START_RATE, state
    at_the_floor = n / _limiter.FLOOR_RATE
    assert wall <= 0.6 * at_the_floor, wall


async def test_an_outage_without_retry_after_is_a_fault_not_a_pace_cut() -> None:
    # A 503 (or 500/502/504) without Retry-After says the host is failing, not that the
    # client is too fast: it is retried with a back-off, and the pace the host has shown
    # it admits stays. Before, each outage answer cut the pace until the 0.5/s floor and a
    # table with a failing source ran for minutes.
    clock = VirtualClock()
    down = {"on": False}
    failing = {f"/p/{k}" for k in range(100, 160)}

    def answer(request: httpx.Request) -> httpx.Response | None:
        if down["on"] and request.url.path in failing:
            return httpx.Response(503, text="Service Unavailable")
        return None

    upstream = Upstream(clock, answer=answer)
    async with upstream.session() as s:
        await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(100)])
        before = s.limits[SPRINGER]
        down["on"] = True
        started = clock.now()
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(100, 300)])
        wall = clock.now() - started
        after = s.limits[SPRINGER]
    assert statuses.count(503) == len(failing)  # each failed after its retries
    assert statuses.count(200) == 200 - len(failing)
    sent_503 = sum(1 for h, _, status in upstream.sent if h == SPRINGER and status == 503)
    assert sent_503 == len(failing) * POLICY.max_attempts  # retried, not given up at once
    assert after.throttled == 0 and after.rate == before.rate == _limiter.UNLISTED_RATE
    # 200 requests at 20/s plus the back-offs of the last retries, not 0.5/s
    assert wall <= 200 / _limiter.UNLISTED_RATE + 2 * POLICY.max_delay, wall


@pytest.mark.parametrize(
    ("host", "status", "headers", "signal"),
    [
        (SPRINGER, 429, {}, True),
        (SPRINGER, 503, {"Retry-After": "3"}, True),
        (SPRINGER, 503, {"X-RateLimit-Remaining": "0"}, True),
        (SPRINGER, 503, {"ratelimit": '"default";r=0;t=2'}, True),
        (SPRINGER, 503, {}, False),
        (SPRINGER, 500, {"Retry-After": "3"}, False),
        (SPRINGER, 502, {}, False),
        (SPRINGER, 504, {}, False),
        (SPRINGER, 403, {}, False),
        (S3, 503, {}, True),  # Amazon S3's 503 SlowDown
        ("api.openalex.org", 403, {}, True),  # with OpenAlex's slow-down status
    ],
)
def test_only_429_and_a_503_that_says_more_are_pace_signals(
    host: str, status: int, headers: dict[str, str], signal: bool
) -> None:
    slow_down = Rate.OPENALEX.transient_statuses if host == "api.openalex.org" else frozenset()
    assert _limiter.is_pace_signal(host, status, headers, slow_down) is signal


@dataclass
class OneAtATime(Upstream):
    """A host that takes one request at a time and answers a second one in flight with 429."""

    busy: int = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if self.busy:
            self.sent.append((request.url.host, self.clock.now(), 429))
            return httpx.Response(429, headers={"Retry-After": "1"})
        self.busy += 1
        try:
            return await super().__call__(request)
        finally:
            self.busy -= 1


async def test_a_host_taking_one_request_at_a_time_is_found_in_one_episode() -> None:
    # Several go out in the first round; the one answered 429 with two at the host while
    # every clean answer had one is read as a concurrency limit: one place from then on,
    # and the pace is not cut for it.
    clock = VirtualClock()
    upstream = OneAtATime(clock, latency=0.25)
    n = 90
    async with upstream.session() as s:
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
        state = s.limits[SPRINGER]
    assert statuses == [200] * n
    assert len(episodes([t for _, t, status in upstream.sent if status == 429])) == 1
    assert upstream.throttled(SPRINGER) <= 3
    assert state.in_flight_cap == 1


async def test_a_rate_throttle_with_one_request_out_does_not_cap_in_flight() -> None:
    # One request at the host cannot break a concurrency limit, so a throttle drawn then
    # (the pace met the host's rate) cuts the pace, not the places: once answers slow down,
    # in flight grows with the round trip again.
    clock = VirtualClock()
    upstream = Upstream(clock, latency=0.05, limits={SPRINGER: Bucket(4.0, 1)})
    async with upstream.session() as s:
        await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(100)])
        assert s.limits[SPRINGER].throttled >= 1
        upstream.latency = 1.0  # now one place carries only one request a second
        await run_all(clock, [s.get(url(SPRINGER, 1000 + k)) for k in range(80)])
        state = s.limits[SPRINGER]
    assert state.in_flight_cap > 1, state
    assert 0.5 * 4.0 <= state.rate <= 4.0, state


class LaggingClock(VirtualClock):
    """A virtual clock whose sleepers wake up to 80 ms late, one in three (seeded), the way
    a busy event loop wakes them: a slot reserved ahead may then be taken late."""

    def __init__(self) -> None:
        super().__init__()
        self._lag = random.Random(3)

    async def sleep(self, seconds: float) -> None:
        lag = self._lag.uniform(0.0, 0.08) if self._lag.random() < 1 / 3 else 0.0
        await super().sleep(seconds + lag if seconds > 0 else seconds)


async def test_a_late_wake_up_never_turns_two_slots_into_a_burst() -> None:
    # A host that allows no burst at all (8/s, one at a time by the clock): requests a
    # busy loop woke late must not be followed by the next one at its reserved slot.
    clock = LaggingClock()
    upstream = Upstream(clock, latency=0.02, limits={SPRINGER: Bucket(8.0, 1)})
    known = {SPRINGER: HostLimit(rate=8.0)}
    async with upstream.session(host_limits=known) as s:
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(200)])
    assert statuses == [200] * 200
    assert upstream.throttled(SPRINGER) == 0
    assert min(gaps(upstream.times(SPRINGER))) >= 1 / 8.0 - EPS


async def test_a_burst_of_429s_slows_the_host_and_clean_answers_speed_it_up_again() -> None:
    clock = VirtualClock()
    refuse = {"on": False}

    def answer(request: httpx.Request) -> httpx.Response | None:
        return httpx.Response(429) if refuse["on"] else None

    upstream = Upstream(clock, answer=answer)
    known = {SPRINGER: HostLimit(rate=10.0)}
    async with upstream.session(host_limits=known) as s:
        await run_all(clock, [s.get(url(SPRINGER, n)) for n in range(20)])
        before = s.limits[SPRINGER].rate
        refuse["on"] = True
        statuses = await run_all(clock, [s.get(url(SPRINGER, 100 + n)) for n in range(4)])
        slowed = s.limits[SPRINGER]
        refuse["on"] = False
        await run_all(clock, [s.get(url(SPRINGER, 200 + n)) for n in range(40)])
        recovered = s.limits[SPRINGER].rate
    assert before == 10.0
    assert statuses == [429] * 4  # each given up after its attempts
    assert slowed.rate < before  # never below what the host admitted: it is also held
    assert slowed.throttled >= 4
    # the pause after a throttle held the whole host, and the pace recovered with clean answers
    assert recovered >= slowed.rate
    assert recovered <= 10.0  # never past the stated limit


async def test_one_episode_of_429s_cuts_the_pace_once() -> None:
    clock = VirtualClock()
    seen = {"n": 0}

    def answer(request: httpx.Request) -> httpx.Response | None:
        seen["n"] += 1
        return httpx.Response(429) if 5 <= seen["n"] < 9 else None

    upstream = Upstream(clock, latency=1.0, answer=answer)
    known = {SPRINGER: HostLimit(rate=8.0, in_flight=8)}
    async with upstream.session(host_limits=known) as s:
        await run_all(clock, [s.get(url(SPRINGER, n)) for n in range(12)])
        state = s.limits[SPRINGER]
    # four requests in the air together were refused: one cut (8 → 4), not four (8 → 0.5)
    assert state.throttled == 4
    assert state.rate >= 4.0


async def test_retry_after_120_parks_the_host_without_waiting_and_rows_say_so() -> None:
    clock = VirtualClock()
    parked = {"on": True}

    def answer(request: httpx.Request) -> httpx.Response | None:
        if request.url.host == UNPAYWALL and parked["on"]:
            return httpx.Response(429, headers={"Retry-After": "120"})
        if request.url.host == UNPAYWALL:
            doi = request.url.path.removeprefix("/v2/")
            return httpx.Response(
                200,
                json={
                    "doi": doi,
                    "is_oa": True,
                    "oa_status": "gold",
                    "best_oa_location": {"license": "cc-by", "url": f"https://x.org/{doi}"},
                    "oa_locations": [],
                },
            )
        return httpx.Response(404)

    upstream = Upstream(clock, answer=answer)
    frame = pd.DataFrame({"DOI": [f"10.1000/a{n}" for n in range(6)]})
    config = {"progress": False, "resolve": False}
    async with upstream.session(contact="me@example.org") as s:
        started = clock.now()
        first = await clock.run(frame.lit.licences_async(session=s, **config))
        took = clock.now() - started
        errors = first["licence_error"].tolist()
        # one request was refused with the long wait; the others were never sent
        assert upstream.throttled(UNPAYWALL) == 1
        assert took < 5.0  # nobody sat out the two minutes
        assert all(
            isinstance(e, str) and e.startswith("abandoned: ") and "asked to wait 120 s" in e
            for e in errors
        ), errors
        assert s.limits[UNPAYWALL].parked is not None
        # after the wait, a re-run picks up exactly those rows
        parked["on"] = False
        await clock.run(clock.sleep(121))
        again = await clock.run(first.lit.licences_async(session=s, **config))
    assert again["licence_error"].isna().all()
    assert again["licence"].eq("cc-by").all() or again["licence"].notna().all()


async def test_crossref_announced_limits_lower_the_ceiling() -> None:
    clock = VirtualClock()

    def answer(request: httpx.Request) -> httpx.Response | None:
        headers = {"X-Rate-Limit-Limit": "5", "X-Rate-Limit-Interval": "1s"}
        return httpx.Response(200, json={}, headers=headers)

    upstream = Upstream(clock, latency=0.0, answer=answer)
    async with upstream.session() as s:
        await run_all(clock, [s.get(url(CROSSREF, n), rate=Rate.CROSSREF) for n in range(30)])
        state = s.limits[CROSSREF]
    assert state.ceiling == 5.0
    # (the slots already reserved at the old pace go first)
    assert min(gaps(upstream.times(CROSSREF)[3:])) >= 0.2 - EPS


async def test_an_exhausted_window_holds_the_host_until_it_resets() -> None:
    clock = VirtualClock()
    calls = {"n": 0}

    def answer(request: httpx.Request) -> httpx.Response | None:
        calls["n"] += 1
        remaining = max(0, 3 - calls["n"])
        return httpx.Response(
            200, headers={"X-RateLimit-Remaining": str(remaining), "X-RateLimit-Reset": "10"}
        )

    upstream = Upstream(clock, latency=0.0, answer=answer)
    async with upstream.session(host_limits={SPRINGER: HostLimit(rate=100.0)}) as s:
        await run_all(clock, [s.get(url(SPRINGER, n)) for n in range(5)])
    times = upstream.times(SPRINGER)
    # three fit the window; the fourth waited for the reset ten seconds after the third
    assert times[3] - times[2] >= 10.0 - EPS


async def through_announcing_bucket(
    per_second: float, burst: int, *, latency: float, n: int
) -> tuple[list[int], int, float]:
    """Send ``n`` requests to a token bucket that announces ``X-RateLimit-*`` after every
    answer, as the benchmark's hosts do (whole seconds, rounded up); return the statuses,
    the 429s and the wall time."""
    from tests.fakes.limits import HostGate
    from tests.fakes.limits import HostLimit as GateLimit

    clock = VirtualClock()
    gate = HostGate(GateLimit(per_second, burst=burst, announce=True, retry_after=True))

    def answer(request: httpx.Request) -> httpx.Response | None:
        verdict = gate.admit(clock.now())
        gate.release()
        return httpx.Response(200 if verdict.admitted else 429, headers=verdict.headers)

    upstream = Upstream(clock, latency=latency, answer=answer)
    async with upstream.session() as s:
        started = clock.now()
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
        wall = clock.now() - started
    return statuses, upstream.throttled(SPRINGER), wall


async def test_a_pace_announced_by_a_one_second_window_is_reached_a_round_trip_a_round() -> None:
    # A host announcing 15 a second (X-RateLimit-* resetting within a second) at 300 ms: no
    # round need wait two round trips for the host's burst to show an overshoot, since the
    # pace it tests is one the host announced; only the in-flight places are still found,
    # one round trip a round. Waiting two round trips a round, 90 % of the pace took 3.0 s.
    clock = VirtualClock()
    from tests.fakes.limits import HostGate
    from tests.fakes.limits import HostLimit as GateLimit

    gate = HostGate(GateLimit(15.0, burst=15, announce=True))

    def answer(request: httpx.Request) -> httpx.Response | None:
        verdict = gate.admit(clock.now())
        gate.release()
        return httpx.Response(200 if verdict.admitted else 429, headers=verdict.headers)

    upstream = Upstream(clock, latency=0.3, answer=answer)
    async with upstream.session() as s:
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(200)])
    assert statuses == [200] * 200
    times = upstream.times(SPRINGER)
    reached = next(
        b - times[0] for a, b in zip(times, times[13:], strict=False) if 13 / (b - a) >= 13.5
    )
    assert reached <= 2.4, reached


async def test_a_token_bucket_announcing_whole_seconds_is_not_paced_at_one_a_second() -> None:
    # A host with a 10/s token bucket and no burst announces after every request that
    # nothing is left and the bucket refills within a second (whole seconds, rounded up):
    # one place is back after a tenth of a second.
    n = 200
    statuses, throttled, wall = await through_announcing_bucket(10.0, 1, latency=0.02, n=n)
    assert statuses == [200] * n
    assert throttled == 0
    assert wall <= 2.0 * n / 10.0, wall  # not the 200 s of one request a second


async def test_an_exhausted_short_window_frees_its_place_after_the_request_went() -> None:
    # The same bucket behind a slow network: "0 left" comes back a round trip after the
    # request went, and the place it took frees 1/limit s after the request arrived. Holding
    # the host for 1/limit s from the answer added the round trip to every request (71 s
    # for these 300); counted from the send, the pace stays near the limit.
    n = 300
    statuses, throttled, wall = await through_announcing_bucket(10.0, 1, latency=0.2, n=n)
    assert statuses == [200] * n
    assert throttled <= 0.01 * n
    assert wall <= 1.9 * n / 10.0, wall


async def test_a_bucket_with_a_place_left_is_not_read_as_a_window_of_one_a_second() -> None:
    # A 17.6/s bucket with a burst of two says "1 left, full again in 1 s" after most
    # answers. Read as a fixed window, that allowed one request a second, less those in
    # flight (this run took 6x its bound); a bucket refilling within a second gives its
    # places back one by one, so the pace alone holds the host.
    n = 600
    statuses, throttled, wall = await through_announcing_bucket(17.6, 2, latency=0.05, n=n)
    assert statuses == [200] * n
    assert throttled <= 0.01 * n
    assert wall <= 2.0 * n / 17.6, wall


async def test_an_exhausted_window_past_the_budget_parks_the_host() -> None:
    clock = VirtualClock()

    def answer(request: httpx.Request) -> httpx.Response | None:
        return httpx.Response(
            200, headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "3600"}
        )

    upstream = Upstream(clock, latency=0.0, answer=answer)
    async with upstream.session() as s:
        assert await run_all(clock, [s.get(url(SPRINGER, 0))]) == [200]
        with pytest.raises(HostParked, match="asked to wait 3600 s"):
            await clock.run(s.get(url(SPRINGER, 1)))


async def test_a_stated_host_limit_is_where_pacing_starts_and_a_ceiling() -> None:
    clock = VirtualClock()
    upstream = Upstream(clock, latency=0.0)
    async with upstream.session(host_limits={SPRINGER: HostLimit(rate=4.0, in_flight=1)}) as s:
        await run_all(clock, [s.get(url(SPRINGER, n)) for n in range(50)])
        state = s.limits[SPRINGER]
    assert state.rate == 4.0 and state.in_flight_cap == 1
    assert all(g >= 0.25 - EPS for g in gaps(upstream.times(SPRINGER)))
    assert upstream.times(SPRINGER)[1] - upstream.times(SPRINGER)[0] == pytest.approx(0.25)


def test_host_limit_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        HostLimit(rate=0)
    with pytest.raises(ValueError):
        HostLimit(rate=float("inf"))
    with pytest.raises(ValueError):
        HostLimit(in_flight=0)


async def test_the_pmc_bucket_is_not_paced_until_it_says_slow_down() -> None:
    clock = VirtualClock()
    slow = {"on": False}

    def answer(request: httpx.Request) -> httpx.Response | None:
        return httpx.Response(503, text="SlowDown") if slow["on"] else None

    upstream = Upstream(clock, latency=0.05, answer=answer)
    async with upstream.session() as s:
        await run_all(clock, [s.get(url(S3, n)) for n in range(64)])
        assert max(upstream.times(S3)) - min(upstream.times(S3)) < EPS  # all at once
        slow["on"] = True
        await run_all(clock, [s.get(url(S3, 100 + n)) for n in range(4)])
        state = s.limits[S3]
    assert math.isfinite(state.rate) and state.throttled >= 1


async def test_a_later_session_starts_from_what_an_earlier_one_learned() -> None:
    # A chained call opens a new session; it must not learn the host's limit again (and
    # draw the same 429s again): it starts at the pace, cap and ceiling the last one reached.
    clock = VirtualClock()
    upstream = Upstream(clock, limits={SPRINGER: Bucket(6.0, 2)})
    async with upstream.session() as first:
        await run_all(clock, [first.get(url(SPRINGER, k)) for k in range(300)])
        learned = first.lessons()
        before = first.limits[SPRINGER]
    throttled_first = upstream.throttled(SPRINGER)
    assert throttled_first > 0 and learned[SPRINGER].learned <= _limiter.UNLISTED_RATE

    upstream.sent.clear()
    await clock.run(clock.sleep(1.0))  # the next call begins a moment later: the bucket refills
    async with upstream.session(lessons=learned) as second:
        state = second.limits  # no limiter yet: made on the first request
        assert SPRINGER not in state
        await run_all(clock, [second.get(url(SPRINGER, 1000 + k)) for k in range(300)])
        after = second.limits[SPRINGER]
    times = upstream.times(SPRINGER)
    # It starts at the pace the first one ended at, not at START_RATE...
    assert times[1] - times[0] == pytest.approx(1 / learned[SPRINGER].rate)
    assert times[1] - times[0] < 1 / _limiter.START_RATE
    assert before.in_flight_cap == learned[SPRINGER].cap
    assert after.requests == 300 + upstream.throttled(SPRINGER)  # each 429 retried once
    # ...so the second session draws fewer throttles than the first (at most a probe's).
    assert upstream.throttled(SPRINGER) < throttled_first
    assert upstream.throttled(SPRINGER) <= 2  # a probe's


def test_lessons_never_lift_a_limiter_above_its_own_plan() -> None:
    clock = VirtualClock()
    plan = _limiter.plan_for(SPRINGER, Rate.DEFAULT, HostLimit(rate=3.0, in_flight=2))
    limiter = _limiter.HostLimiter(SPRINGER, plan, clock, POLICY)
    lessons = _limiter.Lessons(
        rate=15.0, cap=8, learned=15.0, learned_cap=8, slow_start=False, probe_after=20.0
    )
    limiter.resume(lessons)
    state = limiter.state()
    assert state.rate <= 3.0 and state.ceiling <= 3.0 and state.in_flight_cap <= 2


def test_a_probe_bisects_the_pace_on_a_ratio_scale() -> None:
    # Between a pace that holds (5/s) and the slowest throttled one (20/s) a probe goes to
    # their geometric mean, 10/s: paces double and halve, so "halfway" is on a ratio scale.
    # The arithmetic halfway, 12.5/s, overshot the hosts a slow start's 20/s refusal left
    # between 7 and 13/s (and drew a 15 s hold where the host's Retry-After was 15 s).
    clock = VirtualClock()
    limiter = _limiter.HostLimiter(
        SPRINGER, _limiter.plan_for(SPRINGER, Rate.DEFAULT), clock, POLICY
    )
    limiter.resume(
        _limiter.Lessons(
            rate=5.0, cap=8, learned=20.0, learned_cap=0, slow_start=False, probe_after=0.0
        )
    )
    ticket = _limiter.Ticket(5.0, 1, 0, pressed=True, sent=clock.now(), round=0)
    limiter.observe(ticket, 200, {}, throttled=False)
    assert limiter.rate == pytest.approx(10.0)


# -- published per-kind ceilings (limits.py): hard ceilings, never probed past ----------------


def test_a_request_finds_its_published_ceiling_by_kind_and_tier() -> None:
    from litfetch_df.wire.limiter import Ceiling, ceiling_for

    meta = ceiling_for(SPRINGER, "/meta/v2/json", {"q": "doi:10.1/x", "api_key": "k"})
    full = ceiling_for(SPRINGER, "/openaccess/jats", {"q": "doi:10.1/x"})
    # Springer Nature Basic: 100 a minute, one pool for its list and full-text rows.
    assert meta is not None and meta == full == Ceiling(meta.pool, None, 100)
    polite = {"mailto": "a@b.org", "filter": "doi:10.1/x"}
    lists = ceiling_for(CROSSREF, "/works", polite)
    single = ceiling_for(CROSSREF, "/works/10.1/x", {"mailto": "a@b.org"})
    assert lists is not None and lists.per_second == 3.0
    assert single is not None and single.per_second == 10.0 and single.pool != lists.pool
    assert ceiling_for(CROSSREF, "/works", {"filter": "doi:10.1/x"}).per_second == 1.0  # type: ignore[union-attr]
    assert ceiling_for(EPMC, "/europepmc/webservices/rest/search", {}).per_minute == 500  # type: ignore[union-attr]
    assert ceiling_for(UNPAYWALL, "/v2/10.1/x", {}) is None  # a quota, no rate
    assert ceiling_for("example.org", "/a", {}) is None


def _minute_window(
    clock: VirtualClock, per_minute: int
) -> Callable[[httpx.Request], httpx.Response]:
    """A host counting the clock's minutes, as Springer Nature and Europe PMC are modelled."""
    counted: dict[int, int] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        minute = math.floor(clock.now() / 60.0)
        counted[minute] = counted.get(minute, 0) + 1
        return httpx.Response(429 if counted[minute] > per_minute else 200, json={})

    return answer


async def test_springer_basics_hundred_a_minute_is_a_window_never_passed() -> None:
    # 250 Springer Nature Meta requests to a host that would take 20/s: the first 100 go
    # at the pace, then each next one waits until the oldest of the last 100 is a minute
    # old. No 429, and the run takes two minutes and a bit, not more.
    clock = VirtualClock()
    upstream = Upstream(clock, latency=0.05, answer=_minute_window(clock, 100))
    n = 250
    async with upstream.session() as s:
        started = clock.now()
        statuses = await run_all(
            clock,
            [s.get(f"https://{SPRINGER}/meta/v2/json", params={"q": f"doi:{k}"}) for k in range(n)],
        )
        wall = clock.now() - started
    assert statuses == [200] * n
    assert upstream.throttled(SPRINGER) == 0
    times = upstream.times(SPRINGER)
    assert all(b - a >= 60.0 - EPS for a, b in zip(times, times[100:], strict=False))
    assert 120.0 <= wall <= 125.0, wall


async def test_a_published_per_second_ceiling_spaces_its_kind_only() -> None:
    # Crossref's polite pool: lists at 3/s, single records at 10/s, on one host.
    clock = VirtualClock()
    upstream = Upstream(clock, latency=0.02)
    async with upstream.session() as s:
        lists = [
            s.get(
                f"https://{CROSSREF}/works",
                params={"filter": f"doi:10.1/{k}", "mailto": "a@b.org"},
                rate=Rate.CROSSREF,
            )
            for k in range(12)
        ]
        await run_all(clock, lists)
        list_times = upstream.times(CROSSREF)
        singles = [
            s.get(
                f"https://{CROSSREF}/works/10.1/{k}",
                params={"mailto": "a@b.org"},
                rate=Rate.CROSSREF,
            )
            for k in range(20)
        ]
        await run_all(clock, singles)
        single_times = upstream.times(CROSSREF)[12:]
    assert min(gaps(list_times)) >= 1 / 3 - EPS
    assert min(gaps(single_times)) < 1 / 3  # the single records' pool is the faster one
    assert min(gaps(single_times)) >= 1 / 10 - EPS


async def test_a_rate_the_caller_gives_replaces_the_tables_ceiling() -> None:
    # A Springer Nature Premium key: the caller says 5/s, and the table's Basic 100 a
    # minute no longer holds the host (150 requests in about 30 s, not over a minute).
    clock = VirtualClock()
    upstream = Upstream(clock, latency=0.05)
    n = 150
    async with upstream.session(host_limits={SPRINGER: HostLimit(rate=5.0)}) as s:
        started = clock.now()
        calls = [s.get(f"https://{SPRINGER}/meta/v2/json", params={"q": f"{k}"}) for k in range(n)]
        await run_all(clock, calls)
        wall = clock.now() - started
    assert wall <= 31.0, wall


async def test_a_pool_idle_for_a_minute_starts_afresh() -> None:
    # Every send of the pool (Crossref's polite lists, 3/s) has left the window: the next
    # request goes at once.
    clock = VirtualClock()
    upstream = Upstream(clock, latency=0.05)
    params = {"filter": "doi:10.1/x", "mailto": "a@b.org"}
    async with upstream.session() as s:
        first = await clock.run(s.get(f"https://{CROSSREF}/works", params=params))
        await clock.run(clock.sleep(61.0))
        asked = clock.now()
        second = await clock.run(s.get(f"https://{CROSSREF}/works", params=params))
    assert first.status_code == second.status_code == 200
    assert upstream.times(CROSSREF)[1] == asked


async def test_a_query_written_into_the_url_still_names_the_requests_kind() -> None:
    # A Crossref list call whose filter and contact are in the URL itself is a polite list
    # call (3/s), not a public one (1/s).
    clock = VirtualClock()
    upstream = Upstream(clock, latency=0.02)
    async with upstream.session() as s:
        calls = [
            s.get(
                f"https://{CROSSREF}/works?filter=doi:10.1/{k}&mailto=a@b.org", rate=Rate.CROSSREF
            )
            for k in range(8)
        ]
        await run_all(clock, calls)
    spacing = gaps(upstream.times(CROSSREF))
    assert min(spacing) >= 1 / 3 - EPS and max(spacing) < 0.5, spacing


@pytest.mark.parametrize(
    ("rate", "burst", "in_flight", "retry_after"), [(7.3, 7, 6, False), (10.0, 8, 8, True)]
)
async def test_a_throttle_read_as_concurrency_but_refused_again_within_the_cap_cuts_the_pace(
    rate: float, burst: int, in_flight: int, retry_after: bool
) -> None:
    # At 300 ms the first throttle of a host with a rate limit and a burst comes with more
    # requests out than any clean answer was sent with: a concurrency limit, by the look of
    # it, so in flight is capped and the pace kept. A request of the same episode refused
    # with no more at the host than that cap (counting only the requests it served) refutes
    # the reading: the pace is cut in that episode, to what the host proved, and no second
    # episode comes (3 429s, not 6).
    from tests.fakes.limits import HostGate
    from tests.fakes.limits import HostLimit as GateLimit

    clock = VirtualClock()
    gate = HostGate(GateLimit(rate, burst, max_in_flight=in_flight, retry_after=retry_after))

    async def host(request: httpx.Request) -> httpx.Response:
        verdict = gate.admit(clock.now())
        upstream.sent.append((SPRINGER, clock.now(), 200 if verdict.admitted else 429))
        await clock.sleep(0.3)
        if not verdict.admitted:
            return httpx.Response(429, headers=verdict.headers)
        gate.release()
        return httpx.Response(200)

    upstream = Upstream(clock)

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(host))

    n = 200
    async with Session(client_factory=factory, retry=POLICY, clock=clock) as s:
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(n)])
        state = s.limits[SPRINGER]
    refused = [t for _, t, status in upstream.sent if status == 429]
    assert statuses == [200] * n
    assert len(episodes(refused)) == 1, refused
    assert upstream.throttled(SPRINGER) <= 3
    assert state.rate <= rate, state


async def test_a_concurrency_limit_at_a_long_round_trip_keeps_the_pace() -> None:
    # The other side of the rule above: a host that refuses only a sixth request at once
    # (its rate is far above the pace) answers every request of the episode that found five
    # at the host or fewer: nothing refutes the reading, so in flight is capped at five and
    # the pace stays where slow start had it.
    from tests.fakes.limits import HostGate
    from tests.fakes.limits import HostLimit as GateLimit

    clock = VirtualClock()
    gate = HostGate(GateLimit(40.0, 40, max_in_flight=5, retry_after=True))

    async def host(request: httpx.Request) -> httpx.Response:
        verdict = gate.admit(clock.now())
        await clock.sleep(0.3)
        if not verdict.admitted:
            return httpx.Response(429, headers=verdict.headers)
        gate.release()
        return httpx.Response(200)

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(host))

    async with Session(client_factory=factory, retry=POLICY, clock=clock) as s:
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(200)])
        state = s.limits[SPRINGER]
    assert statuses == [200] * 200
    assert state.throttled <= 3
    assert state.in_flight_cap == 5
    assert state.rate >= 15.0, state


async def test_the_pace_own_throttle_within_the_429_budget_bisects_what_the_host_may_allow() -> (
    None
):
    # 15.5/s with a burst of 11 and a 16 s Retry-After: slow start reaches the politeness
    # ceiling (20/s) and the burst hides the overshoot for seconds, so the throttle is the
    # pace's own, not a raise's. The host proved 13/s if its burst is a second long and
    # achieved 17.5/s if it has none; the first 429 is within the budget, so the pace
    # goes to their geometric mean (about 15), not to the proof (13), and holds there.
    clock = VirtualClock()
    upstream = Upstream(clock, latency=0.05, limits={SPRINGER: Bucket(15.5, 11, "16")})
    async with upstream.session() as s:
        statuses = await run_all(clock, [s.get(url(SPRINGER, k)) for k in range(200)])
        state = s.limits[SPRINGER]
    assert statuses == [200] * 200
    assert upstream.throttled(SPRINGER) == 1
    assert 14.0 <= state.rate <= 15.5, state
