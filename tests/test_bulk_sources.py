"""Bulk lookups: S2 paper batch, Crossref works by DOI list, Springer Meta OR queries.

Covered: request counts of ``ceil(distinct / cap)`` over inputs with repeats and
mixed-case DOIs, alignment (property tests over a table-driven fake),
abandoned-vs-absent, per-row equality with the per-article sources on the same
upstream data (recorded bodies and the synthetic world), and keys kept out of
logs and URIs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any
from unittest import mock

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litfetch_df import (
    INSTITUTIONAL,
    PDF,
    ArticleIds,
    File,
    FileKind,
    Rate,
    Related,
    RelationType,
    Session,
)
from litfetch_df.ids import is_preprint_doi
from litfetch_df.operations.relations import related_ids
from litfetch_df.sources import crossref_batch, semantic_scholar_batch, springer_batch
from litfetch_df.sources.bulk import (
    BulkKey,
    BulkResult,
    bulk_file_lister,
    bulk_lookup,
    chunked,
    distinct_keys,
)
from litfetch_df.sources.crossref import CrossrefFileSource
from litfetch_df.sources.crossref_batch import (
    crossref_batch_files,
    crossref_batch_records,
    crossref_batch_relations,
)
from litfetch_df.sources.semantic_scholar import (
    SemanticScholarFileSource,
    SemanticScholarResolver,
)
from litfetch_df.sources.semantic_scholar_batch import (
    SemanticScholarBatchResolver,
    s2_batch_files,
    s2_batch_records,
)
from litfetch_df.sources.springer import SpringerFileSource
from litfetch_df.sources.springer_batch import springer_batch_files, springer_batch_records
from tests.conftest import FAST_RETRY, data_json, mock_session
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import (
    HOST_SPRINGER,
    Article,
    BodyHome,
    Publisher,
    World,
)

S2_KEY = "s2-secret-5d1f09"
S2_CREDS = {"semantic_scholar_api_key": S2_KEY}
META_KEY = "sk-META-77aa01bb02cc"
META_CREDS = {"springer_meta_api_key": META_KEY}
CONTACT = "dev@lab.example"

S2_RECORDED = {
    "10.1038/s42256-024-00832-8": "s2_graph_paper_DOI_10.1038_s42256-024-00832-8.json",
    "10.1016/j.xgen.2025.100814": "s2_graph_paper_DOI_10.1016_j.xgen.2025.100814.json",
}
CROSSREF_RECORDED = {
    "10.1016/j.xgen.2025.100814": (
        "crossref_work_10.1016_j.xgen.2025.100814_elsevier-tdm-links.json"
    ),
    "10.1038/s42256-024-00832-8": "crossref_work_10.1038_s42256-024-00832-8_links-ccby.json",
    "10.1101/2024.04.01.587366": "crossref_work_10.1101_2024.04.01.587366_is-preprint-of.json",
    "10.3389/fgene.2017.00147": "crossref_work_10.3389_fgene.2017.00147_has-preprint.json",
}


def flip_case(doi: str) -> str:
    """The same DOI in upper case (DOIs are case-insensitive)."""
    return doi.upper()


# -- the common machinery ------------------------------------------------------------------


def test_chunked_and_distinct_keys() -> None:
    assert chunked([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    assert chunked([], 3) == []
    with pytest.raises(ValueError):
        chunked([1], 0)
    keys = [BulkKey("a", "A"), None, BulkKey("b", "b"), BulkKey("a", "a")]
    assert distinct_keys(keys) == {"a": ("A", [0, 3]), "b": ("b", [2])}


def test_bulk_result_checks_and_maps() -> None:
    result = BulkResult((1, None, 3), frozenset({1}))
    assert result.map(lambda v: v * 10) == BulkResult((10, None, 30), frozenset({1}))
    assert len(result) == 3
    assert BulkResult.empty(2) == BulkResult((None, None))
    with pytest.raises(ValueError):
        BulkResult((1,), frozenset({1}))


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(
        st.one_of(st.none(), st.sampled_from(["a", "A", "b", "c", "C", "d", "e", "f", "x,y"])),
        max_size=40,
    ),
    cap=st.integers(min_value=1, max_value=5),
    failing=st.sets(st.sampled_from(["a", "b", "c", "d", "e", "f"])),
)
def test_bulk_lookup_property(keys: list[str | None], cap: int, failing: set[str]) -> None:
    """Aligned, each key asked once, chunks of at most cap, failed chunks abandon exactly."""
    table = {"a": 1, "b": 2, "c": 3, "x,y": 9}  # d, e, f: absent
    asked: list[list[str]] = []
    failed: set[str] = set()

    async def lookup(chunk: list[str]) -> dict[str, int] | None:
        asked.append(chunk)
        if any(w.lower() in failing for w in chunk):
            failed.update(w.lower() for w in chunk)
            return None
        return {w: table[w.lower()] for w in chunk if w.lower() in table}

    bulk_keys = [None if k is None else BulkKey(k.lower(), k) for k in keys]
    result = asyncio.run(bulk_lookup(bulk_keys, lookup, cap=cap, alone=lambda w: "," in w))

    distinct = {k.lower() for k in keys if k is not None}
    sent = [w.lower() for chunk in asked for w in chunk]
    assert sorted(sent) == sorted(distinct)  # every key exactly once
    assert all(len(chunk) <= cap for chunk in asked)
    listable = len(distinct - {"x,y"})
    assert len(asked) == math.ceil(listable / cap) + ("x,y" in distinct)
    assert ["x,y"] in asked or "x,y" not in distinct  # the separator key went alone
    assert len(result.values) == len(keys)
    for i, k in enumerate(keys):
        if k is None:
            assert result.values[i] is None and i not in result.abandoned
        elif k.lower() in failed:
            assert result.values[i] is None and i in result.abandoned
        else:
            assert result.values[i] == table.get(k.lower()) and i not in result.abandoned


# -- a table-driven BulkHttp for property tests ----------------------------------------------


class TableHttp:
    """A :class:`BulkHttp` answering S2 batch POSTs and Crossref list GETs from tables.

    ``s2`` maps ``DOI:<lower doi>`` / ``PMID:<n>`` / ``PMCID:<digits>`` to a record;
    ``crossref`` maps a lower-cased DOI to an item. A request naming a key in
    ``failing`` gets a final 503 (what the session returns after its retries).
    """

    def __init__(
        self,
        *,
        s2: Mapping[str, dict[str, Any]] | None = None,
        crossref: Mapping[str, dict[str, Any]] | None = None,
        failing: frozenset[str] = frozenset(),
    ) -> None:
        self.s2 = dict(s2 or {})
        self.crossref = dict(crossref or {})
        self.failing = failing
        self.posts: list[tuple[list[str], bool]] = []
        self.gets: list[tuple[str, dict[str, str | int], bool]] = []
        self.rates: list[Rate] = []

    @property
    def contact(self) -> str | None:
        return CONTACT

    @staticmethod
    def _s2_norm(paper_id: str) -> str:
        scheme, _, value = paper_id.partition(":")
        return f"{scheme}:{value.lower()}" if scheme == "DOI" else paper_id

    async def post(
        self,
        url: str,
        *,
        json: Any = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
    ) -> httpx.Response:
        assert url == semantic_scholar_batch.S2_BATCH_URL
        assert dict(params or {}) == {"fields": "externalIds,openAccessPdf"}
        self.rates.append(rate)
        ids = [self._s2_norm(i) for i in json["ids"]]
        fail = any(i in self.failing for i in ids)
        self.posts.append((ids, fail))
        if fail:
            return httpx.Response(503, json={"message": "Service Unavailable"})
        if len(ids) > semantic_scholar_batch.S2_BATCH_CAP:
            return httpx.Response(400, json={"error": "too many ids"})
        return httpx.Response(200, json=[self.s2.get(i) for i in ids])

    async def get(
        self,
        url: str,
        *,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        self.rates.append(rate)
        if url == crossref_batch.CROSSREF_LIST_URL:
            assert params is not None
            dois = [c.removeprefix("doi:").lower() for c in str(params["filter"]).split(",")]
        else:
            dois = [urllib.parse.unquote(url.removeprefix("https://api.crossref.org/works/"))]
            dois = [d.lower() for d in dois]
        fail = any(d in self.failing for d in dois)
        self.gets.append((url, dict(params or {}), fail))
        if fail:
            return httpx.Response(503, text="Service Unavailable")
        if url != crossref_batch.CROSSREF_LIST_URL:
            item = self.crossref.get(dois[0])
            if item is None:
                return httpx.Response(404, text="Resource not found.")
            return httpx.Response(200, json={"status": "ok", "message": item})
        items = [self.crossref[d] for d in dois if d in self.crossref]
        items.reverse()  # Crossref promises no order
        return httpx.Response(200, json={"status": "ok", "message": {"items": items}})


UNIVERSE = [
    # (doi, pmid, pmcid, known to the service)
    ("10.1000/Alpha.1", "30000001", "PMC7000001", True),
    ("10.1000/beta.2", "30000002", "PMC7000002", True),
    ("10.1000/gamma.3", "30000003", None, False),
    ("10.1000/delta.4", None, "PMC7000004", True),
    ("10.1000/eps.5", "30000005", "PMC7000005", True),
]


def s2_table() -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for n, (doi, pmid, pmcid, known) in enumerate(UNIVERSE):
        if not known:
            continue
        record = {
            "paperId": f"{n:040x}",
            "externalIds": {"DOI": doi, "PubMed": pmid, "PubMedCentral": (pmcid or "")[3:]},
            "openAccessPdf": {"url": f"https://repository.example.org/{n}.pdf"},
        }
        table[f"DOI:{doi.lower()}"] = record
        if pmid:
            table[f"PMID:{pmid}"] = record
        if pmcid:
            table[f"PMCID:{pmcid[3:]}"] = record
    return table


@st.composite
def bundles(draw: st.DrawFn) -> ArticleIds:
    doi, pmid, pmcid, _ = draw(st.sampled_from(UNIVERSE))
    form = draw(st.sampled_from(["doi", "DOI", "pmid", "pmcid", "all", "none", "unknown"]))
    if form == "doi":
        return ArticleIds(doi=doi)
    if form == "DOI":
        return ArticleIds(doi=flip_case(doi), pmid=pmid)
    if form == "pmid":
        return ArticleIds(pmid=pmid)
    if form == "pmcid":
        return ArticleIds(pmcid=pmcid)
    if form == "all":
        return ArticleIds(doi=doi.lower(), pmid=pmid, pmcid=pmcid)
    if form == "unknown":
        return ArticleIds(doi=f"10.1000/unknown.{draw(st.integers(0, 3))}")
    return ArticleIds(bookid="NBK1116")


def s2_sent_key(ids: ArticleIds) -> str | None:
    """The paper id the per-article lookup would use, in the table's compare form."""
    if ids.doi is not None:
        return f"DOI:{ids.doi.lower()}"
    if ids.pmid is not None:
        return f"PMID:{ids.pmid}"
    if ids.pmcid is not None:
        return f"PMCID:{ids.pmcid[3:]}"
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.lists(bundles(), max_size=30),
    cap=st.integers(min_value=1, max_value=7),
    failing=st.sets(st.sampled_from(["DOI:10.1000/beta.2", "PMID:30000005", "PMCID:7000004"])),
)
def test_s2_batch_alignment_property(batch: list[ArticleIds], cap: int, failing: set[str]) -> None:
    http = TableHttp(s2=s2_table(), failing=frozenset(failing))
    with mock.patch.object(semantic_scholar_batch, "S2_BATCH_CAP", cap):
        result = asyncio.run(s2_batch_records(batch, http))

    distinct = {k for k in map(s2_sent_key, batch) if k is not None}
    sent = [i for ids, _ in http.posts for i in ids]
    assert sorted(sent) == sorted(distinct)
    assert len(http.posts) == math.ceil(len(distinct) / cap)
    assert set(http.rates) <= {Rate.S2_UNKEYED}
    failed = {i for ids, fail in http.posts if fail for i in ids}
    table = s2_table()
    assert len(result.values) == len(batch)
    for index, ids in enumerate(batch):
        key = s2_sent_key(ids)
        if key in failed:
            assert index in result.abandoned and result.values[index] is None
        else:
            assert index not in result.abandoned
            assert result.values[index] == (table.get(key) if key else None)


