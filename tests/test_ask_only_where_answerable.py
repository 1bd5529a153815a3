"""Ask only where an answer can exist (issue 12): publisher gating, Europe PMC's own record,
and a resolution that reaches a fixpoint, counted per host on the fake world."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import httpx
import pandas as pd
import pytest

from litfetch_df import ArticleIds, Session
from litfetch_df.frame.engine import onepass, pipeline
from litfetch_df.sources.europe_pmc_search import EuropePmcHolding, holdings
from tests.conftest import FAST_RETRY, mock_session
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream
from tests.fakes.world import (
    HOST_EBI,
    HOST_NCBI,
    HOST_OPENALEX,
    HOST_SPRINGER,
    Article,
    BodyHome,
    Publisher,
    World,
)

CONTACT = "dev@lab.example"
OA_KEY = "springer-oa-gating"
META_KEY = "springer-meta-gating"
REST = "/europepmc/webservices/rest"
SEARCH = f"{REST}/search"


def session_for(fake: FakeUpstream) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT)


def config(session: Session, **credentials: str) -> pipeline.CallOptions:
    return {"session": session, "progress": False, "credentials": dict(credentials)}


def full_text_requests(fake: FakeUpstream) -> list[str]:
    return [r.path for r in fake.requests(HOST_EBI) if r.path.endswith("/fullTextXML")]


# -- the world -------------------------------------------------------------------------------------

# In the PMC bucket: the S3 rung serves it, Europe PMC is never reached.
IN_BUCKET = Article(
    pmid="31000001", pmcid="PMC8000001", pmc_versions=1, doi="10.1000/g.1", body=BodyHome.PMC_OA
)
# In PMC but not open access: Europe PMC's record says it holds no full text.
NOT_OPEN = Article(pmid="31000002", pmcid="PMC8000002", doi="10.1000/g.2", in_pmc=True)
# A Europe-PMC-only author manuscript: its record says the full text is there.
MANUSCRIPT = Article(
    pmid="31000003", pmcid="PMC8000003", doi="10.1000/g.3", body=BodyHome.EUROPE_PMC
)
# Europe PMC search does not know it: nothing known, asked as before.
UNSEARCHED = Article(
    pmid="31000004", pmcid="PMC8000004", doi="10.1000/g.4", in_pmc=True, in_europe_pmc_search=False
)
# A DOI-only row of a Europe-PMC-only article: OpenAlex gives its PMID, not its PMCID.
DOI_ONLY_MANUSCRIPT = Article(
    pmid="31000005", pmcid="PMC8000005", doi="10.1000/g.5", body=BodyHome.EUROPE_PMC
)
# Springer Nature: one open access (served by the OpenAccess JATS rung), one not.
SPRINGER_OPEN = Article(
    pmid="31000006",
    doi="10.1007/s1-026-00006-x",
    publisher=Publisher.SPRINGER,
    body=BodyHome.SPRINGER,
)
SPRINGER_CLOSED = Article(pmid="31000007", doi="10.1186/s2-026-7", publisher=Publisher.SPRINGER)
# Not Springer Nature's: the Springer rungs never ask about these.
OTHERS = [Article(pmid=str(31000100 + i), doi=f"10.5555/other.{i}") for i in range(12)]

ARTICLES = [
    IN_BUCKET,
    NOT_OPEN,
    MANUSCRIPT,
    UNSEARCHED,
    DOI_ONLY_MANUSCRIPT,
    SPRINGER_OPEN,
    SPRINGER_CLOSED,
    *OTHERS,
]


def openalex_without_pmcids(req: FakeRequest) -> FakeResponse:
    """OpenAlex's works filter, listing each work's PMID but not its PMCID (as it often does)."""
    wanted = str(req.param("filter") or "").removeprefix("doi:").split("|")
    by_doi = {str(a.doi).lower(): a for a in ARTICLES}
    results = [
        {
            "doi": f"https://doi.org/{doi}",
            "ids": {"pmid": f"https://pubmed.ncbi.nlm.nih.gov/{a.pmid}"},
        }
        for doi in wanted
        if (a := by_doi.get(doi)) is not None and a.pmid
    ]
    return FakeResponse(200, {"meta": {"count": len(results)}, "results": results})


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[World]:
    w = World(ARTICLES, keys={"springer_openaccess": OA_KEY, "springer_meta": META_KEY})
    w.install(fake)
    fake.route(HOST_OPENALEX, "/works", openalex_without_pmcids)
    yield w


def frame() -> pd.DataFrame:
    rows = [{"pmid": a.pmid, "doi": a.doi} for a in ARTICLES if a is not DOI_ONLY_MANUSCRIPT]
    rows.append({"pmid": None, "doi": DOI_ONLY_MANUSCRIPT.doi})
    return pd.DataFrame(rows)


# -- Europe PMC full text only where its record does not rule it out -------------------------------


async def test_full_text_is_not_asked_where_europe_pmc_says_it_holds_none(
    world: World, fake: FakeUpstream
) -> None:
    pmcids = [a.pmcid for a in (IN_BUCKET, NOT_OPEN, MANUSCRIPT, UNSEARCHED)]
    df = pd.DataFrame({"pmcid": pmcids})
    async with session_for(fake) as session:
        out = await pipeline.fetch_bodies(df, resolve=False, config=config(session))
        assert session.primed_count == 0  # the step's primed answers went with it
    asked = full_text_requests(fake)
    # NOT_OPEN's record says "no full text": not asked. The manuscript and the article the
    # search does not know are asked; the bucket's article never reaches the rung.
    assert sorted(asked) == [f"{REST}/PMC8000003/fullTextXML", f"{REST}/PMC8000004/fullTextXML"]
    (search,) = fake.requests(HOST_EBI, SEARCH)
    assert search.param("query") == " OR ".join(f"PMCID:{p}" for p in pmcids).join("()")
    assert out["body_source"].fillna("-").tolist() == ["pmc_oa_s3", "-", "europe_pmc", "-"]
    assert out["body_error"].isna().all()  # not asked is not failed


async def test_an_unanswered_search_asks_every_article_as_before(
    world: World, fake: FakeUpstream
) -> None:
    fake.fail_next(HOST_EBI, SEARCH, *["drop"] * FAST_RETRY.max_attempts)
    df = pd.DataFrame({"pmcid": [NOT_OPEN.pmcid, MANUSCRIPT.pmcid]})
    async with session_for(fake) as session:
        out = await pipeline.fetch_bodies(df, resolve=False, config=config(session))
    assert len(full_text_requests(fake)) == 2
    assert out["body_source"].fillna("-").tolist() == ["-", "europe_pmc"]
    assert out["body_error"].isna().all()


# -- the whole table: requests per host ---------------------------------------------------------


async def chained(df: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
    return await pipeline.list_files(await pipeline.fetch_bodies(df, **kwargs), **kwargs)


async def one_pass(df: pd.DataFrame, **kwargs: Any) -> pd.DataFrame:
    return await onepass.run(df, steps=["resolve", "bodies", "files"], **kwargs)


@pytest.mark.parametrize("call", [chained, one_pass], ids=["chained", "run"])
async def test_a_run_asks_each_host_only_where_an_answer_can_exist(
    world: World, fake: FakeUpstream, call: Callable[..., Awaitable[pd.DataFrame]]
) -> None:
    async with session_for(fake) as session:
        out = await call(
            frame(),
            config=config(session, springer_api_key=OA_KEY, springer_meta_api_key=META_KEY),
        )
    by_doi = dict(zip(out["doi"], out["body_source"], strict=True))
    # The DOI-only manuscript: PMID from OpenAlex, then its PMCID from Europe PMC search
    # (a second resolution round), then its body from Europe PMC.
    last = out.iloc[-1]
    assert (last["pmid"], last["pmcid"]) == (DOI_ONLY_MANUSCRIPT.pmid, DOI_ONLY_MANUSCRIPT.pmcid)
    assert by_doi[DOI_ONLY_MANUSCRIPT.doi] == "europe_pmc"
    assert by_doi[SPRINGER_OPEN.doi] == "springer_oa"
    assert by_doi[MANUSCRIPT.doi] == "europe_pmc"
    assert out["resolve_error"].isna().all() and out["body_error"].isna().all()

    # Springer's Meta API is asked about its two DOIs only, in one OR query (the file-set
    # step's); OpenAccess too, one OR page of both (issue 24: a page costs less than the
    # Meta query that would tell which one is subscription content).
    springer = sorted(f"doi:{a.doi}" for a in (SPRINGER_OPEN, SPRINGER_CLOSED))
    oa = [str(r.param("q")) for r in fake.requests(HOST_SPRINGER, "/openaccess/jats")]
    meta = [str(r.param("q")) for r in fake.requests(HOST_SPRINGER, "/meta/v2/json")]
    assert len(oa) == 1 and sorted(oa[0].strip("()").split(" OR ")) == springer
    assert len(meta) == 1 and all(sorted(q.split(" OR ")) == springer for q in meta)
    assert fake.count(HOST_SPRINGER) == 2
    assert "springer" in {
        f.source for f in out.loc[out["doi"] == SPRINGER_OPEN.doi, "files"].iloc[0]
    }
    # Europe PMC full text: only the two manuscripts and the article search does not know.
    assert sorted(full_text_requests(fake)) == [
        f"{REST}/{a.pmcid}/fullTextXML" for a in (MANUSCRIPT, UNSEARCHED, DOI_ONLY_MANUSCRIPT)
    ]
    # OpenAlex: one works filter resolving the DOI-only rows, one giving every DOI's
    # best-OA location (so Unpaywall is asked only about DOIs OpenAlex does not know).
    assert fake.count(HOST_OPENALEX) == 2


async def test_the_second_round_asks_only_about_the_bundles_that_gained(
    world: World, fake: FakeUpstream
) -> None:
    df = pd.DataFrame({"doi": [DOI_ONLY_MANUSCRIPT.doi, *(a.doi for a in OTHERS)]})
    async with session_for(fake) as session:
        out = await pipeline.resolve(df, config=config(session))
    assert out.loc[0, "pmcid"] == DOI_ONLY_MANUSCRIPT.pmcid
    # OTHERS gain a PMID from OpenAlex too: in round two NCBI and Europe PMC get one
    # request each, and OpenAlex (whose question did not change) none.
    searches = fake.requests(HOST_EBI, SEARCH)
    assert fake.count(HOST_OPENALEX) == 1
    assert len(searches) == 1 and fake.count(HOST_NCBI) == 2
    asked = str(searches[0].param("query"))
    assert all(f"EXT_ID:{a.pmid}" in asked for a in (DOI_ONLY_MANUSCRIPT, *OTHERS))


# -- the bulk lookup itself (MockTransport) ------------------------------------------------------


async def test_holdings_reads_the_flags_of_each_pmcid_in_or_queries() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        query = request.url.params["query"]
        results = [
            {
                "id": "1",
                "source": "MED",
                "pmid": "1",
                "pmcid": "PMC1",
                "inEPMC": "N",
                "isOpenAccess": "N",
                "inPMC": "Y",
                "hasPDF": "N",
            },
            {
                "id": "2",
                "source": "MED",
                "pmid": "2",
                "pmcid": "PMC2",
                "inEPMC": "Y",
                "isOpenAccess": "N",
                "inPMC": "Y",
                "hasPDF": "Y",
            },
            # Two records of one article: whatever either says it holds, it holds.
            {"id": "3", "source": "MED", "pmcid": "PMC3", "inEPMC": "N"},
            {"id": "PMC3", "source": "PMC", "pmcid": "PMC3", "inEPMC": "Y"},
            {"id": "4", "source": "MED", "pmid": "4"},  # names no PMCID
            {"id": "9", "source": "MED", "pmcid": "PMC9", "inEPMC": "N"},  # not asked about
        ]
        if "PMCID:PMC5" in query:
            return httpx.Response(503, text="busy")
        return httpx.Response(200, json={"resultList": {"result": results}})

    batch = [
        ArticleIds(pmcid="PMC1"),
        ArticleIds(pmcid="pmc2.3"),  # versioned, lower case: the same article as PMC2
        ArticleIds(pmcid="PMC3"),
        ArticleIds(pmcid="PMC4"),
        ArticleIds(doi="10.1000/x"),
        ArticleIds(pmcid="PMC1"),
        *(ArticleIds(pmcid=f"PMC{n}") for n in range(100, 200)),
        ArticleIds(pmcid="PMC5"),
    ]
    async with mock_session(handler) as session:
        found = await holdings(batch, session)
    assert found.values[0] == EuropePmcHolding(
        in_epmc=False, open_access=False, in_pmc=True, has_pdf=False
    )
    assert found.values[0] is not None and found.values[0].lacks_full_text
    holding = found.values[1]
    assert holding is not None and not holding.lacks_full_text  # isOpenAccess N: still asked
    assert found.values[2] == EuropePmcHolding(in_epmc=True)
    assert found.values[3:5] == (None, None)
    assert found.values[5] == found.values[0]
    # 105 distinct PMCIDs: two OR queries of at most 100; the one holding PMC5 failed.
    assert len({str(r.url) for r in seen}) == 2  # the failing one was retried
    assert all(r.url.params["resultType"] == "lite" for r in seen)
    assert max(int(r.url.params["pageSize"]) for r in seen) == 100
    assert found.abandoned == frozenset(
        i
        for i, ids in enumerate(batch)
        if ids.pmcid in {f"PMC{n}" for n in range(196, 200)} or ids.pmcid == "PMC5"
    )


async def test_without_a_meta_key_the_springer_nature_dois_go_in_one_open_access_page(
    world: World, fake: FakeUpstream
) -> None:
    df = pd.DataFrame({"doi": [SPRINGER_OPEN.doi, SPRINGER_CLOSED.doi, OTHERS[0].doi]})
    async with session_for(fake) as session:
        out = await pipeline.fetch_bodies(
            df, resolve=False, config=config(session, springer_api_key=OA_KEY)
        )
    asked = [str(r.param("q")) for r in fake.requests(HOST_SPRINGER)]
    assert len(asked) == 1
    assert sorted(asked[0].strip("()").split(" OR ")) == sorted(
        f"doi:{a.doi}" for a in (SPRINGER_OPEN, SPRINGER_CLOSED)
    )
    assert out["body_source"].fillna("-").tolist() == ["springer_oa", "-", "-"]
    assert out["body_error"].isna().all()
