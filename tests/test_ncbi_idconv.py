"""NCBI PMC ID Converter: the per-item resolver and the batch resolver."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from litfetch_df import ArticleIds, Rate
from litfetch_df.operations.resolution import NcbiIdConverterBatchResolver
from litfetch_df.sources.ncbi_idconv import IDCONV_URL, NcbiIdConverterResolver
from tests.conftest import data_bytes, data_json, mock_session
from tests.fake_upstream import FakeUpstream, json_response

HOST = "pmc.ncbi.nlm.nih.gov"
PATH = "/tools/idconv/api/v1/articles/"


def ok(*records: dict[str, Any]) -> dict[str, Any]:
    """A converter body shaped as upstream.md 2.1 shows."""
    return {
        "status": "ok",
        "responseDate": "2026-03-02 14:05:11",
        "request": "ids=…&format=json&tool=litfetch_df",
        "records": list(records),
    }


def hit(requested: str, n: int, doi: str | None = None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "requested-id": requested,
        "pmcid": f"PMC{7000000 + n}",
        "pmid": 30000000 + n,
        "doi": doi if doi is not None else f"10.1000/abc.{n}",
    }
    return record


def miss(requested: str) -> dict[str, Any]:
    return {"requested-id": requested, "status": "error", "errmsg": "Identifier not found in PMC"}


Handler = Callable[[httpx.Request], httpx.Response]


def recording(handler: Handler) -> tuple[list[httpx.Request], Handler]:
    seen: list[httpx.Request] = []

    def wrapped(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    return seen, wrapped


def ids_of(request: httpx.Request) -> list[str]:
    return request.url.params["ids"].split(",")


# -- per item --------------------------------------------------------------------------------


async def test_per_item_sends_first_id_with_its_type_tool_and_contact() -> None:
    seen, handler = recording(lambda r: httpx.Response(200, json=ok(hit("30000001", 1))))
    async with mock_session(handler, contact="dev@lab.example") as s:
        out = await NcbiIdConverterResolver(tool="mytool")(
            ArticleIds(pmid="30000001", doi="10.1000/ABC.1"), s
        )
    assert [str(r.url.copy_with(query=None)) for r in seen] == [IDCONV_URL]
    params = dict(seen[0].url.params)
    assert params == {
        "ids": "30000001",
        "idtype": "pmid",
        "format": "json",
        "tool": "mytool",
        "email": "dev@lab.example",
    }
    # The integer PMID comes back as text; the caller's DOI casing is kept.
    assert out == ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/ABC.1")


@pytest.mark.parametrize(
    ("ids", "sent", "idtype"),
    [
        (ArticleIds(pmcid="pmc7000001", doi="10.1000/abc.1"), "PMC7000001", "pmcid"),
        (ArticleIds(doi="https://doi.org/10.1000/abc.1"), "10.1000/abc.1", "doi"),
        # An unusable pmid is skipped rather than sent.
        (ArticleIds(pmid="not-a-pmid", doi="10.1000/abc.1"), "10.1000/abc.1", "doi"),
    ],
)
async def test_per_item_key_order_and_normalisation(
    ids: ArticleIds, sent: str, idtype: str
) -> None:
    seen, handler = recording(lambda r: httpx.Response(200, json=ok(hit(sent, 1))))
    async with mock_session(handler) as s:
        out = await NcbiIdConverterResolver()(ids, s)
    assert len(seen) == 1
    assert seen[0].url.params["ids"] == sent
    assert seen[0].url.params["idtype"] == idtype
    assert seen[0].url.params["tool"] == "litfetch_df"
    assert "email" not in seen[0].url.params  # no contact, no email
    assert out.pmcid is not None and out.pmid is not None and out.doi is not None


async def test_per_item_reads_the_recorded_v1_record() -> None:
    body = data_bytes("json", "ncbi_idconv_v1.0_doi_10.1038_ng.590.json")
    handler = lambda r: httpx.Response(200, content=body)  # noqa: E731
    async with mock_session(handler) as s:
        out = await NcbiIdConverterResolver()(ArticleIds(doi="10.1038/NG.590"), s)
    # No requested-id in the legacy record: matched by the echoed DOI, case-insensitively.
    assert out == ArticleIds(pmid="20495566", pmcid="PMC2883744", doi="10.1038/NG.590")


async def test_per_item_never_overwrites() -> None:
    handler = lambda r: httpx.Response(200, json=ok(hit("30000001", 1)))  # noqa: E731
    async with mock_session(handler) as s:
        out = await NcbiIdConverterResolver()(ArticleIds(pmid="30000001", doi="10.9999/other"), s)
    assert out == ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.9999/other")


@pytest.mark.parametrize(
    "respond",
    [
        lambda r: httpx.Response(200, json=ok(miss("30000002"))),
        lambda r: httpx.Response(200, json=ok()),
        lambda r: httpx.Response(
            404, content=data_bytes("json", "ncbi_idconv_v1.0_error_idtype_mismatch.json")
        ),
        lambda r: httpx.Response(400, json={"status": "error"}),
        lambda r: httpx.Response(200, content=b"<html>maintenance</html>"),
        lambda r: httpx.Response(503),
        lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused")),
    ],
    ids=["error-record", "empty", "404", "400", "not-json", "503", "transport"],
)
async def test_per_item_failure_or_miss_leaves_the_bundle(respond: Handler) -> None:
    ids = ArticleIds(pmid="30000002")
    async with mock_session(respond) as s:
        assert await NcbiIdConverterResolver()(ids, s) == ids


@pytest.mark.parametrize(
    "ids",
    [
        ArticleIds(),
        ArticleIds(bookid="NBK1116"),
        ArticleIds(pmid="junk", doi="not a doi"),
        ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/abc.1"),
    ],
)
async def test_per_item_without_a_usable_key_sends_nothing(ids: ArticleIds) -> None:
    seen, handler = recording(lambda r: httpx.Response(500))
    async with mock_session(handler) as s:
        assert await NcbiIdConverterResolver()(ids, s) == ids
    assert seen == []


@pytest.mark.parametrize("tool", ["", "my tool", " ", 3])
def test_tool_must_be_a_name(tool: Any) -> None:
    with pytest.raises(ValueError):
        NcbiIdConverterResolver(tool=tool)
    with pytest.raises(ValueError):
        NcbiIdConverterBatchResolver(tool=tool)


async def test_per_item_paces_at_the_unkeyed_ncbi_rate() -> None:
    rates: list[Rate] = []

    class Spy:
        contact = None

        async def get(self, url: str, **kw: Any) -> httpx.Response:
            rates.append(kw["rate"])
            return httpx.Response(200, json=ok(), request=httpx.Request("GET", url))

    await NcbiIdConverterResolver()(ArticleIds(pmid="30000001"), Spy())
    await NcbiIdConverterBatchResolver()([ArticleIds(pmid="30000001")], Spy())
    assert rates == [Rate.NCBI_UNKEYED, Rate.NCBI_UNKEYED]


# -- batch -----------------------------------------------------------------------------------


def answer_by_table(table: dict[str, int], *, echo: bool = True) -> Handler:
    """Answer each sent id from ``table`` (lower-cased id → article number)."""

    def handler(request: httpx.Request) -> httpx.Response:
        assert "idtype" not in request.url.params or request.url.params["idtype"] == "doi"
        sent = ids_of(request)
        assert len(sent) <= 200
        records = []
        for raw in sent:
            n = table.get(raw.lower())
            if n is None:
                records.append(miss(raw))
                continue
            record = hit(raw, n, doi=f"10.1000/ABC.{n}")
            if not echo:
                del record["requested-id"]
            records.append(record)
        return httpx.Response(200, json=ok(*reversed(records)))  # order is not meaningful

    return handler


async def test_batch_mixed_schemes_with_repeats_cost_ceil_distinct_over_200() -> None:
    table: dict[str, int] = {}
    batch: list[ArticleIds] = []
    for n in range(1, 451):
        # Three schemes in one batch: a third each keyed on pmid, pmcid, doi.
        if n % 3 == 0:
            ids = ArticleIds(pmid=str(30000000 + n))
            table[str(30000000 + n)] = n
        elif n % 3 == 1:
            ids = ArticleIds(pmcid=f"PMC{7000000 + n}")
            table[f"pmc{7000000 + n}"] = n
        else:
            ids = ArticleIds(doi=f"10.1000/abc.{n}")
            table[f"10.1000/abc.{n}"] = n
        batch.append(ids)
    # Repeats, one with its DOI in another case: still one key each on the wire.
    batch += [batch[0], batch[1], ArticleIds(doi="10.1000/ABC.2"), batch[449]]
    seen, handler = recording(answer_by_table(table))
    async with mock_session(handler, contact="dev@lab.example") as s:
        out, abandoned = await NcbiIdConverterBatchResolver()(batch, s)
    assert len(seen) == math.ceil(450 / 200)
    sent = [i for r in seen for i in ids_of(r)]
    assert len(sent) == len(set(sent)) == 450
    assert all(r.url.params["email"] == "dev@lab.example" for r in seen)
    assert all("idtype" not in r.url.params for r in seen)
    assert abandoned == set()
    assert len(out) == len(batch)
    for original, got in zip(batch, out, strict=True):
        assert original.merge(got) == got  # nothing known was changed
        assert got.pmid and got.pmcid and got.doi
    assert out[452].doi == "10.1000/ABC.2"  # caller's casing kept
    assert out[1].doi == "10.1000/abc.2"


async def test_batch_falls_back_to_echoed_ids_without_requested_id() -> None:
    table = {"30000001": 1, "pmc7000002": 2, "10.1000/abc.3": 3}
    handler = answer_by_table(table, echo=False)
    batch = [
        ArticleIds(pmid="30000001"),
        ArticleIds(pmcid="PMC7000002"),
        ArticleIds(doi="10.1000/Abc.3"),
    ]
    async with mock_session(handler) as s:
        out, abandoned = await NcbiIdConverterBatchResolver()(batch, s)
    assert [o.pmcid for o in out] == ["PMC7000001", "PMC7000002", "PMC7000003"]
    assert out[2].doi == "10.1000/Abc.3"
    assert abandoned == set()


async def test_batch_correlates_by_requested_id_first() -> None:
    # NCBI maps a DOI it stores in another form (here a different suffix spelling):
    # only the echo of what was sent ties the record to its element.
    records = [
        {
            "requested-id": "10.1000/old-form.1",
            "pmcid": "PMC7000001",
            "pmid": 30000001,
            "doi": "10.1000/abc.1",
        },
        hit("30000002", 2),
    ]
    handler = lambda r: httpx.Response(200, json=ok(*records))  # noqa: E731
    batch = [ArticleIds(doi="10.1000/Old-Form.1"), ArticleIds(pmid="30000002")]
    async with mock_session(handler) as s:
        out, abandoned = await NcbiIdConverterBatchResolver()(batch, s)
    assert out[0] == ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/Old-Form.1")
    assert out[1].pmcid == "PMC7000002" and abandoned == set()


async def test_batch_error_records_are_misses_not_abandoned() -> None:
    handler = answer_by_table({"30000001": 1})
    batch = [ArticleIds(pmid="30000001"), ArticleIds(pmid="30000009"), ArticleIds(doi="10.1000/x")]
    async with mock_session(handler) as s:
        out, abandoned = await NcbiIdConverterBatchResolver()(batch, s)
    assert out[0].pmcid == "PMC7000001"
    assert out[1:] == batch[1:]
    assert abandoned == set()


async def test_batch_doi_with_a_comma_goes_alone() -> None:
    table = {"30000001": 1, "30000002": 2}
    seen, handler = recording(answer_by_table(table))
    batch = [
        ArticleIds(pmid="30000001"),
        ArticleIds(doi="10.1000/a,b"),
        ArticleIds(pmid="30000002"),
    ]
    async with mock_session(handler) as s:
        out, abandoned = await NcbiIdConverterBatchResolver()(batch, s)
    lists = sorted(r.url.params["ids"] for r in seen)
    assert lists == ["10.1000/a,b", "30000001,30000002"]
    alone = next(r for r in seen if r.url.params["ids"] == "10.1000/a,b")
    assert alone.url.params["idtype"] == "doi"
    assert out[1] == batch[1] and abandoned == set()


@pytest.mark.parametrize(
    ("status", "abandons"), [(503, True), (429, True), (500, True), (400, False), (404, False)]
)
async def test_batch_chunk_failure_abandons_only_its_incomplete_indices(
    status: int, abandons: bool
) -> None:
    table = {str(30000000 + n): n for n in range(1, 301)}
    good = answer_by_table(table)

    def handler(request: httpx.Request) -> httpx.Response:
        # The second chunk (ids 201..300) fails on every attempt.
        if "30000201" in ids_of(request):
            return httpx.Response(status, json={"status": "error"})
        return good(request)

    batch = [ArticleIds(pmid=str(30000000 + n)) for n in range(1, 301)]
    batch.append(ArticleIds(pmid="30000250"))  # a repeat inside the failing chunk
    seen, spy = recording(handler)
    async with mock_session(spy) as s:
        out, abandoned = await NcbiIdConverterBatchResolver()(batch, s)
    expected = set(range(200, 301)) if abandons else set()
    assert abandoned == expected
    assert all(o.pmcid for o in out[:200])
    assert out[200:] == batch[200:]
    if abandons:
        assert len(seen) == 1 + 3  # the failing chunk was retried to exhaustion
        # Retrying the abandoned slice against a healed service converges.
        async with mock_session(good) as s:
            retried, again = await NcbiIdConverterBatchResolver()(
                [batch[i] for i in sorted(abandoned)], s
            )
        assert again == set() and all(r.pmcid for r in retried)


async def test_batch_transport_failure_abandons_and_non_json_does_not() -> None:
    def drop(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    batch = [ArticleIds(pmid="30000001"), ArticleIds(), ArticleIds(pmid="30000001")]
    async with mock_session(drop) as s:
        out, abandoned = await NcbiIdConverterBatchResolver()(batch, s)
    assert out == batch and abandoned == {0, 2}
    assert s.failures  # the session recorded why

    async with mock_session(lambda r: httpx.Response(200, text="not JSON")) as s:
        out, abandoned = await NcbiIdConverterBatchResolver()(batch, s)
    assert out == batch and abandoned == set()

    # Issue 14: an HTML page served with 200 is not an answer but a transient failure.
    async with mock_session(lambda r: httpx.Response(200, text="<html/>")) as s:
        out, abandoned = await NcbiIdConverterBatchResolver()(batch, s)
    assert out == batch and abandoned == {0, 2}


async def test_batch_over_the_fake_upstream(fake: FakeUpstream, fake_session: Any) -> None:
    record = data_json("json", "ncbi_idconv_v1.0_doi_10.1038_ng.590.json")
    fake.route(HOST, PATH, json_response(record))
    batch = [ArticleIds(doi="10.1038/ng.590"), ArticleIds(doi="10.1038/NG.590"), ArticleIds()]
    out, abandoned = await NcbiIdConverterBatchResolver()(batch, fake_session)
    assert fake.count(HOST, PATH) == 1
    assert fake.requests(HOST, PATH)[0].param("ids") == "10.1038/ng.590"
    assert out[0] == ArticleIds(pmid="20495566", pmcid="PMC2883744", doi="10.1038/ng.590")
    assert out[1] == ArticleIds(pmid="20495566", pmcid="PMC2883744", doi="10.1038/NG.590")
    assert out[2] == ArticleIds() and abandoned == set()
