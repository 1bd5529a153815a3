"""The frame primes its per-article lookups from bulk requests (litfetch_df.frame.engine.bulk).

Against the synthetic world of ``tests/fakes/world.py``: request counts of
``ceil(distinct / cap)`` per bulk service and no per-article request to it,
row results identical to the per-article path (the same step with priming
switched off, on the same world), abandoned bulk chunks, unusable bulk
answers, and custom per-article file sources.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pandas as pd
import pytest

from litfetch_df import ArticleIds, File, FileKind, Http, Session
from litfetch_df.frame.engine import bulk, pipeline
from litfetch_df.operations.types import FileSource
from litfetch_df.sources.crossref import CrossrefFileSource
from litfetch_df.sources.crossref_batch import CROSSREF_BATCH_CAP
from litfetch_df.sources.elsevier import ENTITLEMENT_PROBES, ElsevierFetcher
from litfetch_df.sources.semantic_scholar import SemanticScholarFileSource
from litfetch_df.sources.semantic_scholar_batch import S2_BATCH_CAP
from litfetch_df.sources.springer import SpringerFileSource
from litfetch_df.sources.springer_batch import SPRINGER_BATCH_CAP
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeResponse, FakeUpstream
from tests.fakes.world import (
    HOST_BIORXIV,
    HOST_CROSSREF,
    HOST_ELSEVIER,
    HOST_REPOSITORY,
    HOST_S2,
    HOST_SPRINGER,
    Article,
    BodyHome,
    Publisher,
    World,
)

CONTACT = "me@lab.example"
S2_KEY = "test-s2-key"
META_KEY = "test-meta-key"
ELSEVIER_KEY = "test-elsevier-key"
BUNDLED: tuple[FileSource, ...] = (
    SemanticScholarFileSource(),
    CrossrefFileSource(),
    SpringerFileSource(),
)


# -- the world -----------------------------------------------------------------------------------


def is_springer(i: int) -> bool:
    return i % 17 == 0 and i % 13 != 0


def journal_doi(i: int) -> str:
    """Article ``i``'s DOI: a tenth with capitals, Springer's under a Springer Nature prefix."""
    # The Springer sources ask only about DOIs under Springer Nature's prefixes.
    prefix = "10.1007" if is_springer(i) else "10.1000"
    return f"{prefix}/Bulk.{i}" if i % 10 == 0 else f"{prefix}/bulk.{i}"


def journal_article(i: int) -> Article:
    """Article ``i``: a DOI (a tenth with capitals), and a spread of what each service knows."""
    publisher = (
        Publisher.ELSEVIER
        if i % 13 == 0
        else Publisher.SPRINGER
        if i % 17 == 0
        else Publisher.OTHER
    )
    home = {Publisher.ELSEVIER: BodyHome.ELSEVIER, Publisher.SPRINGER: BodyHome.SPRINGER}
    return Article(
        pmid=str(30000001 + i),
        doi=journal_doi(i),
        publisher=publisher,
        body=home.get(publisher, BodyHome.NONE) if i % 2 == 0 else BodyHome.NONE,
        oa_status="gold" if i % 2 == 0 else "closed",
        pdf_url=f"https://{HOST_REPOSITORY}/bitstream/{i}/paper.pdf" if i % 4 != 1 else None,
        in_s2=i % 7 != 3,
        in_crossref=i % 11 != 5,
        crossref_tdm=i % 3 == 0,
        preprint_doi=f"10.1101/2026.01.{i:05d}" if i % 19 == 0 else None,
    )


def preprint(j: int) -> Article:
    """A bioRxiv / medRxiv preprint; two in three know their published version."""
    return Article(
        doi=f"10.1101/2026.02.{j:05d}",
        publisher=Publisher.BIORXIV if j % 2 == 0 else Publisher.MEDRXIV,
        published_doi=journal_doi(j + 1) if j % 3 else None,
        in_s2=j % 4 != 0,
    )


def articles(journals: Sequence[int], n_preprint: int) -> list[Article]:
    return [journal_article(i) for i in journals] + [preprint(j) for j in range(n_preprint)]


# A few of each: Elsevier (0, 26 open; 13 not), Springer (34 open; 17 not), unknown to
# Semantic Scholar (3, 10, 17) or Crossref (5, 16), TDM links (0, 3, 6, 9), a preprint
# relation (0, 19), capitals in the DOI (0, 10), no PDF anywhere (1, 5, 9, 13, 17).
SMALL = (0, 1, 2, 3, 4, 5, 6, 9, 10, 13, 16, 17, 19, 26, 34)


def doi_frame(found: Sequence[Article], repeats: int = 0) -> pd.DataFrame:
    """One row per article's DOI, then ``repeats`` rows repeating the first DOIs upper-cased."""
    dois = [a.doi for a in found] + [str(a.doi).upper() for a in found[:repeats]]
    return pd.DataFrame({"doi": dois, "note": range(len(dois))})


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[World]:
    w = World(articles(range(950), 20))
    w.install(fake)
    yield w


