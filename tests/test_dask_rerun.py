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
from tests.fake_upstream import FakeRequest, FakeUpstream, loopback_transport  # noqa: E402
from tests.fakes.world import World  # noqa: E402

CONTACT = "dask-test@example.org"
STEPS = ["resolve", "bodies", "licences"]
BUDGET = 14  # requests the first run gets before its worker "dies"


class WorkerKilled(BaseException):
    """Stands for the worker process dying: no ``except Exception`` takes it."""


class _Dying(httpx.AsyncBaseTransport):
    """Sends to the fake until the shared budget is spent, then kills the worker."""

    def __init__(self, port: int, budget: list[int]) -> None:
        self._inner = loopback_transport(port)
        self._budget = budget

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._budget[0] <= 0:
            raise WorkerKilled
        self._budget[0] -= 1
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _client(port: int, budget: list[int] | None) -> httpx.AsyncClient:
    transport = _Dying(port, budget) if budget is not None else loopback_transport(port)
    return httpx.AsyncClient(transport=transport, timeout=10.0)


def _factory(port: int, cache: Path | None, budget: list[int] | None = None) -> Any:
    return functools.partial(
        Session,
        client_factory=functools.partial(_client, port, budget),
        retry=FAST_RETRY,
        cache=cache,
    )


def _killed(error: BaseException) -> bool:
    """Whether ``error`` is the kill (a task group may wrap it)."""
    if isinstance(error, BaseExceptionGroup):
        return any(_killed(e) for e in error.exceptions)
    return isinstance(error, WorkerKilled)


def _asked(requests: list[FakeRequest]) -> set[tuple[str, str, str, str, bytes]]:
    return {(r.method, r.host, r.path, repr(sorted(r.query.items())), r.body) for r in requests}


def test_a_rerun_after_a_killed_worker_asks_only_what_was_lost(
    fake: FakeUpstream, tmp_path: Path
) -> None:
    world = World.from_corpus(12, seed=11)
    world.install(fake)
    table = pd.DataFrame({"pmid": [a.pmid for a in world.articles]}, dtype=object)
    ddf = dd.from_pandas(table, npartitions=3, sort=False)
    cache = tmp_path / "cache.sqlite"
    with dask.config.set(scheduler="sync"):
        dying = _factory(fake.port, cache, budget=[BUDGET])
        with pytest.raises(BaseException) as died:
            ddf.lit.run(STEPS, session_factory=dying, contact=CONTACT, concurrency=1).compute()
        assert _killed(died.value)
        first = fake.requests()
        fake.reset_log()
        again = ddf.lit.run(STEPS, session_factory=_factory(fake.port, cache), contact=CONTACT)
        got = again.compute()
        second = fake.requests()
    assert len(first) == BUDGET  # the worker died part-way
    assert second  # what was lost was asked for
    assert not _asked(first) & _asked(second)  # and nothing the dead worker had been answered
    fresh = table.lit.run(STEPS, session=_factory(fake.port, None)(contact=CONTACT))
    pd.testing.assert_frame_equal(got, fresh)
