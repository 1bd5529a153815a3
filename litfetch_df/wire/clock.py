"""The clock pacing and retries read: monotonic time, wall time and sleep.

Every wait the session makes goes through one :class:`Clock`, so a test can
hand in a virtual one and check pacing, back-off and pauses without timing
anything on the wall clock.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """Where pacing reads the time and how it waits."""

    def now(self) -> float:
        """Return monotonic seconds (only differences are meaningful)."""
        ...

    def wall(self) -> float:
        """Return seconds since the epoch (to read an HTTP-date ``Retry-After``)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (``0`` or less: just yield to the event loop)."""
        ...


class SystemClock:
    """The real clock: :func:`time.monotonic`, :func:`time.time`, :func:`asyncio.sleep`."""

    def now(self) -> float:
        """Return :func:`time.monotonic`."""
        return time.monotonic()

    def wall(self) -> float:
        """Return :func:`time.time`."""
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """Await :func:`asyncio.sleep` (looked up at call time, so tests may patch it)."""
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "SystemClock()"
