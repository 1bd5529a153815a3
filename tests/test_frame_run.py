"""``df.lit.run``: every step in one pass gives exactly the frame the chained calls give.

Against the synthetic world of ``tests/fakes/world.py`` serving a corpus of
the benchmark generator (PMC OA, Europe PMC only, DOI only, Elsevier,
Springer, Bookshelf, preprints, nothing; messy ids and duplicate rows): the
result equals the chained ``resolve() / fetch_bodies() / list_files() /
licences() / related()`` frame (columns, dtypes, values, errors), with a
record two steps read asked once; ``out_dir`` bodies; abandoned rows and a
re-run that retries only those rows and steps, as the chained calls do; the
step names; the Series face.
"""

from __future__ import annotations

import dataclasses
import math
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers the .lit accessor)
from benchmarks.client import CREDENTIALS, WORLD_KEYS
from benchmarks.corpus import Corpus, generate
from litfetch_df import Session
from litfetch_df.frame.engine import onepass
from litfetch_df.frame.engine.outcome import is_partial
from litfetch_df.frame.engine.pipeline import is_abandoned
from litfetch_df.sources.crossref_batch import CROSSREF_BATCH_CAP
from litfetch_df.sources.semantic_scholar_batch import S2_BATCH_CAP
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream
from tests.fakes.world import (
    HOST_CROSSREF,
    HOST_EBI,
    HOST_NCBI,
    HOST_OPENALEX,
    HOST_S2,
    HOST_S3,
    HOST_UNPAYWALL,
    World,
)

CONTACT = "me@lab.example"


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return generate(200, seed=3)


@pytest.fixture
def world(fake: FakeUpstream, corpus: Corpus) -> Iterator[World]:
    w = World(corpus.articles, keys=WORLD_KEYS)
    w.install(fake)
    yield w


def session_for(fake: FakeUpstream) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT)


def config(session: Session) -> dict[str, Any]:
    return {"session": session, "progress": False, "credentials": dict(CREDENTIALS)}


async def chained(frame: pd.DataFrame, session: Session, **bodies: Any) -> pd.DataFrame:
    """The five steps as a user chains them today."""
    cfg = config(session)
    out = await frame.lit.resolve_async(**cfg)
    out = await out.lit.fetch_bodies_async(**bodies, **cfg)
    out = await out.lit.list_files_async(**cfg)
    out = await out.lit.licences_async(**cfg)
    return await out.lit.related_async(**cfg)


def unpaywall_dois(fake: FakeUpstream) -> list[str]:
    return [
        urllib.parse.unquote(r.path.removeprefix("/v2/")).lower()
        for r in fake.requests(HOST_UNPAYWALL)
    ]


def s2_gets(fake: FakeUpstream) -> int:
    return sum(1 for r in fake.requests(HOST_S2) if r.method == "GET")


def crossref_lists(fake: FakeUpstream) -> int:
    return sum(1 for r in fake.requests(HOST_CROSSREF) if r.path.rstrip("/") == "/works")


def distinct_dois(frame: pd.DataFrame) -> set[str]:
    return {str(d).lower() for d in frame["doi"].dropna()}


# -- equality with the chained calls -------------------------------------------------------------


async def test_run_gives_the_chained_frame_and_asks_a_shared_record_once(
    world: World, fake: FakeUpstream, corpus: Corpus
) -> None:
    # A slow bulk lookup: the pass starts before it is in, and must wait for it rather
    # than ask Semantic Scholar per article.
    fake.latency(0.4, HOST_S2)
    async with session_for(fake) as session:
        expected = await chained(corpus.frame, session)
    chained_unpaywall = unpaywall_dois(fake)
    chained_crossref = crossref_lists(fake)
    fake.reset_log()

    async with session_for(fake) as session:
        got = await corpus.frame.lit.run_async(onepass.STEPS, **config(session))
        assert session.primed_count == 0  # the primed answers went with the pass

    pd.testing.assert_frame_equal(got, expected)
    assert got["body_source"].notna().sum() > 50 and (got["licence_basis"] == "openalex").any()
    assert got["n_files"].sum() > 100 and got["n_related"].sum() > 0

    dois = distinct_dois(got)
    asked = unpaywall_dois(fake)
    # Unpaywall only about the DOIs OpenAlex does not know (its bulk works filter answers
    # the others), once each, shared by the file-set and the licence.
    unknown = [d for d in dois if (a := world.by_doi(d)) is None or not a.in_openalex]
    assert sorted(asked) == sorted(unknown)
    # The chained calls share the session's memo: the licences ask Unpaywall no more.
    assert sorted(chained_unpaywall) == sorted(asked)
    # Bulk lookups once for the whole pass.
    assert fake.count(HOST_S2, "/graph/v1/paper/batch") == math.ceil(len(dois) / S2_BATCH_CAP)
    assert s2_gets(fake) == 0
    assert crossref_lists(fake) == math.ceil(len(dois) / CROSSREF_BATCH_CAP)
    assert crossref_lists(fake) == chained_crossref  # the chain shares them through the memo
    assert fake.count(HOST_CROSSREF, "/works/") == 0
    # The bucket listing the body rung makes serves the file-set too.
    listings = [sorted(r.query.items()) for r in fake.requests(HOST_S3) if r.path == "/"]
    assert listings and all(listings.count(q) == 1 for q in listings)


