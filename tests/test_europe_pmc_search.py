"""Europe PMC search: the per-item resolver and the OR-ed batch resolver."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from litfetch_df import ArticleIds, Rate
from litfetch_df.operations.resolution import EuropePmcBatchResolver
from litfetch_df.sources.europe_pmc_search import SEARCH_URL, EuropePmcResolver
from tests.conftest import data_json, mock_session
from tests.fake_upstream import FakeRequest, FakeUpstream, json_response

HOST = "www.ebi.ac.uk"
PATH = "/europepmc/webservices/rest/search"

Handler = Callable[[httpx.Request], httpx.Response]


def record(n: int, *, pmcid: bool = True, doi: bool = True) -> dict[str, Any]:
    """One ``resultType=lite`` hit shaped as upstream.md 2.2 shows."""
    rec: dict[str, Any] = {
        "id": str(30000000 + n),
        "source": "MED",
        "pmid": str(30000000 + n),
        "title": "…",
        "isOpenAccess": "Y" if pmcid else "N",
        "inEPMC": "Y" if pmcid else "N",
        "inPMC": "Y" if pmcid else "N",
        "hasPDF": "N",
    }
    if pmcid:
        rec["pmcid"] = f"PMC{7000000 + n}"
    if doi:
        rec["doi"] = f"10.1000/abc.{n}"
    return rec


def body(results: list[dict[str, Any]], query: str = "…", page_size: int = 1) -> dict[str, Any]:
    return {
        "version": "6.9",
        "hitCount": len(results),
        "nextCursorMark": "AoIIP4AAACgzMDAwMDAwMg==",
        "request": {
            "queryString": query,
            "resultType": "lite",
            "cursorMark": "*",
            "pageSize": page_size,
            "sort": "",
            "synonym": False,
        },
        "resultList": {"result": results},
    }


_QUERY = re.compile(r"^(?:\((EXT_ID:\d+(?: OR EXT_ID:\d+)*)\)|(EXT_ID:\d+)) AND SRC:MED$")


def searched(query: str) -> list[str]:
    m = _QUERY.match(query)
    assert m, f"unexpected query {query!r}"
    return re.findall(r"EXT_ID:(\d+)", query)


def by_table(table: dict[str, dict[str, Any]]) -> Handler:
    """Answer a search from ``table`` (pmid → lite record), as Europe PMC would."""

    def handler(request: httpx.Request) -> httpx.Response:
        params = request.url.params
        assert params["format"] == "json" and params["resultType"] == "lite"
        pmids = searched(params["query"])
        hits = [table[p] for p in pmids if p in table][: int(params["pageSize"])]
        return httpx.Response(200, json=body(hits, params["query"], int(params["pageSize"])))

    return handler


def recording(handler: Handler) -> tuple[list[httpx.Request], Handler]:
    seen: list[httpx.Request] = []

    def wrapped(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    return seen, wrapped


# -- per item --------------------------------------------------------------------------------


async def test_per_item_query_and_merge() -> None:
    seen, handler = recording(by_table({"30000001": record(1)}))
    async with mock_session(handler, contact="dev@lab.example") as s:
        out = await EuropePmcResolver()(ArticleIds(pmid="30000001"), s)
    assert out == ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/abc.1")
    assert len(seen) == 1
    assert str(seen[0].url.copy_with(query=None)) == SEARCH_URL
    assert dict(seen[0].url.params) == {
        "query": "EXT_ID:30000001 AND SRC:MED",
        "format": "json",
        "resultType": "lite",
        "pageSize": "1",
    }


async def test_per_item_takes_the_doi_of_a_pubmed_only_article_and_keeps_known_ids() -> None:
    handler = by_table({"30000002": record(2, pmcid=False)})
    async with mock_session(handler) as s:
        out = await EuropePmcResolver()(ArticleIds(pmid="30000002"), s)
        kept = await EuropePmcResolver()(ArticleIds(pmid="30000002", doi="10.1000/ABC.2"), s)
    assert out == ArticleIds(pmid="30000002", doi="10.1000/abc.2")
    assert kept == ArticleIds(pmid="30000002", doi="10.1000/ABC.2")


async def test_per_item_reads_the_recorded_search_response() -> None:
    recorded = data_json("json", "europepmc_rest_search_cancer_resultType-lite.json")
    handler = lambda r: httpx.Response(200, json=recorded)  # noqa: E731
    async with mock_session(handler) as s:
        out = await EuropePmcResolver()(ArticleIds(pmid="39709208"), s)
        other = await EuropePmcResolver()(ArticleIds(pmid="39709209"), s)
    assert out == ArticleIds(
        pmid="39709208", pmcid="PMC12124214", doi="10.1016/s0140-6736(24)02716-8"
    )
    # The record of another PMID in the same body never leaks across.
    assert other == ArticleIds(pmid="39709209", doi="10.1016/s0140-6736(24)02600-x")


@pytest.mark.parametrize(
    "ids",
    [
        ArticleIds(),
        ArticleIds(doi="10.1000/abc.1"),
        ArticleIds(pmcid="PMC7000001"),
        ArticleIds(pmid="3000000x"),
        ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/abc.1"),
    ],
)
async def test_per_item_without_a_usable_pmid_or_a_gap_sends_nothing(ids: ArticleIds) -> None:
    seen, handler = recording(lambda r: httpx.Response(500))
    async with mock_session(handler) as s:
        assert await EuropePmcResolver()(ids, s) == ids
    assert seen == []


@pytest.mark.parametrize(
    "respond",
    [
        lambda r: httpx.Response(200, json=body([])),
        lambda r: httpx.Response(200, text="<html/>"),
        lambda r: httpx.Response(400, json={"errCode": 400}),
        lambda r: httpx.Response(502),
        lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused")),
    ],
    ids=["empty", "not-json", "400", "502", "transport"],
)
async def test_per_item_miss_or_failure_leaves_the_bundle(respond: Handler) -> None:
    ids = ArticleIds(pmid="30000003")
    async with mock_session(respond) as s:
        assert await EuropePmcResolver()(ids, s) == ids


async def test_paces_at_the_europe_pmc_rate() -> None:
    rates: list[Rate] = []

    class Spy:
        contact = None

        async def get(self, url: str, **kw: Any) -> httpx.Response:
            rates.append(kw["rate"])
            return httpx.Response(200, json=body([]), request=httpx.Request("GET", url))

    await EuropePmcResolver()(ArticleIds(pmid="30000001"), Spy())
    await EuropePmcBatchResolver()(
        [ArticleIds(pmid="30000001"), ArticleIds(pmid="30000002")], Spy()
    )
    assert rates == [Rate.EUROPE_PMC, Rate.EUROPE_PMC]


# -- batch -----------------------------------------------------------------------------------


async def test_batch_ors_100_pmids_per_query_with_repeats_sent_once() -> None:
    table = {str(30000000 + n): record(n, pmcid=n % 2 == 0) for n in range(1, 251)}
    batch = [ArticleIds(pmid=str(30000000 + n)) for n in range(1, 251)]
    batch += batch[:30]  # repeats
    batch += [ArticleIds(doi="10.1000/zzz"), ArticleIds()]  # nothing to key on
    seen, handler = recording(by_table(table))
    async with mock_session(handler) as s:
        out, abandoned = await EuropePmcBatchResolver()(batch, s)
    assert len(seen) == math.ceil(250 / 100)
    sent = [p for r in seen for p in searched(r.url.params["query"])]
    assert sorted(sent) == sorted(str(30000000 + n) for n in range(1, 251))
    for r in seen:
        assert int(r.url.params["pageSize"]) == len(searched(r.url.params["query"]))
    assert abandoned == set()
    assert len(out) == len(batch)
    for i, (original, got) in enumerate(zip(batch, out, strict=True)):
        assert original.merge(got) == got
        if original.pmid is None:
            assert got == original
            continue
        n = int(original.pmid) - 30000000
        assert got.doi == f"10.1000/abc.{n}", i  # the doi comes with no extra request
        assert got.pmcid == (f"PMC{7000000 + n}" if n % 2 == 0 else None)


async def test_batch_sends_only_elements_with_a_pmid_and_a_gap() -> None:
    table = {"30000001": record(1), "30000002": record(2), "30000003": record(3)}
    batch = [
        ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/abc.1"),  # complete
        ArticleIds(pmid="30000002", pmcid="PMC7000002"),  # lacks doi
        ArticleIds(pmid="30000003", doi="10.1000/ABC.3"),  # lacks pmcid
    ]
    seen, handler = recording(by_table(table))
    async with mock_session(handler) as s:
        out, _ = await EuropePmcBatchResolver()(batch, s)
    assert [searched(r.url.params["query"]) for r in seen] == [["30000002", "30000003"]]
    assert seen[0].url.params["query"] == "(EXT_ID:30000002 OR EXT_ID:30000003) AND SRC:MED"
    assert out[0] == batch[0]
    assert out[1].doi == "10.1000/abc.2"
    assert out[2] == ArticleIds(pmid="30000003", pmcid="PMC7000003", doi="10.1000/ABC.3")


async def test_batch_failing_chunk_is_abandoned_and_absence_is_not() -> None:
    table = {str(30000000 + n): record(n) for n in range(1, 151) if n != 5}
    good = by_table(table)

    def handler(request: httpx.Request) -> httpx.Response:
        if "EXT_ID:30000101" in request.url.params["query"]:
            return httpx.Response(503, headers={"Retry-After": "0"})
        return good(request)

    batch = [ArticleIds(pmid=str(30000000 + n)) for n in range(1, 151)]
    async with mock_session(handler) as s:
        out, abandoned = await EuropePmcBatchResolver()(batch, s)
    assert abandoned == set(range(100, 150))
    assert out[4] == batch[4]  # PMID 30000005 is unknown: absent, not abandoned
    assert all(o.pmcid for i, o in enumerate(out[:100]) if i != 4)
    assert out[100:] == batch[100:]
    async with mock_session(good) as s:
        retried, again = await EuropePmcBatchResolver()([batch[i] for i in abandoned], s)
    assert again == set() and all(r.pmcid for r in retried)


async def test_batch_over_the_fake_upstream(fake: FakeUpstream, fake_session: Any) -> None:
    recorded = data_json("json", "europepmc_rest_search_cancer_resultType-lite.json")

    def search(req: FakeRequest) -> Any:
        pmids = set(searched(req.param("query") or ""))
        hits = [r for r in recorded["resultList"]["result"] if r["pmid"] in pmids]
        return json_response(body(hits, req.param("query") or "", int(req.param("pageSize") or 1)))

    fake.route(HOST, PATH, search)
    pmids = [r["pmid"] for r in recorded["resultList"]["result"]]
    batch = [ArticleIds(pmid=p) for p in pmids] + [ArticleIds(pmid="30000001")]
    out, abandoned = await EuropePmcBatchResolver()(batch, fake_session)
    assert fake.count(HOST, PATH) == 1 and abandoned == set()
    for rec, got in zip(recorded["resultList"]["result"], out, strict=False):
        assert got.pmcid == rec.get("pmcid")
        assert got.doi == rec.get("doi")
    assert out[-1] == ArticleIds(pmid="30000001")
