"""Every step knows what it did not get (issue 14 item 1).

A source given up after its retries while another answered leaves the row
*partial*: it keeps what was found, its error column says ``partial:
<source> abandoned: <reason>``, a re-run asks only what was given up and
merges, and ``summary()`` counts it. Against the synthetic world
(``tests/fakes/world.py``); an outage route makes one host fail while on.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers the .lit accessor)
from benchmarks.client import CREDENTIALS, WORLD_KEYS
from benchmarks.corpus import Corpus, generate
from litfetch_df import ArticleIds, File, FileKind, Session
from litfetch_df.frame.engine.outcome import given_up_in, is_abandoned, is_partial
from litfetch_df.operations.fileset import list_files_tried, merge_listings
from litfetch_df.operations.tried import Answer
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream
from tests.fakes.world import (
    HOST_CROSSREF,
    HOST_EBI,
    HOST_ELSEVIER,
    HOST_NCBI,
    HOST_OPENALEX,
    HOST_S2,
    HOST_S3,
    HOST_SPRINGER,
    HOST_UNPAYWALL,
    World,
)
from tests.test_fileset import StubSource

CONTACT = "me@lab.example"


class Outage:
    """Answer ``status`` to every request a route sees while ``on`` (else fall through)."""

    def __init__(self, status: int = 503) -> None:
        self.status = status
        self.on = True

    def __call__(self, req: FakeRequest) -> FakeResponse | None:
        return FakeResponse(self.status, "upstream down") if self.on else None


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return generate(60, seed=3)


@pytest.fixture
def world(fake: FakeUpstream, corpus: Corpus) -> World:
    w = World(corpus.articles, keys=WORLD_KEYS)
    w.install(fake)
    return w


@pytest.fixture
def unpaywall_world(fake: FakeUpstream, corpus: Corpus) -> World:
    """The world, but OpenAlex does not know the PMC articles' DOIs.

    In the frame, OpenAlex's bulk filter answers the best-OA file of every DOI it knows and
    Unpaywall is asked only about the others; here those are the PMC articles, whose files
    the PMC bucket lists too, so a given-up Unpaywall leaves them partial.
    """
    articles = [
        dataclasses.replace(a, in_openalex=False) if a.pmcid and a.doi else a
        for a in corpus.articles
    ]
    w = World(articles, keys=WORLD_KEYS)
    w.install(fake)
    return w


def config(fake: FakeUpstream) -> dict[str, Any]:
    session = Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT)
    return {"session": session, "progress": False, "credentials": dict(CREDENTIALS)}


# -- the file-set ----------------------------------------------------------------------------------


async def test_a_given_up_file_source_leaves_a_partial_row_and_a_rerun_asks_only_it(
    unpaywall_world: World, fake: FakeUpstream, corpus: Corpus
) -> None:
    clean = await corpus.frame.lit.list_files_async(**config(fake))
    outage = Outage(500)
    fake.route(HOST_UNPAYWALL, r"/v2/.+", outage)
    got = await corpus.frame.lit.list_files_async(**config(fake))

    partial = got["files_error"].map(is_partial)
    assert partial.sum() >= 3
    for i in got.index[partial]:
        error = got.at[i, "files_error"]
        assert error.startswith(
            "partial: unpaywall abandoned: HTTP 500 from api.unpaywall.org after retries ["
        ), error
        assert [g.source for g in given_up_in(error)] == ["unpaywall"]
        # What the other sources found is kept: every file not only Unpaywall's.
        kept = {f.uri for f in got.at[i, "files"]}
        assert kept == {f.uri for f in clean.at[i, "files"] if f.listed_by != ("unpaywall",)}
    assert got["files_error"].map(is_abandoned).sum() >= partial.sum()
    summary = got.lit.summary()
    assert summary.loc[("partial", "files"), "count"] == partial.sum()

    outage.on = False
    fake.reset_log()
    again = await got.lit.list_files_async(**config(fake))
    # Only the retried rows (partial ones, and the abandoned that found nothing at all);
    # of the partial ones, only the given-up source: the PMC bucket lists every PMC
    # article's files, so no PMC article is abandoned, and none is asked again.
    retried = got["files_error"].map(is_abandoned)
    asked = {unquote(r.path.removeprefix("/v2/")).lower() for r in fake.requests(HOST_UNPAYWALL)}
    assert asked == set(got.loc[retried, "doi"].str.lower())
    assert got.loc[partial, "pmcid"].notna().any()
    assert not fake.requests(HOST_S3)
    pd.testing.assert_frame_equal(again, clean)


async def test_a_rerun_of_rows_partial_for_a_per_article_source_runs_no_bulk_lookup(
    unpaywall_world: World, fake: FakeUpstream, corpus: Corpus
) -> None:
    clean = await corpus.frame.lit.list_files_async(**config(fake))
    outage = Outage(500)
    fake.route(HOST_UNPAYWALL, r"/v2/.+", outage)
    got = await corpus.frame.lit.list_files_async(**config(fake))
    partial = got["files_error"].map(is_partial)
    assert partial.sum() >= 3
    rows = got.loc[partial]

    outage.on = False
    fake.reset_log()
    again = await rows.lit.list_files_async(**config(fake))
    # Unpaywall has no bulk form: the Semantic Scholar, Crossref and Springer lookups
    # would answer sources these rows do not ask again, so none of them is made.
    assert not fake.requests(HOST_S2) and not fake.requests(HOST_CROSSREF)
    assert not fake.requests(HOST_SPRINGER)
    asked = {unquote(r.path.removeprefix("/v2/")).lower() for r in fake.requests(HOST_UNPAYWALL)}
    assert asked == set(rows["doi"].str.lower())
    pd.testing.assert_frame_equal(again, clean.loc[partial])


async def test_list_files_tried_merges_as_a_call_asking_every_source() -> None:
    def pdf(name: str, source: str) -> File:
        return File(FileKind.BODY, source, uri=f"https://files.example/{name}")

    a = StubSource("a", (pdf("u1", "a"), pdf("u2", "a")))
    b = StubSource("b", (pdf("u2", "b"), pdf("u3", "b")))
    c = StubSource("c", (pdf("u1", "c"), pdf("u4", "c")))
    ids = ArticleIds(doi="10.1000/x")
    full = await list_files_tried(object(), ids, sources=(a, b, c))  # type: ignore[arg-type]
    assert [t.answer for t in full.tried] == [Answer.HIT] * 3
    for lost in (a, b, c):
        others = [s.files for s in (a, b, c) if s is not lost]
        known = merge_listings(others)
        again = await list_files_tried(
            object(),  # type: ignore[arg-type]
            ids,
            sources=(a, b, c),
            only={lost.name},
            known=known,
        )
        assert again.files == full.files
        assert [t.source for t in again.tried] == [lost.name]
    # Given up again, a source keeps the files the row already held from it.
    failing = StubSource("b", error=httpx.ConnectError("down"))
    kept = await list_files_tried(
        object(),  # type: ignore[arg-type]
        ids,
        sources=(a, failing, c),
        only={"b"},
        known=full.files,
    )
    assert kept.files == full.files and kept.given_up[0].source == "b"


# -- bodies ---------------------------------------------------------------------------------------


def tree(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file()
    }


async def test_a_body_served_below_a_given_up_rung_is_partial_and_a_rerun_upgrades_it(
    world: World, fake: FakeUpstream, corpus: Corpus, tmp_path: Path
) -> None:
    clean = await corpus.frame.lit.run_async(
        ("resolve", "bodies", "licences"), out_dir=tmp_path / "clean", **config(fake)
    )
    outage = Outage(503)
    # The bucket's objects fail; its listings answer, so the rung is reached and given up.
    fake.route(HOST_S3, r"/PMC[^/]+/PMC[^/]+\.xml", outage)
    out = tmp_path / "faulted"
    got = await corpus.frame.lit.run_async(
        ("resolve", "bodies", "licences"), out_dir=out, **config(fake)
    )
    partial = got["body_error"].map(is_partial)
    assert partial.sum() >= 3
    for i in got.index[partial]:
        error = got.at[i, "body_error"]
        assert error.startswith(
            f"partial: pmc_oa_s3 abandoned: HTTP 503 from {HOST_S3} after retries [pmid "
        ) or error.startswith(f"partial: pmc_oa_s3 abandoned: HTTP 503 from {HOST_S3}"), error
        assert clean.at[i, "body_source"] == "pmc_oa_s3"
        assert got.at[i, "body_source"] == "europe_pmc"  # the lower rung's body, kept
        assert Path(got.at[i, "body_path"]).is_file()
        # Terms read from that body are partial as the body is.
        assert got.at[i, "licence_error"].startswith("partial: pmc_oa_s3 abandoned: ")
    assert got.lit.summary().loc[("partial", "body"), "count"] == partial.sum()

    outage.on = False
    fake.reset_log()
    again = await got.lit.run_async(("resolve", "bodies", "licences"), out_dir=out, **config(fake))
    # Only the rungs above the one that served were asked: never Europe PMC's full text.
    assert not [r for r in fake.requests(HOST_EBI) if "fullTextXML" in r.path]
    assert not again["body_error"].map(is_abandoned).any()
    assert (again.loc[partial, "body_source"] == "pmc_oa_s3").all()
    for column in ("body_source", "body_size", "licence", "access", "licence_error"):
        pd.testing.assert_series_equal(again[column], clean[column])
    assert tree(out) == tree(tmp_path / "clean")


# -- the session -----------------------------------------------------------------------------------


async def test_a_held_answer_whose_lookup_was_given_up_counts_as_a_failure(
    fake: FakeUpstream,
) -> None:
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as session:
        url = "https://api.example.org/record/1"
        key = session.prime("GET", url, failure="HTTP 503 from api.example.org (batch)")
        async with session.scope() as scope:
            assert await scope.held(url) is None
            assert scope.failures == ("HTTP 503 from api.example.org (batch)",)
        session.unprime([key])
        async with session.scope() as scope:
            assert await scope.held(url) is None
            assert scope.failures == ()  # nothing held, nothing lost: not a failure


# -- ids not resolved ------------------------------------------------------------------------------

STEPS = ("resolve", "bodies", "files", "licences")


async def test_a_row_found_with_ids_not_all_resolved_is_partial_and_a_rerun_redoes_it(
    world: World, fake: FakeUpstream, corpus: Corpus, tmp_path: Path
) -> None:
    clean = await corpus.frame.lit.run_async(STEPS, out_dir=tmp_path / "clean", **config(fake))
    outage = Outage(503)
    fake.route(HOST_NCBI, r"/tools/idconv/.*", outage)
    out = tmp_path / "faulted"
    got = await corpus.frame.lit.run_async(STEPS, out_dir=out, **config(fake))

    unresolved = got["resolve_error"].map(is_abandoned)
    # A PMCID-only row: the PMC bucket lists its files by PMCID, but OpenAlex's OA filter
    # (or Unpaywall, for a DOI OpenAlex does not know) is asked by the DOI only the
    # resolution would have given. Found, yet not all there.
    lost = [
        i
        for i in got.index[unresolved]
        if pd.isna(got.at[i, "doi"])
        and any(f.source in ("openalex", "unpaywall") for f in clean.at[i, "files"])
        and got.at[i, "n_files"] > 0
    ]
    assert lost, "no row lost a DOI-asked file to the failed resolution: the test tests nothing"
    for i in lost:
        for column in ("files_error", "body_error", "licence_error"):
            error = got.at[i, column]
            want = f"partial: resolve abandoned: HTTP 503 from {HOST_NCBI}"
            assert isinstance(error, str) and error.startswith(want), (column, error)
            assert [g.source for g in given_up_in(error)] == ["resolve"]
    assert got.lit.summary().loc[("partial", "files"), "count"] >= len(lost)

    outage.on = False
    again = await got.lit.run_async(STEPS, out_dir=out, **config(fake))
    # The same frame (body paths relative to their out_dir) and the same files.
    for frame, root in ((again, out), (clean, tmp_path / "clean")):
        frame["body_path"] = frame["body_path"].str.removeprefix(f"{root}/")
        # Without OpenAlex the faulted run asked Unpaywall, which listed some of the same
        # PDFs; the repaired rows keep that (true) "also listed by". The files themselves
        # are the clean run's.
        frame["files"] = frame["files"].map(
            lambda files: (
                tuple(dataclasses.replace(f, also_listed_by=()) for f in files)
                if isinstance(files, tuple)
                else files
            )
        )
    pd.testing.assert_frame_equal(again, clean)
    assert tree(out) == tree(tmp_path / "clean")


# -- held answers ----------------------------------------------------------------------------------


async def test_a_lost_held_answer_is_partial_and_a_licences_rerun_looks_it_up_again(
    fake: FakeUpstream,
) -> None:
    bigger = generate(2000, seed=9)
    World(bigger.articles, keys=WORLD_KEYS).install(fake)
    frame = bigger.frame.iloc[1650:1690].reset_index(drop=True)
    clean = await frame.lit.run_async(STEPS, **config(fake))
    # Rows whose access only Europe PMC's search record states (a PMCID alone: no DOI
    # for Unpaywall); the record is read where held, from the bodies step's bulk search.
    from_epmc = clean.index[clean["access_basis"].eq("europe_pmc").fillna(False)]
    assert len(from_epmc) > 0, "no row reads Europe PMC's record: the test tests nothing"

    outage = Outage(502)

    def holdings_search(req: FakeRequest) -> FakeResponse | None:
        # Only the bulk search by PMCID (the one the terms are read from) fails.
        return outage(req) if "PMCID:" in (req.param("query") or "") else None

    fake.route(HOST_EBI, r"/europepmc/webservices/rest/search", holdings_search)
    got = await frame.lit.run_async(STEPS, **config(fake))
    for i in from_epmc:
        error = got.at[i, "licence_error"]
        # Not "nothing known": the answer was lost, and the row says so.
        assert isinstance(error, str) and is_abandoned(error), (i, error)
        assert "(Europe PMC search)" in error, error

    # The re-run redoes the licences of those rows only: the step alone asks nothing of
    # Europe PMC in bulk, but a row that lost that answer makes the lookup again.
    outage.on = False
    again = await got.lit.run_async(STEPS, **config(fake))
    pd.testing.assert_frame_equal(again, clean)


async def test_a_body_kept_through_a_rerun_takes_the_name_its_resolved_ids_give(
    world: World, fake: FakeUpstream, corpus: Corpus, tmp_path: Path
) -> None:
    clean = await corpus.frame.lit.run_async(STEPS, out_dir=tmp_path / "clean", **config(fake))
    # The resolution fails (NCBI's converter, OpenAlex's works filter: run() asks it about
    # each DOI once, for the ids and the access terms alike, so the steps lose it too).
    resolving = [Outage(503), Outage(503)]
    fake.route(HOST_NCBI, r"/tools/idconv/.*", resolving[0])
    fake.route(HOST_OPENALEX, r"/works.*", resolving[1])
    out = tmp_path / "faulted"
    got = await corpus.frame.lit.run_async(STEPS, out_dir=out, **config(fake))
    # DOI-only rows whose Elsevier body was named by the DOI, the PMID not yet known.
    renamed = [
        i
        for i in got.index[got["body_source"].eq("elsevier_oa").fillna(False)]
        if isinstance(clean.at[i, "body_path"], str)
        and Path(got.at[i, "body_path"]).name != Path(clean.at[i, "body_path"]).name
    ]
    assert renamed, "no body was named before its ids were resolved: the test tests nothing"

    # Resolved now, but the rung that served is given up this time: the row keeps its
    # body (partial), under the name its ids give now.
    for outage in resolving:
        outage.on = False
    elsevier = Outage(503)
    fake.route(HOST_ELSEVIER, r".*", elsevier)
    kept = await got.lit.run_async(STEPS, out_dir=out, **config(fake))
    for i in renamed:
        assert is_partial(kept.at[i, "body_error"]), kept.at[i, "body_error"]
        moved = Path(kept.at[i, "body_path"])
        assert moved.name == Path(clean.at[i, "body_path"]).name
        assert moved.read_bytes() == Path(clean.at[i, "body_path"]).read_bytes()
        assert not Path(got.at[i, "body_path"]).exists()  # moved, not copied

    elsevier.on = False
    again = await kept.lit.run_async(STEPS, out_dir=out, **config(fake))
    for frame, root in ((again, out), (clean, tmp_path / "clean")):
        frame["body_path"] = frame["body_path"].str.removeprefix(f"{root}/")
        # Without OpenAlex the faulted run asked Unpaywall, which listed some of the same
        # PDFs; the repaired rows keep that (true) "also listed by". The files themselves
        # are the clean run's.
        frame["files"] = frame["files"].map(
            lambda files: (
                tuple(dataclasses.replace(f, also_listed_by=()) for f in files)
                if isinstance(files, tuple)
                else files
            )
        )
    pd.testing.assert_frame_equal(again, clean)
    assert tree(out) == tree(tmp_path / "clean")
