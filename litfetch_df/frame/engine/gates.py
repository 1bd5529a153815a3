"""Holding a unit's requests back until a bulk lookup that may answer them is in.

The bulk lookups of a call (:mod:`~litfetch_df.frame.engine.bulk`) run while the
units already work. A per-article request one of them may prime waits for
it, and its unit gives its concurrency slot to another unit meanwhile, so
no request is spent on an answer the lookup brings anyway, and the units
need not wait for the slowest lookup to begin.

A GET (and a read of a held answer) waits only until its own answer is
primed, not for the whole lookup: a lookup primes chunk by chunk, and on a
long table the last chunk of a slowly paced service (Crossref's list pool,
3 a second) comes minutes after the first, while the units its early chunks
answered could go on. A request the lookup primes nothing for (its chunk was
not answered, or the lookup never covers it) still waits for the whole
lookup, as a POST always does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx

from ...session import Session, request_key
from ...store.answers import CachedResponse
from ...store.quota import QuotaLedger
from ...wire.http import Rate
from . import bulk

__all__ = ["Gates", "Slot", "UnitHttp"]


class Gates:
    """The bulk lookups still running, and which per-article requests wait for them."""

    def __init__(self) -> None:
        self._lookups: list[tuple[bulk.Service, asyncio.Future[Any]]] = []
        self._signals: dict[str, asyncio.Event] = {}

    def signal(self, key: str) -> asyncio.Event:
        """The event set once the request keyed ``key`` is primed (see :meth:`primed`)."""
        event = self._signals.get(key)
        if event is None:
            event = self._signals[key] = asyncio.Event()
        return event

    def primed(self, key: str) -> None:
        """A lookup primed ``key``: wake the units waiting to read it."""
        event = self._signals.pop(key, None)
        if event is not None:
            event.set()

    def add(self, service: bulk.Service, task: asyncio.Future[Any]) -> None:
        """Hold requests ``service`` may prime until ``task`` (its lookup) is done."""
        self._lookups.append((service, task))

    def blocking(self, url: str) -> set[asyncio.Future[Any]]:
        """Return the unfinished lookups a request to ``url`` should wait for."""
        return {t for s, t in self._lookups if not t.done() and bulk.may_prime(s, url)}

    async def close(self) -> None:
        """Stop the lookups still running (the pass ended early) and wait for them."""
        tasks = [t for _, t in self._lookups]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


class Slot:
    """One unit's share of the pass's concurrency, given up while it waits for a bulk lookup.

    ``concurrency`` bounds the units that are working; a unit waiting for a
    lookup is not working, so it lets another unit start meanwhile and takes a
    slot back once the lookup is in.
    """

    def __init__(self, slots: asyncio.Semaphore) -> None:
        self._slots = slots
        self._held = True  # the pass acquired it before starting the unit
        self._waiting = 0
        self._taking = asyncio.Lock()

    async def wait_for(
        self, lookups: set[asyncio.Future[Any]], primed: asyncio.Event | None = None
    ) -> None:
        """Wait until ``lookups`` are done (or ``primed`` is set), holding no slot meanwhile."""
        self._waiting += 1
        self.release()
        woken = asyncio.ensure_future(primed.wait()) if primed is not None else None
        try:
            if woken is None:
                await asyncio.wait(lookups)
            else:
                await asyncio.wait({*lookups, woken}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if woken is not None:
                woken.cancel()
            self._waiting -= 1
        async with self._taking:
            # The unit's other requests may still be waiting: the last one takes the slot.
            if not self._held and self._waiting == 0:
                await self._slots.acquire()
                self._held = True

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        if self._held:
            self._held = False
            self._slots.release()


class UnitHttp:
    """A unit's scope as the ``Http`` its steps ask through, holding gated requests back.

    Requests, pacing, caching and failures are the scope's; only a request a
    running bulk lookup may answer waits for that lookup first.
    """

    def __init__(self, scope: Session, gates: Gates, slot: Slot) -> None:
        self._scope = scope
        self._gates = gates
        self._slot = slot

    @property
    def contact(self) -> str | None:
        """The session's contact email."""
        return self._scope.contact

    @property
    def quota(self) -> QuotaLedger | None:
        """The session's quota ledger: a step reads a spent budget here before asking."""
        return self._scope.quota

    async def _gate(self, url: str) -> None:
        lookups = self._gates.blocking(url)
        if lookups:
            await self._slot.wait_for(lookups)

    async def _gate_get(
        self,
        url: str,
        params: Mapping[str, str | int] | None,
        headers: Mapping[str, str] | None,
        follow_redirects: bool = False,
    ) -> None:
        """Hold a GET until its own answer is primed or no lookup that may prime it runs."""
        key: str | None = None
        while lookups := self._gates.blocking(url):
            # Hashed only when a lookup gates the request (most requests pass ungated).
            key = key or request_key("GET", url, params, headers, follow_redirects, None)
            signal = self._gates.signal(key)
            if self._scope.is_primed(key):
                return
            await self._slot.wait_for(lookups, signal)

    async def get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        """The scope's GET, once it is primed or no running bulk lookup may answer it."""
        await self._gate_get(url, params, headers, follow_redirects)
        return await self._scope.get(
            url, params=params, headers=headers, rate=rate, follow_redirects=follow_redirects
        )

    async def held(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> CachedResponse | None:
        """The scope's held answer for a GET (nothing sent), once its bulk lookup is in.

        Waiting makes what is read independent of timing: a lookup still
        running may yet prime the answer. Once it has primed this one (a
        lookup primes a request once), the answer is read at once: a lookup
        that primes as its answers come in (OpenAlex's singletons, when the
        list budget is spent) does not hold every unit until its last answer.
        """
        await self._gate_get(url, params, headers)
        return await self._scope.held(url, params=params, headers=headers)

    async def post(
        self,
        url: str,
        *,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
    ) -> httpx.Response:
        """The scope's POST, once no running bulk lookup may answer it."""
        await self._gate(url)
        return await self._scope.post(url, json=json, params=params, headers=headers, rate=rate)
