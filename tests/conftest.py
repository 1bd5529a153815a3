"""Shared fixtures: the local fake upstream, mock-transport sessions, recorded data."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from litfetch_df import RetryPolicy, Session
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