@st.composite
def doi_bundles(draw: st.DrawFn) -> ArticleIds:
    doi, _, _, _ = draw(st.sampled_from(UNIVERSE))
    form = draw(st.sampled_from(["as-is", "upper", "url", "none", "comma", "unknown"]))
    if form == "upper":
        return ArticleIds(doi=flip_case(doi))
    if form == "url":
        return ArticleIds(doi=f"https://doi.org/{doi}")
    if form == "none":
        return ArticleIds(pmid="30000001")
    if form == "comma":
        return ArticleIds(doi="10.1000/a,b")
    if form == "unknown":
        return ArticleIds(doi=f"10.1000/unknown.{draw(st.integers(0, 3))}")
    return ArticleIds(doi=doi)


def crossref_table() -> dict[str, dict[str, Any]]:
    table = {
        doi.lower(): {
            "DOI": doi.lower(),
            "link": [
                {
                    "URL": f"https://publisher.example.org/tdm/{n}.pdf",
                    "content-type": "application/pdf",
                    "intended-application": "text-mining",
                }
            ],
            "relation": {"has-preprint": [{"id-type": "doi", "id": f"10.1101/2026.01.0{n}"}]},
        }
        for n, (doi, _, _, known) in enumerate(UNIVERSE)
        if known
    }
    table["10.1000/a,b"] = {"DOI": "10.1000/a,b", "link": []}
    return table


