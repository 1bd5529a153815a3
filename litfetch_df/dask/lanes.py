"""How many calls to the coordinator may wait at once in one process, so its reports get through.

A Dask actor's calls travel over the calling process's connection pool
(``distributed``'s, at most :data:`POOL` connections), and a call holds its
connection until the actor's coroutine returns. A coordinator's ``acquire``
returns only once a host's place is free, and a place is freed by the
``finish`` or ``release`` report of a request already sent, which needs a
connection of that same pool. So were every connection held by a waiting
``acquire``, the reports that would grant them could never be sent: a circular
wait that stalls the cluster for good (the lease of each granted place, ten
minutes, was the only way out). It took one table: a 10,000-row partition
whose Unpaywall-ahead lookup asked about ~700 DOIs at once, while that host's
eight places waited for reports stuck behind them (ADR 0022).

So the calls a :class:`~litfetch_df.dask.limiter.LoopLink` awaits wait first in
a lane of their host here, with no connection held: at most :data:`PER_HOST`
of one host's calls, and :data:`TOTAL` of all, are out at once per process
(and loop: the one the coordinator's calls are made on). Reports never wait in
a lane, so the other half of the pool is always theirs (and Dask's own
messages'). A lane per host keeps one slow host's queue from holding back
another host's grants. A lane bounds the calls waiting for a grant, not the
requests in flight (a granted call leaves its lane at once); a few dozen
waiting keep any host's pace busy, and more only queue at the coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import AsyncIterator, Hashable
from typing import Final

__all__ = ["PER_HOST", "POOL", "TOTAL", "Lanes", "lanes_for"]

POOL: Final = 512
"""Connections a ``distributed`` worker or client opens at most (its ``connection_limit``)."""

TOTAL: Final = POOL // 2
"""Awaited calls out at once per process, every host together: half the pool."""

PER_HOST: Final = 32
"""Awaited calls of one host out at once per process: a grant's round trip is milliseconds,
so a lane this wide keeps even OpenAlex's 100 a second fed."""


class Lanes:
    """The lanes of the calls made on one event loop: ``per_host`` each, ``total`` in all.

    Used on that loop only (its semaphores bind to it on first use).
    """

    def __init__(self, per_host: int = PER_HOST, total: int = TOTAL) -> None:
        if per_host < 1 or total < 1:
            raise ValueError(f"lanes must be at least 1 wide, got {per_host!r} and {total!r}")
        self._per_host = per_host
        self._total = asyncio.Semaphore(total)
        self._hosts: dict[Hashable, asyncio.Semaphore] = {}

    @contextlib.asynccontextmanager
    async def out(self, host: Hashable) -> AsyncIterator[None]:
        """Hold a place in ``host``'s lane (and the total) while the call is out."""
        lane = self._hosts.get(host)
        if lane is None:
            lane = self._hosts[host] = asyncio.Semaphore(self._per_host)
        async with lane, self._total:
            yield


_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Lanes] = weakref.WeakKeyDictionary()
_BY_LOOP_LOCK = threading.Lock()  # the sessions of several threads make links at once


def lanes_for(loop: asyncio.AbstractEventLoop) -> Lanes:
    """The lanes every link whose calls are made on ``loop`` shares (made on first use).

    Every partition a worker runs, each on a thread and a loop of its own,
    reaches the coordinator from the worker's loop and through its one pool.
    """
    with _BY_LOOP_LOCK:
        lanes = _BY_LOOP.get(loop)
        if lanes is None:
            lanes = _BY_LOOP[loop] = Lanes()
        return lanes