@pytest.fixture
def small_world(fake: FakeUpstream) -> Iterator[World]:
    w = World(articles(SMALL, 4))
    w.install(fake)
    yield w


@pytest.fixture
def per_article() -> Iterator[None]:
    """Switch priming off, for the per-article path to compare with."""
    bulk._ENABLED = False
    try:
        yield
    finally:
        bulk._ENABLED = True


def session_for(fake: FakeUpstream) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT)


def config(session: Session, **credentials: str) -> pipeline.CallOptions:
    return {"session": session, "progress": False, "credentials": dict(credentials)}


def s2_gets(fake: FakeUpstream) -> int:
    return sum(1 for r in fake.requests(HOST_S2) if r.method == "GET")


def s2_posts(fake: FakeUpstream) -> int:
    return fake.count(HOST_S2, "/graph/v1/paper/batch")


def crossref_lists(fake: FakeUpstream) -> int:
    return sum(1 for r in fake.requests(HOST_CROSSREF) if r.path.rstrip("/") == "/works")


def crossref_singles(fake: FakeUpstream) -> int:
    return fake.count(HOST_CROSSREF, "/works/")


def distinct_dois(frame: pd.DataFrame) -> int:
    return len({str(d).lower() for d in frame["doi"]})


# -- request counts ------------------------------------------------------------------------------


async def test_list_files_asks_each_bulk_service_once_per_chunk(
    world: World, fake: FakeUpstream
) -> None:
    frame = doi_frame(world.articles, repeats=30)
    assert len(frame) == 1000
    distinct = distinct_dois(frame)
    assert distinct == 970
    async with session_for(fake) as session:
        out = await pipeline.list_files(
            frame,
            sources=BUNDLED,
            resolve=False,
            config=config(session, springer_meta_api_key=META_KEY),
        )
        assert session.primed_count == 0  # the step's primed answers went with it
    assert s2_posts(fake) == math.ceil(distinct / S2_BATCH_CAP) == 2
    assert s2_gets(fake) == 0
    assert crossref_lists(fake) == math.ceil(distinct / CROSSREF_BATCH_CAP) == 10
    assert crossref_singles(fake) == 0
    # Springer Meta is asked about Springer Nature's DOIs only, in OR queries.
    springer = [a for a in world.articles if a.publisher is Publisher.SPRINGER]
    assert fake.count(HOST_SPRINGER) == math.ceil(len(springer) / SPRINGER_BATCH_CAP)
    asked = [t for r in fake.requests(HOST_SPRINGER) for t in str(r.param("q")).split(" OR ")]
    assert sorted(asked) == sorted(f"doi:{a.doi}" for a in springer)

    # Every row answers as the world says, repeats (upper-cased DOIs) included.
    assert out["files_error"].isna().all()
    for doi, found in zip(out["doi"], out["files"], strict=True):
        a = world.by_doi(doi)
        assert a is not None
        expected = set()
        if a.in_s2 and a.pdf_url and a.is_open:
            expected.add("semantic_scholar")
        if a.in_crossref and (
            a.crossref_tdm or a.publisher in (Publisher.ELSEVIER, Publisher.SPRINGER)
        ):
            expected.add("crossref_tdm")
        if a.publisher is Publisher.SPRINGER:
            expected.add("springer")
        assert {f.source for f in found} == expected, doi