async def test_out_dir_bodies_and_the_licences_read_from_them_match_the_chain(
    world: World, fake: FakeUpstream, corpus: Corpus, tmp_path: Path
) -> None:
    frame = corpus.frame.iloc[:80]
    out = tmp_path / "bodies"
    async with session_for(fake) as session:
        expected = await chained(frame, session, out_dir=out)
        got = await frame.lit.run_async(
            ["licences", "files", "resolve", "bodies", "related"], out_dir=out, **config(session)
        )
    pd.testing.assert_frame_equal(got, expected)
    assert "body" not in got.columns
    written = got["body_path"].dropna()
    assert len(written) > 10 and all(
        Path(p).is_file() and Path(p).is_relative_to(out) for p in written
    )
    assert (got.loc[got["body_path"].notna(), "licence_basis"] == "artifact").any()


def test_the_sync_method_and_a_subset_of_steps(world: World, fake: FakeUpstream) -> None:
    frame = pd.DataFrame({"DOI": [a.doi for a in world.articles if a.doi][:12]})
    got = frame.lit.run(
        "licences, resolve",
        session=session_for(fake),
        progress=False,
        credentials=dict(CREDENTIALS),
    )
    expected = frame.lit.resolve(session=session_for(fake), progress=False).lit.licences(
        session=session_for(fake), progress=False, credentials=dict(CREDENTIALS)
    )
    pd.testing.assert_frame_equal(got, expected)
    assert "body_source" not in got.columns and "files" not in got.columns
    assert got["licence_basis"].notna().any()


async def test_one_unit_at_a_time_waiting_for_a_slow_bulk_lookup(
    world: World, fake: FakeUpstream, corpus: Corpus
) -> None:
    # With one slot, the unit waiting for the lookup lets the others work meanwhile; all
    # finish, and none asks Semantic Scholar per article.
    fake.latency(0.3, HOST_S2)
    frame = corpus.frame.iloc[:30]
    async with session_for(fake) as session:
        got = await frame.lit.run_async(
            ["resolve", "bodies", "files"], concurrency=1, **config(session)
        )
        cfg = config(session)
        expected = await frame.lit.resolve_async(**cfg)
        expected = await expected.lit.fetch_bodies_async(**cfg)
        expected = await expected.lit.list_files_async(**cfg)
    pd.testing.assert_frame_equal(got, expected)
    assert got["n_files"].sum() > 0 and got["body_source"].notna().any()
    assert s2_gets(fake) == 0


async def test_licences_without_a_contact_warn_as_the_step_does(
    world: World, fake: FakeUpstream
) -> None:
    frame = pd.DataFrame({"doi": [a.doi for a in world.articles if a.doi][:3]})
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as session:
        with pytest.warns(UserWarning, match=r"run\(\): no contact email"):
            got = await frame.lit.run_async(["licences"], session=session, progress=False)
    # Unpaywall is never asked without a contact; only Crossref's deposited licences
    # (asked in bulk, no contact needed) can fill the column, labelled as such, and
    # the access status comes only from what the bulk lookups already hold.
    assert fake.count(HOST_UNPAYWALL) == 0
    assert got["licence_error"].isna().all()
    assert got["licence"].notna().any()
    # OpenAlex's works (asked in bulk, no contact needed) and Crossref's deposits fill it.
    assert got.loc[got["licence"].notna(), "licence_basis"].isin(["openalex", "crossref"]).all()
    stated = got["access"].notna()
    assert got.loc[stated, "access_basis"].isin(["semantic_scholar", "openalex"]).all()
    assert got.loc[~stated, "oa_status"].isna().all()


def test_unknown_or_no_steps_are_refused_before_any_request(fake: FakeUpstream) -> None:
    frame = pd.DataFrame({"doi": ["10.1000/x.1"]})
    with pytest.raises(ValueError, match=r"'bodys'.*resolve, bodies, files, licences, related"):
        frame.lit.run(["resolve", "bodys"], session=session_for(fake))
    with pytest.raises(ValueError, match="no step"):
        frame.lit.run([], session=session_for(fake))
    assert fake.count() == 0


