"""OpenAlex works filter: the batch OpenAlexResolver (DOI → PMID / PMCID)."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from litfetch_df import ArticleIds, Rate
from litfetch_df.operations.resolution import OpenAlexResolver, default_batch_resolver
from litfetch_df.sources.bulk_recipe import chunked
from litfetch_df.sources.openalex import TERMS_SELECT, URL_MAX, WORKS_URL, works_with_terms
from tests.conftest import data_json, mock_session
from tests.fake_upstream import FakeRequest, FakeUpstream, json_response

HOST = "api.openalex.org"
KEY = "oa-Secret-Key-123"

Handler = Callable[[httpx.Request], httpx.Response]


def work(doi: str, *, pmid: str | None = None, pmcid: str | None = None) -> dict[str, Any]:
    """One ``select=ids,doi`` work shaped as upstream.md 2.3 shows."""
    ids: dict[str, str] = {
        "openalex": "https://openalex.org/W4390000001",
        "doi": f"https://doi.org/{doi}",
    }
    if pmid:
        ids["pmid"] = f"https://pubmed.ncbi.nlm.nih.gov/{pmid}"
    if pmcid:
        ids["pmcid"] = f"https://www.ncbi.nlm.nih.gov/pmc/articles/{pmcid}"
    return {"ids": ids, "doi": f"https://doi.org/{doi}"}


def page(results: list[dict[str, Any]], per_page: int = 50) -> dict[str, Any]:
    return {
        "meta": {
            "count": len(results),
            "db_response_time_ms": 31,
            "page": 1,
            "per_page": per_page,
            "groups_count": None,
        },
        "results": results,
        "group_by": [],
    }


def filtered(request: httpx.Request) -> list[str]:
    value = request.url.params["filter"]
    assert value.startswith("doi:")
    return value.removeprefix("doi:").split("|")


def by_table(table: dict[str, dict[str, Any]], select: str = "ids,doi") -> Handler:
    """Answer a works filter from ``table`` (lower-cased DOI → work), as OpenAlex would."""

    def handler(request: httpx.Request) -> httpx.Response:
        params = request.url.params
        assert params["select"] == select
        dois = filtered(request)
        if len(dois) > 100:
            return httpx.Response(400, json={"error": "Invalid query parameters error."})
        if len(str(request.url)) > 4_094:  # observed of OpenAlex (pyalex#85)
            return httpx.Response(414, json={"error": "URI too long"})
        hits = [table[d] for d in dict.fromkeys(dois) if d in table]
        return httpx.Response(200, json=page(hits[: int(params["per-page"])]))

    return handler


def recording(handler: Handler) -> tuple[list[httpx.Request], Handler]:
    seen: list[httpx.Request] = []

    def wrapped(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    return seen, wrapped


@pytest.mark.parametrize("key", ["", " ", "abc def", "abc\n", 42])
def test_api_key_is_checked_at_construction_without_echoing_it(key: Any) -> None:
    with pytest.raises(ValueError) as info:
        OpenAlexResolver(api_key=key)
    assert "abc" not in str(info.value)
    with pytest.raises(ValueError):
        default_batch_resolver(openalex_api_key=key)


def test_repr_hides_the_key() -> None:
    assert KEY not in repr(OpenAlexResolver(api_key=KEY))
    assert KEY not in repr(default_batch_resolver(openalex_api_key=KEY))


async def test_params_mailto_key_and_parsing() -> None:
    table = {
        "10.1000/abc.1": work("10.1000/abc.1", pmid="30000001", pmcid="7000001"),
        "10.5555/xyz-9": work("10.5555/xyz-9"),
        "10.1000/abc.3": work("10.1000/abc.3", pmid="30000003/", pmcid="PMC7000003/"),
    }
    seen, handler = recording(by_table(table))
    batch = [
        ArticleIds(doi="10.1000/ABC.1"),
        ArticleIds(doi="10.5555/xyz-9"),
        ArticleIds(doi="10.1000/abc.3", pmid="30000003"),
        ArticleIds(doi="10.1000/unknown"),
    ]
    async with mock_session(handler, contact="dev@lab.example") as s:
        out, abandoned = await OpenAlexResolver(api_key=KEY)(batch, s)
    assert len(seen) == 1
    assert str(seen[0].url.copy_with(query=None)) == WORKS_URL
    assert dict(seen[0].url.params) == {
        "filter": "doi:10.1000/abc.1|10.5555/xyz-9|10.1000/abc.3|10.1000/unknown",
        "select": "ids,doi",
        "per-page": "4",
        "mailto": "dev@lab.example",
        "api_key": KEY,
    }
    assert out == [
        ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/ABC.1"),  # casing kept
        ArticleIds(doi="10.5555/xyz-9"),  # known work without PubMed ids
        ArticleIds(pmid="30000003", pmcid="PMC7000003", doi="10.1000/abc.3"),  # trailing slashes
        ArticleIds(doi="10.1000/unknown"),  # absent
    ]
    assert abandoned == set()


async def test_no_key_no_contact_no_params_for_them() -> None:
    seen, handler = recording(by_table({}))
    async with mock_session(handler) as s:
        await OpenAlexResolver()([ArticleIds(doi="10.1000/abc.1")], s)
    assert "api_key" not in seen[0].url.params and "mailto" not in seen[0].url.params


async def test_reads_recorded_work_objects() -> None:
    recorded = [
        data_json("json", "openalex_work_doi_10.1073_pnas.1414271111.json"),
        data_json("json", "openalex_work_doi_10.1016_j.xgen.2025.100814.json"),
    ]
    handler = lambda r: httpx.Response(200, json=page(recorded))  # noqa: E731
    batch = [
        ArticleIds(doi="10.1073/PNAS.1414271111"),
        ArticleIds(doi="10.1016/j.xgen.2025.100814"),
    ]
    async with mock_session(handler) as s:
        out, _ = await OpenAlexResolver()(batch, s)
    assert out[0] == ArticleIds(pmid="25349395", pmcid="PMC4234579", doi="10.1073/PNAS.1414271111")
    assert out[1] == ArticleIds(pmid="40120586", doi="10.1016/j.xgen.2025.100814")


async def test_long_dois_split_a_chunk_before_its_url_passes_what_openalex_accepts() -> None:
    # 100 DOIs of 55 characters, percent-encoded, would make a URL of about 6,600 characters
    # (OpenAlex errs past about 4,094): the resolver and the terms lookup both send more,
    # shorter requests, and no DOI goes unasked.
    dois = [f"10.1002/(sici)1097-4636(199603)31:3<{n:04d}>3.0.co;2-{'x' * 8}" for n in range(100)]
    assert all(len(d) >= 55 for d in dois)
    table = {d: work(d, pmid=str(30000000 + n)) for n, d in enumerate(dois)}
    for ask in ("resolver", "terms"):
        select = "ids,doi" if ask == "resolver" else TERMS_SELECT
        seen, handler = recording(by_table(table, select))
        batch = [ArticleIds(doi=d) for d in dois]
        async with mock_session(handler) as s:
            if ask == "resolver":
                _, abandoned = await OpenAlexResolver(api_key=KEY)(batch, s)
            else:
                abandoned = set((await works_with_terms(batch, s, api_key=KEY)).abandoned)
        assert abandoned == set()
        assert len(seen) >= 2, ask
        assert all(len(str(r.url)) <= URL_MAX for r in seen), [len(str(r.url)) for r in seen]
        assert sorted(d for r in seen for d in filtered(r)) == sorted(dois)


def test_chunks_close_at_the_cap_or_the_width_budget() -> None:
    assert chunked(["aa", "b", "cc", "d"], 3) == [["aa", "b", "cc"], ["d"]]
    # by width: 2 + 1 fits 3; "cc" would pass it; a value wider than the budget goes alone
    got = chunked(["aa", "b", "cc", "dddd", "e"], 3, width=len, budget=3)
    assert got == [["aa", "b"], ["cc"], ["dddd"], ["e"]]


async def test_100_dois_per_request_and_repeats_in_any_case_sent_once() -> None:
    table = {
        f"10.1000/abc.{n}": work(f"10.1000/abc.{n}", pmid=str(30000000 + n)) for n in range(120)
    }
    batch = [ArticleIds(doi=f"10.1000/ABC.{n}") for n in range(120)]
    batch += [ArticleIds(doi=f"10.1000/abc.{n}") for n in range(0, 120, 7)]
    batch += [ArticleIds(pmid="30000001"), ArticleIds()]  # nothing to key on
    seen, handler = recording(by_table(table))
    async with mock_session(handler) as s:
        out, abandoned = await OpenAlexResolver()(batch, s)
    assert len(seen) == math.ceil(120 / 100)  # OpenAlex's 2026 maximum of OR values
    sent = [d for r in seen for d in filtered(r)]
    assert len(sent) == len(set(sent)) == 120
    assert all(d == d.lower() for d in sent)
    assert all(int(r.url.params["per-page"]) == len(filtered(r)) for r in seen)
    assert abandoned == set()
    for original, got in zip(batch, out, strict=True):
        assert original.merge(got) == got
        if original.doi:
            n = int(original.doi.rsplit(".", 1)[1])
            assert got.pmid == str(30000000 + n)
        else:
            assert got == original


async def test_elements_without_a_gap_or_doi_cost_nothing() -> None:
    seen, handler = recording(by_table({}))
    batch = [
        ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/abc.1"),
        ArticleIds(pmid="30000002"),
        ArticleIds(doi="not a doi"),
    ]
    async with mock_session(handler) as s:
        out, abandoned = await OpenAlexResolver()(batch, s)
    assert seen == [] and out == batch and abandoned == set()


async def test_a_doi_with_a_pipe_or_comma_goes_alone() -> None:
    table = {"10.1000/abc.1": work("10.1000/abc.1", pmid="30000001")}
    seen, handler = recording(by_table(table))
    batch = [
        ArticleIds(doi="10.1000/abc.1"),
        ArticleIds(doi="10.5555/x|y"),
        ArticleIds(doi="10.5555/a,b"),
    ]
    async with mock_session(handler) as s:
        out, abandoned = await OpenAlexResolver()(batch, s)
    assert sorted(r.url.params["filter"] for r in seen) == [
        "doi:10.1000/abc.1",
        "doi:10.5555/a,b",
        "doi:10.5555/x|y",
    ]
    assert out[0].pmid == "30000001" and out[1:] == batch[1:] and abandoned == set()


@pytest.mark.parametrize(
    ("status", "abandons"),
    [(403, True), (429, True), (503, True), (400, False), (404, False)],
)
async def test_status_classification(status: int, abandons: bool) -> None:
    table = {
        f"10.1000/abc.{n}": work(f"10.1000/abc.{n}", pmid=str(30000000 + n)) for n in range(120)
    }
    good = by_table(table)

    def handler(request: httpx.Request) -> httpx.Response:
        if "10.1000/abc.105" in filtered(request):
            return httpx.Response(status, json={"error": "…", "message": "…"})
        return good(request)

    batch = [ArticleIds(doi=f"10.1000/abc.{n}") for n in range(120)]
    async with mock_session(handler) as s:
        out, abandoned = await OpenAlexResolver()(batch, s)
    assert abandoned == (set(range(100, 120)) if abandons else set())
    assert all(o.pmid for o in out[:100]) and out[100:] == batch[100:]


async def test_transport_failure_abandons() -> None:
    def drop(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    batch = [ArticleIds(doi="10.1000/abc.1"), ArticleIds(pmid="30000001")]
    async with mock_session(drop) as s:
        out, abandoned = await OpenAlexResolver()(batch, s)
    assert out == batch and abandoned == {0}


async def test_the_key_never_reaches_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400 if "abc.1" in request.url.params["filter"] else 503)

    async with mock_session(handler) as s:
        await OpenAlexResolver(api_key=KEY)([ArticleIds(doi="10.1000/abc.1")], s)
        await OpenAlexResolver(api_key=KEY)([ArticleIds(doi="10.1000/abc.2")], s)
    assert caplog.records  # something was logged
    assert KEY not in caplog.text


async def test_paces_at_the_openalex_rate() -> None:
    rates: list[Rate] = []

    class Spy:
        contact = None

        async def get(self, url: str, **kw: Any) -> httpx.Response:
            rates.append(kw["rate"])
            return httpx.Response(200, json=page([]), request=httpx.Request("GET", url))

    await OpenAlexResolver()([ArticleIds(doi="10.1000/abc.1")], Spy())
    assert rates == [Rate.OPENALEX]


async def test_over_the_fake_upstream(fake: FakeUpstream, fake_session: Any) -> None:
    def works(req: FakeRequest) -> Any:
        dois = (req.param("filter") or "").removeprefix("doi:").split("|")
        found = [work(d, pmid="30000001", pmcid="7000001") for d in dois if d == "10.1000/abc.1"]
        return json_response(page(found, int(req.param("per-page") or 0)))

    fake.route(HOST, "/works", works)
    batch = [
        ArticleIds(doi="10.1000/Abc.1"),
        ArticleIds(doi="10.1000/abc.1"),
        ArticleIds(doi="10.1000/q"),
    ]
    out, abandoned = await OpenAlexResolver()(batch, fake_session)
    assert fake.count(HOST, "/works") == 1
    assert out[0] == ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/Abc.1")
    assert out[1].pmcid == "PMC7000001" and out[2] == batch[2] and abandoned == set()
