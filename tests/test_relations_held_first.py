"""Relations from the Crossref records the session holds first (issue 24): bioRxiv/medRxiv's
``details`` is asked per DOI only for the preprints Crossref's list answer left open."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest

from litfetch_df import ArticleIds, Related, RelationType, Session
from litfetch_df.frame.engine import onepass, pipeline
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import HOST_BIORXIV, HOST_CROSSREF, Article, Publisher, World

CONTACT = "dev@lab.example"

# A bioRxiv preprint whose Crossref record says where it was published (is-preprint-of).
LINKED = Article(
    doi="10.1101/2026.01.01.000001",
    publisher=Publisher.BIORXIV,
    published_doi="10.1000/journal.1",
)
JOURNAL = Article(
    pmid="32000001", doi="10.1000/journal.1", preprint_doi="10.1101/2026.01.01.000001"
)
# A bioRxiv preprint Crossref links to nothing: bioRxiv is asked, medRxiv is not.
ON_BIORXIV = Article(doi="10.1101/2026.01.01.000002", publisher=Publisher.BIORXIV)
# A medRxiv preprint Crossref links to nothing: bioRxiv says "no posts", medRxiv is asked.
ON_MEDRXIV = Article(doi="10.1101/2026.01.01.000003", publisher=Publisher.MEDRXIV)
# A preprint Crossref does not know: only bioRxiv can tell (it says published).
NOT_IN_CROSSREF = Article(
    doi="10.1101/2026.01.01.000004",
    publisher=Publisher.BIORXIV,
    published_doi="10.1000/journal.4",
    in_crossref=False,
)
OTHERS = [Article(pmid=str(32000100 + i), doi=f"10.5555/other.{i}") for i in range(6)]
ARTICLES = [LINKED, JOURNAL, ON_BIORXIV, ON_MEDRXIV, NOT_IN_CROSSREF, *OTHERS]


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[World]:
    w = World(ARTICLES)
    w.install(fake)
    yield w


def session_for(fake: FakeUpstream) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT)


def frame() -> pd.DataFrame:
    return pd.DataFrame({"doi": [a.doi for a in ARTICLES] + ["10.1101/../../admin"]})


def biorxiv_paths(fake: FakeUpstream) -> list[str]:
    return sorted(r.path for r in fake.requests(HOST_BIORXIV))


async def test_held_crossref_records_settle_relations_before_biorxiv(
    world: World, fake: FakeUpstream
) -> None:
    async with session_for(fake) as session:
        out = await pipeline.related(
            frame(), resolve=False, config={"session": session, "progress": False}
        )
    # Crossref: the list requests only (no per-DOI work lookup afterwards).
    assert all(not r.path.startswith("/works/10.") for r in fake.requests(HOST_CROSSREF))
    assert fake.count(HOST_CROSSREF) >= 1
    # bioRxiv: only the three preprints Crossref left open, each on one server at most
    # besides medRxiv's own (bioRxiv said "no posts found" first).
    assert biorxiv_paths(fake) == sorted(
        [
            f"/details/biorxiv/{ON_BIORXIV.doi}",
            f"/details/biorxiv/{ON_MEDRXIV.doi}",
            f"/details/medrxiv/{ON_MEDRXIV.doi}",
            f"/details/biorxiv/{NOT_IN_CROSSREF.doi}",
        ]
    )
    published = dict(zip(out["doi"], out["published_doi"], strict=True))
    assert published[LINKED.doi] == "10.1000/journal.1"
    assert published[NOT_IN_CROSSREF.doi] == "10.1000/journal.4"
    assert pd.isna(published[ON_BIORXIV.doi]) and pd.isna(published[ON_MEDRXIV.doi])
    preprints = dict(zip(out["doi"], out["preprint_doi"], strict=True))
    assert preprints[JOURNAL.doi] == LINKED.doi
    # the bad id is reported in its row and never sent upstream
    bad = out.iloc[-1]
    assert bad["related_error"] == "invalid doi: '10.1101/../../admin'"
    assert pd.isna(bad["published_doi"])
    assert all("admin" not in r.path for r in fake.requests())


async def test_run_asks_biorxiv_only_for_unsettled_preprints(
    world: World, fake: FakeUpstream
) -> None:
    async with session_for(fake) as session:
        out = await onepass.run(
            frame(), steps=["related"], config={"session": session, "progress": False}
        )
    assert f"/details/biorxiv/{LINKED.doi}" not in biorxiv_paths(fake)
    assert len(biorxiv_paths(fake)) == 4
    assert out.loc[out["doi"] == LINKED.doi, "published_doi"].iloc[0] == "10.1000/journal.1"


async def test_session_related_ids_keeps_litfetch_semantics(
    world: World, fake: FakeUpstream
) -> None:
    # The per-call operation asks bioRxiv and Crossref at once, as litfetch does.
    async with session_for(fake) as session:
        related = await session.related_ids(ArticleIds(doi=LINKED.doi))
    assert related == (Related(RelationType.PUBLISHED, ArticleIds(doi="10.1000/journal.1")),)
    assert biorxiv_paths(fake) == [f"/details/biorxiv/{LINKED.doi}"]
