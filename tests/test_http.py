"""RetryPolicy and Session retries: every rule, over MockTransport and the real-socket fake."""

from __future__ import annotations

import email.utils
import itertools
import random
import time
from typing import Any

import httpx
import pytest

import litfetch_df
from litfetch_df import (
    BulkHttp,
    HostParked,
    Http,
    Rate,
    RetryPolicy,
    Session,
    UpstreamUnavailable,
)
from litfetch_df.wire.http import RETRYABLE_STATUSES, parse_retry_after
from tests.conftest import FAST_RETRY, data_json, mock_session
from tests.fake_upstream import FakeResponse, FakeUpstream, json_response
from tests.virtual_clock import VirtualClock

OPENALEX = "api.openalex.org"
WORK_URL = f"https://{OPENALEX}/works/doi:10.1016/j.xgen.2025.100814"
WORK = "openalex_work_doi_10.1016_j.xgen.2025.100814.json"


def _json(status: int = 200, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"status": status}, headers=headers)


class Script:
    """A MockTransport handler that plays back outcomes, then answers 200."""

    def __init__(self, *outcomes: int | httpx.Response | type[httpx.TransportError]) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        outcome = self.outcomes.pop(0) if self.outcomes else 200
        if isinstance(outcome, int):
            return _json(outcome)
        if isinstance(outcome, httpx.Response):
            return outcome
        raise outcome("scripted failure", request=request)


# -- RetryPolicy as a value ------------------------------------------------------------------


def test_defaults_match_the_spec() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.base_delay, policy.max_delay) == (3, 0.5, 8.0)
    assert frozenset({429, 500, 502, 503, 504}) == RETRYABLE_STATUSES
    assert litfetch_df.RetryPolicy is RetryPolicy


@pytest.mark.parametrize("attempts", [0, -1])
def test_max_attempts_below_one_is_rejected(attempts: int) -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=attempts)


@pytest.mark.parametrize(
    "kwargs", [{"base_delay": -0.1}, {"max_delay": -1.0}, {"base_delay": float("nan")}]
)
def test_bad_delays_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RetryPolicy(**kwargs)


@pytest.mark.parametrize("attempt", [0, 1, 2, 3, 4, 5, 10, 2000])
def test_backoff_is_full_jitter_within_bounds(attempt: int) -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=8.0)
    upper = min(8.0, 0.5 * 2.0 ** min(attempt, 64))
    rng = random.Random(attempt)
    samples = [policy.backoff(attempt, rng=rng) for _ in range(2000)]
    assert all(0.0 <= d <= upper for d in samples)
    # full jitter spreads over the whole range, not a fixed delay
    assert min(samples) < 0.1 * upper
    assert max(samples) > 0.9 * upper


def test_retry_after_seconds_and_http_date() -> None:
    now = 1_700_000_000.0
    in_30s = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after("5") == 5.0
    assert parse_retry_after(" 7 ") == 7.0
    assert parse_retry_after("0") == 0.0
    # A negative delay is broken, not "now" (issue 26): it reads as absent.
    assert parse_retry_after("-3") is None
    assert parse_retry_after(in_30s, now=now) == pytest.approx(30.0)
    assert parse_retry_after(email.utils.formatdate(now - 60, usegmt=True), now=now) == 0.0
    for junk in (None, "", "soon", "nan", "Mon, 99 Foo 2024 00:00:00 GMT"):
        assert parse_retry_after(junk) is None


