"""The benchmark's drawn worlds and the fake's enforcement of them, on a clock the test holds."""

from __future__ import annotations

import pytest

from benchmarks.model import lower_bound
from benchmarks.worlds import (
    IN_FLIGHT_RANGE,
    PUBLISHED,
    RATE_RANGE,
    UNPUBLISHED,
    RetryAfter,
    draw_world,
    draw_worlds,
)
from tests.fake_upstream import FakeUpstream
from tests.fakes.limits import HostGate, HostLimit
from tests.fakes.world import (
    HOST_ELSEVIER,
    HOST_NCBI,
    HOST_S3,
    HOST_SPRINGER,
    HOST_UNPAYWALL,
    Article,
    BodyHome,
    Publisher,
    World,
)

SPRINGER_OA = Article(
    doi="10.1007/s00000-026-00001-x",
    body=BodyHome.SPRINGER,
    publisher=Publisher.SPRINGER,
    oa_status="gold",
)


def test_the_same_seed_draws_the_same_world_and_another_seed_another() -> None:
    assert draw_world(7) == draw_world(7)
    assert draw_world(7).describe() == draw_world(7).describe()
    assert draw_world(7) != draw_world(8)
    assert [w.seed for w in draw_worlds(3, 4)] == [3, 4, 5, 6]
    assert draw_worlds(3, 2)[1] == draw_world(4)


def test_every_unpublished_host_gets_limits_inside_the_drawn_ranges() -> None:
    habits: set[RetryAfter] = set()
    for world in draw_worlds(1, 40):
        assert [d.host for d in world.drawn] == list(UNPUBLISHED)
        for d in world.drawn:
            assert RATE_RANGE[0] <= d.rate <= RATE_RANGE[1]
            assert IN_FLIGHT_RANGE[0] <= d.in_flight <= IN_FLIGHT_RANGE[1]
            assert 1 <= d.burst <= max(1, int(d.rate))
            assert (d.long_wait is not None) == (d.retry_after is RetryAfter.LONG)
            if d.long_wait is not None:
                assert 5 <= d.long_wait <= 20
            habits.add(d.retry_after)
        assert world.host(HOST_ELSEVIER) is not None
        assert world.host(HOST_ELSEVIER).announces  # type: ignore[union-attr]
        limits = world.limits()
        assert HOST_S3 not in limits  # the bucket stays unthrottled
        for host, published in PUBLISHED.items():
            assert limits[host] == published
        assert world.describe().count("\n") == len(UNPUBLISHED)  # a header, one line per host
    assert habits == set(RetryAfter)


def test_the_bound_uses_the_drawn_rate_burst_and_in_flight_cap() -> None:
    world = draw_world(2)
    springer = world.host(HOST_SPRINGER)
    assert springer is not None
    bound, terms = lower_bound(
        {HOST_SPRINGER: 100, HOST_NCBI: 1},
        latency=0.05,
        concurrency=32,
        rates=world.rates(),
        caps=world.caps(),
        bursts=world.bursts(),
    )
    rate_term = (100 - springer.burst) / springer.rate + 0.05
    latency_term = 100 * 0.05 / springer.in_flight
    assert terms[0].host == HOST_SPRINGER
    assert bound == pytest.approx(max(rate_term, latency_term))


def test_a_burst_over_the_rate_is_refused_with_the_accurate_retry_after() -> None:
    gate = HostGate(HostLimit(per_second=0.25, burst=2, tolerance=0.0, retry_after=True))
    first, second, third = (gate.admit(0.0) for _ in range(3))
    assert first.admitted and second.admitted and not third.admitted
    # the bucket admits again at t = 4 s (two slots of 4 s used, one may be early by 4 s)
    assert third.headers["Retry-After"] == "4"
    assert gate.admit(2.5).headers["Retry-After"] == "2"  # 1.5 s left, rounded up
    assert gate.admit(4.0).admitted


