"""RetryPolicy and Session retries: every rule, over MockTransport and the real-socket fake."""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import litfetch_df
import litfetch_df.session as session_module
from litfetch_df import BulkHttp, Http, Rate, RetryPolicy, Session, UpstreamUnavailable
from litfetch_df._http import RETRYABLE_STATUSES, parse_retry_after
from tests.conftest import FAST_RETRY, data_json, mock_session
from tests.fake_upstream import FakeResponse, FakeUpstream, json_response

OPENALEX = "api.openalex.org"
WORK_URL = f"https://{OPENALEX}/works/doi:10.1016/j.xgen.2025.100814"
WORK = "openalex_work_doi_10.1016_j.xgen.2025.100814.json"


class SleepRecorder:
    """Stands in for the ``asyncio`` module inside litfetch_df.session.

    Records every requested sleep and yields without waiting, so retry tests are
    instant. Pacing still holds: the session re-checks the clock after waking.
    """

    def __init__(self) -> None:
        self.delays: list[float] = []
        self._real_sleep = asyncio.sleep

    def __getattr__(self, name: str) -> Any:
        return getattr(asyncio, name)

    async def sleep(self, delay: float, result: Any = None) -> Any:
        self.delays.append(delay)
        await self._real_sleep(0)
        return result


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> Iterator[SleepRecorder]:
    recorder = SleepRecorder()
    monkeypatch.setattr(session_module, "asyncio", recorder)
    yield recorder


def _json(status: int = 200, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"status": status}, headers=headers)


class Script:
    """A MockTransport handler that plays back outcomes, then answers 200."""

    def __init__(self, *outcomes: int | httpx.Response | type[httpx.TransportError]) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[httpx.Request] = []
        self.times: list[float] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(request)
        self.times.append(time.monotonic())
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
    assert parse_retry_after("-3") == 0.0
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


async def test_retry_waits_are_jittered_backoff(sleeps: SleepRecorder) -> None:
    policy = RetryPolicy(max_attempts=5, base_delay=0.5, max_delay=1.5)
    script = Script(*([httpx.ConnectError] * 4))
    async with mock_session(script, retry=policy) as s:
        assert (await s.get(WORK_URL)).status_code == 200
    assert len(sleeps.delays) == 4
    for n, delay in enumerate(sleeps.delays):
        assert 0.0 <= delay <= min(1.5, 0.5 * 2**n)


async def test_retry_after_seconds_overrides_backoff(sleeps: SleepRecorder) -> None:
    # a backoff would be up to 50 s; Retry-After: 0 says "now"
    policy = RetryPolicy(max_attempts=2, base_delay=50.0, max_delay=60.0)
    script = Script(_json(429, **{"Retry-After": "0"}))
    async with mock_session(script, retry=policy) as s:
        assert (await s.get(WORK_URL)).status_code == 200
    assert sleeps.delays[0] == 0.0
    assert len(script.calls) == 2


async def test_retry_after_http_date_overrides_backoff(sleeps: SleepRecorder) -> None:
    policy = RetryPolicy(max_attempts=2, base_delay=50.0, max_delay=60.0)
    past = email.utils.formatdate(time.time() - 10, usegmt=True)
    script = Script(_json(503, **{"Retry-After": past}))
    async with mock_session(script, retry=policy) as s:
        assert (await s.get(WORK_URL)).status_code == 200
    assert sleeps.delays[0] == 0.0


@pytest.mark.parametrize("value", ["3600", "http-date"])
async def test_retry_after_is_capped_at_max_delay(value: str, sleeps: SleepRecorder) -> None:
    if value == "http-date":
        value = email.utils.formatdate(time.time() + 3600, usegmt=True)
    policy = RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=0.05)
    script = Script(_json(429, **{"Retry-After": value}))
    async with mock_session(script, retry=policy) as s:
        assert (await s.get(WORK_URL)).status_code == 200
    assert sleeps.delays[0] == pytest.approx(0.05)
    # and the retry really left no earlier than the capped wait
    assert script.times[1] - script.times[0] >= 0.05 - 0.002


async def test_retry_after_on_a_500_is_not_honoured(sleeps: SleepRecorder) -> None:
    # the API text limits Retry-After to 429/503; a 500's header falls back to backoff
    policy = RetryPolicy(max_attempts=2, base_delay=0.0, max_delay=60.0)
    script = Script(_json(500, **{"Retry-After": "30"}))
    async with mock_session(script, retry=policy) as s:
        assert (await s.get(WORK_URL)).status_code == 200
    assert sleeps.delays[0] == 0.0


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
    assert Rate.OPENALEX.min_interval == pytest.approx(0.1)
    for rate in Rate:
        assert rate.min_interval >= 0
        assert rate.max_in_flight >= 0
