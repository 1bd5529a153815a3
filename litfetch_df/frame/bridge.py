"""Run a coroutine to completion from synchronous code, wherever that code runs.

A notebook cell already runs inside an event loop, so ``asyncio.run`` fails
there, and patching the user's loop (``nest_asyncio``) changes the semantics
of everything else in the kernel. Instead each synchronous call runs its
coroutine on a fresh event loop in a worker thread of its own and waits for
it. The waiting thread stays responsive to ``KeyboardInterrupt`` (Ctrl-C, a
Jupyter kernel interrupt): the work is cancelled, its ``async with`` blocks
close their connections, the worker thread is joined, and the interrupt is
re-raised. See docs/adr/0004-sync-bridge.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

from .._http import get_logger

__all__ = ["CANCEL_GRACE", "run_sync"]

T = TypeVar("T")

log = get_logger(__name__)

CANCEL_GRACE: Final = 5.0
"""Seconds to wait for cancelled work to unwind before giving up on the worker thread."""

_POLL: Final = 0.1  # how often the waiting thread wakes, so an interrupt lands promptly


class _Runner(threading.Thread):
    def __init__(self, factory: Callable[[], Coroutine[Any, Any, Any]], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._factory = factory
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self.started_loop = threading.Event()
        self.finished = threading.Event()
        self.cancel_requested = False

    def run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # delivered to the waiting thread
            if self.error is None:
                self.error = exc
        finally:
            self.finished.set()

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.started_loop.set()
        if self.cancel_requested:
            return
        try:
            self.result = await self._factory()
        except BaseException as exc:
            self.error = exc
            if isinstance(exc, asyncio.CancelledError):
                return  # asyncio.run must not see our own cancellation as a failure
            raise

    def cancel(self) -> None:
        self.cancel_requested = True
        loop, task = self.loop, self.task
        if loop is not None and task is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(task.cancel)


def run_sync(
    factory: Callable[[], Coroutine[Any, Any, T]],
    *,
    name: str = "litfetch_df-bridge",
    grace: float = CANCEL_GRACE,
) -> T:
    """Run the coroutine made by ``factory()`` on a background event loop; return its result.

    Works whether or not the calling thread has a running event loop (a
    Jupyter cell, a plain script, another thread). ``factory`` is called on
    the worker thread, so loop-bound objects are created on the loop that uses
    them. Exceptions from the coroutine are re-raised here. A
    ``KeyboardInterrupt`` while waiting cancels the coroutine, waits up to
    ``grace`` seconds for it to unwind (closing its sessions), and re-raises.
    """
    runner = _Runner(factory, name)
    runner.start()
    try:
        # Wait on an Event, not Thread.join: an interrupted join can mark a still
        # running thread as stopped (bpo-45274), after which it could not be awaited.
        while not runner.finished.wait(_POLL):
            pass
    except KeyboardInterrupt:
        log.info("interrupted; cancelling the running work")
        runner.cancel()
        runner.started_loop.wait(grace)
        runner.cancel()  # again, in case the loop came up after the first request
        if not runner.finished.wait(grace):
            log.warning("the worker thread did not stop within %.1fs", grace)
        runner.join(grace)
        raise
    runner.join()
    if runner.error is not None:
        raise runner.error
    result: T = runner.result
    return result
