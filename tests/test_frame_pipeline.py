"""The row pipeline: dedup, absent / abandoned / invalid rows, reruns, row-by-row parity.

The small fakes here (a Europe PMC full-text fetcher, an NCBI ID Converter
batch resolver, a static file source) follow the protocols of
``litfetch_df.operations.types`` and speak to the local fake upstream in the
shapes upstream.md documents; other frame tests import them. The end-to-end
tests at the bottom run the real default ladder, file sources, resolvers and
licence reader against the synthetic world of ``tests/fakes/world.py``.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import litfetch_df.frame  # registers .lit
from litfetch_df import JATS_XML, ArticleIds, Blob, File, FileKind, Http, Rate, Session
from litfetch_df.frame.engine.pipeline import is_abandoned
from litfetch_df.frame.engine.progress import Progress
from litfetch_df.operations.fileset import bulk_first_file_sources
from litfetch_df.wire.http import RETRYABLE_STATUSES, UpstreamUnavailable
from tests.conftest import FAST_RETRY, data_bytes
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream, json_response, xml_response

assert litfetch_df.frame

JATS = data_bytes("jats", "PMC3166277_bmc-microbiol_1471-2180-11-174.nxml")
JATS_2 = data_bytes("jats", "PMC2599765_ehp-116-1694_public-domain.nxml")
EBI = "www.ebi.ac.uk"
REST = "/europepmc/webservices/rest"
NCBI = "pmc.ncbi.nlm.nih.gov"
IDCONV = "/tools/idconv/api/v1/articles/"
FILES = "files.example.org"


# -- protocol-following fakes ----------------------------------------------------------------


class EpmcFetcher:
    """Europe PMC fullTextXML by PMCID: 200 is a hit, anything else declines."""

    name = "europe_pmc"
    requires = frozenset({"pmcid"})

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        url = f"https://{EBI}{REST}/{article_ids.pmcid}/fullTextXML"
        response = await http.get(url, rate=Rate.EUROPE_PMC)
        if response.status_code != 200:
            return None
        return Blob(File(FileKind.BODY, self.name, JATS_XML, uri=url), response.content)


class SlowFetcher:
    """A fetcher that never finishes (for interrupt tests)."""

    name = "slow"
    requires = frozenset({"pmcid"})

    def __init__(self, *, on_started: int = 0, then: Callable[[], object] | None = None) -> None:
        self.started = 0
        self.cancelled = 0
        # ``then`` runs once ``on_started`` fetches have begun (an interrupt, say), so a test
        # interrupts at a point of the work, not after a guess at how long it takes.
        self._on_started = on_started
        self._then = then

    async def fetch(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        import asyncio

        self.started += 1
        try:
            await http.get(f"https://{EBI}{REST}/{article_ids.pmcid}/fullTextXML")
            if self._then is not None and self.started == self._on_started:
                self._then()
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return None


class IdconvBatch:
    """NCBI ID Converter batch resolver: 200 ids a request, abandoned chunks on 429/5xx."""

    def __init__(self) -> None:
        self.batches: list[list[ArticleIds]] = []

    async def __call__(
        self, batch: Sequence[ArticleIds], http: Http
    ) -> tuple[Sequence[ArticleIds], set[int]]:
        self.batches.append(list(batch))
        out = list(batch)
        abandoned: set[int] = set()
        for start in range(0, len(batch), 200):
            chunk = range(start, min(start + 200, len(batch)))
            keys = {i: batch[i].pmid or batch[i].pmcid or batch[i].doi for i in chunk}
            wanted = sorted({k for k in keys.values() if k})
            if not wanted:
                continue
            try:
                response = await http.get(
                    f"https://{NCBI}{IDCONV}",
                    params={"ids": ",".join(wanted), "format": "json", "tool": "litfetch"},
                    rate=Rate.NCBI_UNKEYED,
                )
            except UpstreamUnavailable:
                abandoned.update(chunk)
                continue
            if response.status_code in RETRYABLE_STATUSES:
                abandoned.update(chunk)
                continue
            if response.status_code != 200:
                continue
            found: dict[str, ArticleIds] = {}
            for rec in response.json().get("records", []):
                if rec.get("status") == "error":
                    continue
                ids = ArticleIds(
                    pmid=str(rec["pmid"]) if rec.get("pmid") else None,
                    pmcid=rec.get("pmcid"),
                    doi=rec.get("doi"),
                )
                found[rec["requested-id"].lower()] = ids
            for i, key in keys.items():
                if key and key.lower() in found:
                    out[i] = batch[i].merge(found[key.lower()])
        return out, abandoned


class StaticFiles:
    """A file source listing fixed Files per PMCID and downloading them from the fake."""

    def __init__(self, name: str, listing: Mapping[str, tuple[File, ...]]) -> None:
        self.name = name
        self.listing = dict(listing)

    async def list_files(
        self,
        article_ids: ArticleIds,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> tuple[File, ...]:
        if article_ids.pmcid is None:
            return ()
        response = await http.get(f"https://{FILES}/list/{article_ids.pmcid}")
        if response.status_code != 200:
            return ()
        return self.listing.get(article_ids.pmcid, ())

    async def fetch_file(
        self,
        file: File,
        *,
        credentials: Mapping[str, object] | None = None,
        http: Http,
    ) -> Blob | None:
        assert file.uri is not None
        response = await http.get(file.uri)
        return Blob(file, response.content) if response.status_code == 200 else None


# -- the fake world these talk to --------------------------------------------------------------

ARTICLES = {
    # pmcid: (pmid, doi, body)
    "PMC7000001": ("30000001", "10.1000/abc.1", JATS),
    "PMC7000002": ("30000002", "10.1000/abc.2", JATS_2),
    "PMC7000003": ("30000003", "10.1000/abc.3", None),  # in PMC, no open full text
}


def idconv_handler(req: FakeRequest) -> FakeResponse:
    records: list[dict[str, Any]] = []
    for raw in (req.param("ids") or "").split(","):
        hit = None
        for pmcid, (pmid, doi, _) in ARTICLES.items():
            if raw.lower() in (pmcid.lower(), pmid, doi.lower()):
                hit = {"requested-id": raw, "pmcid": pmcid, "pmid": int(pmid), "doi": doi}
        records.append(
            hit or {"requested-id": raw, "status": "error", "errmsg": "Identifier not found in PMC"}
        )
    return json_response(
        {"status": "ok", "responseDate": "2026-03-02 14:05:11", "records": records}
    )


def fulltext_handler(req: FakeRequest) -> FakeResponse:
    m = re.fullmatch(rf"{REST}/(PMC\d+)/fullTextXML", req.path)
    body = ARTICLES.get(m.group(1), (None, None, None))[2] if m else None
    if body is None:
        return FakeResponse(404, b"")
    return xml_response(body)


def install(fake: FakeUpstream) -> None:
    """Serve ARTICLES: Europe PMC full text, the ID Converter, and a file host."""
    fake.route(EBI, rf"{REST}/[^/]+/fullTextXML", fulltext_handler)
    fake.route(NCBI, IDCONV, idconv_handler)
    fake.route(FILES, r"/list/.+", FakeResponse(200, b"ok"))
    fake.route(FILES, r"/get/.+", lambda req: FakeResponse(200, f"bytes of {req.path}".encode()))


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    install(fake)
    yield fake


def session_for(fake: FakeUpstream, **kwargs: Any) -> Session:
    """A not-yet-entered Session routed to the fake (the frame enters it)."""
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, **kwargs)


def fulltext_count(fake: FakeUpstream, pmcid: str | None = None) -> int:
    path = f"{REST}/{pmcid}/" if pmcid else REST
    return sum(1 for r in fake.requests(EBI, path) if r.path.endswith("/fullTextXML"))


CFG: dict[str, Any] = {"progress": False}
# A Semantic Scholar key moves its pacing from 1/s to 10/s, which keeps these tests quick.
S2_KEY = {"semantic_scholar_api_key": "test-s2-key"}


# -- dedup ---------------------------------------------------------------------------------------


async def test_duplicate_bundles_are_fetched_once_and_fanned_out(world: FakeUpstream) -> None:
    df = pd.DataFrame(
        {
            "PMCID": ["PMC7000001", "pmc7000001", " 7000001 ", "PMC7000002", "PMC7000002.1"],
            "other": [1, 2, 3, 4, 5],
        },
        index=[10, 20, 30, 40, 50],
    )
    out = await df.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, session=session_for(world), **CFG
    )
    assert fulltext_count(world, "PMC7000001") == 1
    assert fulltext_count(world, "PMC7000002") == 1
    assert out["body_source"].tolist() == ["europe_pmc"] * 5
    assert out.loc[10, "body"] is out.loc[30, "body"]  # the same Blob fanned back
    assert out.loc[10, "body"].content == JATS
    assert out.loc[50, "body"].content == JATS_2


async def test_dois_differing_only_in_case_are_one_unit(world: FakeUpstream) -> None:
    resolver = IdconvBatch()
    df = pd.DataFrame({"doi": ["10.1000/ABC.1", "10.1000/abc.1", "https://doi.org/10.1000/abc.1"]})
    out = await df.lit.resolve_async(resolver=resolver, session=session_for(world), **CFG)
    assert len(resolver.batches) == 1 and len(resolver.batches[0]) == 1
    assert out["pmcid"].tolist() == ["PMC7000001"] * 3
    # each row keeps its own (normalised) DOI casing
    assert out["doi"].tolist() == ["10.1000/ABC.1", "10.1000/abc.1", "10.1000/abc.1"]


# -- absent, abandoned, invalid ---------------------------------------------------------------


async def test_absent_abandoned_and_invalid_rows_are_told_apart(world: FakeUpstream) -> None:
    world.fail_next(EBI, f"{REST}/PMC7000002/", *[FakeResponse(503, b"busy")] * 3)
    df = pd.DataFrame(
        {"pmcid": ["PMC7000001", "PMC7000003", "PMC7000002", "PMCfoo", None, "PMC7000009"]}
    )
    out = await df.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, session=session_for(world), **CFG
    )
    errors = out["body_error"].tolist()
    # hit
    assert out.loc[0, "body_source"] == "europe_pmc" and pd.isna(errors[0])
    # absent: nothing serves it -> NA, no error
    assert pd.isna(out.loc[1, "body"]) and pd.isna(errors[1])
    assert pd.isna(out.loc[5, "body"]) and pd.isna(errors[5])
    # abandoned: retries exhausted -> NA and a reason
    assert pd.isna(out.loc[2, "body"])
    assert errors[2].startswith("abandoned: HTTP 503 from www.ebi.ac.uk")
    # invalid: reported, never sent
    assert errors[3] == "invalid pmcid: 'PMCfoo'"
    assert not any("foo" in r.path.lower() for r in world.requests(EBI))
    # blank: absent
    assert pd.isna(out.loc[4, "body"]) and pd.isna(errors[4])
    assert fulltext_count(world, "PMC7000002") == 3  # the session retried before abandoning


async def test_transport_failure_is_abandoned(world: FakeUpstream) -> None:
    world.fail_next(EBI, f"{REST}/PMC7000001/", "drop", "drop", "drop")
    df = pd.DataFrame({"pmcid": ["PMC7000001"]})
    out = await df.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, session=session_for(world), **CFG
    )
    assert is_abandoned(out.loc[0, "body_error"])
    assert "www.ebi.ac.uk" in out.loc[0, "body_error"]


async def test_invalid_value_keeps_the_rows_other_valid_ids(world: FakeUpstream) -> None:
    resolver = IdconvBatch()
    df = pd.DataFrame({"PMID": ["not-a-pmid"], "DOI": ["10.1000/abc.2"]})
    out = await df.lit.resolve_async(resolver=resolver, session=session_for(world), **CFG)
    assert out.loc[0, "resolve_error"] == "invalid pmid: 'not-a-pmid'"
    assert out.loc[0, "pmcid"] == "PMC7000002"
    assert resolver.batches == [[ArticleIds(doi="10.1000/abc.2")]]
    sent = [r.param("ids") for r in world.requests(NCBI)]
    assert sent == ["10.1000/abc.2"]


async def test_a_code_error_in_one_unit_does_not_sink_the_frame(world: FakeUpstream) -> None:
    class Broken(EpmcFetcher):
        async def fetch(
            self,
            article_ids: ArticleIds,
            *,
            credentials: Mapping[str, object] | None = None,
            http: Http,
        ) -> Blob | None:
            if article_ids.pmcid == "PMC7000002":
                raise RuntimeError("boom")
            return await super().fetch(article_ids, credentials=credentials, http=http)

    df = pd.DataFrame({"pmcid": ["PMC7000001", "PMC7000002"]})
    out = await df.lit.fetch_bodies_async(
        fetchers=[Broken()], resolve=False, session=session_for(world), **CFG
    )
    assert out.loc[0, "body_source"] == "europe_pmc"
    assert out.loc[1, "body_error"] == "error: RuntimeError: boom"
    assert not is_abandoned(out.loc[1, "body_error"])


# -- reruns -------------------------------------------------------------------------------------


async def test_rerun_retries_only_abandoned_rows(world: FakeUpstream) -> None:
    world.fail_next(EBI, f"{REST}/PMC7000002/", *[FakeResponse(503, b"busy")] * 3)
    df = pd.DataFrame({"pmcid": ["PMC7000001", "PMC7000002", "PMC7000003", "bad", "PMC7000002"]})
    session = session_for(world)
    first = await df.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, session=session, **CFG
    )
    assert [is_abandoned(e) for e in first["body_error"]] == [False, True, False, False, True]
    world.reset_log()
    second = await first.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, session=session, **CFG
    )
    # one request: the abandoned bundle (two rows share it); done and absent rows cost nothing
    assert [r.path for r in world.requests()] == [f"{REST}/PMC7000002/fullTextXML"]
    assert second.loc[1, "body"].content == JATS_2 and pd.isna(second.loc[1, "body_error"])
    assert second.loc[4, "body"].content == JATS_2
    assert second.loc[0, "body"] is first.loc[0, "body"]
    assert second.loc[3, "body_error"] == "invalid pmcid: 'bad'"
    assert pd.isna(second.loc[2, "body"]) and pd.isna(second.loc[2, "body_error"])
    world.reset_log()
    # nothing left to retry: a third call sends nothing
    third = await second.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, session=session, **CFG
    )
    assert world.count() == 0
    pd.testing.assert_frame_equal(third, second)
    # force=True redoes every row
    await second.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, force=True, session=session, **CFG
    )
    assert fulltext_count(world) == 3


async def test_resolve_rerun_retries_only_abandoned_rows(world: FakeUpstream) -> None:
    resolver = IdconvBatch()
    session = session_for(world)
    world.fail_next(NCBI, IDCONV, *[FakeResponse(503, b"busy")] * 3)
    df = pd.DataFrame({"PMID": ["30000001", "30000002", "", "x"]})
    first = await df.lit.resolve_async(resolver=resolver, session=session, **CFG)
    # Each row's text ends with the row's own id (not the batch URL naming both).
    assert first["resolve_error"].tolist()[:2] == [
        f"abandoned: HTTP 503 from pmc.ncbi.nlm.nih.gov after 3 attempts [pmid {pmid}]"
        for pmid in ("30000001", "30000002")
    ]
    assert pd.isna(first.loc[2, "resolve_error"])
    assert first.loc[3, "resolve_error"] == "invalid pmid: 'x'"
    assert first["pmcid"].isna().all()
    world.reset_log()
    second = await first.lit.resolve_async(resolver=resolver, session=session, **CFG)
    assert world.count() == 1
    assert second["pmcid"].tolist()[:2] == ["PMC7000001", "PMC7000002"]
    assert second["resolve_error"].isna().tolist() == [True, True, True, False]
    world.reset_log()
    await second.lit.resolve_async(resolver=resolver, session=session, **CFG)
    assert world.count() == 0


# -- parity with the single-article calls ------------------------------------------------------


async def test_results_equal_row_by_row_single_article_calls(world: FakeUpstream) -> None:
    world.fail_next(EBI, f"{REST}/PMC7000003/", FakeResponse(503, b"busy"))  # retried, recovers
    pmcids = ["PMC7000002", "PMC7000001", "PMC7000003", "PMC7000009", "PMC7000001", None]
    df = pd.DataFrame({"pmcid": pmcids, "n": range(6)})
    out = await df.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, session=session_for(world), **CFG
    )
    async with session_for(world) as session:
        for i, pmcid in enumerate(pmcids):
            if pmcid is None:
                assert pd.isna(out.loc[i, "body"])
                continue
            async with session.scope() as scope:
                blob = await scope.fetch_body(
                    ArticleIds(pmcid=pmcid), resolver=None, fetchers=[EpmcFetcher()]
                )
            got = out.loc[i, "body"]
            if blob is None:
                assert pd.isna(got)
            else:
                assert got == blob
                assert out.loc[i, "body_size"] == len(blob.content)
                assert out.loc[i, "body_media_type"] == blob.file.media_type


# -- concurrency -------------------------------------------------------------------------------


async def test_units_run_concurrently_up_to_the_bound(fake: FakeUpstream) -> None:
    fake.route(EBI, rf"{REST}/[^/]+/fullTextXML", xml_response(JATS))
    # Europe PMC is paced at its published 10/s: answers slower than its interval overlap.
    fake.latency(0.3, EBI)
    df = pd.DataFrame({"pmcid": [f"PMC{7100000 + i}" for i in range(12)]})
    out = await df.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()],
        resolve=False,
        session=session_for(fake),
        concurrency=4,
        progress=False,
    )
    assert out["body_source"].notna().all()
    assert 2 <= fake.max_in_flight[EBI] <= 4


# -- out_dir ---------------------------------------------------------------------------------------


async def test_out_dir_keeps_paths_not_bytes(world: FakeUpstream, tmp_path: Path) -> None:
    df = pd.DataFrame({"pmcid": ["PMC7000001", "PMC7000002", "PMC7000001", "PMC7000003"]})
    out = await df.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()],
        resolve=False,
        out_dir=tmp_path / "bodies",
        session=session_for(world),
        **CFG,
    )
    assert "body" not in out.columns
    assert str(out["body_path"].dtype) == "string"
    paths = out["body_path"].tolist()
    assert Path(paths[0]).name == "PMC7000001.xml" and paths[0] == paths[2]
    assert Path(paths[0]).read_bytes() == JATS
    assert Path(paths[1]).read_bytes() == JATS_2
    assert pd.isna(paths[3])
    assert out["body_size"].tolist()[:3] == [len(JATS), len(JATS_2), len(JATS)]
    assert sorted(p.name for p in (tmp_path / "bodies").iterdir()) == [
        "PMC7000001.xml",
        "PMC7000002.xml",
    ]


async def test_licences_read_from_body_files(world: FakeUpstream, tmp_path: Path) -> None:
    df = pd.DataFrame({"pmcid": ["PMC7000001", "PMC7000002"]})
    session = session_for(world)
    on_disk = await df.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, out_dir=tmp_path, session=session, **CFG
    )
    in_memory = await df.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, session=session, **CFG
    )
    world.reset_log()
    a = await on_disk.lit.licences_async(resolve=False, session=session, **CFG)
    b = await in_memory.lit.licences_async(resolve=False, session=session, **CFG)
    assert world.count() == 0  # the bytes carry the licence: no Unpaywall request
    cols = ["licence", "licence_family", "access", "licence_basis", "licence_error"]
    pd.testing.assert_frame_equal(a[cols], b[cols])
    assert a["licence_basis"].tolist() == ["artifact", "artifact"]
    assert a.loc[0, "licence"] == "http://creativecommons.org/licenses/by/2.0"


# -- progress ------------------------------------------------------------------------------------


def test_progress_bar_shows_rows_sources_and_errors() -> None:
    buffer = io.StringIO()
    with Progress(5, desc="fetch_bodies", enabled=True, file=buffer) as bar:
        bar.advance(3, label="europe_pmc")
        bar.advance(1, label="pmc_oa_s3")
        bar.advance(1, error=True)
        assert bar.postfix() == {"europe_pmc": 3, "pmc_oa_s3": 1, "errors": 1}
    text = buffer.getvalue()
    assert "fetch_bodies" in text and "5/5" in text
    assert "europe_pmc=3" in text and "errors=1" in text


def test_progress_disabled_writes_nothing() -> None:
    buffer = io.StringIO()
    with Progress(5, desc="x", enabled=False, file=buffer) as bar:
        bar.advance(5, label="a")
    assert buffer.getvalue() == ""
    assert bar.done == 5


# -- end to end with the real defaults -----------------------------------------------------------


@pytest.fixture
def synthetic(fake: FakeUpstream) -> Iterator[tuple[FakeUpstream, Any]]:
    from tests.fakes.world import CC_BY, CC_BY_NC, Article, BodyHome, World

    articles = [
        Article(
            pmid="30000001",
            pmcid="PMC7000001",
            pmc_versions=1,
            doi="10.1000/abc.1",
            body=BodyHome.PMC_OA,
            n_supplementary=2,
            oa_status="gold",
            pdf_url="https://publisher.example.org/pdf/abc.1.pdf",
        ),
        Article(
            pmid="30000002",
            pmcid="PMC7000002",
            doi="10.1000/abc.2",
            body=BodyHome.EUROPE_PMC,
            licence=CC_BY_NC,
        ),
        Article(pmid="30000003", doi="10.1000/abc.3", oa_status="closed", licence=None),
        Article(
            doi="10.1101/2024.01.01.000001",
            published_doi="10.1000/abc.4",
            oa_status="green",
            licence=CC_BY,
        ),
        Article(doi="10.1000/abc.4", preprint_doi="10.1101/2024.01.01.000001"),
    ]
    world = World(articles)
    world.install(fake)
    yield fake, world


def test_every_step_end_to_end_with_real_defaults(
    synthetic: tuple[FakeUpstream, Any], tmp_path: Path
) -> None:
    fake, _ = synthetic
    session = session_for(fake, contact="me@lab.example")
    df = pd.DataFrame(
        {
            "PMID": ["30000001", "30000002.0", None, "30000001", None],
            "DOI": [
                None,
                None,
                "doi:10.1000/ABC.3",
                None,
                "https://doi.org/10.1101/2024.01.01.000001",
            ],
        },
        index=pd.Index(list("abcde"), name="row"),
    )
    resolved = df.lit.resolve(session=session, **CFG)
    assert resolved["pmcid"].tolist()[:2] == ["PMC7000001", "PMC7000002"]
    assert resolved.loc["c", "pmid"] == "30000003"
    bodies = resolved.lit.fetch_bodies(session=session, **CFG)
    assert bodies.loc["a", "body_source"] == "pmc_oa_s3"
    assert bodies.loc["b", "body_source"] == "europe_pmc"
    assert pd.isna(bodies.loc["c", "body"]) and pd.isna(bodies.loc["c", "body_error"])
    terms = bodies.lit.licences(session=session, **CFG)
    assert terms.loc["a", "licence_basis"] == "artifact"
    # OpenAlex's bulk works filter knows the DOI: its open_access answers, not Unpaywall.
    assert terms.loc["c", "licence_basis"] == "openalex"
    assert terms.loc["c", "access"] == "closed"
    listed = terms.lit.list_files(session=session, credentials=S2_KEY, **CFG)
    assert listed.loc["a", "n_files"] >= 3
    long = listed.lit.files()
    assert list(long.index.unique()) == [label for label in "abcde" if label in set(long.index)]
    assert long.index.name == "row"
    assert set(long["kind"]) <= {"body", "supplementary"}
    fetched = long.lit.fetch_files(tmp_path, session=session, **CFG)
    assert fetched["fetch_error"].isna().all(), fetched["fetch_error"].tolist()
    for path in fetched["path"]:
        assert Path(path).is_file() and Path(path).resolve().is_relative_to(tmp_path.resolve())
    rel = listed.lit.related(session=session, **CFG)
    assert rel.loc["e", "published_doi"] == "10.1000/abc.4"
    longrel = rel.lit.relations()
    assert longrel.loc[["e"], "related_doi"].tolist() == ["10.1000/abc.4"]
    assert longrel.loc[["e"], "relation"].tolist() == ["published"]
    summary = rel.lit.summary()
    assert summary.loc[("rows", "total"), "count"] == 5
    assert summary.loc[("bodies", "pmc_oa_s3"), "count"] == 2
    # the input frame was never touched
    assert list(df.columns) == ["PMID", "DOI"]


async def test_real_defaults_equal_row_by_row_calls(synthetic: tuple[FakeUpstream, Any]) -> None:
    fake, _ = synthetic
    df = pd.DataFrame(
        {
            "pmid": ["30000001", "30000002", "30000003", None],
            "pmcid": ["PMC7000001", "PMC7000002", None, None],
            "doi": ["10.1000/abc.1", "10.1000/abc.2", "10.1000/abc.3", "10.1000/abc.4"],
        }
    )
    session = session_for(fake, contact="me@lab.example")
    creds = S2_KEY
    async with session:
        out = await df.lit.fetch_bodies_async(resolve=False, session=session, **CFG)
        out = await out.lit.list_files_async(
            resolve=False, session=session, credentials=creds, **CFG
        )
        out = await out.lit.related_async(resolve=False, session=session, **CFG)
        for i, row in df.iterrows():
            ids = ArticleIds.parse(pmid=row["pmid"], pmcid=row["pmcid"], doi=row["doi"])
            async with session.scope() as scope:
                blob = await scope.fetch_body(ids, resolver=None)
            async with session.scope() as scope:
                # The frame lists with OpenAlex before Unpaywall: the same sources here.
                found = await scope.list_files(
                    ids, sources=bulk_first_file_sources(), credentials=creds
                )
            async with session.scope() as scope:
                rel = await scope.related_ids(ids)
            got = out.loc[i, "body"]
            assert (pd.isna(got) and blob is None) or got == blob
            assert out.loc[i, "files"] == found
            assert out.loc[i, "related"] == rel


def test_default_progress_stays_quiet_for_quick_runs() -> None:
    buffer = io.StringIO()
    with Progress(3, desc="quick", enabled=None, file=buffer) as bar:
        bar.advance(3, label="a")
    assert buffer.getvalue() == ""  # shown only once a run has lasted a couple of seconds


async def test_licences_take_the_access_status_the_bytes_leave_out_from_unpaywall(
    fake: FakeUpstream,
) -> None:
    # A licence stated in the bytes with no open-access statement anywhere (issue 15).
    from tests.test_unpaywall import GOLD, route_unpaywall

    route_unpaywall(fake)
    content = (
        b'<article xmlns:xlink="http://www.w3.org/1999/xlink"><front><article-meta><permissions>'
        b'<license xlink:href="https://creativecommons.org/licenses/by-nc/4.0/"/></permissions>'
        b"</article-meta></front><body/></article>"
    )
    blob = Blob(File(FileKind.BODY, "test", JATS_XML), content)
    df = pd.DataFrame({"doi": [GOLD, "10.1000/no-body.1"], "body": [blob, None]})
    session = session_for(fake, contact="me@lab.example")
    terms = await df.lit.licences_async(resolve=False, session=session, **CFG)
    row = terms.loc[0]
    assert row["licence"] == "https://creativecommons.org/licenses/by-nc/4.0/"
    assert row["licence_family"] == "cc-by-nc"
    assert (row["licence_basis"], row["access"], row["access_basis"]) == (
        "artifact",
        "gold",
        "unpaywall",
    )
    assert pd.isna(terms.loc[1, "licence_basis"]) and pd.isna(terms.loc[1, "access_basis"])
