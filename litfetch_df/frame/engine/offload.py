"""Blocking work of the steps (body parses, disk writes) on a small pool of threads.

``asyncio.to_thread`` uses the loop's default executor: up to ``cpu + 4``
threads, and glibc gives every thread that allocates its own malloc arena,
which keeps the memory an lxml parse or a write buffer used long after it is
freed. A pass does a few such jobs at a time anyway (``concurrency`` units,
each parse a few milliseconds, and lxml lets other threads run meanwhile),
so a pool of :data:`WORKERS` threads shared by every call does them as fast
and keeps at most that many arenas for the life of the process.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import threading
from collections.abc import Callable
from typing import Final, TypeVar

__all__ = ["WORKERS", "offload"]

T = TypeVar("T")

WORKERS: Final = 2
"""Threads in the shared pool."""

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=WORKERS, thread_name_prefix="litfetch-df-offload"
            )
        return _pool


async def offload(fn: Callable[..., T], /, *args: object) -> T:
    """Run ``fn(*args)`` on the shared pool and return its result (or raise its exception).

    Like :func:`asyncio.to_thread`, without carrying the context variables.
    """
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), functools.partial(fn, *args))