async def test_related_asks_crossref_in_lists_and_biorxiv_for_preprints_only(
    world: World, fake: FakeUpstream
) -> None:
    frame = doi_frame(world.articles, repeats=30)
    async with session_for(fake) as session:
        out = await pipeline.related(frame, resolve=False, config=config(session))
    assert crossref_lists(fake) == math.ceil(distinct_dois(frame) / CROSSREF_BATCH_CAP)
    assert crossref_singles(fake) == 0
    details = fake.requests(HOST_BIORXIV)
    assert details, "preprint DOIs are followed on bioRxiv / medRxiv"
    assert all("/10.1101/" in r.path for r in details)
    assert out["related_error"].isna().all()
    by_doi = dict(zip(out["doi"], out["published_doi"], strict=True))
    assert by_doi["10.1101/2026.02.00001"] == "10.1000/bulk.2"
    preprints = dict(zip(out["doi"], out["preprint_doi"], strict=True))
    assert preprints["10.1000/bulk.19"] == "10.1101/2026.01.00019"


async def test_fetch_bodies_primes_crossref_only_for_the_elsevier_rung_with_a_key(
    world: World, fake: FakeUpstream
) -> None:
    frame = doi_frame(world.articles, repeats=30)
    async with session_for(fake) as session:
        keyless = await pipeline.fetch_bodies(frame, resolve=False, config=config(session))
    assert fake.count(HOST_CROSSREF) == 0
    assert keyless["body_source"].isna().all()

    fake.reset_log()
    async with session_for(fake) as session:
        out = await pipeline.fetch_bodies(
            frame, resolve=False, config=config(session, elsevier_api_key=ELSEVIER_KEY)
        )
    assert crossref_lists(fake) == math.ceil(distinct_dois(frame) / CROSSREF_BATCH_CAP)
    assert crossref_singles(fake) == 0
    elsevier = [a for a in world.articles if a.publisher is Publisher.ELSEVIER and a.in_crossref]
    open_ = [a for a in elsevier if a.body is BodyHome.ELSEVIER]
    # Every open article, and closed ones only until the key proves not entitled.
    closed = min(len(elsevier) - len(open_), ENTITLEMENT_PROBES)
    assert fake.count(HOST_ELSEVIER) == len(open_) + closed
    sources = dict(zip(out["doi"].str.lower(), out["body_source"], strict=True))
    for a in world.articles:
        full = a.publisher is Publisher.ELSEVIER and a.in_crossref and a.body is BodyHome.ELSEVIER
        assert (sources[str(a.doi).lower()] is not pd.NA) is full, a.doi
    assert set(out["body_source"].dropna()) == {"elsevier_oa"}


# -- identical to the per-article path -----------------------------------------------------------


def mixed_frame(world: World) -> pd.DataFrame:
    """DOI rows in two casings, a PMID-only row, a row with nothing Semantic Scholar can use."""
    rows: list[dict[str, Any]] = [{"doi": a.doi, "pmid": a.pmid} for a in world.articles]
    rows += [{"doi": str(a.doi).upper(), "pmid": None} for a in world.articles[:3]]
    rows += [{"doi": None, "pmid": "30000005"}, {"doi": None, "pmid": "39999999"}]
    return pd.DataFrame(rows)


async def both_ways(
    fake: FakeUpstream, run: Any, frame: pd.DataFrame, **credentials: str
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, int]]:
    """Run a step with priming, then without it; return both frames and the bulk run's counts."""
    async with session_for(fake) as session:
        primed = await run(frame, resolve=False, config=config(session, **credentials))
    counts = {"s2_gets": s2_gets(fake), "crossref_singles": crossref_singles(fake)}
    fake.reset_log()
    bulk._ENABLED = False
    try:
        async with session_for(fake) as session:
            plain = await run(frame, resolve=False, config=config(session, **credentials))
    finally:
        bulk._ENABLED = True
    return primed, plain, counts


