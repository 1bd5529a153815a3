"""A unit's GET held for a bulk lookup goes once its own answer is primed, not at the lookup's end.

The lookup here is a task the test drives by hand (events, no clock): it primes one
Crossref work, then waits. A GET of that work must be answered from the primed answer
while the lookup still runs; a GET of a work the lookup has not primed must wait for
the lookup to end, and then go to the network; a POST always waits for the lookup.
"""

from __future__ import annotations

import asyncio

import httpx

from litfetch_df import Session
from litfetch_df.frame.engine import bulk
from litfetch_df.frame.engine.gates import Gates, Slot, UnitHttp
from litfetch_df.frame.engine.primed_keys import PrimedKeys
from litfetch_df.ids import ArticleIds
from litfetch_df.store.answers import CachedResponse

WORKS = "https://api.crossref.org/works/"
PRIMED = WORKS + "10.1000/primed"
LATER = WORKS + "10.1000/not-primed"


def _session(sent: list[str]) -> Session:
    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(str(request.url))
        return httpx.Response(200, json={"status": "ok", "message": {"DOI": "x"}})

    return Session(client_factory=lambda: httpx.AsyncClient(transport=httpx.MockTransport(handler)))


async def _let_run() -> None:
    """Let every ready task and callback run (no clock: a held request stays held)."""
    for _ in range(20):
        await asyncio.sleep(0)


async def _setup(
    session: Session, release: asyncio.Event
) -> tuple[UnitHttp, asyncio.Task[list[str]], asyncio.Semaphore]:
    gates = Gates()
    keys = PrimedKeys(session)
    keys.on_add = gates.primed
    primed = asyncio.Event()

    async def lookup() -> list[str]:
        await primed.wait()
        entry = CachedResponse(status_code=200, headers=(), content=b'{"m": 1}', url=PRIMED)
        keys.add(ArticleIds(doi="10.1000/primed"), session.prime("GET", PRIMED, response=entry))
        await release.wait()
        return list(keys)

    task = asyncio.create_task(lookup())
    gates.add(bulk.Service.CROSSREF, task)
    slots = asyncio.Semaphore(1)
    await slots.acquire()
    unit = UnitHttp(session, gates, Slot(slots))
    primed.set()
    return unit, task, slots


async def test_a_get_whose_answer_is_primed_goes_before_the_lookup_ends() -> None:
    sent: list[str] = []
    release = asyncio.Event()
    async with _session(sent) as session:
        unit, task, _ = await _setup(session, release)
        getting = asyncio.create_task(unit.get(PRIMED))
        await _let_run()
        assert getting.done() and not task.done()  # answered while the lookup still runs
        assert getting.result().content == b'{"m": 1}'
        assert sent == []
        release.set()
        await task


async def test_a_get_the_lookup_has_not_primed_waits_for_its_end() -> None:
    sent: list[str] = []
    release = asyncio.Event()
    async with _session(sent) as session:
        unit, task, _ = await _setup(session, release)
        waiting = asyncio.create_task(unit.get(LATER))
        await _let_run()  # the GET must still be held
        assert not waiting.done() and sent == []
        release.set()
        await task
        response = await waiting
        assert response.status_code == 200 and sent == [LATER]


async def test_a_post_waits_for_the_whole_lookup() -> None:
    sent: list[str] = []
    release = asyncio.Event()
    async with _session(sent) as session:
        unit, task, _ = await _setup(session, release)
        posting = asyncio.create_task(unit.post(PRIMED, json={"ids": ["x"]}))
        await _let_run()
        assert not posting.done() and sent == []
        release.set()
        await task
        await posting
        assert sent == [PRIMED]


async def test_a_waiting_get_gives_its_slot_away_and_takes_it_back() -> None:
    sent: list[str] = []
    release = asyncio.Event()
    async with _session(sent) as session:
        unit, task, slots = await _setup(session, release)
        waiting = asyncio.create_task(unit.get(LATER))
        await _let_run()
        assert not slots.locked()  # another unit may work meanwhile
        release.set()
        await task
        await waiting
        assert slots.locked()  # the unit holds its slot again