def doi_lower(ids: ArticleIds) -> str | None:
    if ids.doi is None:
        return None
    return ids.doi.removeprefix("https://doi.org/").lower()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.lists(doi_bundles(), max_size=30),
    cap=st.integers(min_value=2, max_value=7),
    failing=st.sets(st.sampled_from(["10.1000/beta.2", "10.1000/unknown.1", "10.1000/a,b"])),
)
def test_crossref_batch_alignment_property(
    batch: list[ArticleIds], cap: int, failing: set[str]
) -> None:
    http = TableHttp(crossref=crossref_table(), failing=frozenset(failing))
    with mock.patch.object(crossref_batch, "CROSSREF_BATCH_CAP", cap):
        result = asyncio.run(crossref_batch_records(batch, http))

    distinct = {k for k in map(doi_lower, batch) if k is not None}
    listable = distinct - {"10.1000/a,b"}
    assert len(http.gets) == math.ceil(len(listable) / cap) + ("10.1000/a,b" in distinct)
    assert set(http.rates) <= {Rate.CROSSREF}
    failed: set[str] = set()
    for url, params, fail in http.gets:
        if url == crossref_batch.CROSSREF_LIST_URL:
            assert params["select"] == "DOI,link,relation,license"
            assert params["mailto"] == CONTACT
            chunk = [c.removeprefix("doi:") for c in str(params["filter"]).split(",")]
            assert params["rows"] == len(chunk) and 1 < len(chunk) <= cap
        else:
            chunk = [urllib.parse.unquote(url.rsplit("/works/", 1)[1])]
            assert params == {"mailto": CONTACT}
        if fail:
            failed.update(d.lower() for d in chunk)
    table = crossref_table()
    for index, ids in enumerate(batch):
        key = doi_lower(ids)
        if key in failed:
            assert index in result.abandoned and result.values[index] is None
        else:
            assert index not in result.abandoned
            assert result.values[index] == (table.get(key) if key else None)


# -- Semantic Scholar ------------------------------------------------------------------------


def s2_recorded_handler(seen: list[httpx.Request]) -> Callable[[httpx.Request], httpx.Response]:
    """Serve recorded S2 papers to both the single-paper GET and the batch POST."""
    by_id: dict[str, dict[str, Any]] = {}
    for doi, name in S2_RECORDED.items():
        record = data_json("json", name)
        ext = record["externalIds"]
        by_id[f"DOI:{doi}"] = record
        by_id[f"PMID:{ext['PubMed']}"] = record
        by_id[f"PMCID:{ext['PubMedCentral']}"] = record

    def find(paper_id: str) -> dict[str, Any] | None:
        scheme, _, value = paper_id.partition(":")
        return by_id.get(f"{scheme}:{value.lower()}" if scheme == "DOI" else paper_id)

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        fields = request.url.params.get("fields", "").split(",")
        if request.method == "POST":
            ids = json.loads(request.content)["ids"]
            out = []
            for paper_id in ids:
                record = find(paper_id)
                out.append(
                    None
                    if record is None
                    else {"paperId": record["paperId"], **{f: record.get(f) for f in fields}}
                )
            return httpx.Response(200, json=out)
        paper_id = urllib.parse.unquote(request.url.path.removeprefix("/graph/v1/paper/"))
        record = find(paper_id)
        if record is None:
            return httpx.Response(404, json={"error": f"Paper with id {paper_id} not found"})
        return httpx.Response(
            200, json={"paperId": record["paperId"], **{f: record.get(f) for f in fields}}
        )

    return handler


S2_ROWS = [
    ArticleIds(doi="10.1038/s42256-024-00832-8"),
    ArticleIds(doi="10.1016/J.XGEN.2025.100814"),
    ArticleIds(pmid="38799228"),
    ArticleIds(pmcid="PMC12008803"),
    ArticleIds(doi="10.1101/2024.04.01.587366"),  # S2 does not know it
    ArticleIds(bookid="NBK1116"),  # nothing S2 takes
    ArticleIds(doi="10.1038/S42256-024-00832-8", pmid="1"),
    ArticleIds(),
]