def test_retry_after_date_without_zone_reads_as_gmt(monkeypatch: pytest.MonkeyPatch) -> None:
    # A local zone 14 hours from GMT (POSIX form, no tz database needed): a date read
    # as local time would be hours off.
    monkeypatch.setenv("TZ", "LOC-14")
    time.tzset()
    try:
        now = 1_700_000_000.0
        naive = email.utils.formatdate(now + 30, usegmt=True).replace(" GMT", " -0000")
        assert parse_retry_after(naive, now=now) == pytest.approx(30.0)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_delay_for_honours_retry_after_capped() -> None:
    policy = RetryPolicy(base_delay=100.0, max_delay=8.0)
    now = 1_700_000_000.0
    assert policy.delay_for(0, _json(429, **{"Retry-After": "3"})) == 3.0
    assert policy.delay_for(0, _json(503, **{"Retry-After": "3"})) == 3.0
    assert policy.delay_for(0, _json(429, **{"Retry-After": "120"})) == 8.0
    date = email.utils.formatdate(now + 5, usegmt=True)
    assert policy.delay_for(0, _json(503, **{"Retry-After": date}), now=now) == pytest.approx(5.0)
    date = email.utils.formatdate(now + 3600, usegmt=True)
    assert policy.delay_for(0, _json(429, **{"Retry-After": date}), now=now) == 8.0
    # without (or with an unusable) Retry-After the jittered backoff applies
    small = RetryPolicy(base_delay=0.5, max_delay=8.0)
    assert 0.0 <= small.delay_for(0, _json(429)) <= 0.5
    assert 0.0 <= small.delay_for(1, _json(429, **{"Retry-After": "later"})) <= 1.0
    assert 0.0 <= small.delay_for(2, None) <= 2.0


# -- Session retry rules over MockTransport ---------------------------------------------------


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
async def test_retryable_status_is_retried(status: int) -> None:
    script = Script(status, status)
    async with mock_session(script) as s:
        response = await s.get(WORK_URL)
    assert response.status_code == 200
    assert len(script.calls) == 3
    assert s.failures == ()


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422, 501])
async def test_other_status_is_returned_at_once(status: int) -> None:
    script = Script(status)
    async with mock_session(script) as s:
        response = await s.get(WORK_URL)
    assert response.status_code == status
    assert len(script.calls) == 1
    assert s.failures == ()


async def test_exhausted_retryable_status_is_the_final_response() -> None:
    script = Script(503, 503, 503, 503)
    async with mock_session(script, retry=RetryPolicy(3, 0.001, 0.01)) as s:
        response = await s.get(WORK_URL)
        failures = s.failures
    assert response.status_code == 503
    assert len(script.calls) == 3
    assert len(failures) == 1 and "503" in failures[0] and OPENALEX in failures[0]


async def test_max_attempts_one_disables_retrying() -> None:
    script = Script(500)
    async with mock_session(script, retry=RetryPolicy(max_attempts=1)) as s:
        assert (await s.get(WORK_URL)).status_code == 500
    assert len(script.calls) == 1


@pytest.mark.parametrize(
    "error", [httpx.ConnectError, httpx.ReadTimeout, httpx.RemoteProtocolError]
)
async def test_transport_error_is_retried_then_succeeds(error: type[httpx.TransportError]) -> None:
    script = Script(error, error)
    async with mock_session(script) as s:
        response = await s.get(WORK_URL)
    assert response.status_code == 200
    assert len(script.calls) == 3


async def test_transport_error_on_every_attempt_raises_upstream_unavailable() -> None:
    script = Script(httpx.ConnectError, httpx.ConnectError, httpx.ConnectError)
    async with mock_session(script) as s:
        with pytest.raises(UpstreamUnavailable) as info:
            await s.get(WORK_URL, params={"select": "id"})
        failures = s.failures
    assert len(script.calls) == 3
    assert isinstance(info.value, httpx.TransportError)
    message = str(info.value)
    assert OPENALEX in message and "ConnectError" in message and "3 attempts" in message
    assert len(failures) == 1 and OPENALEX in failures[0]


S3_URL = "https://pmc-oa-opendata.s3.amazonaws.com/PMC1.1/PMC1.1.xml"


class ClockedScript(Script):
    """A Script that stamps each call with the virtual clock's time."""

    def __init__(self, clock: VirtualClock, *outcomes: Any) -> None:
        super().__init__(*outcomes)
        self.clock = clock
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.times.append(self.clock.now())
        return super().__call__(request)


