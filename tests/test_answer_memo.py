"""Chained calls on one table share the small answers they fetched (issue 13, item 3).

:class:`~litfetch_df.store.memo.AnswerMemo` keeps deterministic JSON answers of a
session's scopes within a byte budget; a chained call on a frame made by an
earlier call shares that call's memo (``df.attrs``), whether the session is
the caller's or one the calls open for themselves, so an Unpaywall record
read by the file-set is not asked again by the licences.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers the .lit accessor)
from benchmarks.client import CREDENTIALS, WORLD_KEYS
from benchmarks.corpus import Corpus, generate
from litfetch_df import Session
from litfetch_df.frame.engine import context
from litfetch_df.frame.engine.pipeline import is_abandoned
from litfetch_df.store.answers import CachedResponse
from litfetch_df.store.memo import AnswerMemo
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeResponse, FakeUpstream
from tests.fakes.world import HOST_CROSSREF, HOST_OPENALEX, HOST_UNPAYWALL, World
from tests.test_frame_run import CONTACT, crossref_lists, unpaywall_dois

JSON = (("content-type", "application/json"),)


def answer(status: int = 200, size: int = 10, headers: Any = JSON) -> CachedResponse:
    return CachedResponse(status, headers, b"x" * size, "https://api.example/x")


def test_the_memo_keeps_small_deterministic_json_answers_within_its_budget() -> None:
    one = AnswerMemo.cost(answer(200, 10))
    memo = AnswerMemo(max_bytes=2 * one + 5)
    assert memo.offer("a", answer(200, 10))
    assert memo.offer("b", answer(404, 10))
    assert not memo.offer("c", answer(200, 10))  # over the budget: kept no more
    assert memo.load("a") is not None and memo.load("c") is None
    assert not memo.offer("d", answer(503, 1))  # not deterministic
    assert not memo.offer("e", answer(200, 1, (("content-type", "application/pdf"),)))
    assert not AnswerMemo().offer("f", answer(200, 2 * 1024 * 1024))  # a body, not a record
    assert len(memo) == 2 and memo.size_bytes == 2 * one
    memo.clear()
    assert len(memo) == 0 and memo.load("a") is None


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return generate(60, seed=5)


@pytest.fixture
def world(fake: FakeUpstream, corpus: Corpus) -> Iterator[World]:
    w = World(corpus.articles, keys=WORLD_KEYS)
    w.install(fake)
    yield w


async def test_chained_calls_without_a_session_share_their_records(
    world: World, fake: FakeUpstream, corpus: Corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sessions the calls open for themselves go to the fake, nothing else changes.
    made: list[Session] = []
    taught: list[dict[str, Any]] = []

    def to_the_fake(**kwargs: Any) -> Session:
        kwargs.pop("contact", None)
        taught.append(dict(kwargs.get("lessons") or {}))
        session = Session(
            client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT, **kwargs
        )
        made.append(session)
        return session

    monkeypatch.setattr(context, "Session", to_the_fake)
    cfg: dict[str, Any] = {"progress": False, "credentials": dict(CREDENTIALS)}
    listed = await corpus.frame.lit.list_files_async(**cfg)
    after_files = sorted(unpaywall_dois(fake))
    lists_after_files = crossref_lists(fake)
    assert after_files and lists_after_files > 0
    out = await listed.lit.licences_async(**cfg)
    related = await out.lit.related_async(**cfg)

    assert len(made) == 3 and made[0].memo is made[1].memo is made[2].memo
    # Each call starts its limiters where the table's last call left them.
    assert taught[0] == {} and HOST_UNPAYWALL in taught[1]
    assert taught[1][HOST_UNPAYWALL] == made[0].lessons()[HOST_UNPAYWALL]
    assert sorted(unpaywall_dois(fake)) == after_files  # the licences asked no record again
    assert crossref_lists(fake) == lists_after_files  # nor the relations Crossref's
    assert (out["licence_basis"] == "unpaywall").any()
    assert not related["related_error"].map(is_abandoned).any()

    # A new table (no memo token) starts afresh.
    fresh = await corpus.frame.lit.list_files_async(**cfg)
    assert made[-1].memo is not made[0].memo
    assert fresh.attrs[context.MEMO_ATTR] != listed.attrs[context.MEMO_ATTR]
    assert fake.count(HOST_UNPAYWALL) == 2 * len(after_files)
    assert fake.count(HOST_CROSSREF) > 0


async def test_a_given_session_keeps_its_own_memo(world: World, fake: FakeUpstream) -> None:
    frame = pd.DataFrame({"doi": [a.doi for a in world.articles if a.doi][:5]})
    own = AnswerMemo()
    session = Session(
        client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT, memo=own
    )
    async with session:
        listed = await frame.lit.list_files_async(session=session, progress=False)
        await listed.lit.licences_async(session=session, progress=False)
    assert len(own) > 0
    assert context.MEMO_ATTR not in listed.attrs  # the caller's session: no table memo
    # OpenAlex knows every DOI: Unpaywall is never asked, and the files step's works
    # filter (kept in the session's own memo) answers the licences step too.
    assert unpaywall_dois(fake) == []
    terms = [
        r for r in fake.requests(HOST_OPENALEX, "/works") if "open_access" in str(r.param("select"))
    ]
    assert len(terms) == 1
    assert listed["files"].map(len).sum() > 0


async def test_a_session_shares_only_when_its_memo_is_on(fake: FakeUpstream) -> None:
    fake.route(HOST_UNPAYWALL, "/v2/10.1/x", FakeResponse(200, {"doi": "10.1/x"}))
    url = f"https://{HOST_UNPAYWALL}/v2/10.1/x"

    async def two_scopes(session: Session) -> None:
        for _ in range(2):
            async with session.scope() as scope:
                await scope.get(url)

    # Off (a Session used on its own): each scope's cache is its own.
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as session:
        assert session.memo is None
        await two_scopes(session)
    assert fake.count(HOST_UNPAYWALL) == 2

    # On: a later scope is served from the memo; the session asked directly is not.
    fake.reset_log()
    async with Session(client_factory=fake.client_factory(), retry=FAST_RETRY) as session:
        memo = session.keep_answers()
        assert session.keep_answers() is memo  # idempotent
        await two_scopes(session)
        assert fake.count(HOST_UNPAYWALL) == 1 and len(memo) == 1
        await session.get(url)
        await session.get(url)
    assert fake.count(HOST_UNPAYWALL) == 3


def test_the_budget_counts_what_an_answer_costs_besides_its_content() -> None:
    # A table's small records cost as much again in bookkeeping as in content: a budget
    # of content alone let the memo hold about twice what it was given.
    many = [("date", "Tue, 01 Dec 2026 00:00:00 GMT"), ("server", "x"), *JSON]
    entry = CachedResponse(200, tuple(many), b"x" * 100, "https://api.example/works/10.1/x")
    memo = AnswerMemo(max_bytes=10 * 100)
    kept = sum(memo.offer(str(i), entry) for i in range(10))
    assert 0 < kept < 10 and memo.size_bytes <= 10 * 100
    assert memo.size_bytes == kept * (100 + len(entry.url) + len("content-type") + 16 + 400)
    assert memo.load("0") is not None and memo.load("0").headers == JSON  # type: ignore[union-attr]
