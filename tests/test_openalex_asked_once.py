"""``df.lit.run()`` asks OpenAlex's works filter about each DOI once, for ids and terms alike.

The resolution asks the filter about the DOIs short of a PMID or PMCID; the file-set and
licence steps want every DOI's access terms from the same filter. Within one run the
resolution selects the terms too and hands the works on, so the steps ask only about the
DOIs the resolution did not. Against the synthetic world (``tests/fakes/world.py``).
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

import litfetch_df  # noqa: F401  (registers the .lit accessor)
from benchmarks.client import CREDENTIALS, WORLD_KEYS
from benchmarks.corpus import generate
from litfetch_df import Session
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import HOST_OPENALEX, World

STEPS = ("resolve", "files", "licences")


def _asked(fake: FakeUpstream) -> Counter[str]:
    """Each DOI named by an OpenAlex works-filter request, with how often it was named."""
    named: Counter[str] = Counter()
    for r in fake.requests(HOST_OPENALEX):
        value = (r.query.get("filter") or [""])[0]
        if r.path.rstrip("/") == "/works" and value.startswith("doi:"):
            named.update(d.lower() for d in value.removeprefix("doi:").split("|"))
    return named


def _lists(fake: FakeUpstream) -> int:
    return sum(1 for r in fake.requests(HOST_OPENALEX) if r.path.rstrip("/") == "/works")


async def test_run_names_each_doi_once_and_gives_the_chained_frame(fake: FakeUpstream) -> None:
    corpus = generate(160, seed=5)
    World(corpus.articles, keys=WORLD_KEYS).install(fake)
    cfg = {"progress": False, "credentials": dict(CREDENTIALS)}

    def session() -> Session:
        return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact="me@x.org")

    async with session() as s:
        out = await corpus.frame.lit.resolve_async(session=s, **cfg)
        out = await out.lit.list_files_async(session=s, **cfg)
        expected = await out.lit.licences_async(session=s, **cfg)
    chained = _asked(fake)
    chained_lists = _lists(fake)
    fake.reset_log()

    async with session() as s:
        got = await corpus.frame.lit.run_async(STEPS, session=s, **cfg)
        assert s.primed_count == 0  # the held works went with the pass

    pd.testing.assert_frame_equal(got, expected)
    asked = _asked(fake)
    # The chained calls name the DOIs short of an id twice (resolution, then terms) ...
    assert any(n > 1 for n in chained.values())
    # ... one run names every DOI once, and sends fewer list calls for the same answers.
    assert asked and max(asked.values()) == 1
    assert set(asked) == set(chained)
    assert _lists(fake) < chained_lists
    assert (got["licence_basis"] == "openalex").any()