def clocked(script: ClockedScript, retry: RetryPolicy) -> Session:
    return mock_session(script, retry=retry, clock=script.clock)


async def test_retry_waits_are_jittered_backoff() -> None:
    # The PMC bucket is unpaced, so every wait between attempts is the back-off alone.
    clock = VirtualClock()
    policy = RetryPolicy(max_attempts=5, base_delay=0.5, max_delay=1.5)
    script = ClockedScript(clock, *([httpx.ConnectError] * 4))
    async with clocked(script, policy) as s:
        assert (await clock.run(s.get(S3_URL))).status_code == 200
    gaps = [b - a for a, b in itertools.pairwise(script.times)]
    assert len(gaps) == 4
    for n, gap in enumerate(gaps):
        assert 0.0 <= gap <= min(1.5, 0.5 * 2**n)
    assert len(set(gaps)) > 1  # jittered, not fixed


@pytest.mark.parametrize("status", [429, 503])
async def test_a_retry_after_is_waited_out_whole_not_capped(status: int) -> None:
    # max_delay caps back-off, never a Retry-After the host asked for (within max_wait).
    clock = VirtualClock()
    policy = RetryPolicy(max_attempts=2, base_delay=0.5, max_delay=1.0, max_wait=60.0)
    script = ClockedScript(clock, _json(status, **{"Retry-After": "30"}))
    async with clocked(script, policy) as s:
        assert (await clock.run(s.get(WORK_URL))).status_code == 200
    assert script.times[1] - script.times[0] == pytest.approx(30.0)


async def test_retry_after_http_date_is_waited_out() -> None:
    clock = VirtualClock()
    policy = RetryPolicy(max_attempts=2, base_delay=0.5, max_delay=1.0)
    when = email.utils.formatdate(clock.wall() + 20, usegmt=True)
    script = ClockedScript(clock, _json(503, **{"Retry-After": when}))
    async with clocked(script, policy) as s:
        assert (await clock.run(s.get(WORK_URL))).status_code == 200
    assert script.times[1] - script.times[0] == pytest.approx(20.0, abs=1.0)


async def test_a_short_retry_after_still_waits_the_own_back_off() -> None:
    # "Retry-After: 0" does not start a burst: the host waits the later of the
    # header and its own back-off (base_delay, or two intervals at the cut rate).
    clock = VirtualClock()
    policy = RetryPolicy(max_attempts=2, base_delay=0.5, max_delay=8.0)
    script = ClockedScript(clock, _json(429, **{"Retry-After": "0"}))
    async with clocked(script, policy) as s:
        assert (await clock.run(s.get(WORK_URL))).status_code == 200
    assert script.times[1] - script.times[0] == pytest.approx(0.5)


@pytest.mark.parametrize("value", ["3600", "http-date"])
async def test_a_retry_after_past_the_budget_parks_the_host(value: str) -> None:
    clock = VirtualClock()
    if value == "http-date":
        value = email.utils.formatdate(clock.wall() + 3600, usegmt=True)
    policy = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.05, max_wait=60.0)
    script = ClockedScript(clock, _json(429, **{"Retry-After": value}))
    async with clocked(script, policy) as s:
        started = clock.now()
        with pytest.raises(HostParked, match=rf"{OPENALEX} asked to wait 36\d\d s"):
            await clock.run(s.get(WORK_URL))
        # the next request to that host fails at once, without a call
        with pytest.raises(HostParked):
            await clock.run(s.get(WORK_URL + "x"))
        assert len(script.calls) == 1
        assert clock.now() - started < 1.0  # nobody sat out the hour
        assert OPENALEX in s.failures[0] and "asked to wait" in s.failures[0]
        assert s.limits[OPENALEX].parked is not None
        # once the hour is over, the host is asked again
        await clock.run(clock.sleep(3601))
        assert (await clock.run(s.get(WORK_URL))).status_code == 200
    assert len(script.calls) == 2