async def test_s2_batch_files_equal_the_per_article_source_on_recorded_papers() -> None:
    seen: list[httpx.Request] = []
    async with mock_session(s2_recorded_handler(seen)) as session:
        bulk = await s2_batch_files(S2_ROWS, session, credentials=S2_CREDS)
        posts = [r for r in seen if r.method == "POST"]
        source = SemanticScholarFileSource()
        single = [
            await source.list_files(ids, credentials=S2_CREDS, http=session) for ids in S2_ROWS
        ]
    assert [v or () for v in bulk.values] == single
    assert bulk.abandoned == frozenset()
    assert single[0] == (
        File(
            FileKind.BODY,
            "semantic_scholar",
            media_type=PDF,
            uri="https://www.nature.com/articles/s42256-024-00832-8.pdf",
        ),
    )
    # A record S2 does not know is absent, not a failure; rows without an id get nothing.
    assert bulk.values[4] is None and bulk.values[5] is None
    (post,) = posts
    assert json.loads(post.content) == {
        "ids": [
            "DOI:10.1038/s42256-024-00832-8",
            "DOI:10.1016/J.XGEN.2025.100814",
            "PMID:38799228",
            "PMCID:12008803",
            "DOI:10.1101/2024.04.01.587366",
        ]
    }
    assert post.url.params["fields"] == "externalIds,openAccessPdf"
    assert post.headers["x-api-key"] == S2_KEY


async def test_s2_batch_resolver_matches_the_per_item_resolver() -> None:
    rows = [
        ArticleIds(doi="10.1038/s42256-024-00832-8"),
        ArticleIds(doi="10.1016/j.xgen.2025.100814", pmid="99999999"),
        ArticleIds(pmid="38799228", pmcid="PMC11116106", doi="10.1038/s42256-024-00832-8"),
        ArticleIds(doi="10.1101/2024.04.01.587366"),
        ArticleIds(pmid="40120586"),
    ]
    seen: list[httpx.Request] = []
    async with mock_session(s2_recorded_handler(seen)) as session:
        batch, abandoned = await SemanticScholarBatchResolver(api_key=S2_KEY)(rows, session)
        posts = [json.loads(r.content)["ids"] for r in seen if r.method == "POST"]
        single = [await SemanticScholarResolver(api_key=S2_KEY)(ids, session) for ids in rows]
    assert batch == single
    assert abandoned == set()
    assert batch[0] == ArticleIds(
        pmid="38799228", pmcid="PMC11116106", doi="10.1038/s42256-024-00832-8"
    )
    # A known id is never overwritten; gaps are filled.
    assert batch[1] == ArticleIds(
        pmid="99999999", pmcid="PMC12008803", doi="10.1016/j.xgen.2025.100814"
    )
    # The complete bundle is not asked about.
    assert posts == [
        [
            "DOI:10.1038/s42256-024-00832-8",
            "DOI:10.1016/j.xgen.2025.100814",
            "DOI:10.1101/2024.04.01.587366",
            "PMID:40120586",
        ]
    ]
    assert "s2-secret" not in repr(SemanticScholarBatchResolver(api_key=S2_KEY))


async def test_s2_resolver_falls_back_per_item_without_post() -> None:
    seen: list[httpx.Request] = []
    rows = [ArticleIds(pmid="38799228"), ArticleIds(doi="10.1016/j.xgen.2025.100814")]

    class GetOnly:
        """An Http without post (a third-party test double)."""

        def __init__(self, session: Session) -> None:
            self._session = session

        @property
        def contact(self) -> str | None:
            return None

        async def get(self, url: str, **kwargs: Any) -> httpx.Response:
            return await self._session.get(url, **kwargs)

    async with mock_session(s2_recorded_handler(seen)) as session:
        out, abandoned = await SemanticScholarBatchResolver(api_key=S2_KEY)(rows, GetOnly(session))
    assert [r.method for r in seen] == ["GET", "GET"]
    assert out[0].doi == "10.1038/s42256-024-00832-8" and out[1].pmcid == "PMC12008803"
    assert abandoned == set()


async def test_s2_request_count_for_1201_ids_with_repeats() -> None:
    """1,201 rows, 1,001 distinct ids (repeats in another case) → ceil(1001 / 500) = 3 POSTs."""
    rows = [ArticleIds(doi=f"10.1000/S2.{n}") for n in range(700)]
    rows += [ArticleIds(pmid=str(30000000 + n)) for n in range(301)]
    rows += [ArticleIds(doi=f"10.1000/s2.{n}") for n in range(0, 400, 2)]  # 200 repeats
    assert len(rows) == 1201
    sizes: list[int] = []
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        ids = json.loads(request.content)["ids"]
        sizes.append(len(ids))
        sent.extend(ids)
        return httpx.Response(
            200,
            json=[
                {"paperId": i, "openAccessPdf": {"url": f"https://repository.example.org/{i}"}}
                for i in ids
            ],
        )

    async with mock_session(handler) as session:
        result = await s2_batch_files(rows, session, credentials=S2_CREDS)
    assert sorted(sizes) == [1, 500, 500]
    assert len(sent) == len({s.lower() for s in sent}) == 1001
    # Each row's answer is the one for its own id, including the repeats.
    for ids, files in zip(rows, result.values, strict=True):
        assert files is not None
        (file,) = files
        expected = f"DOI:10.1000/S2.{ids.doi.split('.')[-1]}" if ids.doi else f"PMID:{ids.pmid}"
        assert file.uri == f"https://repository.example.org/{expected}"