async def test_list_files_rows_equal_the_per_article_path(
    small_world: World, fake: FakeUpstream
) -> None:
    frame = mixed_frame(small_world)

    async def run(frame: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
        return await pipeline.list_files(frame, sources=BUNDLED, **kwargs)

    primed, plain, counts = await both_ways(
        fake, run, frame, semantic_scholar_api_key=S2_KEY, springer_meta_api_key=META_KEY
    )
    assert counts == {"s2_gets": 0, "crossref_singles": 0}
    assert s2_gets(fake) > 0 and crossref_singles(fake) > 0  # the comparison did ask per article
    assert primed["files"].tolist() == plain["files"].tolist()
    assert primed["n_files"].tolist() == plain["n_files"].tolist()
    assert primed["files_error"].isna().all() and plain["files_error"].isna().all()
    assert primed["n_files"].sum() > 0


async def test_related_rows_equal_the_per_article_path(
    small_world: World, fake: FakeUpstream
) -> None:
    primed, plain, counts = await both_ways(fake, pipeline.related, mixed_frame(small_world))
    assert counts["crossref_singles"] == 0
    for column in ("related", "n_related", "preprint_doi", "published_doi", "related_error"):
        assert primed[column].tolist() == plain[column].tolist(), column
    assert primed["n_related"].sum() > 0


async def test_elsevier_bodies_equal_the_per_article_path(
    small_world: World, fake: FakeUpstream
) -> None:
    primed, plain, counts = await both_ways(
        fake, pipeline.fetch_bodies, mixed_frame(small_world), elsevier_api_key=ELSEVIER_KEY
    )
    assert counts["crossref_singles"] == 0
    for column in ("body", "body_source", "body_size", "body_error"):
        assert primed[column].tolist() == plain[column].tolist(), column
    assert (primed["body_source"] == "elsevier_oa").sum() > 0


# -- failures ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "host", "path", "failure", "reason"),
    [
        (
            SemanticScholarFileSource(),
            HOST_S2,
            "/graph/v1/paper/batch",
            FakeResponse(503, {"message": "Service Unavailable"}),
            "HTTP 503 from api.semanticscholar.org",
        ),
        (CrossrefFileSource(), HOST_CROSSREF, "/works", "drop", "api.crossref.org"),
    ],
    ids=["s2-503", "crossref-drop"],
)
async def test_an_abandoned_bulk_chunk_abandons_its_rows_and_a_rerun_retries_them(
    small_world: World,
    fake: FakeUpstream,
    source: FileSource,
    host: str,
    path: str,
    failure: FakeResponse | str,
    reason: str,
) -> None:
    frame = doi_frame(small_world.articles)
    fake.fail_next(host, path, *[failure] * FAST_RETRY.max_attempts)
    keyed = {"semantic_scholar_api_key": S2_KEY}  # quicker pacing, same behaviour
    async with session_for(fake) as session:
        first = await pipeline.list_files(
            frame, sources=[source], resolve=False, config=config(session, **keyed)
        )
        # The chunk's rows were given up at once: no per-article request followed.
        assert s2_gets(fake) == 0 and crossref_singles(fake) == 0
        assert fake.count(host) == FAST_RETRY.max_attempts
        errors = first["files_error"].tolist()
        assert all(str(e).startswith("abandoned: ") and reason in str(e) for e in errors)
        assert first["n_files"].isna().all()

        fake.reset_log()
        second = await pipeline.list_files(
            first, sources=[source], resolve=False, config=config(session, **keyed)
        )
        assert fake.count(host) == 1  # one bulk request for all the retried rows
        assert session.primed_count == 0
    assert second["files_error"].isna().all()
    assert second["n_files"].sum() > 0

    fake.reset_log()
    async with session_for(fake) as session:
        clean = await pipeline.list_files(
            frame, sources=[source], resolve=False, config=config(session, **keyed)
        )
    assert second["files"].tolist() == clean["files"].tolist()


async def test_an_unusable_bulk_answer_falls_back_to_per_article_requests(
    small_world: World, fake: FakeUpstream
) -> None:
    frame = doi_frame(small_world.articles)
    refusal = FakeResponse(400, {"status": "failed", "message-type": "validation-failure"})
    fake.fail_next(HOST_CROSSREF, "/works", refusal)
    async with session_for(fake) as session:
        out = await pipeline.list_files(
            frame, sources=[CrossrefFileSource()], resolve=False, config=config(session)
        )
    # Nothing was primed from the refused list: each DOI was asked on its own.
    assert crossref_lists(fake) == 1
    assert crossref_singles(fake) == distinct_dois(frame)
    fake.reset_log()
    async with session_for(fake) as session:
        clean = await pipeline.list_files(
            frame, sources=[CrossrefFileSource()], resolve=False, config=config(session)
        )
    assert crossref_singles(fake) == 0
    assert out["files"].tolist() == clean["files"].tolist()
    assert out["files_error"].isna().all()


# -- sources without a bulk form -----------------------------------------------------------------