def test_retry_after_is_absent_or_a_fixed_long_wait_when_the_host_says_so() -> None:
    silent = HostGate(HostLimit(per_second=5.0, tolerance=0.0))
    long = HostGate(HostLimit(per_second=5.0, tolerance=0.0, fixed_retry_after=17))
    for gate in (silent, long):
        assert gate.admit(0.0).admitted
    refused = silent.admit(0.0)
    assert not refused.admitted and "Retry-After" not in refused.headers
    assert refused.retry_after is None
    refused = long.admit(0.1)
    assert refused.headers["Retry-After"] == "17" and refused.retry_after == 17.0


def test_a_request_over_the_in_flight_cap_is_refused_until_one_is_answered() -> None:
    gate = HostGate(HostLimit(per_second=1000.0, burst=1000, max_in_flight=2, retry_after=True))
    assert gate.admit(0.0).admitted and gate.admit(0.0).admitted
    over = gate.admit(0.0)
    assert not over.admitted and over.over_in_flight and over.headers["Retry-After"] == "1"
    gate.release()
    assert gate.admit(0.0).admitted


def test_an_announcing_host_counts_down_its_remaining_requests() -> None:
    gate = HostGate(HostLimit(per_second=2.0, burst=3, tolerance=0.0, announce=True))
    seen = [gate.admit(0.0).headers for _ in range(4)]
    assert [h["X-RateLimit-Remaining"] for h in seen] == ["2", "1", "0", "0"]
    assert {h["X-RateLimit-Limit"] for h in seen} == {"2"}
    assert seen[2]["X-RateLimit-Reset"] == "2"  # three slots of 0.5 s: full again in 1.5 s
    assert gate.admit(0.5).admitted  # one slot has drained


async def test_the_fake_enforces_a_drawn_host_over_real_sockets_on_a_frozen_clock(
    fake: FakeUpstream,
) -> None:
    limit = HostLimit(per_second=4.0, burst=2, tolerance=0.0, fixed_retry_after=12, announce=True)
    world = World([SPRINGER_OA], clock=lambda: 100.0)  # every request arrives at t = 100 s
    world.install(fake, limits={HOST_SPRINGER: limit})
    url = f"https://{HOST_SPRINGER}/openaccess/jats"
    params = {"q": f"doi:{SPRINGER_OA.doi}", "api_key": "k"}
    async with fake.client_factory()() as c:
        answers = [await c.get(url, params=params) for _ in range(4)]
        free = await c.get(f"https://{HOST_S3}/PMC1.1/PMC1.1.xml")
    assert [r.status_code for r in answers] == [200, 200, 429, 429]
    assert answers[0].headers["x-ratelimit-remaining"] == "1"
    assert [r.headers.get("retry-after") for r in answers] == [None, None, "12", "12"]
    assert world.served[HOST_SPRINGER] == 4 and world.throttled[HOST_SPRINGER] == 2
    assert world.early[HOST_SPRINGER] == 1  # the fourth came inside the first 12 s
    assert world.over_in_flight[HOST_SPRINGER] == 0
    assert free.status_code == 404 and world.throttled[HOST_S3] == 0


def test_the_worlds_table_names_the_binding_host_and_a_timed_out_run() -> None:
    from benchmarks.report import ScenarioReport
    from benchmarks.worldtable import format_worlds

    world = draw_world(1)
    bound, terms = lower_bound(
        {HOST_SPRINGER: 50}, latency=0.05, concurrency=32, rates=world.rates()
    )
    common = {
        "n": 10,
        "latency": 0.05,
        "concurrency": 32,
        "credentials": True,
        "bound": bound,
        "ideal": {HOST_SPRINGER: 50},
        "terms": terms,
        "peak_rss_mb": None,
        "world": world.to_json(),
    }
    finished = ScenarioReport(
        name="pipeline",
        wall=2 * bound,
        requests={HOST_SPRINGER: 80},
        throttled={HOST_SPRINGER: 20},
        outcomes={"abandoned": {"body_error: abandoned: HTTP # from x": 3}},
        politeness={"routes": {"springer_jats": 70}, "servable": {"springer_jats": 7}},
        **common,  # type: ignore[arg-type]
    )
    cut = ScenarioReport(
        name="chained",
        wall=None,
        requests={},
        throttled={},
        error="timed out after 60 s",
        **common,  # type: ignore[arg-type]
    )
    table = format_worlds([finished, cut])
    assert "| 1 | run() | " in table and "(Springer) | 2.0 |" in table
    assert "Springer 20 (25%)" in table and "| 70/7 |" in table
    assert "3: 3 body_error: abandoned" in table
    assert "> (timed out after 60 s)" in table and "- (no frame)" in table
    assert table.count("\n| 1 | EPMC") == 1  # the drawn limits, once per world


