"""Batch answers are kept per id in the persistent cache (docs/caching-and-offline.md).

Against the synthetic world (``tests/fakes/world.py``), counting the requests
the fake receives: a warm re-run of the same frame sends none, and so do a
reversed, a head, a duplicated frame; a frame extended by new rows sends
exactly the requests a cold run of the new rows alone sends; offline, a subset
answers fully; ``refresh=True`` asks again. Below those, the recipe
(:func:`~litfetch_df.sources.bulk_recipe.bulk_lookup`) with an in-memory memo,
and what the session stores and refuses to store.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers .lit)
from litfetch_df import ResponseCache, Session
from litfetch_df.sources.bulk_recipe import (
    BulkKey,
    IdRecords,
    Unusable,
    bulk_lookup,
    json_object_record,
)
from litfetch_df.store.answers import Recalled
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream
from tests.fakes.world import (
    HOST_CROSSREF,
    HOST_EBI,
    HOST_NCBI,
    HOST_OPENALEX,
    HOST_S2,
    HOST_SPRINGER,
    Article,
    BodyHome,
    Publisher,
    World,
)

CONTACT = "me@lab.example"
META_KEY = "test-meta-key-123"
CREDENTIALS = {"springer_meta_api_key": META_KEY}
BATCH_HOSTS = (HOST_NCBI, HOST_EBI, HOST_OPENALEX, HOST_S2, HOST_CROSSREF, HOST_SPRINGER)


def article(i: int) -> Article:
    """Article ``i``: PMC bucket, Europe PMC only, PubMed only, or a journal DOI (some Springer)."""
    kind = i % 4
    pmid = str(30000001 + i)
    if kind == 0:
        return Article(
            pmid=pmid,
            pmcid=f"PMC{7000001 + i}",
            pmc_versions=1,
            doi=f"10.1000/bc.{i}",
            body=BodyHome.PMC_OA,
        )
    if kind == 1:
        return Article(
            pmid=pmid,
            pmcid=f"PMC{7000001 + i}",
            doi=f"10.1000/bc.{i}",
            body=BodyHome.EUROPE_PMC,
            in_pmc=False,
        )
    if kind == 2:
        return Article(pmid=pmid, doi=f"10.5555/bc-pubmed-only.{i}")
    springer = i % 8 == 3
    return Article(
        doi=f"10.1007/bc.{i}" if springer else f"10.1000/journal.{i}",
        publisher=Publisher.SPRINGER if springer else Publisher.OTHER,
        in_s2=i % 5 != 0,
        in_crossref=i % 7 != 0,
        crossref_tdm=i % 3 == 0,
    )


def frame_of(found: Sequence[Article]) -> pd.DataFrame:
    """One row per article: its PMID when it has one, else its DOI."""
    return pd.DataFrame(
        {
            "pmid": [a.pmid for a in found],
            "doi": [None if a.pmid else a.doi for a in found],
        },
        dtype="string",
    )


def session(fake: FakeUpstream, cache: Path, **options: Any) -> Session:
    return Session(
        client_factory=fake.client_factory(),
        retry=FAST_RETRY,
        contact=CONTACT,
        cache=cache,
        **options,
    )


async def run(frame: pd.DataFrame, s: Session) -> pd.DataFrame:
    """Resolve, then list files (S2, Crossref, Springer bulk lookups) and fetch bodies."""
    return await frame.lit.run_async(
        steps=("resolve", "files", "bodies"),
        session=s,
        progress=False,
        credentials=dict(CREDENTIALS),
    )


def signature(requests: Sequence[FakeRequest]) -> list[tuple[str, str, str, str]]:
    return sorted(
        (r.method, r.host, r.path, repr(sorted(r.query.items())) + r.body.decode())
        for r in requests
    )


def comparable(out: pd.DataFrame) -> pd.DataFrame:
    """The frame's answers as text (file-sets and bodies by their display)."""
    return out.drop(columns=[c for c in ("body",) if c in out.columns]).astype(str)


N = 48


@pytest.fixture
def world(fake: FakeUpstream) -> World:
    w = World([article(i) for i in range(N + 12)])
    w.install(fake)
    return w


