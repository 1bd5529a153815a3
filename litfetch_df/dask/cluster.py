"""Where the cluster's coordinator lives, and how a worker reaches it.

With a ``distributed`` client the coordinator is a Dask actor on one worker,
created once per client (:func:`cluster_limiter`). Without one (Dask's
threaded scheduler, or plain pandas code that wants one budget for several
threads) it runs on a background event loop of this process
(:func:`local_coordinator`).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
import weakref
from dataclasses import dataclass
from typing import Any

from .limiter import DEFAULT_LEASE, BackgroundLoop, ClusterLimiter, Link, LoopLink

__all__ = [
    "LOCAL",
    "Coordinator",
    "cluster_limiter",
    "current_coordinator",
    "link_for",
    "local_coordinator",
]

_ACTORS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_ACTORS_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Coordinator:
    """Which coordinator the partitions of one call ask: an actor handle, or this process's.

    ``actor`` is a Dask actor handle of a :class:`ClusterLimiter` (it pickles
    to a reference and binds to the worker it lands on); ``None`` means the
    process-wide coordinator of whichever process runs the partition.
    """

    actor: Any = None


LOCAL = Coordinator()
"""The process-wide coordinator: one budget for every thread of one process."""


def cluster_limiter(client: Any = None, *, lease: float = DEFAULT_LEASE) -> Any:
    """Return the actor handle of ``client``'s coordinator, creating it on first use.

    ``client`` defaults to the current ``distributed`` client. Its
    ``states()``, ``granted()`` and ``held()`` show each host's cluster-wide
    pacing (``cluster_limiter().states().result()``). ``lease`` is how long a
    granted place may go without news before it is taken back (used when the
    coordinator is made). A coordinator whose worker died is replaced by a
    fresh one (its pacing starts again from the published rates). Raises
    :class:`ValueError` when there is no client.
    """
    if client is None:
        from distributed import get_client

        client = get_client()
    with _ACTORS_LOCK:
        known = _ACTORS.get(client)
        if known is None or not _alive(client, known[0]):
            future = client.submit(
                ClusterLimiter,
                lease=lease,
                actor=True,
                key=f"litfetch-cluster-limiter-{uuid.uuid4().hex}",
            )
            known = (future, future.result())
            _ACTORS[client] = known
    return known[1]


def _alive(client: Any, future: Any) -> bool:
    """Whether the worker holding the coordinator of ``future`` is still in the cluster."""
    if future.status != "finished":
        return False
    try:
        where: dict[str, Any] = client.who_has([future])
    except Exception:  # the scheduler cannot tell: assume the worst, make another
        return False
    return bool(where.get(future.key))


def current_coordinator() -> Coordinator:
    """Return the coordinator for a call made now: the client's actor, else this process's."""
    try:
        from distributed import get_client
    except ImportError:
        return LOCAL
    try:
        client = get_client()
    except ValueError:
        return LOCAL
    return Coordinator(cluster_limiter(client))


_LOCAL_LOCK = threading.Lock()
_LOCAL_STATE: dict[str, Any] = {}


def local_coordinator() -> tuple[ClusterLimiter, BackgroundLoop]:
    """Return this process's coordinator and the loop it runs on (made on first use)."""
    with _LOCAL_LOCK:
        if "limiter" not in _LOCAL_STATE:
            loop = BackgroundLoop()
            _LOCAL_STATE["loop"] = loop
            _LOCAL_STATE["limiter"] = ClusterLimiter()
        return _LOCAL_STATE["limiter"], _LOCAL_STATE["loop"]


def link_for(coordinator: Coordinator) -> Link:
    """Return the link a session in this process uses to reach ``coordinator``."""
    if coordinator.actor is None:
        limiter, background = local_coordinator()
        return LoopLink(limiter, background.loop)
    from distributed import get_worker
    from distributed.actor import Actor as _Actor

    actor_class: Any = _Actor  # untyped

    handle: Any = coordinator.actor
    try:
        worker: Any = get_worker()
    except ValueError:  # on the client: the actor's calls go through the client's loop
        from distributed import get_client

        io_loop: Any = get_client().loop
    else:
        # The handle binds to a worker lazily, where it is first used; that is the
        # worker's event loop here, which cannot tell which worker it is, so bind it now
        # (a handle pickles as ``(Actor, (cls, address, key))``).
        _, (cls, address, key) = handle.__reduce__()
        handle = actor_class(cls, address, key, worker=worker)
        io_loop = worker.loop
    # Tornado's IOLoop wraps the asyncio loop the actor's calls must be made on.
    loop: asyncio.AbstractEventLoop = io_loop.asyncio_loop
    return LoopLink(handle, loop)
