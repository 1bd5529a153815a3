"""A virtual clock for pacing tests: time moves only when every task is waiting on it.

Pass it as ``Session(clock=clock)`` and drive the work with
``await clock.run(coro)``. Sleeps are futures in a heap; whenever the event loop
has nothing else ready, the clock jumps to the earliest sleeper and wakes it. Over
an ``httpx.MockTransport`` nothing waits on real I/O, so the run is the same on
an idle laptop and on a loaded CI machine, and asserting exact times is sound.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")

EPOCH = 1_800_000_000.0  # wall() at now() == 0: an arbitrary fixed date in 2027


class VirtualClock:
    """A :class:`litfetch_df.Clock` whose time advances only as sleepers are woken."""

    def __init__(self, start: float = 100.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self.slept: list[float] = []

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return EPOCH + self._now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), future))
        await future

    async def _idle(self) -> None:
        """Yield until no other callback is ready to run."""
        loop = asyncio.get_running_loop()
        for _ in range(10_000):
            await asyncio.sleep(0)
            ready = getattr(loop, "_ready", None)
            if ready is not None and len(ready) == 0:
                # one more round: a callback may have scheduled another on its way out
                await asyncio.sleep(0)
                if len(ready) == 0:
                    return
        raise RuntimeError("the event loop never went idle")

    async def run(self, work: Awaitable[T]) -> T:
        """Await ``work``, advancing virtual time whenever everything else is asleep."""
        task = asyncio.ensure_future(work)
        while not task.done():
            await self._idle()
            if task.done():
                break
            while self._sleepers and self._sleepers[0][2].done():
                heapq.heappop(self._sleepers)  # cancelled sleepers
            if not self._sleepers:
                # Nothing sleeps on the clock, yet the work is not done: it waits on
                # something real; give it a moment of real time rather than spin.
                await asyncio.sleep(0.001)
                continue
            when = self._sleepers[0][0]
            self._now = max(self._now, when)
            while self._sleepers and self._sleepers[0][0] <= self._now:
                _, _, future = heapq.heappop(self._sleepers)
                if not future.done():
                    future.set_result(None)
        return task.result()
