"""A partition lost mid-way (its worker killed) and run again asks only what was lost.

When a worker dies, Dask runs its partitions again elsewhere (or the user runs
the call again). What the dead partition's session had already been answered
is in the persistent cache its sessions share, so the second go asks the
services only for what the first never got. The kill is made deterministic
here: the transport of the first run "dies" (raises an exception no handler
takes, as a killed process runs nothing more) at its Nth request, on Dask's
synchronous scheduler.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")

import litfetch_df.dask  # noqa: E402, F401  (registers ddf.lit)
from litfetch_df import Session  # noqa: E402
from tests.dask_support import FAST_RETRY  # noqa: E402
from tests.fake_upstream import FakeUpstream, loopback_transport  # noqa: E402
from tests.fakes.world import World  # noqa: E402

CONTACT = "dask-test@example.org"
STEPS = ["resolve", "bodies", "licences"]
BUDGET = 14  # requests the first run gets before its worker "dies"


class WorkerKilled(BaseException):
    """Stands for the worker process dying: no ``except Exception`` takes it."""


class _Dying(httpx.AsyncBaseTransport):
    """Sends to the fake until the shared budget is spent, then kills the worker."""

    def __init__(self, port: int, budget: list[int] | None, answered: list[str]) -> None:
        self._inner = loopback_transport(port)
        self._budget = budget
        self._answered = answered

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._budget is not None:
            if self._budget[0] <= 0:
                raise WorkerKilled
            self._budget[0] -= 1
        response = await self._inner.handle_async_request(request)
        # What the client got an answer to (a request the kill cut short is not).
        self._answered.append(f"{request.method} {request.url} {request.content!r}")
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _client(port: int, budget: list[int] | None, answered: list[str]) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=_Dying(port, budget, answered), timeout=10.0)


def _factory(
    port: int,
    cache: Path | None,
    budget: list[int] | None = None,
    answered: list[str] | None = None,
) -> Any:
    return functools.partial(
        Session,
        client_factory=functools.partial(
            _client, port, budget, answered if answered is not None else []
        ),
        retry=FAST_RETRY,
        cache=cache,
    )


def _killed(error: BaseException) -> bool:
    """Whether ``error`` is the kill (a task group may wrap it)."""
    if isinstance(error, BaseExceptionGroup):
        return any(_killed(e) for e in error.exceptions)
    return isinstance(error, WorkerKilled)


def test_a_rerun_after_a_killed_worker_asks_only_what_was_lost(
    fake: FakeUpstream, tmp_path: Path
) -> None:
    world = World.from_corpus(12, seed=11)
    world.install(fake)
    table = pd.DataFrame({"pmid": [a.pmid for a in world.articles]}, dtype=object)
    ddf = dd.from_pandas(table, npartitions=3, sort=False)
    cache = tmp_path / "cache.sqlite"
    with dask.config.set(scheduler="sync"):
        budget = [BUDGET]
        answered_first: list[str] = []
        answered_second: list[str] = []
        dying = _factory(fake.port, cache, budget=budget, answered=answered_first)
        with pytest.raises(BaseException) as died:
            ddf.lit.run(STEPS, session_factory=dying, contact=CONTACT, concurrency=1).compute()
        assert _killed(died.value)
        first = fake.requests()
        fake.reset_log()
        again_factory = _factory(fake.port, cache, answered=answered_second)
        got = ddf.lit.run(STEPS, session_factory=again_factory, contact=CONTACT).compute()
        second = fake.requests()
    # The worker died part-way, its whole budget spent. (The fake may have seen fewer: a
    # request in flight when the kill cancels its task can be dropped before it is read.)
    assert budget == [0] and 0 < len(answered_first) <= len(first) <= BUDGET
    assert second  # what was lost was asked for
    # and nothing the dead worker had been answered was asked again
    assert not set(answered_first) & set(answered_second)
    assert len(answered_second) == len(second)
    fresh = table.lit.run(STEPS, session=_factory(fake.port, None)(contact=CONTACT))
    pd.testing.assert_frame_equal(got, fresh)
