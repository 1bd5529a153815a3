"""What a long pass holds stays bounded (issue 14: memory flat at N=20,000).

Guards against the big holders found in the memory benchmark coming back:
every unit of a table started at once while a slow bulk lookup runs (each
parked with its scope and cells), the primed answers of every row kept
until the pass ends, and a bulk lookup's decoded answers kept until its
last chunk is in. Counted, never timed: the lookups here wait by yielding
to the event loop, not on a clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd
import pytest

from litfetch_df import ArticleIds, Blob, File, Http, Session
from litfetch_df.frame.engine import bulk, pipeline
from litfetch_df.frame.engine import runner as engine
from litfetch_df.sources.bulk_recipe import BulkKey, Settled, bulk_stream
from litfetch_df.sources.crossref import CrossrefFileSource, crossref_work_request
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import Article, World

CONTACT = "me@lab.example"
N = 30


def journal(i: int) -> Article:
    return Article(pmid=str(31000001 + i), doi=f"10.1000/memory.{i}", title=f"Article {i}")


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[World]:
    w = World([journal(i) for i in range(N)])
    w.install(fake)
    yield w


def frame_of(world: World) -> pd.DataFrame:
    return pd.DataFrame({"doi": [a.doi for a in world.articles]})


class Probe:
    """A file source that lists nothing; it asks Crossref (a gated request) and counts.

    ``started`` counts the units that reached it; ``primed`` holds, per call,
    how many answers the session held primed once its own request was answered.
    """

    name = "probe"

    def __init__(self, session: Session) -> None:
        self.session = session
        self.started = 0
        self.primed: list[int] = []

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> tuple[File, ...]:
        self.started += 1
        assert article_ids.doi is not None
        # Waits for the Crossref lookup while it runs (see frame/engine/gates.py), then is answered.
        await crossref_work_request(article_ids.doi, CONTACT).send(http)
        self.primed.append(self.session.primed_count)
        return ()

    async def fetch_file(
        self, file: File, *, credentials: Mapping[str, object] | None = None, http: Http
    ) -> Blob | None:
        return None


def session_for(fake: FakeUpstream) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT)


def config(session: Session) -> pipeline.CallOptions:
    return {"session": session, "progress": False, "concurrency": 1}


async def test_a_units_primed_answers_go_when_the_unit_is_done(
    world: World, fake: FakeUpstream
) -> None:
    async with session_for(fake) as session:
        probe = Probe(session)
        out = await pipeline.list_files(
            frame_of(world),
            sources=[CrossrefFileSource(), probe],
            resolve=False,
            config=config(session),
        )
        assert session.primed_count == 0
    assert len(probe.primed) == N and out["files_error"].isna().all()
    assert fake.count("api.crossref.org", "/works/") == 0  # every unit read a primed answer
    # One unit at a time: the last one finds only its own answers primed, not the table's.
    assert probe.primed[-1] <= 2 < N


async def test_units_waiting_for_a_lookup_are_bounded(
    world: World, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = bulk._PRIMERS[bulk.Service.CROSSREF]
    probes: list[Probe] = []
    parked: list[int] = []

    async def slow(session: Session, bundles: Any, creds: Any, keys: Any) -> None:
        # Let the pass start every unit it will while the lookup runs, then answer.
        seen = -1
        while seen != probes[0].started:
            seen = probes[0].started
            for _ in range(50):
                await asyncio.sleep(0)
        parked.append(seen)
        await real(session, bundles, creds, keys)

    monkeypatch.setitem(bulk._PRIMERS, bulk.Service.CROSSREF, slow)
    async with session_for(fake) as session:
        probes.append(Probe(session))
        out = await pipeline.list_files(
            frame_of(world),
            sources=[CrossrefFileSource(), probes[0]],
            resolve=False,
            config=config(session),
        )
    # With concurrency 1, each waiting unit gives its slot away; without the bound on the
    # units started and not finished, all N would wait at once.
    assert parked == [engine.LIVE_UNITS_PER_SLOT] and engine.LIVE_UNITS_PER_SLOT < N
    assert probes[0].started == N and out["files_error"].isna().all()
    assert fake.count("api.crossref.org", "/works/") == 0


async def test_a_bulk_lookup_hands_each_chunk_over_before_the_next_is_in() -> None:
    handed: list[str] = []
    seen_by_second: list[list[str]] = []
    keys = [BulkKey(key=k, wire=k) for k in ("a", "b")]

    async def lookup(chunk: list[str]) -> dict[str, dict[str, str]] | None:
        if chunk == ["b"]:
            for _ in range(100):  # yield until the first chunk is handed over (or give up)
                if handed:
                    break
                await asyncio.sleep(0)
            seen_by_second.append(list(handed))
        return {wire: {"id": wire} for wire in chunk}

    def each(settled: Settled[dict[str, str]]) -> None:
        assert settled.answered and settled.value is not None
        handed.append(settled.value["id"])

    await bulk_stream(keys, lookup, each, cap=1)
    # The second chunk's answer came in after the first was handed over: nothing held
    # the first chunk's records until the whole lookup was done.
    assert seen_by_second == [["a"]] and handed == ["a", "b"]