def failing_s2_handler(poison: str, outcome: str) -> Callable[[httpx.Request], httpx.Response]:
    """Answer an S2 batch from a simple rule; a batch naming ``poison`` fails with ``outcome``."""

    def handler(request: httpx.Request) -> httpx.Response:
        ids = json.loads(request.content)["ids"]
        if poison in ids:
            if outcome == "drop":
                raise httpx.ConnectError("connection refused", request=request)
            if outcome == "html":
                return httpx.Response(200, html="<html><body>Gateway</body></html>")
            return httpx.Response(int(outcome), json={"message": "refused", "code": outcome})
        # Odd numbers are unknown to S2 (null), even ones are known.
        return httpx.Response(
            200,
            json=[
                None if int(i.rsplit(".", 1)[1]) % 2 else {"paperId": i, "openAccessPdf": None}
                for i in ids
            ],
        )

    return handler


# "html" (a 200 gateway page for a JSON request) moved here from the definitive errors
# with issue 14: a 2xx that is not the payload asked for is a transient failure.
@pytest.mark.parametrize("outcome", ["503", "429", "drop", "html"])
async def test_s2_failed_chunk_abandons_exactly_its_indices(outcome: str) -> None:
    rows = [ArticleIds(doi=f"10.1000/x.{n}") for n in range(6)]
    rows += [ArticleIds(doi="10.1000/X.0"), ArticleIds(doi="10.1000/x.5")]
    handler = failing_s2_handler("DOI:10.1000/x.2", outcome)
    with mock.patch.object(semantic_scholar_batch, "S2_BATCH_CAP", 2):
        async with mock_session(handler) as session, session.scope() as scope:
            result = await s2_batch_records(rows, scope, api_key=S2_KEY)
            failures = scope.failures
    # Chunks: [x.0, x.1] [x.2, x.3] [x.4, x.5]; the middle one failed.
    assert result.abandoned == frozenset({2, 3})
    assert result.values[0] is not None and result.values[6] is result.values[0]
    # null from S2 is absence: not abandoned.
    assert result.values[1] is None and result.values[5] is None and result.values[7] is None
    assert failures  # the session also recorded why


@pytest.mark.parametrize("outcome", ["400", "404"])
async def test_s2_definitive_errors_are_not_abandoned(
    outcome: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="litfetch_df")
    rows = [ArticleIds(doi=f"10.1000/x.{n}") for n in range(4)]
    with mock.patch.object(semantic_scholar_batch, "S2_BATCH_CAP", 2):
        async with mock_session(failing_s2_handler("DOI:10.1000/x.2", outcome)) as session:
            result = await s2_batch_records(rows, session, api_key=S2_KEY)
    assert result.abandoned == frozenset()
    assert result.values[0] is not None and result.values[2:] == (None, None)
    assert "Semantic Scholar batch" in caplog.text


async def test_s2_misaligned_answer_is_definitive() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[{"paperId": "only-one"}])

    async with mock_session(handler) as session:
        result = await s2_batch_records(
            [ArticleIds(doi="10.1000/a"), ArticleIds(doi="10.1000/b")], session
        )
    assert result == BulkResult((None, None))


async def test_s2_key_selects_the_rate_and_stays_out_of_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    rows = [ArticleIds(doi="10.1000/x.0"), ArticleIds(doi="10.1000/x.2")]
    keyed = TableHttp()
    unkeyed = TableHttp()
    await s2_batch_files(rows, keyed, credentials=S2_CREDS)
    await s2_batch_files(rows, unkeyed, credentials={"semantic_scholar_api_key": "  "})
    assert keyed.rates == [Rate.S2_KEYED] and unkeyed.rates == [Rate.S2_UNKEYED]
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503, json={"message": "down"})

    async with mock_session(handler) as session:
        result = await s2_batch_files(rows, session, credentials=S2_CREDS)
    assert result.abandoned == frozenset({0, 1})
    assert all(r.headers["x-api-key"] == S2_KEY for r in seen)
    assert S2_KEY not in caplog.text


async def test_s2_requires_post() -> None:
    with pytest.raises(TypeError):
        await s2_batch_records([ArticleIds(doi="10.1000/a")], object())  # type: ignore[arg-type]


async def test_s2_scope_serves_files_and_records_from_one_post() -> None:
    seen: list[httpx.Request] = []
    async with mock_session(s2_recorded_handler(seen)) as session, session.scope() as scope:
        files = await s2_batch_files(S2_ROWS, scope)
        records = await s2_batch_records(S2_ROWS, scope)
    assert len(seen) == 1
    assert records.values[0] is not None and files.values[0]


# -- Crossref --------------------------------------------------------------------------------


def crossref_recorded_handler(
    seen: list[httpx.Request],
) -> Callable[[httpx.Request], httpx.Response]:
    """Serve recorded Crossref works to the single-work GET and the list GET (select honoured)."""
    messages = {doi: data_json("json", name)["message"] for doi, name in CROSSREF_RECORDED.items()}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.host == "api.biorxiv.org":
            return httpx.Response(404, json={"messages": [{"status": "no posts found"}]})
        path = request.url.path
        if path.startswith("/works/"):
            doi = urllib.parse.unquote(path.removeprefix("/works/")).lower()
            if doi not in messages:
                return httpx.Response(404, text="Resource not found.")
            return httpx.Response(200, json={"status": "ok", "message": messages[doi]})
        flt = request.url.params["filter"]
        select = request.url.params["select"].split(",")
        dois = [c.removeprefix("doi:").lower() for c in flt.split(",")]
        items = [
            {k: messages[d][k] for k in select if k in messages[d]} for d in dois if d in messages
        ]
        random.Random(flt).shuffle(items)
        return httpx.Response(
            200,
            json={
                "status": "ok",
                "message-type": "work-list",
                "message": {"total-results": len(items), "items": items},
            },
        )

    return handler