async def test_retry_after_on_a_500_is_not_honoured() -> None:
    # the API text limits Retry-After to 429/503; a 500's header falls back to backoff
    clock = VirtualClock()
    policy = RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=60.0)
    script = ClockedScript(clock, _json(500, **{"Retry-After": "30"}))
    async with clocked(script, policy) as s:
        assert (await clock.run(s.get(WORK_URL, rate=Rate.OPENALEX))).status_code == 200
    # only OpenAlex's own pacing (10/s) separates the attempts
    assert script.times[1] - script.times[0] == pytest.approx(Rate.OPENALEX.min_interval)


# -- over real sockets ------------------------------------------------------------------------


async def test_dropped_connections_are_retried_over_sockets(fake: FakeUpstream) -> None:
    fake.route(OPENALEX, r"/works/.+", json_response(data_json("json", WORK)))
    fake.fail_next(OPENALEX, "/works/", "drop", "drop")
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        response = await s.get(WORK_URL)
    assert response.status_code == 200
    assert response.json()["doi"] == data_json("json", WORK)["doi"]
    assert fake.count(OPENALEX, "/works/") == 3


async def test_dropped_on_every_attempt_over_sockets(fake: FakeUpstream) -> None:
    fake.fail_next(OPENALEX, "/works/", "drop", "drop", "drop")
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        with pytest.raises(UpstreamUnavailable):
            await s.get(WORK_URL)
        assert len(s.failures) == 1
    assert fake.count(OPENALEX) == 3


async def test_status_sequence_over_sockets(fake: FakeUpstream) -> None:
    fake.route(OPENALEX, r"/works/.+", json_response(data_json("json", WORK)))
    fake.fail_next(
        OPENALEX,
        "/works/",
        FakeResponse(502, "bad gateway"),
        FakeResponse(429, {"error": "slow down"}, {"Retry-After": "0"}),
    )
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        response = await s.get(WORK_URL)
    assert response.status_code == 200
    assert fake.count(OPENALEX) == 3


async def test_not_found_is_not_retried_over_sockets(fake: FakeUpstream) -> None:
    fake.route(OPENALEX, r"/works/.+", json_response({"error": "not found"}, status=404))
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        assert (await s.get(WORK_URL)).status_code == 404
    assert fake.count(OPENALEX) == 1


# -- protocols --------------------------------------------------------------------------------


def test_session_satisfies_the_http_protocols() -> None:
    s = Session()
    assert isinstance(s, Http)
    assert isinstance(s, BulkHttp)


def test_rates_cover_every_politeness_domain() -> None:
    names = {r.name for r in Rate}
    assert {
        "DEFAULT",
        "NCBI_UNKEYED",
        "NCBI_KEYED",
        "S2_UNKEYED",
        "S2_KEYED",
        "OPENALEX",
        "EUROPE_PMC",
        "CROSSREF",
    } <= names
    # equal numbers must not collapse members into aliases of one another
    assert len({Rate.NCBI_KEYED, Rate.S2_KEYED, Rate.OPENALEX}) == 3
    assert Rate.OPENALEX.name == "OPENALEX"
    assert Rate.DEFAULT.min_interval == 0.0
    assert Rate.NCBI_UNKEYED.min_interval == pytest.approx(0.34)
    assert Rate.NCBI_KEYED.min_interval == pytest.approx(0.1)
    assert Rate.S2_UNKEYED.min_interval == pytest.approx(1.0)
    assert Rate.S2_KEYED.min_interval == pytest.approx(0.1)
    assert Rate.OPENALEX.min_interval == pytest.approx(0.01)  # 100/s, published for 2026
    for rate in Rate:
        assert rate.min_interval >= 0
        assert rate.max_in_flight >= 0
