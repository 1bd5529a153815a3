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
import contextvars
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Final, TypeVar

from ...wire.http import get_logger

__all__ = ["CANCEL_GRACE", "Interrupted", "offer_partial", "run_call", "run_sync"]

T = TypeVar("T")

log = get_logger(__name__)

CANCEL_GRACE: Final = 5.0
"""Seconds to wait for cancelled work to unwind before giving up on the worker thread."""

_POLL: Final = 0.1  # how often the waiting thread wakes, so an interrupt lands promptly


class Interrupted(KeyboardInterrupt):
    """A synchronous ``.lit`` call stopped by an interrupt (Ctrl-C, "interrupt kernel").

    A :class:`KeyboardInterrupt`, so it stops a script or a cell as usual.
    ``partial`` is the frame the call had built so far, when it could build
    one (``None`` otherwise): every row of the input, in order, the finished
    rows filled in and the others marked ``abandoned: interrupted`` in their
    error column, so that passing it to the same call again works only those.
    """

    def __init__(self, message: str, partial: Any = None) -> None:
        super().__init__(message)
        self.partial = partial


# Where the running call leaves its partial result when it is cancelled; set per sync call.
_PARTIAL: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "litfetch_df_partial", default=None
)


def offer_partial(build: Callable[[], Any]) -> None:
    """Offer what a cancelled call had done, for :func:`run_sync` to hand to its caller.

    Called while the cancellation unwinds; ``build()`` runs only when a
    synchronous caller is waiting for it (not for the ``_async`` methods),
    and a failure to build is logged, never raised over the cancellation.
    """
    sink = _PARTIAL.get()
    if sink is None:
        return
    try:
        sink.append(build())
    except Exception as exc:  # the interrupt must still go through
        log.warning("could not keep the partial result: %s: %s", type(exc).__name__, exc)


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
        self._cancel_sent = False
        self.partial: list[Any] = []

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
        _PARTIAL.set(self.partial)  # this task's context: the call's own tasks inherit it
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
        if loop is not None and task is not None and not self._cancel_sent:
            # Once only: a second cancel would land in the unwinding itself and cut short
            # the closing of connections (``async with`` exits) that the first one started.
            self._cancel_sent = True
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
    ``grace`` seconds for it to unwind (closing its sessions), and raises
    :class:`Interrupted` (a ``KeyboardInterrupt``) carrying the partial result
    the coroutine offered (:func:`offer_partial`), if any.
    """
    runner = _Runner(factory, name)
    try:
        # Inside the try: the worker may run far enough to be interrupted before start()
        # has even returned here.
        runner.start()
        # Wait on an Event, not Thread.join: an interrupted join can mark a still
        # running thread as stopped (bpo-45274), after which it could not be awaited.
        while not runner.finished.wait(_POLL):
            pass
    except KeyboardInterrupt:
        if runner.ident is None:
            raise  # interrupted before the worker thread existed: nothing to stop
        log.info("interrupted; cancelling the running work")
        runner.cancel()
        runner.started_loop.wait(grace)
        runner.cancel()  # again, in case the loop came up after the first request
        if not runner.finished.wait(grace):
            log.warning("the worker thread did not stop within %.1fs", grace)
        runner.join(grace)
        if runner.finished.is_set() and runner.partial:
            partial = runner.partial[-1]
            raise Interrupted(_interrupted_text(partial), partial) from None
        raise
    runner.join()
    if runner.error is not None:
        raise runner.error
    result: T = runner.result
    return result


def _interrupted_text(partial: Any) -> str:
    rows = len(partial) if hasattr(partial, "__len__") else None
    size = f" ({rows} rows)" if rows is not None else ""
    return (
        f"interrupted; the partial result{size} is this exception's .partial (in a notebook: "
        "sys.last_value.partial): unfinished rows are marked 'abandoned: interrupted', and "
        "calling the same method on it works only those"
    )


def run_call(
    factory: Callable[[], Coroutine[Any, Any, T]], config: Mapping[str, Any], name: str
) -> T:
    """Run an accessor method's coroutine from sync code (``df.lit.<name>()``); return its result.

    Refuses a ``session`` already open in another event loop, with what to do instead.
    """
    session = config.get("session")
    if session is not None and session.is_open:
        raise RuntimeError(
            f"this Session is already open in another event loop; from async code call "
            f"`await df.lit.{name}_async(session=...)`, or pass a Session that is not yet "
            "entered (it is opened and closed around the call)"
        )
    return run_sync(factory, name=f"litfetch_df-{name}")