CROSSREF_ROWS = [
    ArticleIds(doi="10.1016/j.xgen.2025.100814"),
    ArticleIds(doi="10.1038/S42256-024-00832-8"),
    ArticleIds(doi="https://doi.org/10.1101/2024.04.01.587366"),
    ArticleIds(doi="10.3389/fgene.2017.00147"),
    ArticleIds(doi="10.1000/not-in-crossref"),
    ArticleIds(pmid="30000001"),
    ArticleIds(doi="10.3389/FGENE.2017.00147"),
    ArticleIds(doi="10.1234/../../admin"),  # escapes its URL path: never requested
]


async def test_crossref_bulk_equals_the_per_article_paths_on_recorded_works() -> None:
    seen: list[httpx.Request] = []
    async with mock_session(crossref_recorded_handler(seen), contact=CONTACT) as session:
        files = await crossref_batch_files(CROSSREF_ROWS, session)
        relations = await crossref_batch_relations(CROSSREF_ROWS, session)
        listed = [r for r in seen if r.url.path == "/works"]
        source = CrossrefFileSource()
        single_files = [await source.list_files(ids, http=session) for ids in CROSSREF_ROWS]
        single_related = [await related_ids(session, ids) for ids in CROSSREF_ROWS]
    assert [v or () for v in files.values] == single_files
    assert [v or () for v in relations.values] == single_related
    assert files.abandoned == relations.abandoned == frozenset()
    assert any(single_files) and any(single_related)  # the data has both
    assert files.values[4] is None and files.values[5] is None and files.values[7] is None
    assert len(listed) == 2  # one list request per call, five distinct DOIs each
    params = listed[0].url.params
    assert params["rows"] == "5" and params["mailto"] == CONTACT
    assert params["select"] == "DOI,link,relation,license"
    assert params["filter"].split(",") == [
        "doi:10.1016/j.xgen.2025.100814",
        "doi:10.1038/S42256-024-00832-8",
        "doi:10.1101/2024.04.01.587366",
        "doi:10.3389/fgene.2017.00147",
        "doi:10.1000/not-in-crossref",
    ]


async def test_crossref_request_count_mixed_case_and_comma() -> None:
    """201 distinct DOIs (plus case repeats) → 2 list requests + 1 lone; a comma DOI alone."""
    rows = [ArticleIds(doi=f"10.1000/Cr.{n}") for n in range(201)]
    rows += [ArticleIds(doi=f"10.1000/cR.{n}") for n in range(0, 201, 3)]
    rows += [ArticleIds(doi="10.1000/a,b"), ArticleIds(doi="10.1000/A,B")]
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/works":
            dois = [c.removeprefix("doi:") for c in request.url.params["filter"].split(",")]
            items = [{"DOI": d.lower(), "link": []} for d in dois]
            return httpx.Response(200, json={"status": "ok", "message": {"items": items}})
        doi = urllib.parse.unquote(request.url.path.removeprefix("/works/"))
        return httpx.Response(200, json={"status": "ok", "message": {"DOI": doi.lower()}})

    async with mock_session(handler) as session:
        result = await crossref_batch_records(rows, session)
    lists = [r for r in seen if r.url.path == "/works"]
    singles = sorted(urllib.parse.unquote(r.url.path) for r in seen if r.url.path != "/works")
    assert len(seen) == math.ceil(201 / 100) + 1
    assert sorted(len(r.url.params["filter"].split(",")) for r in lists) == [100, 100]
    assert singles == ["/works/10.1000/Cr.200", "/works/10.1000/a,b"]
    assert all(v is not None for v in result.values)
    for ids, record in zip(rows, result.values, strict=True):
        assert record is not None and ids.doi is not None
        assert record["DOI"] == ids.doi.lower()


async def test_crossref_failed_chunk_is_abandoned_missing_doi_is_absent() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        flt = request.url.params.get("filter", "")
        if "10.1000/bad" in flt:
            raise httpx.ReadTimeout("timed out", request=request)
        dois = [c.removeprefix("doi:") for c in flt.split(",")]
        items = [{"DOI": d} for d in dois if not d.endswith("missing")]
        return httpx.Response(200, json={"status": "ok", "message": {"items": items}})

    rows = [
        ArticleIds(doi="10.1000/ok.1"),
        ArticleIds(doi="10.1000/ok.missing"),
        ArticleIds(doi="10.1000/bad"),
        ArticleIds(doi="10.1000/ok.2"),
        ArticleIds(doi="10.1000/BAD"),
    ]
    with mock.patch.object(crossref_batch, "CROSSREF_BATCH_CAP", 2):
        async with mock_session(handler) as session:
            result = await crossref_batch_records(rows, session)
    # Chunks: [ok.1, ok.missing] [bad, ok.2]
    assert result.abandoned == frozenset({2, 3, 4})
    assert result.values[0] == {"DOI": "10.1000/ok.1"}
    assert result.values[1] is None and 1 not in result.abandoned


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(400, json={"status": "failed", "message-type": "validation-failure"}),
        httpx.Response(200, json={"status": "ok", "message": {"items": "nope"}}),
        httpx.Response(404, text="Resource not found."),
    ],
)
async def test_crossref_definitive_errors_are_not_abandoned(answer: httpx.Response) -> None:
    rows = [ArticleIds(doi="10.1000/a.1"), ArticleIds(doi="10.1000/a.2")]
    async with mock_session(lambda _request: answer) as session:
        result = await crossref_batch_files(rows, session)
    assert result == BulkResult((None, None))


async def test_crossref_html_page_is_abandoned() -> None:
    # Issue 14: a 200 maintenance page where JSON was asked for is retried and abandoned
    # (it used to count as a definitive, empty answer).
    def handler(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, html="<html><body>Maintenance</body></html>")

    rows = [ArticleIds(doi="10.1000/a.1"), ArticleIds(doi="10.1000/a.2")]
    async with mock_session(handler) as session:
        result = await crossref_batch_files(rows, session)
    assert result.values == (None, None)
    assert result.abandoned == frozenset({0, 1})


# -- Springer Meta ---------------------------------------------------------------------------


