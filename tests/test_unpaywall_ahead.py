"""``df.lit.run()`` asks Unpaywall ahead: the DOIs OpenAlex does not know, once that is known.

Unpaywall has no bulk form, so the licences step asks it one DOI at a time. Asked from its
unit, a question waited for the unit's bodies step and the bulk lookups that step waits
for (the Elsevier rung's Crossref records); asked ahead, it goes as soon as OpenAlex has
said it does not know the DOI, with the same requests and the same frame. Against the
synthetic world (``tests/fakes/world.py``).
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
from litfetch_df.frame.engine import bulk
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream
from tests.fakes.world import HOST_CROSSREF, HOST_UNPAYWALL, World

CFG: dict[str, Any] = {"progress": False, "credentials": dict(CREDENTIALS)}


def _session(fake: FakeUpstream) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact="me@x.org")


def _unpaywall(fake: FakeUpstream) -> Counter[str]:
    return Counter(r.path for r in fake.requests(HOST_UNPAYWALL))


async def test_unpaywall_is_asked_before_the_bulk_lookups_the_bodies_wait_for(
    fake: FakeUpstream,
) -> None:
    corpus = generate(60, seed=3)
    world = World(corpus.articles, keys=WORLD_KEYS)
    world.install(fake)
    asked = threading.Event()
    held_in_vain: list[str] = []

    def unpaywall(req: FakeRequest) -> FakeResponse | str:
        asked.set()
        return world._unpaywall(req, req.path.removeprefix("/v2/"))

    def crossref_list(req: FakeRequest) -> FakeResponse | str:
        # Crossref's list answers only once Unpaywall was asked. A unit asks Unpaywall
        # after its bodies step, whose Elsevier rung waits for these records: from the
        # unit alone the question would come only when this wait runs out (real time: a
        # safety valve for a client that does not ask ahead, not a measure).
        if not asked.wait(30):
            held_in_vain.append(req.path)
        return world._crossref_list(req)

    fake.route(HOST_UNPAYWALL, r"/v2/(.+)", unpaywall)
    fake.route(HOST_CROSSREF, r"/works/?", crossref_list)
    async with _session(fake) as s:
        out = await corpus.frame.lit.run_async(session=s, **CFG)
    assert not held_in_vain
    assert (out["licence_basis"] == "unpaywall").any()


async def test_asking_ahead_sends_the_same_requests_and_gives_the_same_frame(
    fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = generate(120, seed=4)
    World(corpus.articles, keys=WORLD_KEYS).install(fake)
    async with _session(fake) as s:
        ahead = await corpus.frame.lit.run_async(session=s, **CFG)
        assert s.primed_count == 0  # the answers asked ahead went with the pass
    sent_ahead = Counter((r.host, r.path) for r in fake.requests())
    unpaywall_ahead = _unpaywall(fake)
    fake.reset_log()

    async def not_ahead(*args: object, **kwargs: object) -> None:
        return None

    monkeypatch.setattr(bulk, "prime_unpaywall", not_ahead)  # each unit asks for itself
    async with _session(fake) as s:
        alone = await corpus.frame.lit.run_async(session=s, **CFG)
    pd.testing.assert_frame_equal(ahead, alone)
    # Each DOI OpenAlex does not know asked once, ahead or not, and nothing else changed.
    assert unpaywall_ahead and max(unpaywall_ahead.values()) == 1
    assert unpaywall_ahead == _unpaywall(fake)
    assert sent_ahead == Counter((r.host, r.path) for r in fake.requests())