class Recorder:
    """A custom per-article file source: one file per DOI, and a log of what it was asked."""

    name = "recorder"

    def __init__(self) -> None:
        self.asked: list[ArticleIds] = []

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> tuple[File, ...]:
        self.asked.append(article_ids)
        if article_ids.doi is None:
            return ()
        uri = f"https://{HOST_REPOSITORY}/custom/{article_ids.doi}"
        return (File(FileKind.BODY, self.name, "application/pdf", uri=uri),)

    async def fetch_file(
        self, file: File, *, credentials: Mapping[str, object] | None = None, http: Http
    ) -> None:
        return None


class MyCrossref(CrossrefFileSource):
    """A subclass may ask differently, so it keeps its per-article requests."""


async def test_custom_sources_keep_working_per_article(
    small_world: World, fake: FakeUpstream
) -> None:
    frame = doi_frame(small_world.articles, repeats=2)
    distinct = distinct_dois(frame)
    recorder = Recorder()
    async with session_for(fake) as session:
        out = await pipeline.list_files(
            frame,
            sources=[recorder, SemanticScholarFileSource(), MyCrossref()],
            resolve=False,
            config=config(session),
        )
    assert len(recorder.asked) == distinct  # once per distinct bundle
    assert s2_posts(fake) == 1 and s2_gets(fake) == 0
    assert crossref_lists(fake) == 0 and crossref_singles(fake) == distinct
    for doi, found in zip(out["doi"], out["files"], strict=True):
        # A repeat in another casing shares its first row's unit (and its DOI casing).
        mine = [str(f.uri).lower() for f in found if f.source == "recorder"]
        assert mine == [f"https://{HOST_REPOSITORY}/custom/{doi}".lower()]
    assert out["files_error"].isna().all()


def test_only_the_services_a_step_uses_are_primed() -> None:
    assert bulk.for_file_sources(None) == {
        bulk.Service.SEMANTIC_SCHOLAR,
        bulk.Service.CROSSREF,
        bulk.Service.SPRINGER_META,
    }
    assert bulk.for_file_sources([Recorder(), MyCrossref()]) == frozenset()
    # The ladder's Europe PMC rung is told its misses in advance; Crossref needs an Elsevier key.
    full_text = bulk.Service.EUROPE_PMC_FULL_TEXT
    assert bulk.for_fetchers(None, {}) == {full_text}
    assert bulk.for_fetchers(None, {"elsevier_api_key": "  "}) == {full_text}
    assert bulk.for_fetchers(None, {"elsevier_api_key": "k"}) == {bulk.Service.CROSSREF, full_text}
    assert bulk.for_fetchers([ElsevierFetcher()], {"elsevier_api_key": "k"}) == {
        bulk.Service.CROSSREF
    }
    assert bulk.for_fetchers([], {"elsevier_api_key": "k"}) == frozenset()
    # OpenAccess is asked in OR pages: its own key is all it needs (issue 24).
    springer = {"springer_api_key": "oa", "springer_meta_api_key": "meta"}
    assert bulk.Service.SPRINGER_OPEN_ACCESS in bulk.for_fetchers(None, springer)
    assert bulk.for_fetchers(None, {"springer_api_key": "oa"}) == {
        full_text,
        bulk.Service.SPRINGER_OPEN_ACCESS,
    }
    assert bulk.for_fetchers(None, {"springer_meta_api_key": "meta"}) == {full_text}
    assert bulk.for_related() == {bulk.Service.CROSSREF}


async def test_the_switch_really_turns_priming_off(
    small_world: World, fake: FakeUpstream, per_article: None
) -> None:
    frame = doi_frame(small_world.articles[:5])
    async with session_for(fake) as session:
        await pipeline.list_files(
            frame, sources=[CrossrefFileSource()], resolve=False, config=config(session)
        )
    assert crossref_lists(fake) == 0 and crossref_singles(fake) == 5


async def test_a_primer_that_breaks_leaves_the_step_to_the_per_article_path(
    small_world: World, fake: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def boom(session: Session, bundles: object, creds: object, keys: list[str]) -> None:
        keys.append(session.prime("GET", "https://api.crossref.org/works/x", failure="unused"))
        raise RuntimeError("a bug in a primer")

    monkeypatch.setitem(bulk._PRIMERS, bulk.Service.CROSSREF, boom)
    frame = doi_frame(small_world.articles[:5])
    async with session_for(fake) as session:
        out = await pipeline.list_files(
            frame, sources=[CrossrefFileSource()], resolve=False, config=config(session)
        )
        assert session.primed_count == 0  # what it primed before breaking went too
    assert crossref_singles(fake) == 5
    assert out["files_error"].isna().all()