def meta_record(doi: str, *, openaccess: str = "false", pdf: str | None = None) -> dict[str, Any]:
    url = pdf if pdf is not None else f"http://link.springer.com/openurl/pdf?id=doi:{doi}"
    return {
        "contentType": "Article",
        "identifier": f"doi:{doi}",
        "url": [
            {"format": "html", "platform": "", "value": url.replace("/pdf?", "/fulltext?")},
            {"format": "pdf", "platform": "", "value": url},
        ],
        "doi": doi,
        "publisher": "Springer",
        "openaccess": openaccess,
    }


def meta_answer(query: str, records: list[dict[str, Any]]) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "apiMessage": "This JSON was provided by Springer Nature",
            "query": query,
            "apiKey": META_KEY,  # the real API echoes the key
            "result": [
                {"total": str(len(records)), "start": "1", "recordsDisplayed": str(len(records))}
            ],
            "records": records,
            "facets": [],
        },
    )


def meta_handler(
    seen: list[httpx.Request], known: Mapping[str, dict[str, Any]]
) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        assert request.url.params["api_key"] == META_KEY
        query = request.url.params["q"]
        dois = [t.removeprefix("doi:") for t in query.split(" OR ")]
        records = [known[d.lower()] for d in dois if d.lower() in known]
        records.reverse()
        return meta_answer(query, records)

    return handler


async def test_springer_without_key_makes_no_request() -> None:
    seen: list[httpx.Request] = []
    async with mock_session(meta_handler(seen, {})) as session:
        result = await springer_batch_files(
            [ArticleIds(doi="10.1007/a")], session, credentials={"springer_meta_api_key": " "}
        )
    assert result == BulkResult((None,)) and seen == []


async def test_springer_request_count_matching_and_files() -> None:
    """120 distinct DOIs (plus case repeats) → ceil(120 / 25) = 5 OR queries (Basic's page)."""
    known = {
        f"10.1007/s{n}": meta_record(f"10.1007/s{n}", openaccess="true" if n % 8 == 0 else "false")
        for n in range(0, 120, 4)
    }
    rows = [ArticleIds(doi=f"10.1007/S{n}") for n in range(120)]
    rows += [ArticleIds(doi=f"10.1007/s{n}") for n in range(0, 120, 5)]
    seen: list[httpx.Request] = []
    async with mock_session(meta_handler(seen, known)) as session:
        result = await springer_batch_files(rows, session, credentials=META_CREDS)
    assert len(seen) == math.ceil(120 / 25)
    sizes = sorted(len(r.url.params["q"].split(" OR ")) for r in seen)
    assert sizes == [20, 25, 25, 25, 25]
    assert all(r.url.params["p"] == str(len(r.url.params["q"].split(" OR "))) for r in seen)
    for ids, files in zip(rows, result.values, strict=True):
        assert ids.doi is not None
        n = int(ids.doi.split("/")[1][1:])
        if n % 4:
            assert files is None
            continue
        assert files == (
            File(
                FileKind.BODY,
                "springer",
                media_type=PDF,
                uri=f"http://link.springer.com/openurl/pdf?id=doi:10.1007/s{n}",
                credential_key=None if n % 8 == 0 else INSTITUTIONAL,
            ),
        )
    assert result.abandoned == frozenset()


async def test_springer_syntax_dois_go_alone_and_failures_abandon() -> None:
    seen: list[httpx.Request] = []
    known = {"10.1007/ok": meta_record("10.1007/ok"), "10.1007/x(1)": meta_record("10.1007/x(1)")}

    def handler(request: httpx.Request) -> httpx.Response:
        if "10.1007/down" in request.url.params["q"]:
            seen.append(request)
            return httpx.Response(503, json={"message": "down"})
        return meta_handler(seen, known)(request)

    rows = [
        ArticleIds(doi="10.1007/ok"),
        ArticleIds(doi="10.1007/x(1)"),
        ArticleIds(doi="10.1007/unknown"),
        ArticleIds(doi="10.1007/down"),
        ArticleIds(doi="10.1007/also"),
    ]
    with mock.patch.object(springer_batch, "SPRINGER_BATCH_CAP", 2):
        async with mock_session(handler) as session:
            result = await springer_batch_records(rows, session, credentials=META_CREDS)
    queries = sorted({r.url.params["q"] for r in seen})
    # A lone DOI is asked exactly as the per-article source asks (no page size).
    assert "doi:10.1007/x(1)" in queries
    lone = [r for r in seen if r.url.params["q"] == "doi:10.1007/x(1)"]
    assert "p" not in lone[0].url.params
    assert result.values[0] is not None and result.values[1] is not None
    assert result.values[2] is None and 2 not in result.abandoned
    assert result.abandoned == frozenset({3, 4})


