"""Per-host pacing over the real-socket fake: spacing under concurrency, host independence,
sharing across scopes, Retry-After pauses and the in-flight bound.

Only lower bounds on time are asserted (and orderings with a wide margin); request
start times are taken on the client side by an httpx request hook, which runs after
the session has waited its turn.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from litfetch_df import Rate, RetryPolicy, Session
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeResponse, FakeUpstream, json_response

EPMC = "www.ebi.ac.uk"
OPENALEX = "api.openalex.org"
CROSSREF = "api.crossref.org"
TOLERANCE = 0.002  # clock granularity between the slot and the hook


@dataclass(frozen=True)
class Sent:
    host: str
    path: str
    at: float


class SendLog:
    """Collects client-side send times via an httpx ``request`` event hook."""

    def __init__(self) -> None:
        self.sent: list[Sent] = []

    async def hook(self, request: httpx.Request) -> None:
        self.sent.append(Sent(request.url.host, request.url.path, time.monotonic()))

    def times(self, host: str, path: str | None = None) -> list[float]:
        return sorted(
            s.at for s in self.sent if s.host == host and (path is None or s.path == path)
        )

    def factory(self, fake: FakeUpstream) -> Callable[[], httpx.AsyncClient]:
        return fake.client_factory(event_hooks={"request": [self.hook]})


@pytest.fixture
def intervals(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[Rate, float]]:
    """Shrink chosen rates' intervals so pacing tests take fractions of a second.

    The pacing logic is unchanged; only the numbers a Rate reports are.
    """
    table: dict[Rate, float] = {}
    original = Rate.min_interval
    assert isinstance(original, property) and original.fget is not None
    fget = original.fget

    def patched(self: Rate) -> float:
        return table[self] if self in table else float(fget(self))

    monkeypatch.setattr(Rate, "min_interval", property(patched))
    yield table


def assert_spaced(times: list[float], interval: float) -> None:
    """The k-th start (0-based) is no earlier than k × interval after the first."""
    assert times, "nothing was sent"
    first = times[0]
    for k, t in enumerate(times):
        assert t - first >= k * interval - TOLERANCE, (k, t - first)


def epmc_url(n: int) -> str:
    return f"https://{EPMC}/europepmc/webservices/rest/PMC{7000000 + n}/fullTextXML"


def route_epmc(fake: FakeUpstream) -> None:
    fake.route(
        EPMC,
        r"/europepmc/webservices/rest/PMC\d+/fullTextXML",
        FakeResponse(200, b"<article/>", {"Content-Type": "application/xml"}),
    )


async def test_200_concurrent_callers_to_one_host_are_spaced(
    fake: FakeUpstream, intervals: dict[Rate, float]
) -> None:
    interval = intervals[Rate.EUROPE_PMC] = 0.005
    route_epmc(fake)
    # the fake throttles like a real service: more than ~1/interval per second gets 429s
    fake.rate_limit(EPMC, per_second=1 / interval + 10)
    log = SendLog()
    async with Session(client_factory=log.factory(fake), retry=RetryPolicy(1)) as s:
        responses = await asyncio.gather(
            *(s.get(epmc_url(n), rate=Rate.EUROPE_PMC) for n in range(200))
        )
    assert [r.status_code for r in responses] == [200] * 200
    times = log.times(EPMC)
    assert len(times) == 200
    assert_spaced(times, interval)
    assert fake.count(EPMC) == 200
    assert fake.throttled == []


async def test_real_rate_intervals_are_respected(fake: FakeUpstream) -> None:
    route_epmc(fake)
    log = SendLog()
    async with Session(client_factory=log.factory(fake), retry=FAST_RETRY) as s:
        await asyncio.gather(*(s.get(epmc_url(n), rate=Rate.UNPAYWALL) for n in range(6)))
    assert_spaced(log.times(EPMC), Rate.UNPAYWALL.min_interval)


async def test_two_hosts_do_not_wait_on_each_other(
    fake: FakeUpstream, intervals: dict[Rate, float]
) -> None:
    intervals[Rate.EUROPE_PMC] = 0.2
    intervals[Rate.OPENALEX] = 0.2
    route_epmc(fake)
    fake.route(OPENALEX, r"/works/.+", json_response({"id": "https://openalex.org/W1"}))
    log = SendLog()
    async with Session(client_factory=log.factory(fake), retry=FAST_RETRY) as s:
        first_host = [
            asyncio.create_task(s.get(epmc_url(n), rate=Rate.EUROPE_PMC)) for n in range(3)
        ]
        await asyncio.sleep(0)  # host A's queue is formed before host B asks
        second_host = [
            asyncio.create_task(
                s.get(f"https://{OPENALEX}/works/doi:10.1000/{n}", rate=Rate.OPENALEX)
            )
            for n in range(2)
        ]
        await asyncio.gather(*first_host, *second_host)
    a = log.times(EPMC)
    b = log.times(OPENALEX)
    assert_spaced(a, 0.2)
    assert_spaced(b, 0.2)
    # B is paced on its own clock: behind a shared queue B's first request would
    # have left after A's third (0.4 s); on its own it leaves at once.
    assert b[0] < a[1]
    assert b[1] < a[2]


async def test_pacing_is_shared_by_the_scopes_of_one_session(
    fake: FakeUpstream, intervals: dict[Rate, float]
) -> None:
    interval = intervals[Rate.EUROPE_PMC] = 0.03
    route_epmc(fake)
    log = SendLog()

    async def unit(s: Session, offset: int) -> None:
        async with s.scope() as sc:
            await asyncio.gather(
                *(sc.get(epmc_url(offset + n), rate=Rate.EUROPE_PMC) for n in range(4))
            )

    async with Session(client_factory=log.factory(fake), retry=FAST_RETRY) as s:
        await asyncio.gather(unit(s, 0), unit(s, 100), unit(s, 200))
    times = log.times(EPMC)
    assert len(times) == 12
    assert_spaced(times, interval)


async def test_post_is_paced(fake: FakeUpstream, intervals: dict[Rate, float]) -> None:
    interval = intervals[Rate.S2_KEYED] = 0.03
    host = "api.semanticscholar.org"
    fake.route(host, r"/graph/v1/paper/batch", json_response([]), method="POST")
    log = SendLog()
    url = f"https://{host}/graph/v1/paper/batch"
    async with Session(client_factory=log.factory(fake), retry=FAST_RETRY) as s:
        await asyncio.gather(
            *(s.post(url, json={"ids": [f"DOI:10.1000/{n}"]}, rate=Rate.S2_KEYED) for n in range(5))
        )
    assert_spaced(log.times(host), interval)


async def test_retries_are_paced_too(fake: FakeUpstream, intervals: dict[Rate, float]) -> None:
    interval = intervals[Rate.EUROPE_PMC] = 0.05
    route_epmc(fake)
    fake.fail_next(EPMC, "/europepmc/", FakeResponse(500, "x"), FakeResponse(502, "y"))
    log = SendLog()
    policy = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0)  # retry at once
    async with Session(client_factory=log.factory(fake), retry=policy) as s:
        assert (await s.get(epmc_url(1), rate=Rate.EUROPE_PMC)).status_code == 200
    assert_spaced(log.times(EPMC), interval)


async def test_retry_after_pauses_the_whole_host(
    fake: FakeUpstream, intervals: dict[Rate, float]
) -> None:
    intervals[Rate.EUROPE_PMC] = 0.02
    pause = 0.3
    route_epmc(fake)
    fake.route(OPENALEX, r"/works/.+", json_response({"id": "https://openalex.org/W1"}))
    fake.fail_next(
        EPMC, "/europepmc/", FakeResponse(429, {"error": "slow down"}, {"Retry-After": "1"})
    )
    log = SendLog()
    # Retry-After: 1 is capped at max_delay, so the pause lasts `pause` seconds
    policy = RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=pause)
    async with Session(client_factory=log.factory(fake), retry=policy) as s:
        queued = [asyncio.create_task(s.get(epmc_url(n), rate=Rate.EUROPE_PMC)) for n in range(5)]
        await asyncio.sleep(0.05)  # the 429 has arrived; the queue is mid-flight
        other_host = await s.get(f"https://{OPENALEX}/works/doi:10.1000/x", rate=Rate.OPENALEX)
        other_sent = time.monotonic()
        responses = await asyncio.gather(*queued)
    assert other_host.status_code == 200
    assert [r.status_code for r in responses] == [200] * 5
    first = log.times(EPMC)[0]
    later = log.times(EPMC)[1:]
    assert len(later) == 5  # four others and the retry
    # every request queued behind the 429 (including those whose slot had been
    # reserved before it arrived) waited out the pause
    assert all(t >= first + pause - TOLERANCE for t in later), [t - first for t in later]
    # the other host was not paused
    assert other_sent < first + pause
    assert fake.count(EPMC) == 6


async def test_retry_after_on_the_last_attempt_still_pauses_the_host(
    fake: FakeUpstream,
) -> None:
    pause = 0.2
    route_epmc(fake)
    fake.fail_next(EPMC, "/europepmc/", FakeResponse(503, "busy", {"Retry-After": "5"}))
    log = SendLog()
    policy = RetryPolicy(max_attempts=1, base_delay=0.0, max_delay=pause)
    async with Session(client_factory=log.factory(fake), retry=policy) as s:
        assert (await s.get(epmc_url(1))).status_code == 503
        assert (await s.get(epmc_url(2))).status_code == 200
    first, second = log.times(EPMC)
    assert second - first >= pause - TOLERANCE


async def test_max_in_flight_bounds_concurrency(
    fake: FakeUpstream, intervals: dict[Rate, float]
) -> None:
    intervals[Rate.CROSSREF] = 0.001
    fake.route(CROSSREF, r"/works/.+", json_response({"status": "ok", "message": {}}))
    fake.latency(0.1, CROSSREF)
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        await asyncio.gather(
            *(s.get(f"https://{CROSSREF}/works/10.1000/{n}", rate=Rate.CROSSREF) for n in range(7))
        )
    assert fake.count(CROSSREF) == 7
    assert fake.max_in_flight[CROSSREF] == Rate.CROSSREF.max_in_flight == 3


def test_a_session_can_be_reentered_on_a_new_event_loop(intervals: dict[Rate, float]) -> None:
    # The notebook bridge runs each call on a fresh loop with one Session; the
    # per-host in-flight gate must not stay bound to the first loop.
    intervals[Rate.CROSSREF] = 0.001
    in_flight = 0
    peak = 0

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return httpx.Response(200, json={"status": "ok"}, request=request)

    session = Session(
        client_factory=lambda: httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        retry=FAST_RETRY,
    )

    async def run() -> list[int]:
        async with session as s:
            responses = await asyncio.gather(
                *(
                    s.get(f"https://{CROSSREF}/works/10.1000/{n}", rate=Rate.CROSSREF)
                    for n in range(7)
                )
            )
        return [r.status_code for r in responses]

    assert asyncio.run(run()) == [200] * 7
    assert asyncio.run(run()) == [200] * 7
    assert peak == 3


async def test_a_serial_host_counts_its_interval_from_the_previous_answer(
    intervals: dict[Rate, float],
) -> None:
    """With one request in flight, a slow answer cannot squeeze the next arrival closer."""
    interval = intervals[Rate.S2_UNKEYED] = 0.05
    seen: list[tuple[float, float]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        arrived = time.monotonic()
        await asyncio.sleep(0.03)  # the server takes a while to answer
        seen.append((arrived, time.monotonic()))
        return httpx.Response(200, json={})

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(handler))

    async with Session(client_factory=factory) as s:
        await asyncio.gather(
            *(
                s.get(f"https://api.semanticscholar.org/p/{n}", rate=Rate.S2_UNKEYED)
                for n in range(5)
            )
        )
    seen.sort()
    for (_, previous_end), (arrived, _) in itertools.pairwise(seen):
        assert arrived >= previous_end + interval - TOLERANCE
