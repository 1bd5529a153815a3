"""``df.lit.run()`` starts a row's steps as soon as its ids are final.

A row that came with its PMID, PMCID and DOI, or that the ID Converter completed, is
asked about no more while the rest of the frame still resolves: its steps (its S3
listing first) go at once, and the bulk lookups, which need every bundle, start when
the resolution is over. The frame and the requests are those of a run that waits for
the whole resolution. Against the synthetic world (``tests/fakes/world.py``).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers the .lit accessor)
from benchmarks.client import CREDENTIALS, WORLD_KEYS
from benchmarks.corpus import generate
from litfetch_df import Session
from litfetch_df.frame.engine import onepass
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream
from tests.fakes.world import HOST_ELSEVIER, HOST_OPENALEX, HOST_S3, World

CFG: dict[str, Any] = {"progress": False, "credentials": dict(CREDENTIALS)}


def _session(fake: FakeUpstream) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact="me@x.org")


def _sent(fake: FakeUpstream) -> Counter[tuple[str, str, str]]:
    # Elsevier by count: which closed article probes the key's entitlement (the first one
    # a unit reaches) depends on the order the units get there.
    return Counter(
        (r.host, "" if r.host == HOST_ELSEVIER else r.path, str(sorted(r.query.items())))
        for r in fake.requests()
    )


async def test_final_rows_start_their_steps_while_the_rest_resolve(fake: FakeUpstream) -> None:
    corpus = generate(60, seed=3)
    world = World(corpus.articles, keys=WORLD_KEYS)
    world.install(fake)
    listed = threading.Event()
    held_in_vain: list[str] = []

    def s3_list(req: FakeRequest) -> FakeResponse | str:
        listed.set()
        return world._s3_list(req)

    def openalex_works(req: FakeRequest) -> FakeResponse | str:
        # OpenAlex answers only once S3 was asked: the resolution asks it after the ID
        # Converter and Europe PMC search, while the rows they completed are already at
        # their S3 listing. Waiting for the whole resolution, S3 would be asked only when
        # this wait runs out (real time: a safety valve, not a measure).
        if not listed.wait(30):
            held_in_vain.append(str(req.query.get("filter")))
        return world._openalex_works(req)

    fake.route(HOST_S3, r"/", s3_list)
    fake.route(HOST_OPENALEX, r"/works/?", openalex_works)
    async with _session(fake) as s:
        out = await corpus.frame.lit.run_async(session=s, **CFG)
    assert not held_in_vain
    assert (out["body_source"] == "pmc_oa_s3").any()


@pytest.mark.parametrize("n", [20, 150])
async def test_starting_early_sends_the_same_requests_and_gives_the_same_frame(
    fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch, n: int
) -> None:
    corpus = generate(n, seed=6)
    World(corpus.articles, keys=WORLD_KEYS).install(fake)
    async with _session(fake) as s:
        early = await corpus.frame.lit.run_async(session=s, **CFG)
        assert s.primed_count == 0
    sent_early = _sent(fake)
    fake.reset_log()

    monkeypatch.setattr(onepass, "_resolves_afresh", lambda *args: False)
    async with _session(fake) as s:
        waited = await corpus.frame.lit.run_async(session=s, **CFG)
    pd.testing.assert_frame_equal(early, waited)
    assert sent_early == _sent(fake)
