"""Resume and replay at the DataFrame face, against the synthetic world.

- an interrupted run started again with the same cache sends no request for
  what had finished (batch resolution chunks included);
- a run replayed offline from its cache gives the same frame, and a request the
  cache cannot answer is reported in that row;
- a PMID-only article outside PMC ends the pre-pass with its DOI.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers .lit)
from litfetch_df import Session
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeRequest, FakeUpstream
from tests.fakes.world import HOST_EBI, HOST_NCBI, Article, BodyHome, World
from tests.virtual_clock import VirtualClock

CONTACT = "me@lab.example"


def article(i: int) -> Article:
    """Article ``i``: a third in the PMC bucket, a third Europe PMC only, a third PubMed only."""
    kind = i % 3
    if kind == 0:
        return Article(
            pmid=str(30000001 + i),
            pmcid=f"PMC{7000001 + i}",
            pmc_versions=1,
            doi=f"10.1000/res.{i}",
            body=BodyHome.PMC_OA,
        )
    if kind == 1:
        return Article(
            pmid=str(30000001 + i),
            pmcid=f"PMC{7000001 + i}",
            doi=f"10.1000/res.{i}",
            body=BodyHome.EUROPE_PMC,
            in_pmc=False,
        )
    return Article(pmid=str(30000001 + i), doi=f"10.5555/pubmed-only.{i}")


def pmid_frame(world: World) -> pd.DataFrame:
    return pd.DataFrame({"PMID": [a.pmid for a in world.articles]})


def request_ids(requests: list[FakeRequest]) -> list[tuple[str, str, str]]:
    return [(r.host, r.path, repr(sorted(r.query.items()))) for r in requests]


async def test_an_interrupted_run_resumes_without_repeating_finished_requests(
    fake: FakeUpstream, tmp_path: Path
) -> None:
    # In process on a virtual clock: the interruption falls at the same point of the run
    # on every machine, however busy (no wall-clock race between the run and the cancel).
    clock = VirtualClock()
    world = World([article(i) for i in range(300)])
    world.install(fake)
    fake.latency(0.01)
    df = pmid_frame(world)
    cache = tmp_path / "cache"

    def session() -> Session:
        return Session(
            client_factory=fake.client_factory(clock=clock),
            contact=CONTACT,
            cache=cache,
            retry=FAST_RETRY,
            clock=clock,
        )

    async def first_run() -> None:
        resolved = await df.lit.resolve_async(session=session(), progress=False)
        await resolved.lit.fetch_bodies_async(session=session(), progress=False)

    async def until_forty_bodies_were_asked() -> None:
        while fake.count(HOST_EBI, "/europepmc/webservices/rest/PMC") < 40:
            await clock.sleep(0.001)

    task = asyncio.ensure_future(first_run())
    await clock.run(until_forty_bodies_were_asked())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await clock.run(task)
    answered_before = set(request_ids(fake.requests()))
    fake.reset_log()

    async def second_run() -> pd.DataFrame:
        resolved = await df.lit.resolve_async(session=session(), progress=False)
        return await resolved.lit.fetch_bodies_async(session=session(), progress=False)

    out = await clock.run(second_run())

    again = request_ids(fake.requests())
    # the resolve chunks all finished in the first run: none is sent again
    assert fake.count(HOST_NCBI) == 0
    assert not [r for r in again if r[0] == HOST_EBI and r[1].endswith("/search")]
    # every request of the second run is one the first run had not completed
    repeated = [r for r in again if r in answered_before]
    # a request cut off in flight (sent, never answered) may be repeated; at most concurrency
    assert len(repeated) <= 32, repeated[:5]
    assert len(again) < len(answered_before)  # finished work was not redone
    # and the result is complete and right
    with_body = out["body_source"].notna()
    assert with_body.sum() == 200
    assert out.loc[with_body, "pmcid"].notna().all()


async def test_a_resumed_run_gives_the_same_frame_as_an_uninterrupted_one(
    fake: FakeUpstream, tmp_path: Path
) -> None:
    world = World([article(i) for i in range(60)])
    world.install(fake)
    df = pmid_frame(world)

    async def run(cache: Path) -> pd.DataFrame:
        s1 = Session(client_factory=fake.client_factory(), contact=CONTACT, cache=cache)
        s2 = Session(client_factory=fake.client_factory(), contact=CONTACT, cache=cache)
        resolved = await df.lit.resolve_async(session=s1, progress=False)
        out = await resolved.lit.fetch_bodies_async(session=s2, progress=False)
        return out.drop(columns=["body"])

    clean = await run(tmp_path / "a")
    recorded = tmp_path / "b"
    await run(recorded)
    fake.reset_log()
    offline = Session(cache=recorded, offline=True, contact=CONTACT)
    resolved = await df.lit.resolve_async(session=offline, progress=False)
    replayed = (
        await resolved.lit.fetch_bodies_async(
            session=Session(cache=recorded, offline=True, contact=CONTACT), progress=False
        )
    ).drop(columns=["body"])
    assert fake.count() == 0  # offline never touches the network
    pd.testing.assert_frame_equal(replayed, clean)


async def test_an_offline_miss_is_reported_in_its_row(fake: FakeUpstream, tmp_path: Path) -> None:
    world = World([article(i) for i in range(9)])
    world.install(fake)
    cache = tmp_path / "cache"
    small = pmid_frame(world).iloc[:3]
    recorder = Session(client_factory=fake.client_factory(), contact=CONTACT, cache=cache)
    recorded = await small.lit.resolve_async(session=recorder, progress=False)

    everything = pmid_frame(world)
    out = await everything.lit.resolve_async(
        session=Session(cache=cache, offline=True), progress=False
    )
    # the three recorded ids are answered from their per-id records (which do not depend on
    # the contact); the six never asked say so in their rows
    errors = out["resolve_error"]
    assert errors.iloc[:3].isna().all()
    assert list(out["pmcid"].iloc[:3]) == list(recorded["pmcid"])
    assert list(out["doi"].iloc[:3]) == list(recorded["doi"])
    assert errors.iloc[3:].notna().all()
    assert all("not in cache" in e for e in errors.iloc[3:])
    assert len(out) == len(everything) and list(out.index) == list(everything.index)
    assert list(out["pmid"]) == list(everything["PMID"])  # what the row had is kept


async def test_a_pmid_only_article_outside_pmc_gets_its_doi_in_the_pre_pass(
    fake: FakeUpstream,
) -> None:
    world = World([article(2), article(5)])  # both PubMed only: no PMCID, not in PMC
    world.install(fake)
    df = pd.DataFrame({"PMID": ["30000003", "30000006"]})
    out = await df.lit.resolve_async(
        session=Session(client_factory=fake.client_factory(), contact=CONTACT), progress=False
    )
    assert list(out["doi"]) == ["10.5555/pubmed-only.2", "10.5555/pubmed-only.5"]
    assert out["pmcid"].isna().all()
    assert out["resolve_error"].isna().all()
