"""Broken rate-limit headers read as absent: a row never raises, a host is never parked by one.

A host that answers ``Retry-After: inf`` (or ``nan``, ``-5``, ``1e309``, a wait of
10^12 s, garbage) or a rate-limit header of the same kind must not break a
session: the value is ignored with a log line and the session goes on as if the
header were missing. Every test drives a :class:`Session` over an
``httpx.MockTransport`` on a :class:`VirtualClock`.
"""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest

from litfetch_df import Rate, RetryPolicy, Session
from litfetch_df.wire.http import parse_retry_after
from tests.virtual_clock import VirtualClock

HOST = "api.openalex.org"
START = VirtualClock().now()

BROKEN_WAITS = [
    "inf",
    "Infinity",
    "-inf",
    "nan",
    "1e309",
    "-5",
    "1000000000000",
    "garbage",
    "Fri, 31 Dec 9999 23:59:59 GMT",
]


class ThrottleOnce:
    """Answers the first request with ``status`` and ``headers``, every later one with 200."""

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers
        self.sent = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        if self.sent == 1:
            return httpx.Response(self.status, headers=self.headers)
        return httpx.Response(200, json={"ok": True}, headers=self.headers)


def session(clock: VirtualClock, handler: ThrottleOnce) -> Session:
    return Session(
        client_factory=lambda: httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        retry=RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0),
        clock=clock,
    )


async def fetch(clock: VirtualClock, handler: ThrottleOnce, n: int) -> tuple[list[int], bool]:
    async with session(clock, handler) as s:

        async def together() -> list[httpx.Response]:
            calls = [s.get(f"https://{HOST}/w/{i}", rate=Rate.OPENALEX) for i in range(n)]
            return await asyncio.gather(*calls)

        answers = await clock.run(together())
        parked = s.limits[HOST].parked
    return [a.status_code for a in answers], parked


@pytest.mark.parametrize("value", BROKEN_WAITS)
@pytest.mark.parametrize("status", [429, 503])
async def test_a_broken_retry_after_is_ignored_and_every_row_completes(
    status: int, value: str, caplog: pytest.LogCaptureFixture
) -> None:
    clock = VirtualClock()
    handler = ThrottleOnce(status, {"Retry-After": value})
    with caplog.at_level(logging.WARNING):
        statuses, parked = await fetch(clock, handler, 5)
    assert statuses == [200] * 5
    assert not parked
    # The header read as absent: no wait near what it asked for.
    assert clock.now() - START < 60
    assert "Retry-After" in caplog.text


@pytest.mark.parametrize(
    "headers",
    [
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1e12", "X-RateLimit-Limit": "10"},
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "inf", "X-RateLimit-Limit": "10"},
        {"X-RateLimit-Remaining": "nan", "X-RateLimit-Reset": "5", "X-RateLimit-Limit": "10"},
        {"X-RateLimit-Remaining": "-5", "X-RateLimit-Reset": "5", "X-RateLimit-Limit": "10"},
        {"RateLimit-Remaining": "0", "RateLimit-Reset": "1e309", "RateLimit-Limit": "10"},
        {"X-Rate-Limit-Limit": "1e309", "X-Rate-Limit-Interval": "1s"},
        {"X-Rate-Limit-Limit": "50", "X-Rate-Limit-Interval": "9" * 400 + "s"},
        {"X-Rate-Limit-Limit": "garbage", "X-Rate-Limit-Interval": "soon"},
    ],
    ids=lambda h: ";".join(f"{k}={v[:8]}" for k, v in h.items()),
)
async def test_broken_rate_limit_headers_neither_raise_nor_park_nor_slow_the_host(
    headers: dict[str, str],
) -> None:
    clock = VirtualClock()
    handler = ThrottleOnce(200, headers)
    statuses, parked = await fetch(clock, handler, 20)
    assert statuses == [200] * 20
    assert not parked
    # Twenty requests at OpenAlex's published pace take well under a minute; a header
    # read as a 10^12 s window or a near-zero announced rate would take far longer.
    assert clock.now() - START < 30


@pytest.mark.parametrize("value", BROKEN_WAITS)
def test_parse_retry_after_reads_a_broken_value_as_absent(value: str) -> None:
    assert parse_retry_after(value, now=1.7e9) is None


def test_parse_retry_after_keeps_sane_values() -> None:
    assert parse_retry_after("3", now=0.0) == 3.0
    assert parse_retry_after("0", now=0.0) == 0.0
    # A date already past means "now"; one a minute ahead means a minute.
    assert parse_retry_after("Thu, 01 Jan 1970 00:00:00 GMT", now=100.0) == 0.0
    assert parse_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", now=40.0) == 60.0
