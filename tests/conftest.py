"""Shared fixtures: the local fake upstream, mock-transport sessions, recorded data."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from litfetch_df import RetryPolicy, Session
from litfetch_df.wire.netguard import ALLOW_PRIVATE_NETWORK_ENV
from tests.fake_upstream import FakeUpstream

DATA = Path(__file__).parent / "data"

# Retries in tests wait almost nothing; the rules are the same.
FAST_RETRY = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01)


def data_path(*parts: str) -> Path:
    """Return the path of a recorded fixture under tests/data/ (see PROVENANCE.md)."""
    return DATA.joinpath(*parts)


def data_bytes(*parts: str) -> bytes:
    return data_path(*parts).read_bytes()


def data_json(*parts: str) -> Any:
    return json.loads(data_path(*parts).read_text(encoding="utf-8"))


_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class NetworkRefused(RuntimeError):
    """A test tried to reach a host that is not this machine."""


# A job started in the background (``cmd &``, nohup, some CI runners) inherits SIGINT as
# ignored, and then ``_thread.interrupt_main()`` does nothing: the Ctrl-C tests would wait
# out their hang instead of being interrupted. They test the library, not the launcher.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _no_network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Refuse any real-socket request to a non-loopback host, in every test.

    The fake upstream is reached through ``httpx.AsyncHTTPTransport`` on
    127.0.0.1, so it passes; a request that escaped the fake or a mock transport
    fails loudly instead of touching the network. The refusal is also recorded
    and fails the test at teardown: code under test that catches every error
    (a unit's outcome, a logged warning) cannot turn it into a passing row.
    """
    original_async = httpx.AsyncHTTPTransport.handle_async_request
    original_sync = httpx.HTTPTransport.handle_request
    refused: list[str] = []

    def refuse(host: str) -> NetworkRefused:
        refused.append(host)
        return NetworkRefused(f"test tried to reach {host}")

    async def guarded_async(
        self: httpx.AsyncHTTPTransport, request: httpx.Request
    ) -> httpx.Response:
        if request.url.host not in _LOOPBACK:
            raise refuse(request.url.host)
        return await original_async(self, request)

    def guarded_sync(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        if request.url.host not in _LOOPBACK:
            raise refuse(request.url.host)
        return original_sync(self, request)

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", guarded_async)
    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", guarded_sync)
    yield
    if request.node.get_closest_marker("refuses_network") is None:
        assert not refused, f"a test tried to reach the network: {sorted(set(refused))}"


# Also for the whole process from the start: a Dask LocalCluster fixture starts its worker
# processes once, before any test's own fixtures run, and they keep the environment they
# were started with. The code's default stays "refused" (see _local_servers_allowed).
os.environ[ALLOW_PRIVATE_NETWORK_ENV] = "1"


@pytest.fixture(autouse=True)
def _local_servers_allowed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opt every test in to connecting to 127.0.0.1, where the fake upstream listens.

    This is the one place the test suite makes the opt-in a user with an
    intranet mirror makes (ADR 0019): the environment variable, so sessions
    made inside the library (the ``.lit`` calls, Dask partitions, the CLI,
    subprocesses) get it too. The code's default stays "refused": tests marked
    ``guarded_network`` run without the opt-in and check that default.
    """
    if request.node.get_closest_marker("guarded_network") is not None:
        monkeypatch.delenv(ALLOW_PRIVATE_NETWORK_ENV, raising=False)
    else:
        monkeypatch.setenv(ALLOW_PRIVATE_NETWORK_ENV, "1")


@pytest.fixture(autouse=True)
def _unknown_hosts_unpaced(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Start hosts without a published limit unpaced, except in tests marked ``real_limits``.

    The fakes here impose no limit of their own unless a test sets one, and a
    conservative start that learns upwards on the wall clock would only slow
    every test that is about something else. The limiter's own tests (marked
    ``real_limits``) run with the real starting points, on a virtual clock.
    """
    if request.node.get_closest_marker("real_limits") is not None:
        return
    from litfetch_df.wire import limiter as _limiter

    monkeypatch.setattr(_limiter, "UNLISTED_RATE", float("inf"))
    monkeypatch.setattr(_limiter, "UNLISTED_IN_FLIGHT", 0)


@pytest.fixture
def fake() -> Iterator[FakeUpstream]:
    """A fresh fake upstream server on a random loopback port."""
    server = FakeUpstream().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def fake_session(fake: FakeUpstream) -> AsyncIterator[Session]:
    """An open Session whose every request goes to the fake upstream."""
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as s:
        yield s


def mock_session(
    handler: Callable[[httpx.Request], httpx.Response],
    *,
    contact: str | None = None,
    retry: RetryPolicy = FAST_RETRY,
    **kwargs: Any,
) -> Session:
    """A (not yet entered) Session over an ``httpx.MockTransport`` calling ``handler``."""

    def factory() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(handler))

    return Session(client_factory=factory, retry=retry, contact=contact, **kwargs)