async def test_only_a_request_sent_after_the_429_arrived_counts_as_early(
    fake: FakeUpstream,
) -> None:
    arrivals = iter([0.0, 0.0, 0.05, 5.0, 20.0])  # the clock reading at each request
    limit = HostLimit(per_second=0.1, tolerance=0.0, fixed_retry_after=12)
    world = World([SPRINGER_OA], clock=lambda: next(arrivals))
    world.install(fake, latency={HOST_SPRINGER: 0.1}, limits={HOST_SPRINGER: limit})
    url = f"https://{HOST_SPRINGER}/openaccess/jats"
    params = {"q": f"doi:{SPRINGER_OA.doi}", "api_key": "k"}
    async with fake.client_factory()() as c:
        statuses = [(await c.get(url, params=params)).status_code for _ in range(5)]
    # the 429 at t = 0 reaches the client at t = 0.1: the request at 0.05 was already on its
    # way, the one at 5 s ignored the 12 s asked for, the one at 20 s waited
    assert statuses == [200, 429, 429, 429, 200]
    assert world.early[HOST_SPRINGER] == 1


@pytest.mark.real_limits
def test_the_limiter_sweep_runs_a_drawn_host_on_the_virtual_clock() -> None:
    # The sweep behind ADR 0007's bench: the fake's own gate, a window of requests, the
    # session's real limiter, virtual seconds.
    from benchmarks.limiter_sweep import sweep_host

    drawn = draw_world(15).host(HOST_UNPAYWALL)
    assert drawn is not None and drawn.burst == 1 and drawn.long_wait == 15
    out = sweep_host(drawn, n=300, jitter=(0.0, 0.0))
    assert out.failed == 0
    assert out.throttled >= 1  # slow start finds the undisclosed limit by passing it once
    assert 1.0 <= out.ratio < 3.0, out
    assert out.throttled <= 3  # each episode one 429: a burst-free host, Retry-After 15 s
    assert drawn.rate <= out.ceiling <= 2 * drawn.rate  # the slowest throttled pace


@pytest.mark.real_limits
def test_the_sweeps_discovery_floor_charges_a_hold_only_where_a_refusal_is_unavoidable() -> None:
    # The floor beside the bound (issue 25): one refusal's hold on a host whose limit a
    # limiter must pass to learn, or whose burst arrival jitter overruns; none elsewhere.
    from dataclasses import replace

    from benchmarks.limiter_sweep import discovery_hold
    from benchmarks.worlds import RetryAfter

    drawn = draw_world(15).host(HOST_UNPAYWALL)  # 8.2/s, burst 1, 7 in flight, 15 s holds
    assert drawn is not None and not drawn.announces
    calm = (0.0, 0.0)
    assert discovery_hold(drawn, 0.05, calm) == 15.0  # the rate sits under 20/s, untold
    told = replace(drawn, announces=True, burst=4)
    assert discovery_hold(told, 0.05, calm) == 0.0  # announced, and 7 in flight suffice
    assert discovery_hold(told, 0.05, (0.05, 0.08)) == 0.0  # a burst of 4 absorbs 80 ms
    assert discovery_hold(replace(told, burst=1), 0.05, (0.05, 0.08)) == 15.0  # b1 jostled
    assert discovery_hold(replace(told, in_flight=1), 0.3, calm) == 15.0  # 1 in flight: 3.3/s
    accurate = replace(drawn, retry_after=RetryAfter.ACCURATE, long_wait=None)
    assert discovery_hold(accurate, 0.05, calm) == 1.0  # Retry-After rounds up to a second
    silent = replace(drawn, retry_after=RetryAfter.ABSENT, long_wait=None)
    assert discovery_hold(silent, 0.05, calm) == 0.0  # nothing named, nothing obeyed
