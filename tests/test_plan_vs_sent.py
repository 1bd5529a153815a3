"""After ``df.lit.run()`` the frame holds, per host, the requests it sent beside its plan.

Against the synthetic world of ``tests/fakes/world.py`` on loopback: the ``sent``
figures in ``attrs`` are what the fake received, the ``planned`` ones what
``df.lit.plan()`` says for the same frame and options, and ``summary()`` shows
both; a re-run served from the session's answers sends (and records) nothing new.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers the .lit accessor)
from benchmarks.client import CREDENTIALS, WORLD_KEYS
from benchmarks.corpus import Corpus, generate
from litfetch_df import Session
from litfetch_df.frame.engine.cost import plan_for
from litfetch_df.frame.engine.spent import REQUESTS_ATTR, planned_by_host, requests_table
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import World

CONTACT = "me@lab.example"


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return generate(60, seed=5)


@pytest.fixture
def world(fake: FakeUpstream, corpus: Corpus) -> Iterator[World]:
    w = World(corpus.articles, keys=WORLD_KEYS)
    w.install(fake)
    yield w


def _config(fake: FakeUpstream) -> dict[str, Any]:
    session = Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT)
    return {"session": session, "progress": False, "credentials": dict(CREDENTIALS)}


def test_run_records_what_it_sent_per_host_beside_its_plan(
    fake: FakeUpstream, world: World, corpus: Corpus
) -> None:
    frame = corpus.frame
    cfg = _config(fake)
    out = frame.lit.run(**cfg)
    record = out.attrs[REQUESTS_ATTR]
    received = dict(World.requests_per_host(fake))
    assert received, "the run sent nothing: the test proves nothing"
    assert record["sent"] == dict(sorted(received.items()))
    expected = planned_by_host(
        plan_for(frame, session=cfg["session"], credentials=CREDENTIALS, contact=CONTACT)
    )
    assert record["planned"] == expected and expected

    summary = out.lit.summary()
    for host, n in received.items():
        assert summary.loc[("requests sent", host), "count"] == n
        assert pd.isna(summary.loc[("requests sent", host), "share"])
    for host, n in expected.items():
        assert summary.loc[("requests planned", host), "count"] == n


def test_the_requests_table_lines_up_plan_and_sent() -> None:
    attrs = {REQUESTS_ATTR: {"planned": {"a.org": 10, "b.org": 4}, "sent": {"a.org": 11}}}
    table = requests_table(attrs).set_index("host")
    assert table.loc["a.org", "sent_over_planned"] == pytest.approx(1.1)
    assert table.loc["b.org", "sent"] == 0
    assert requests_table({}).empty
    # A host the plan did not expect has no ratio.
    only_sent = requests_table({REQUESTS_ATTR: {"planned": {}, "sent": {"c.org": 2}}})
    assert pd.isna(only_sent.iloc[0]["sent_over_planned"])


def test_a_frame_not_made_by_run_has_no_request_rows() -> None:
    summary = pd.DataFrame({"doi": ["10.1000/x"]}).lit.summary()
    sections = set(summary.index.get_level_values("section"))
    assert not sections & {"requests planned", "requests sent"}


SEEDS = (1, 2, 3, 4)
"""Seeds of the test world whose plans and runs are summed (one seed's small counts are noise)."""

SUM_TOLERANCE = 0.15
"""Issue 24: the plan's requests per host within 15 % of what the runs sent, summed over seeds."""


def test_the_plan_sums_to_what_runs_send_over_several_seeds() -> None:
    planned: dict[str, int] = {}
    sent: dict[str, int] = {}
    for seed in SEEDS:
        corpus = generate(150, seed=seed)
        fake = FakeUpstream().start()
        try:
            World(corpus.articles, keys=WORLD_KEYS).install(fake)
            cfg = _config(fake)
            plan = plan_for(
                corpus.frame, session=cfg["session"], credentials=CREDENTIALS, contact=CONTACT
            )
            corpus.frame.lit.run(**cfg)
            received = World.requests_per_host(fake)
        finally:
            fake.stop()
        for host, n in planned_by_host(plan).items():
            planned[host] = planned.get(host, 0) + n
        for host, n in received.items():
            sent[host] = sent.get(host, 0) + n
    # Hosts asked a handful of times in all are left out: one request there is a large share.
    # Elsevier too: its prior is fitted at N=2,000 (half the Elsevier DOIs asked), while a
    # table this small asks most of them (a known gap of the plan, issue 24).
    judged = {h: n for h, n in sent.items() if n >= 10 and h != "api.elsevier.com"}
    assert "www.ebi.ac.uk" in judged and "api.unpaywall.org" in judged, sent
    off = {
        host: (planned.get(host, 0), n)
        for host, n in judged.items()
        if abs(planned.get(host, 0) - n) > SUM_TOLERANCE * n
    }
    assert not off, f"planned/sent beyond {SUM_TOLERANCE:.0%}: {off}"