async def test_warm_runs_of_the_same_ids_in_any_shape_send_nothing(
    world: World, fake: FakeUpstream, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    df = frame_of(world.articles[:N])
    out = await run(df, session(fake, cache))
    assert all(fake.count(host) > 0 for host in BATCH_HOSTS)  # every batch service was asked
    assert out["resolve_error"].isna().all()

    variants = {
        "same": df,
        "reversed": df.iloc[::-1],
        "head": df.head(3),
        "duplicated": pd.concat([df, df.iloc[::3]]),
        "every other": df.iloc[1::2],
    }
    for name, variant in variants.items():
        fake.reset_log()
        again = await run(variant, session(fake, cache))
        assert fake.count() == 0, (name, signature(fake.requests())[:5])
        # ... and each row answers as it did in the cold run
        expected = comparable(out.loc[variant.index]).reset_index(drop=True)
        pd.testing.assert_frame_equal(comparable(again).reset_index(drop=True), expected)


async def test_an_extended_frame_asks_only_about_its_new_rows(
    world: World, fake: FakeUpstream, tmp_path: Path
) -> None:
    old, new = world.articles[:N], world.articles[N:]
    await run(frame_of(old), session(fake, tmp_path / "cache"))

    # The requests the new rows cost on their own, cold, in a cache of their own.
    fake.reset_log()
    alone = await run(frame_of(new), session(fake, tmp_path / "alone"))
    expected = signature(fake.requests())
    assert any(r[1] in BATCH_HOSTS for r in expected)

    fake.reset_log()
    extended = pd.concat([frame_of(old), frame_of(new)], ignore_index=True)
    out = await run(extended, session(fake, tmp_path / "cache"))
    assert signature(fake.requests()) == expected
    tail = comparable(out.iloc[len(old) :]).reset_index(drop=True)
    pd.testing.assert_frame_equal(tail, comparable(alone))


async def test_offline_a_subset_answers_fully_from_the_per_id_answers(
    world: World, fake: FakeUpstream, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    df = frame_of(world.articles[:N])
    out = await run(df, session(fake, cache))
    fake.reset_log()
    subset = df.iloc[::-3]  # other chunks than the recorded ones, in another order
    replay = Session(cache=cache, offline=True, contact=CONTACT)
    again = await run(subset, replay)
    assert fake.count() == 0
    errors = [c for c in again.columns if c.endswith("_error")]
    assert not again[errors].apply(lambda col: col.str.contains("not in cache")).any().any()
    expected = comparable(out.loc[subset.index]).reset_index(drop=True)
    pd.testing.assert_frame_equal(comparable(again).reset_index(drop=True), expected)


async def test_refresh_asks_every_batch_again(
    world: World, fake: FakeUpstream, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    df = frame_of(world.articles[:N])
    await run(df, session(fake, cache))
    cold = signature(fake.requests())
    fake.reset_log()
    await run(df.head(5), session(fake, cache))
    assert fake.count() == 0
    await run(df, session(fake, cache, refresh=True))
    assert signature(fake.requests()) == cold


async def test_an_abandoned_batch_keeps_nothing_and_is_asked_again(
    world: World, fake: FakeUpstream, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    df = frame_of(world.articles[:N])
    # the converter's one request: a 503 on each of its three attempts
    fake.fail_next(HOST_NCBI, "/tools/idconv", *[FakeResponse(503)] * FAST_RETRY.max_attempts)
    first = await df.lit.resolve_async(session=session(fake, cache), progress=False)
    assert first["resolve_error"].str.startswith("abandoned").any()
    fake.reset_log()
    second = await df.lit.resolve_async(session=session(fake, cache), progress=False)
    assert fake.count(HOST_NCBI) > 0  # the abandoned ids are asked again ...
    assert second["resolve_error"].isna().all()  # ... and answered
    fake.reset_log()
    await df.lit.resolve_async(session=session(fake, cache), progress=False)
    assert fake.count() == 0  # ... and now kept


# -- the recipe ----------------------------------------------------------------------------------


class Memo:
    """An in-memory :class:`~litfetch_df.store.answers.RecordMemo`."""

    def __init__(self) -> None:
        self.kept: dict[tuple[str, str], Any] = {}

    def recall_record(self, kind: str, key: str) -> Recalled | None:
        found = self.kept.get((kind, key), KeyError)
        return None if found is KeyError else Recalled(found)

    def keep_record(self, kind: str, key: str, value: Any, *, secrets: Sequence[str] = ()) -> None:
        self.kept[kind, key] = value


RECORDS: IdRecords[dict[str, Any]] = IdRecords("test", dict, json_object_record)


def keys(*wires: str) -> list[BulkKey | None]:
    return [BulkKey(w.lower(), w) for w in wires]


async def test_found_and_absent_ids_are_kept_and_not_asked_again() -> None:
    memo = Memo()
    asked: list[list[str]] = []

    async def lookup(chunk: list[str]) -> Mapping[str, dict[str, Any]]:
        asked.append(chunk)
        return {w: {"id": w} for w in chunk if w != "B"}

    first = await bulk_lookup(keys("A", "B", "C"), lookup, cap=2, records=RECORDS, memo=memo)
    assert memo.kept == {
        ("test", "a"): {"id": "A"},
        ("test", "b"): None,
        ("test", "c"): {"id": "C"},
    }
    assert first.answered == frozenset({0, 1, 2})

    asked.clear()
    again = await bulk_lookup(keys("c", "D", "a", "b"), lookup, cap=2, records=RECORDS, memo=memo)
    assert asked == [["D"]]  # only the id never answered
    assert again.values == ({"id": "C"}, {"id": "D"}, {"id": "A"}, None)
    assert again.answered == frozenset({0, 1, 2, 3}) and not again.abandoned

    asked.clear()
    await bulk_lookup(keys("A", "B"), lookup, cap=2, records=RECORDS, memo=memo)
    assert asked == []  # all kept: nothing is sent


async def test_unanswered_and_unusable_chunks_keep_nothing() -> None:
    memo = Memo()

    async def lookup(chunk: list[str]) -> Mapping[str, dict[str, Any]] | None:
        return None if "A" in chunk else Unusable()

    result = await bulk_lookup(keys("A", "B"), lookup, cap=1, records=RECORDS, memo=memo)
    assert memo.kept == {}
    assert result.abandoned == frozenset({0})
    assert result.answered == frozenset()  # B's chunk was answered, but says nothing


async def test_without_a_memo_the_recipe_asks_everything() -> None:
    asked: list[str] = []

    async def lookup(chunk: list[str]) -> Mapping[str, dict[str, Any]]:
        asked.extend(chunk)
        return {}

    await bulk_lookup(keys("A"), lookup, cap=5, records=RECORDS, memo=object())
    await bulk_lookup(keys("A"), lookup, cap=5, records=RECORDS, memo=object())
    assert asked == ["A", "A"]


# -- what the session stores -----------------------------------------------------------------


def test_records_expire_with_the_cache_ttl_and_refresh_ignores_them(tmp_path: Path) -> None:
    now = [1000.0]
    store = ResponseCache(tmp_path / "c", ttl=100.0, clock=lambda: now[0])
    s = Session(cache=store)
    s.keep_record("test", "k", {"x": 1})
    s.keep_record("test", "gone", None)
    assert s.recall_record("test", "k") == Recalled({"x": 1})
    assert s.recall_record("test", "gone") == Recalled(None)  # a miss is an answer
    assert s.recall_record("other", "k") is None
    assert Session(cache=store, refresh=True).recall_record("test", "k") is None
    now[0] += 100.0
    assert s.recall_record("test", "k") is None
    store.close()


def test_a_record_echoing_a_credential_is_not_stored(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path / "c")
    s = Session(cache=store)
    s.keep_record(
        "test", "k", {"url": f"https://x.example/a?api_key={META_KEY}"}, secrets=[META_KEY]
    )
    s.keep_record("test", "ok", {"url": "https://x.example/a"}, secrets=[META_KEY])
    assert s.recall_record("test", "k") is None
    assert s.recall_record("test", "ok") is not None
    store.close()
    raw = b"".join(p.read_bytes() for p in (tmp_path / "c").iterdir())
    assert META_KEY.encode() not in raw


async def test_a_warm_run_stores_no_key_and_only_whole_records(
    world: World, fake: FakeUpstream, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    await run(frame_of(world.articles[:N]), session(fake, cache))
    raw = b"".join(p.read_bytes() for p in cache.iterdir())
    assert META_KEY.encode() not in raw
    # closing(): a connection's own "with" ends a transaction but leaves it open.
    with contextlib.closing(sqlite3.connect(cache / "responses.sqlite3")) as db:
        rows = db.execute(
            "SELECT url, content, codec FROM litfetch_responses WHERE url LIKE 'litfetch-record:%'"
        ).fetchall()
    kinds = {url for url, _, _ in rows}
    assert {
        "litfetch-record:ncbi-idconv",
        "litfetch-record:crossref-works select=DOI,link,relation,license",
        "litfetch-record:s2-batch fields=externalIds,openAccessPdf",
        "litfetch-record:springer-meta",
    } <= kinds
    for _, content, codec in rows:
        if codec == "identity":
            assert "record" in json.loads(content)