async def test_springer_key_never_logged_nor_in_uri(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echoed = meta_record("10.1007/echo", pdf=f"https://link.springer.com/pdf?api_key={META_KEY}")
    known = {"10.1007/fine": meta_record("10.1007/fine", openaccess="true"), "10.1007/echo": echoed}

    def handler(request: httpx.Request) -> httpx.Response:
        if "10.1007/gone" in request.url.params["q"]:
            raise httpx.ConnectError(f"failed {request.url}", request=request)
        if "10.1007/refused" in request.url.params["q"]:
            return httpx.Response(401, json={"status": "Fail", "message": "Authentication failed"})
        return meta_handler([], known)(request)

    rows = [
        ArticleIds(doi="10.1007/fine"),
        ArticleIds(doi="10.1007/echo"),
        ArticleIds(doi="10.1007/gone"),
        ArticleIds(doi="10.1007/x2"),
        ArticleIds(doi="10.1007/refused"),
        ArticleIds(doi="10.1007/x3"),
    ]
    with mock.patch.object(springer_batch, "SPRINGER_BATCH_CAP", 2):
        async with mock_session(handler) as session:
            result = await springer_batch_files(rows, session, credentials=META_CREDS)
    assert result.values[0] is not None and result.values[0][0].credential_key is None
    assert result.values[1] == ()  # the echoing link is dropped
    assert result.abandoned == frozenset({2, 3})  # transport failure after retries
    assert result.values[4:] == (None, None) and 4 not in result.abandoned  # 401: definitive
    for files in result.values:
        assert all(META_KEY not in (f.uri or "") for f in files or ())
    assert caplog.records and META_KEY not in caplog.text


async def test_springer_chunks_run_concurrently(fake: FakeUpstream) -> None:
    world = World(
        [
            Article(doi=f"10.1007/s{n}", publisher=Publisher.SPRINGER, body=BodyHome.SPRINGER)
            for n in range(6)
        ],
        keys={"springer_meta": META_KEY},
    )
    world.install(fake, latency={HOST_SPRINGER: 0.3})
    rows = [ArticleIds(doi=f"10.1007/s{n}") for n in range(6)]
    with mock.patch.object(springer_batch, "SPRINGER_BATCH_CAP", 2):
        async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as session:
            result = await springer_batch_files(rows, session, credentials=META_CREDS)
    assert fake.count(HOST_SPRINGER) == 3
    assert fake.max_in_flight[HOST_SPRINGER] >= 2  # nothing here waits between chunks
    assert all(v for v in result.values)


# -- per-row equality on the synthetic world -------------------------------------------------

WORLD = [
    Article(
        pmid="30000001",
        pmcid="PMC7000001",
        doi="10.1000/World.1",
        oa_status="gold",
        pdf_url="https://repository.example.org/world/1.pdf",
        crossref_tdm=True,
        preprint_doi="10.1101/2026.01.05.600001",
    ),
    Article(pmid="30000002", doi="10.1000/world.2", oa_status="closed"),
    Article(pmcid="PMC7000003", oa_status="green", pdf_url="https://repository.example.org/3.pdf"),
    Article(doi="10.1000/world.4", in_s2=False, in_crossref=False),
    Article(
        doi="10.1007/s00000-026-00001-x",
        publisher=Publisher.SPRINGER,
        body=BodyHome.SPRINGER,
        oa_status="gold",
        pdf_url="http://link.springer.com/openurl/pdf?id=doi:10.1007/s00000-026-00001-x",
    ),
    Article(doi="10.1007/s00000-026-00002-y", publisher=Publisher.SPRINGER),
    Article(doi="10.1101/2026.02.01.600002", published_doi="10.1000/world.2"),
]

WORLD_ROWS = [
    ArticleIds(doi="10.1000/WORLD.1"),
    ArticleIds(pmid="30000002"),
    ArticleIds(pmcid="PMC7000003"),
    ArticleIds(doi="10.1000/world.4"),
    ArticleIds(doi="10.1007/S00000-026-00001-X"),
    ArticleIds(doi="10.1007/s00000-026-00002-y"),
    ArticleIds(doi="10.1000/world.2", pmid="30000002"),
    ArticleIds(doi="10.1101/2026.02.01.600002"),
    ArticleIds(doi="10.1000/nowhere"),
    ArticleIds(doi="10.1000/world.1"),
    ArticleIds(),
]


@pytest.fixture
async def world_session(fake: FakeUpstream) -> AsyncIterator[Session]:
    World(WORLD, keys={"springer_meta": META_KEY}).install(fake)
    async with Session(
        client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT
    ) as session:
        yield session


async def test_world_bulk_file_sets_equal_list_files(
    fake: FakeUpstream, world_session: Session
) -> None:
    credentials = {**S2_CREDS, **META_CREDS}
    for source in (SemanticScholarFileSource(), CrossrefFileSource(), SpringerFileSource()):
        lister = bulk_file_lister(source)
        assert lister is not None
        fake.reset_log()
        bulk = await lister(WORLD_ROWS, world_session, credentials=credentials)
        bulk_requests = len(fake.requests())
        single = [
            await source.list_files(ids, credentials=credentials, http=world_session)
            for ids in WORLD_ROWS
        ]
        assert [v or () for v in bulk.values] == single, source.name
        assert bulk.abandoned == frozenset()
        assert any(single), source.name
        assert bulk_requests == 1, source.name


async def test_world_bulk_relations_equal_related_ids_crossref_part(
    world_session: Session,
) -> None:
    bulk = await crossref_batch_relations(WORLD_ROWS, world_session)
    for ids, relations in zip(WORLD_ROWS, bulk.values, strict=True):
        full = await related_ids(world_session, ids)
        if ids.doi is not None and is_preprint_doi(ids.doi):
            # related_ids puts bioRxiv's answer first; Crossref's may repeat it.
            assert set(relations or ()) <= set(full)
        else:
            assert (relations or ()) == full
    assert any(bulk.values)
    assert bulk.values[0] == (
        Related(RelationType.PREPRINT, ArticleIds(doi="10.1101/2026.01.05.600001")),
    )


async def test_world_batch_resolver_equals_per_item(world_session: Session) -> None:
    batch, abandoned = await SemanticScholarBatchResolver(api_key=S2_KEY)(WORLD_ROWS, world_session)
    single = [
        await SemanticScholarResolver(api_key=S2_KEY)(ids, world_session) for ids in WORLD_ROWS
    ]
    assert batch == single and abandoned == set()
    assert batch[1] == ArticleIds(pmid="30000002", doi="10.1000/world.2")


def test_bulk_file_lister_maps_only_the_bundled_classes() -> None:
    class Custom(SemanticScholarFileSource):
        pass

    assert bulk_file_lister(SemanticScholarFileSource()) is s2_batch_files
    assert bulk_file_lister(CrossrefFileSource()) is crossref_batch_files
    assert bulk_file_lister(SpringerFileSource()) is springer_batch_files
    assert bulk_file_lister(Custom()) is None
    assert bulk_file_lister(object()) is None
