"""Resolver chains and batch resolution over one fake world of articles.

The world is a table of articles and what each service knows about them: in
NCBI's PMC (all three services know it), Europe-PMC-only PMC ids (UK author
manuscripts NCBI lacks), PubMed articles outside PMC, DOI-only works known to
OpenAlex, and articles nobody knows. One handler answers all three services
from it, shaped as upstream.md 2.1-2.3 shows; it serves a real Session over
``httpx.MockTransport``, the local fake upstream, and (for the property tests)
a bare in-memory ``Http``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litfetch_df import ArticleIds, Rate
from litfetch_df.ids import RESOLVABLE
from litfetch_df.operations.resolution import (
    MAX_ROUNDS,
    EuropePmcBatchResolver,
    NcbiIdConverterBatchResolver,
    OpenAlexResolver,
    chain,
    chain_batch,
    default_batch_resolver,
    default_resolver,
)
from litfetch_df.operations.types import BatchResolver
from litfetch_df.sources.europe_pmc_search import EuropePmcResolver
from litfetch_df.sources.ncbi_idconv import NcbiIdConverterResolver
from tests.conftest import data_bytes, mock_session
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream

NCBI = "pmc.ncbi.nlm.nih.gov"
EPMC = "www.ebi.ac.uk"
OPENALEX = "api.openalex.org"
SEARCH_PATH = "/europepmc/webservices/rest/search"

# -- the world ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Article:
    pmid: str | None
    pmcid: str | None
    doi: str | None
    in_ncbi: bool = False  # NCBI's converter maps it (it is in PMC)
    in_epmc: bool = False  # Europe PMC has its MEDLINE record
    in_openalex: bool = False  # OpenAlex knows the DOI
    openalex_pmcid: bool = False  # ... and lists the PMCID, not only the PMID

    @property
    def ids(self) -> ArticleIds:
        return ArticleIds(pmid=self.pmid, pmcid=self.pmcid, doi=self.doi)


def _pmid(n: int) -> str:
    return str(30000000 + n)


def _pmcid(n: int) -> str:
    return f"PMC{7000000 + n}"


def build_world(size: int) -> list[Article]:
    """The ~20 hand-picked articles, then ``size`` more cycling through the same kinds."""
    table = [
        # In PMC: every service knows them.
        Article(_pmid(1), _pmcid(1), "10.1000/abc.1", True, True, True, True),
        Article(_pmid(2), _pmcid(2), "10.1000/ABC.2", True, True, True),  # NCBI stores upper case
        Article(_pmid(3), _pmcid(3), "10.5555/xyz-3", True, True, True, True),
        Article(_pmid(4), _pmcid(4), "10.1000/abc.4", True, True),
        Article(_pmid(5), _pmcid(5), None, True, True),
        Article(_pmid(6), _pmcid(6), "10.1000/a,6", True, True, True),  # NCBI list separator
        # Europe-PMC-only PMC ids (NCBI's converter lacks them).
        Article(_pmid(7), _pmcid(7), "10.1000/abc.7", False, True, True),
        Article(_pmid(8), _pmcid(8), "10.1000/abc.8", False, True),
        Article(_pmid(9), _pmcid(9), None, False, True),
        # PubMed articles outside PMC: Europe PMC gives the DOI, OpenAlex the PMID.
        Article(_pmid(10), None, "10.1000/abc.10", False, True, True),
        Article(_pmid(11), None, "10.1000/abc.11", False, True),
        Article(_pmid(12), None, "10.1000/x|12", False, True, True),  # OpenAlex separator
        Article(_pmid(13), None, None, False, True),
        # DOI-only works known to OpenAlex (not in PubMed).
        Article(None, None, "10.5555/only.14", in_openalex=True),
        Article(None, None, "10.5555/Only.15", in_openalex=True),
        Article(None, None, "10.5555/only.16", in_openalex=True),
        # Nobody knows these.
        Article(_pmid(17), _pmcid(17), "10.1000/none.17"),
        Article(_pmid(18), None, None),
        Article(None, None, "10.1000/none.19"),
        Article(None, _pmcid(20), None),
    ]
    for n in range(100, 100 + size):
        kind = n % 5
        doi = f"10.1000/w.{n}"
        if kind == 0:
            table.append(Article(_pmid(n), _pmcid(n), doi, True, True, True, n % 2 == 0))
        elif kind == 1:
            table.append(Article(_pmid(n), _pmcid(n), doi, False, True, True))
        elif kind == 2:
            table.append(Article(_pmid(n), None, doi, False, True, True))
        elif kind == 3:
            table.append(Article(None, None, doi, in_openalex=True))
        else:
            table.append(Article(_pmid(n), None, None))
    return table


class World:
    """Answers NCBI, Europe PMC and OpenAlex requests from a table of articles."""

    def __init__(self, articles: Sequence[Article]) -> None:
        self.articles = list(articles)
        self.by_pmid = {a.pmid: a for a in articles if a.pmid}
        self.by_pmcid = {a.pmcid: a for a in articles if a.pmcid}
        self.by_doi = {a.doi.lower(): a for a in articles if a.doi}
        self.down: set[str] = set()  # hosts answering 503 to everything
        self.requests: Counter[str] = Counter()

    def handle(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        self.requests[host] += 1
        if host in self.down:
            return httpx.Response(503, text="Service Unavailable")
        if host == NCBI:
            return self._ncbi(request.url.params)
        if host == EPMC and request.url.path == SEARCH_PATH:
            return self._epmc(request.url.params)
        if host == OPENALEX and request.url.path == "/works":
            return self._openalex(request.url.params)
        return httpx.Response(404)

    def _ncbi(self, params: httpx.QueryParams) -> httpx.Response:
        sent = params["ids"].split(",")  # what NCBI does with a comma, whatever it belongs to
        if len(sent) > 200:
            return httpx.Response(400, json={"status": "error", "message": "too many ids"})
        idtype = params.get("idtype")
        records: list[dict[str, Any]] = []
        for raw in sent:
            kind = idtype or (
                "pmid"
                if raw.isdigit()
                else "pmcid"
                if re.fullmatch(r"PMC\d+", raw)
                else "doi"
                if raw.startswith("10.")
                else None
            )
            article = {
                "pmid": self.by_pmid.get(raw),
                "pmcid": self.by_pmcid.get(raw.upper()),
                "doi": self.by_doi.get(raw.lower()),
            }.get(kind or "")
            if article is None or not article.in_ncbi:
                records.append(
                    {
                        "requested-id": raw,
                        "status": "error",
                        "errmsg": "Identifier not found in PMC",
                    }
                )
                continue
            record: dict[str, Any] = {"requested-id": raw, "pmcid": article.pmcid}
            record["pmid"] = int(article.pmid) if article.pmid else None
            if article.doi:
                record["doi"] = article.doi
            records.append(record)
        body = {"status": "ok", "responseDate": "2026-03-02 14:05:11", "records": records}
        return httpx.Response(200, json=body)

    def _epmc(self, params: httpx.QueryParams) -> httpx.Response:
        query = params["query"]
        if not re.fullmatch(r"(\(EXT_ID:\d+( OR EXT_ID:\d+)*\)|EXT_ID:\d+) AND SRC:MED", query):
            return httpx.Response(400, json={"errMsg": "bad query"})
        results = []
        for pmid in re.findall(r"EXT_ID:(\d+)", query):
            article = self.by_pmid.get(pmid)
            if article is None or not article.in_epmc:
                continue
            rec: dict[str, Any] = {"id": pmid, "source": "MED", "pmid": pmid, "title": "…"}
            if article.pmcid:
                rec["pmcid"] = article.pmcid
            if article.doi:
                rec["doi"] = article.doi
            results.append(rec)
        results = results[: int(params["pageSize"])]
        body = {
            "version": "6.9",
            "hitCount": len(results),
            "request": {"queryString": query, "resultType": params["resultType"]},
            "resultList": {"result": results},
        }
        return httpx.Response(200, json=body)

    def _openalex(self, params: httpx.QueryParams) -> httpx.Response:
        filters = params["filter"].split(",")  # OpenAlex ANDs comma-separated filters
        if len(filters) != 1 or not filters[0].startswith("doi:"):
            return httpx.Response(400, json={"error": "Invalid query parameters error."})
        values = filters[0].removeprefix("doi:").split("|")
        if len(values) > 100:
            return httpx.Response(400, json={"error": "Invalid query parameters error."})
        works = []
        for value in dict.fromkeys(values):
            article = self.by_doi.get(value.lower())
            if article is None or not article.in_openalex or article.doi is None:
                continue
            ids = {"openalex": "https://openalex.org/W4390000001"}
            ids["doi"] = f"https://doi.org/{article.doi.lower()}"
            if article.pmid:
                ids["pmid"] = f"https://pubmed.ncbi.nlm.nih.gov/{article.pmid}"
            if article.pmcid and article.openalex_pmcid:
                ids["pmcid"] = f"https://www.ncbi.nlm.nih.gov/pmc/articles/{article.pmcid[3:]}"
            works.append({"ids": ids, "doi": ids["doi"]})
        works = works[: int(params["per-page"])]
        return httpx.Response(200, json={"meta": {"count": len(works)}, "results": works})


class TableHttp:
    """A bare in-memory ``Http``: every request answered by the world, no pacing, no retries."""

    def __init__(self, world: World, contact: str | None = "dev@lab.example") -> None:
        self.world = world
        self.contact = contact

    async def get(
        self,
        url: str,
        *,
        params: Any = None,
        headers: Any = None,
        rate: Rate = Rate.DEFAULT,
        follow_redirects: bool = False,
    ) -> httpx.Response:
        request = httpx.Request("GET", url, params=params)
        response = self.world.handle(request)
        response.request = request
        return response


# -- the model: what the batch chain should give, element by element ---------------------------


@dataclasses.dataclass
class Expected:
    result: ArticleIds
    rounds: list[dict[str, str]]  # per round: service host -> the key this element was sent under

    @property
    def sent(self) -> set[str]:
        """The services this element was sent to, in any round."""
        return {host for sent in self.rounds for host in sent}


def _complete(ids: ArticleIds) -> bool:
    return ids.has(RESOLVABLE)


def _keys(ids: ArticleIds) -> dict[str, str | None]:
    """What each service would be asked about ``ids`` (``None``: nothing)."""
    if _complete(ids):
        return dict.fromkeys((NCBI, EPMC, OPENALEX))
    ncbi = ids.pmid or (ids.pmcid.upper() if ids.pmcid else None) or (ids.doi or "").lower()
    return {
        NCBI: ncbi or None,
        EPMC: ids.pmid if ids.pmid and (ids.pmcid is None or ids.doi is None) else None,
        OPENALEX: ids.doi.lower() if ids.doi and (ids.pmid is None or ids.pmcid is None) else None,
    }


_NEVER = "never asked"


def model(article: Article, given: ArticleIds, down: frozenset[str] = frozenset()) -> Expected:
    """What ``default_batch_resolver`` should make of one element, written plainly.

    Rounds of NCBI, Europe PMC, OpenAlex until the element gains nothing; in a
    later round a service is asked again only when its question changed.
    """
    ids, rounds = given, []
    last: dict[str, str | None] = {}
    for _ in range(MAX_ROUNDS):
        before, sent = ids, {}
        for host in (NCBI, EPMC, OPENALEX):
            if _complete(ids):
                break
            key = _keys(ids)[host]
            if last.get(host, _NEVER) == key:
                continue
            last[host] = key
            if key is None:
                continue
            sent[host] = key
            if host in down:
                continue
            if host == NCBI:
                separator = ids.pmid is None and ids.pmcid is None and "," in key
                if article.in_ncbi and not separator:
                    ids = ids.merge(article.ids)
            elif host == EPMC:
                if article.in_epmc:
                    ids = ids.merge(article.ids)
            elif article.in_openalex and "|" not in key and "," not in key:
                pmcid = article.pmcid if article.openalex_pmcid else None
                ids = ids.merge(ArticleIds(pmid=article.pmid, pmcid=pmcid))
        rounds.append(sent)
        if ids == before:
            break
    return Expected(ids, rounds)


def expected_requests(expectations: Sequence[Expected]) -> dict[str, int]:
    """Per round, ``ceil(distinct / cap)`` per service plus one request per key that goes alone."""
    caps = {NCBI: 200, EPMC: 100, OPENALEX: 100}
    alone = {NCBI: ",", EPMC: "", OPENALEX: ",|"}
    counts = dict.fromkeys(caps, 0)
    for r in range(MAX_ROUNDS):
        for host, cap in caps.items():
            keys = {
                e.rounds[r][host] for e in expectations if r < len(e.rounds) and host in e.rounds[r]
            }
            solo = {k for k in keys if any(c in k for c in alone[host])}
            counts[host] += math.ceil(len(keys - solo) / cap) + len(solo)
    return counts


def as_given(article: Article, mask: int, shout: bool) -> ArticleIds:
    """The article as a caller holds it: a subset of its ids, the DOI maybe in upper case."""
    doi = article.doi.upper() if article.doi and shout else article.doi
    fields = [("pmid", article.pmid), ("pmcid", article.pmcid), ("doi", doi)]
    present = [(name, value) for name, value in fields if value is not None]
    chosen = {name: value for bit, (name, value) in enumerate(present) if mask >> bit & 1}
    if not chosen:  # never an empty bundle: keep the first id it has
        chosen = dict(present[:1])
    return ArticleIds(**chosen)


WORLD_ARTICLES = build_world(400)

element = st.tuples(st.integers(0, len(WORLD_ARTICLES) - 1), st.integers(0, 7), st.booleans())


@st.composite
def batches(draw: st.DrawFn, max_bulk: int = 450) -> list[tuple[int, int, bool]]:
    """A shuffled batch: a few random picks (each twice) plus a run of up to ``max_bulk``.

    The run makes batches big enough to span several chunks of every service,
    which plain list strategies rarely reach.
    """
    size = len(WORLD_ARTICLES)
    picks = draw(st.lists(element, max_size=40))
    start = draw(st.integers(0, size - 1))
    count = draw(st.integers(0, max_bulk))
    bulk = [((start + k) % size, (start + k) * 3 % 8, k % 3 == 0) for k in range(count)]
    combined = picks + bulk + picks
    draw(st.randoms(use_true_random=False)).shuffle(combined)
    return combined


def run_batch(
    resolver: BatchResolver, batch: Sequence[ArticleIds], http: Any
) -> tuple[Sequence[ArticleIds], set[int]]:
    """Run a batch resolver to completion outside any event loop (for hypothesis tests)."""

    async def go() -> tuple[Sequence[ArticleIds], set[int]]:
        return await resolver(batch, http)

    return asyncio.run(go())


def draw_batch(picks: Sequence[tuple[int, int, bool]]) -> tuple[list[Article], list[ArticleIds]]:
    articles = [WORLD_ARTICLES[i] for i, _, _ in picks]
    return articles, [as_given(a, m, s) for a, (_, m, s) in zip(articles, picks, strict=True)]


# -- per item: chain -------------------------------------------------------------------------


class Scripted:
    """A per-item resolver answering a fixed bundle and counting its calls."""

    def __init__(self, answer: ArticleIds) -> None:
        self.answer = answer
        self.calls = 0

    async def __call__(self, ids: ArticleIds, http: Any) -> ArticleIds:
        self.calls += 1
        return self.answer  # deliberately not merged: the chain must protect known ids


async def test_chain_runs_in_order_and_stops_once_complete() -> None:
    first = Scripted(ArticleIds(pmcid="PMC7000001"))
    second = Scripted(ArticleIds(pmid="30000001", pmcid="PMC7999999", doi="10.1000/abc.1"))
    third = Scripted(ArticleIds(doi="10.9999/never"))
    out = await chain(first, second, third)(ArticleIds(doi="10.1000/ABC.1"), TableHttp(World([])))
    assert out == ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/ABC.1")
    assert (first.calls, second.calls, third.calls) == (1, 1, 0)


async def test_chain_of_a_complete_bundle_calls_nothing() -> None:
    spy = Scripted(ArticleIds())
    complete = ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/abc.1")
    assert await chain(spy)(complete, TableHttp(World([]))) == complete
    assert spy.calls == 0
    assert await chain()(ArticleIds(pmid="1"), TableHttp(World([]))) == ArticleIds(pmid="1")


async def test_default_resolver_is_europe_pmc_then_ncbi() -> None:
    world = World(build_world(0))
    http = TableHttp(world)
    resolver = default_resolver()
    assert resolver == chain(EuropePmcResolver(), NcbiIdConverterResolver())
    # Europe PMC alone completes a PMC article from its PMID: NCBI is never asked.
    out = await resolver(ArticleIds(pmid=_pmid(1)), http)
    assert out == WORLD_ARTICLES[0].ids
    assert world.requests == Counter({EPMC: 1})
    # With a DOI alone Europe PMC has nothing to search with; NCBI answers.
    out = await resolver(ArticleIds(doi="10.1000/ABC.4"), http)
    assert out == ArticleIds(pmid=_pmid(4), pmcid=_pmcid(4), doi="10.1000/ABC.4")
    assert world.requests == Counter({EPMC: 1, NCBI: 1})


# -- batch: chain_batch ------------------------------------------------------------------------


class ScriptedBatch:
    """A batch resolver answering from a dict keyed by pmid, recording what it saw."""

    def __init__(
        self, answers: dict[str, ArticleIds], abandon: frozenset[str] = frozenset()
    ) -> None:
        self.answers, self.abandon = answers, abandon
        self.seen: list[list[ArticleIds]] = []

    async def __call__(
        self, batch: Sequence[ArticleIds], http: Any
    ) -> tuple[list[ArticleIds], set[int]]:
        self.seen.append(list(batch))
        out = [self.answers.get(ids.pmid or "", ids) for ids in batch]  # overwrites on purpose
        return out, {i for i, ids in enumerate(batch) if ids.pmid in self.abandon}


@pytest.mark.parametrize("required", [(), ["bookid"], ["pmid", "title"], {"PMID"}])
def test_chain_batch_rejects_bad_required(required: Any) -> None:
    with pytest.raises(ValueError):
        chain_batch(EuropePmcBatchResolver(), required=required)


async def test_chain_batch_feeds_each_resolver_only_what_is_still_missing() -> None:
    a = ArticleIds(pmid="1")
    b = ArticleIds(pmid="2", pmcid="PMC2")
    c = ArticleIds(pmid="3")
    first = ScriptedBatch({"1": ArticleIds(pmid="1", pmcid="PMC1")}, abandon=frozenset({"3"}))
    second = ScriptedBatch({"3": ArticleIds(pmid="3", pmcid="PMC3", doi="10.1000/three")})
    out, abandoned = await chain_batch(first, second, required=("pmcid",))([a, b, c, a], None)  # type: ignore[arg-type]
    assert first.seen == [[a, c, a]]  # b already had its pmcid
    assert second.seen == [[c]]
    assert out == [
        ArticleIds(pmid="1", pmcid="PMC1"),
        b,
        ArticleIds(pmid="3", pmcid="PMC3", doi="10.1000/three"),
        ArticleIds(pmid="1", pmcid="PMC1"),
    ]
    # 3 was abandoned by the first resolver, then completed by the second: dropped.
    assert abandoned == set()


async def test_chain_batch_abandoned_iff_incomplete_and_given_up() -> None:
    first = ScriptedBatch(
        {"1": ArticleIds(pmid="1", pmcid="PMC9", doi="10.1000/x")}, frozenset({"1", "2"})
    )
    second = ScriptedBatch({"2": ArticleIds(pmid="9", pmcid="PMC2")})
    batch = [ArticleIds(pmid="1", pmcid="PMC1"), ArticleIds(pmid="2"), ArticleIds(pmid="4")]
    out, abandoned = await chain_batch(first, second)(batch, None)  # type: ignore[arg-type]
    # A resolver that "overwrites" cannot change a known id; what it found is still merged.
    assert out[0] == ArticleIds(pmid="1", pmcid="PMC1", doi="10.1000/x")
    assert out[1] == ArticleIds(pmid="2", pmcid="PMC2")
    assert out[2] == batch[2]
    # 0 was abandoned but is complete; 1 abandoned and incomplete; 2 a plain miss.
    assert abandoned == {1}


class Overlapping:
    """A batch resolver keyed on one id, logging when each of its calls starts and ends."""

    def __init__(self, name: str, key: str, answers: dict[str, ArticleIds], log: list[str]) -> None:
        self.name, self.key, self.answers, self.log = name, key, answers, log

    def lookup_key(self, ids: ArticleIds) -> str | None:
        value: str | None = getattr(ids, self.key)
        return value

    async def __call__(
        self, batch: Sequence[ArticleIds], http: Any
    ) -> tuple[list[ArticleIds], set[int]]:
        keys = [k for ids in batch if (k := getattr(ids, self.key)) is not None]
        self.log.append(f"{self.name} asks {keys}")
        for _ in range(3):  # an answer takes a while: others may be asked meanwhile
            await asyncio.sleep(0)
        self.log.append(f"{self.name} answered")
        found = (self.answers.get(getattr(ids, self.key) or "") for ids in batch)
        return [ids.merge(f) if f else ids for ids, f in zip(batch, found, strict=True)], set()


async def test_a_later_round_asks_its_resolvers_at_once() -> None:
    # Round one in order: NCBI, then Europe PMC search with what NCBI left, then OpenAlex,
    # which gives the DOI-only bundle a PMID. Round two's questions (NCBI and Europe PMC
    # about that PMID) follow from round one alone: both go out before either answers.
    log: list[str] = []
    ncbi = Overlapping("ncbi", "pmid", {}, log)
    epmc = Overlapping("epmc", "pmid", {"7": ArticleIds(pmid="7", pmcid="PMC7")}, log)
    alex = Overlapping("openalex", "doi", {"10.1/x": ArticleIds(pmid="7")}, log)
    out, abandoned = await chain_batch(ncbi, epmc, alex)(  # type: ignore[arg-type]
        [ArticleIds(doi="10.1/x"), ArticleIds(pmid="8")], None
    )
    assert out == [ArticleIds(pmid="7", pmcid="PMC7", doi="10.1/x"), ArticleIds(pmid="8")]
    assert abandoned == set()
    assert log == [
        "ncbi asks ['8']",
        "ncbi answered",
        "epmc asks ['8']",
        "epmc answered",
        "openalex asks ['10.1/x']",
        "openalex answered",
        "ncbi asks ['7']",
        "epmc asks ['7']",
        "ncbi answered",
        "epmc answered",
    ]


async def test_a_later_round_failing_stops_the_others_and_says_why() -> None:
    log: list[str] = []
    alex = Overlapping("openalex", "doi", {"10.1/x": ArticleIds(pmid="7")}, log)
    slow = Overlapping("epmc", "pmid", {}, log)

    async def broken(batch: Sequence[ArticleIds], http: Any) -> tuple[list[ArticleIds], set[int]]:
        if any(ids.pmid for ids in batch):
            raise ValueError("broken resolver")
        return list(batch), set()

    with pytest.raises(ValueError, match="broken resolver"):
        await chain_batch(broken, slow, alex)([ArticleIds(doi="10.1/x")], None)  # type: ignore[arg-type]
    assert log[-1] == "epmc asks ['7']"  # cancelled before it answered


async def test_the_chain_tells_each_bundle_once_its_ids_are_final() -> None:
    # Told as they complete: the complete input at once, NCBI's completions after NCBI;
    # an incomplete bundle once a round has asked every resolver its question. A complete
    # bundle sharing an id with an open one (which may yet become the same bundle) is
    # told with it.
    log: list[str] = []
    ncbi = Overlapping(
        "ncbi",
        "pmid",
        {
            "2": ArticleIds(pmid="2", pmcid="PMC2", doi="10.1/two"),
            "3": ArticleIds(pmid="3", pmcid="PMC3", doi="10.1/three"),
        },
        log,
    )
    alex = Overlapping("openalex", "doi", {"10.1/three": ArticleIds(pmid="3", pmcid="PMC3")}, log)
    whole = ArticleIds(pmid="1", pmcid="PMC1", doi="10.1/one")
    unknown = ArticleIds(pmid="9")  # no service knows it: final once a round asked everyone
    batch = [
        whole,
        ArticleIds(pmid="2"),
        ArticleIds(pmid="3"),
        ArticleIds(doi="10.1/three"),
        unknown,
    ]
    told: list[tuple[list[int], list[ArticleIds]]] = []

    def tell(done: list[int], found: list[ArticleIds]) -> None:
        told.append((done, found))
        log.append(f"told {done}")

    chain = chain_batch(ncbi, alex)
    out, _ = await chain(batch, None, on_final=tell)  # type: ignore[call-arg, arg-type]
    three = ArticleIds(pmid="3", pmcid="PMC3", doi="10.1/three")
    assert told == [
        ([0], [whole]),
        ([1], [ArticleIds(pmid="2", pmcid="PMC2", doi="10.1/two")]),
        ([2, 3], [three, three]),
        ([4], [unknown]),
    ]
    assert log.index("told [1]") < log.index("openalex asks ['10.1/three']")
    assert out[2] == out[3] == three


async def test_chain_batch_rejects_a_misaligned_resolver() -> None:
    async def short(batch: Sequence[ArticleIds], http: Any) -> tuple[list[ArticleIds], set[int]]:
        return list(batch)[1:], set()

    with pytest.raises(ValueError, match="returned 1 results for 2 inputs"):
        await chain_batch(short)([ArticleIds(pmid="1"), ArticleIds(pmid="2")], None)  # type: ignore[arg-type]


def test_default_batch_resolver_composition() -> None:
    assert default_batch_resolver() == chain_batch(
        NcbiIdConverterBatchResolver(), EuropePmcBatchResolver(), OpenAlexResolver()
    )
    assert default_batch_resolver(openalex_api_key="k1") != default_batch_resolver()


# -- batch over the world: properties --------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_batch_chain_matches_the_model_with_exact_request_counts(
    picks: list[tuple[int, int, bool]],
) -> None:
    articles, batch = draw_batch(picks)
    world = World(WORLD_ARTICLES)
    out, abandoned = run_batch(default_batch_resolver(), batch, TableHttp(world))
    assert len(out) == len(batch)
    assert abandoned == set()
    expectations = [model(a, g) for a, g in zip(articles, batch, strict=True)]
    for given_ids, got, want in zip(batch, out, expectations, strict=True):
        assert given_ids.merge(got) == got  # aligned, nothing known overwritten
        assert got == want.result
    counts = expected_requests(expectations)
    assert {h: world.requests[h] for h in counts} == counts


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(max_bulk=250), st.sampled_from([NCBI, EPMC, OPENALEX]))
def test_a_service_down_abandons_exactly_the_unanswered_and_the_retry_converges(
    picks: list[tuple[int, int, bool]], down: str
) -> None:
    articles, batch = draw_batch(picks)
    world = World(WORLD_ARTICLES)
    world.down = {down}
    out, abandoned = run_batch(default_batch_resolver(), batch, TableHttp(world))
    degraded = [model(a, g, frozenset({down})) for a, g in zip(articles, batch, strict=True)]
    assert out == [e.result for e in degraded]  # what the others answered is merged
    assert abandoned == {
        i for i, e in enumerate(degraded) if down in e.sent and not _complete(e.result)
    }
    world.down = set()
    retry = [batch[i] for i in sorted(abandoned)]
    healed, again = run_batch(default_batch_resolver(), retry, TableHttp(world))
    assert again == set()
    for i, got in zip(sorted(abandoned), healed, strict=True):
        assert got == model(articles[i], batch[i]).result


@settings(max_examples=40, deadline=None)
@given(batches(max_bulk=120))
def test_each_batch_resolver_alone_is_position_independent(
    picks: list[tuple[int, int, bool]],
) -> None:
    """Element i of a batch resolves exactly as it would in a batch of its own."""
    _, batch = draw_batch(picks)
    http = TableHttp(World(WORLD_ARTICLES))

    async def run(resolver: BatchResolver) -> None:
        out, abandoned = await resolver(batch, http)
        assert len(out) == len(batch) and abandoned == set()
        alone = {ids: (await resolver([ids], http))[0][0] for ids in set(batch)}
        assert list(out) == [alone[ids] for ids in batch]

    for resolver in (NcbiIdConverterBatchResolver(), EuropePmcBatchResolver(), OpenAlexResolver()):
        asyncio.run(run(resolver))


class BarrierHttp:
    """An ``Http`` whose requests all wait until ``expected`` of them are in flight at once.

    A resolver that issued its chunks one after another would never get past the
    first request; one that gathers them releases them all.
    """

    contact = None

    def __init__(self, world: World, expected: int) -> None:
        self.world, self.expected = world, expected
        self.waiting = 0
        self.released = asyncio.Event()

    async def get(self, url: str, *, params: Any = None, **_: Any) -> httpx.Response:
        self.waiting += 1
        if self.waiting >= self.expected:
            self.released.set()
        await asyncio.wait_for(self.released.wait(), timeout=5)
        request = httpx.Request("GET", url, params=params)
        response = self.world.handle(request)
        response.request = request
        return response


@pytest.mark.parametrize(
    ("resolver", "make", "chunks"),
    [
        (NcbiIdConverterBatchResolver(), lambda n: ArticleIds(pmid=_pmid(1000 + n)), 3),
        (EuropePmcBatchResolver(), lambda n: ArticleIds(pmid=_pmid(1000 + n)), 5),
        (OpenAlexResolver(), lambda n: ArticleIds(doi=f"10.1000/c.{n}"), 5),
    ],
)
async def test_chunks_of_one_service_are_issued_together(
    resolver: BatchResolver, make: Callable[[int], ArticleIds], chunks: int
) -> None:
    http = BarrierHttp(World([]), expected=chunks)
    out, abandoned = await resolver([make(n) for n in range(500)], http)
    assert http.waiting == chunks and len(out) == 500 and abandoned == set()


# -- batch over a real Session ---------------------------------------------------------------


def world_handler(world: World) -> Callable[[httpx.Request], httpx.Response]:
    return world.handle


async def test_request_counts_over_a_session_with_repeats_mixed_case_and_schemes() -> None:
    usable = [a for a in build_world(1400) if a.in_ncbi and a.ids.has(RESOLVABLE)]
    articles = [a for a in usable if "," not in (a.doi or "")][:250]
    assert len(articles) == 250
    batch: list[ArticleIds] = []
    for n, a in enumerate(articles):
        # Mixed schemes and DOI casing, every article twice.
        first = [ArticleIds(pmid=a.pmid), ArticleIds(pmcid=a.pmcid), ArticleIds(doi=a.doi)][n % 3]
        batch += [first, first if n % 2 else dataclasses.replace(first)]
        if first.doi:
            batch.append(ArticleIds(doi=first.doi.upper()))
    world = World(build_world(1400))
    async with mock_session(world_handler(world), contact="dev@lab.example") as s:
        out, abandoned = await default_batch_resolver()(batch, s)
    # 250 distinct articles, each complete after one NCBI pass: ceil(250 / 200) requests.
    assert world.requests == Counter({NCBI: math.ceil(250 / 200)})
    assert abandoned == set()
    assert all(_complete(o) for o in out)
    assert s.requests_by_host == {NCBI: 2}


async def test_a_chunk_failing_every_retry_over_a_session() -> None:
    articles = build_world(1000)
    world = World(articles)
    good = world.handle
    # PubMed articles outside PMC: NCBI misses them, Europe PMC must answer.
    pubmed_only = [a for a in articles if a.pmid and not a.pmcid and a.in_epmc][:150]
    assert len(pubmed_only) == 150
    target = pubmed_only[120].pmid
    attempts = Counter[str]()

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == EPMC and f"EXT_ID:{target}" in request.url.params["query"]:
            attempts["failing"] += 1
            raise httpx.ConnectError("connection reset", request=request)
        return good(request)

    batch = [ArticleIds(pmid=a.pmid) for a in pubmed_only]
    async with mock_session(handler) as s:
        out, abandoned = await default_batch_resolver()(batch, s)
        assert s.failures  # the session knows why
    # Europe PMC's second chunk (pmids 101-150) never answered; its elements stay incomplete.
    assert attempts["failing"] == 3
    assert abandoned == set(range(100, 150))
    assert [o.doi for o in out[:100]] == [a.doi for a in pubmed_only[:100]]
    assert out[100:] == batch[100:]
    async with mock_session(good) as s:
        healed, again = await default_batch_resolver()([batch[i] for i in sorted(abandoned)], s)
    assert again == set()
    assert [h.doi for h in healed] == [pubmed_only[i].doi for i in sorted(abandoned)]


async def test_absence_is_not_abandonment() -> None:
    nobody = [a for a in WORLD_ARTICLES if not (a.in_ncbi or a.in_epmc or a.in_openalex)]
    batch = [a.ids for a in nobody] + [ArticleIds(doi="10.1000/unknown")]
    world = World(WORLD_ARTICLES)
    async with mock_session(world.handle) as s:
        out, abandoned = await default_batch_resolver()(batch, s)
    assert out == batch and abandoned == set()
    assert s.failures == ()


async def test_over_the_fake_upstream(fake: FakeUpstream, fake_session: Any) -> None:
    world = World(WORLD_ARTICLES)

    def serve(req: FakeRequest) -> FakeResponse:
        url = httpx.URL(f"https://{req.host}{req.path}", params=req.query)
        response = world.handle(httpx.Request("GET", url))
        return FakeResponse(response.status_code, response.content, dict(response.headers))

    fake.route(NCBI, r"/tools/idconv/api/v1/articles/", serve)
    fake.route(EPMC, SEARCH_PATH, serve)
    fake.route(OPENALEX, r"/works", serve)
    articles = WORLD_ARTICLES[:20]
    batch = [as_given(a, n % 7 + 1, n % 2 == 0) for n, a in enumerate(articles)] * 2
    out, abandoned = await default_batch_resolver()(batch, fake_session)
    assert out == [model(a, g).result for a, g in zip(articles * 2, batch, strict=True)]
    assert abandoned == set()
    counts = expected_requests([model(a, g) for a, g in zip(articles * 2, batch, strict=True)])
    assert {h: fake.count(h) for h in counts} == counts


# -- per item vs batch -------------------------------------------------------------------------


async def test_per_item_and_batch_chains_agree() -> None:
    table = WORLD_ARTICLES[:20]
    batch: list[ArticleIds] = []
    owners: list[Article] = []
    for article in table:
        for mask in range(1, 8):
            given_ids = as_given(article, mask, shout=mask % 2 == 0)
            if given_ids not in batch:
                batch.append(given_ids)
                owners.append(article)
    http = TableHttp(World(WORLD_ARTICLES))
    enriched, abandoned = await default_batch_resolver()(batch, http)
    per_item = [await default_resolver()(ids, http) for ids in batch]
    assert abandoned == set()
    strictly_more = 0
    for given_ids, article, one, many in zip(batch, owners, per_item, enriched, strict=True):
        if given_ids.pmid or article.in_ncbi:
            assert one == many, given_ids
        else:
            # No PMID, outside NCBI's PMC: only the batch chain has OpenAlex's DOI route.
            assert many.merge(one) == many, given_ids
            strictly_more += one != many
    assert strictly_more > 0  # the table does exercise that route
    kinds = {(a.in_ncbi, a.in_epmc, a.in_openalex) for a in owners}
    assert len(kinds) >= 5


# -- the pre-pass then the ladder ------------------------------------------------------------


async def test_fetch_body_after_the_pre_pass_needs_no_resolver_request() -> None:
    pytest.importorskip("litfetch_df.operations.ladder")
    europe_pmc = pytest.importorskip("litfetch_df.sources.europe_pmc")
    jats = data_bytes("jats", "PMC3166277_bmc-microbiol_1471-2180-11-174.nxml")
    world = World(WORLD_ARTICLES)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/fullTextXML"):
            world.requests["fulltext"] += 1
            return httpx.Response(200, content=jats, headers={"Content-Type": "application/xml"})
        return world.handle(request)

    batch = [ArticleIds(pmid=_pmid(1)), ArticleIds(doi="10.1000/abc.4"), ArticleIds(pmid=_pmid(7))]
    async with mock_session(handler) as s:
        enriched, abandoned = await default_batch_resolver()(batch, s)
        assert abandoned == set() and all(e.pmcid for e in enriched)
        before = Counter(world.requests)
        fetchers = [europe_pmc.EuropePmcFetcher()]
        blobs = [await s.fetch_body(ids, resolver=None, fetchers=fetchers) for ids in enriched]
        # Even with a resolver offered, a complete bundle never calls it.
        blobs.append(
            await s.fetch_body(enriched[0], resolver=default_resolver(), fetchers=fetchers)
        )
    assert all(b is not None and b.content == jats for b in blobs)
    spent = world.requests - before
    assert spent == Counter({"fulltext": 4})


# -- the public module -----------------------------------------------------------------------


def test_the_resolvers_module_re_exports_every_bundled_resolver() -> None:
    pytest.importorskip("litfetch_df.sources.semantic_scholar")
    from litfetch_df import resolvers

    expected = {
        "BatchResolver",
        "EuropePmcBatchResolver",
        "EuropePmcResolver",
        "NcbiIdConverterBatchResolver",
        "NcbiIdConverterResolver",
        "OpenAlexResolver",
        "Resolver",
        "SemanticScholarBatchResolver",
        "SemanticScholarResolver",
        "chain",
        "chain_batch",
        "default_batch_resolver",
        "default_resolver",
    }
    assert set(resolvers.__all__) == expected
    assert all(getattr(resolvers, name) is not None for name in expected)
    assert resolvers.OpenAlexResolver is OpenAlexResolver
    assert resolvers.default_resolver() == default_resolver()


# -- the fixpoint: a gained id goes back to the resolvers that can use it ---------------------


async def test_a_pmid_from_openalex_goes_back_to_europe_pmc_for_the_pmcid() -> None:
    # Article 7: a Europe-PMC-only PMC id, known to OpenAlex by DOI (without the PMCID).
    doi_only = ArticleIds(doi="10.1000/abc.7")
    # Article 14: a DOI-only work OpenAlex knows; it gains nothing anyone can use further.
    nothing_more = ArticleIds(doi="10.5555/only.14")
    world = World(WORLD_ARTICLES)
    async with mock_session(world.handle) as s:
        out, abandoned = await default_batch_resolver()([doi_only, nothing_more], s)
    assert out[0] == ArticleIds(pmid=_pmid(7), pmcid=_pmcid(7), doi="10.1000/abc.7")
    assert out[1] == ArticleIds(doi="10.5555/only.14")
    assert abandoned == set()
    # Round 1: NCBI (both DOIs), OpenAlex (both DOIs). Round 2, for the bundle that gained
    # a PMID only: NCBI and Europe PMC by that PMID. OpenAlex is not asked the same DOI again.
    assert world.requests == Counter({NCBI: 2, OPENALEX: 1, EPMC: 1})


async def test_rounds_stop_when_nothing_is_gained_and_are_bounded() -> None:
    calls: list[list[ArticleIds]] = []

    async def grows(batch: Sequence[ArticleIds], http: Any) -> tuple[list[ArticleIds], set[int]]:
        # A resolver with no lookup_key: offered again whenever the bundle changed. It adds
        # a PMID, then a PMCID, then a DOI, one id per call.
        calls.append(list(batch))
        out = []
        for ids in batch:
            if ids.pmid is None:
                out.append(ids.merge(ArticleIds(pmid="1")))
            elif ids.pmcid is None:
                out.append(ids.merge(ArticleIds(pmcid="PMC1")))
            else:
                out.append(ids.merge(ArticleIds(doi="10.1/x")))
        return out, set()

    async def idle(batch: Sequence[ArticleIds], http: Any) -> tuple[list[ArticleIds], set[int]]:
        calls.append([])
        return list(batch), set()

    out, _ = await chain_batch(grows)([ArticleIds(bookid="NBK1")], None)  # type: ignore[arg-type]
    assert len(calls) == MAX_ROUNDS == 3
    assert out[0] == ArticleIds(pmid="1", pmcid="PMC1", doi="10.1/x", bookid="NBK1")

    calls.clear()
    await chain_batch(idle, grows, required={"pmid"})([ArticleIds(doi="10.1/y")], None)  # type: ignore[arg-type]
    # Round 1: idle, grows (gains the PMID: complete on "pmid"). Round 2 has nothing to offer.
    assert [len(c) for c in calls] == [0, 1]
