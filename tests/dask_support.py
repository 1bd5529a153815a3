"""Helpers the Dask tests send to worker processes (importable there by reference)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import httpx

from litfetch_df import HostLimit, RetryPolicy, Session
from tests.fake_upstream import loopback_transport

FAST_RETRY = RetryPolicy(max_attempts=3, base_delay=0.001, max_delay=0.01)


def fake_client(port: int) -> httpx.AsyncClient:
    """An httpx client whose every request goes to the fake upstream on ``port``."""
    return httpx.AsyncClient(transport=loopback_transport(port), timeout=10.0)


def session_factory(port: int, host_limits: Mapping[str, HostLimit] | None = None) -> Any:
    """A picklable ``session_factory`` for ``ddf.lit``: sessions that talk to the fake."""
    return functools.partial(
        Session,
        client_factory=functools.partial(fake_client, port),
        retry=FAST_RETRY,
        host_limits=dict(host_limits or {}),
    )


def unpace_unknown_hosts() -> None:
    """What the tests' autouse fixture does, in a worker process: unknown hosts unpaced."""
    from litfetch_df.wire import limiter as _limiter

    _limiter.UNLISTED_RATE = float("inf")
    _limiter.UNLISTED_IN_FLIGHT = 0