async def test_series_run_matches_the_frame(world: World, fake: FakeUpstream) -> None:
    dois = pd.Series([a.doi for a in world.articles if a.doi][:10], name="DOI")
    async with session_for(fake) as session:
        got = await dois.lit.run_async(steps=("resolve", "licences"), **config(session))
        expected = await dois.to_frame().lit.run_async(("resolve", "licences"), **config(session))
    pd.testing.assert_frame_equal(got, expected)
    assert list(got.columns[:1]) == ["DOI"]


# -- abandoned rows and the re-run ----------------------------------------------------------------


class Outage:
    """Unpaywall answers 503 for some DOIs while ``on`` (else the world answers)."""

    def __init__(self, dois: set[str]) -> None:
        self.dois = {d.lower() for d in dois}
        self.on = True

    def __call__(self, req: FakeRequest) -> FakeResponse | None:
        doi = urllib.parse.unquote(req.path.removeprefix("/v2/")).lower()
        if self.on and doi in self.dois:
            return FakeResponse(503, {"message": "Service Unavailable"})
        return None


async def test_abandoned_rows_and_the_rerun_match_the_chain_and_retry_only_them(
    fake: FakeUpstream, corpus: Corpus
) -> None:
    frame = corpus.frame.iloc[:80]
    # Unpaywall fails for the DOI-only articles of these rows, which OpenAlex does not know
    # here (so Unpaywall is asked about them): those without licence-bearing body bytes
    # lose their licence, and those no other source lists files for their file-set.
    named = [corpus.articles[r.article] for r in corpus.rows[:80] if r.article is not None]
    failing = {a.doi for a in named if a.doi and not a.pmcid and a.in_unpaywall}
    articles = [
        dataclasses.replace(a, in_openalex=False) if a.doi in failing else a
        for a in corpus.articles
    ]
    World(articles, keys=WORLD_KEYS).install(fake)
    outage = Outage(failing)
    fake.route(HOST_UNPAYWALL, r"/v2/.+", outage)

    async with session_for(fake) as session:
        expected = await chained(frame, session)
        got = await frame.lit.run_async(onepass.STEPS, **config(session))
    pd.testing.assert_frame_equal(got, expected)
    licence_abandoned = got["licence_error"].map(is_abandoned)
    files_abandoned = got["files_error"].map(is_abandoned)
    assert licence_abandoned.sum() >= 3
    assert all("HTTP 503 from api.unpaywall.org" in e for e in got["licence_error"].dropna())
    # A failure is its own step's: the other steps of those rows are not abandoned.
    for column in ("resolve_error", "body_error", "related_error"):
        assert not got[column].map(is_abandoned).any(), column

    outage.on = False
    fake.reset_log()
    async with session_for(fake) as session:
        again = await got.lit.run_async(onepass.STEPS, **config(session))
        seen = fake.requests()
        fake.reset_log()
        expected_again = await chained(expected, session)
    pd.testing.assert_frame_equal(again, expected_again)
    for column in ("licence_error", "files_error"):
        assert not again[column].map(is_abandoned).any()
    retried = licence_abandoned | files_abandoned
    # Finished rows keep their values; the retried ones got theirs.
    pd.testing.assert_frame_equal(again[~retried], got[~retried])
    # Rows that found nothing get the licence from Unpaywall; rows whose body bytes gave
    # the licence while Unpaywall was given up were partial, and get the access now.
    licence_partial = got["licence_error"].map(is_partial)
    assert licence_partial.any()
    assert all(
        e.startswith("partial: api.unpaywall.org abandoned: HTTP 503 from api.unpaywall.org")
        for e in got.loc[licence_partial, "licence_error"]
    )
    assert got.loc[licence_partial, "licence"].notna().all()
    lost = licence_abandoned & ~licence_partial
    assert again.loc[lost, "licence_basis"].eq("unpaywall").all()
    assert again.loc[licence_partial, "access"].notna().all()
    # Only what was abandoned went out again: no resolution, no body, once per record.
    # (OpenAlex only for the retried rows' access terms, in bulk: Unpaywall is the detour
    # for the DOIs it does not know.)
    hosts = {r.host for r in seen}
    assert not hosts & {HOST_NCBI, HOST_EBI}
    openalex = [r for r in seen if r.host == HOST_OPENALEX]
    assert len(openalex) <= 1 and all("open_access" in str(r.param("select")) for r in openalex)
    asked = [
        urllib.parse.unquote(r.path.removeprefix("/v2/")).lower()
        for r in seen
        if r.host == HOST_UNPAYWALL
    ]
    assert sorted(asked) == sorted(distinct_dois(got[retried]))
