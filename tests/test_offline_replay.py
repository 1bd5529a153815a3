"""Replaying a recording: offline misses stay quiet, the demo ignores keys, looking changes nothing.

- an offline miss (:class:`NotInCache`) is routine when a recording is replayed,
  and the row reports it, so sources log it at INFO; every other transport
  failure stays a WARNING;
- the demo's records were made without keys, so ``.lit`` calls on
  :func:`demo_session` ignore the keys of the package options (keys given to
  the call itself are still sent);
- ``litfetch-df cache info`` opens the file without changing it.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

import litfetch_df.demo as demo
from litfetch_df import ArticleIds, NotInCache, UpstreamUnavailable
from litfetch_df.cli import app as cli
from litfetch_df.demo_world import DemoWorld, demo_articles, world_session
from litfetch_df.frame.engine.options import ENV_CREDENTIALS, reset_options
from litfetch_df.session import CachedResponse
from litfetch_df.sources.crossref import fetch_crossref_work
from litfetch_df.sources.crossref_batch import crossref_batch_records
from litfetch_df.sources.pmc_oa import PmcOaFetcher
from litfetch_df.store.cache import ResponseCache
from tests.conftest import mock_session

DOI = "10.1000/replay.1"


def _unreachable(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def _levels(caplog: pytest.LogCaptureFixture) -> dict[str, set[int]]:
    """Logger name -> the levels it logged at (litfetch_df's own loggers only)."""
    found: dict[str, set[int]] = {}
    for record in caplog.records:
        if record.name.startswith("litfetch_df.sources") or record.name.startswith(
            "litfetch_df.operations"
        ):
            found.setdefault(record.name, set()).add(record.levelno)
    return found


async def test_an_offline_miss_is_logged_at_info(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="litfetch_df")
    async with mock_session(_unreachable, cache=tmp_path, offline=True) as s:
        assert await fetch_crossref_work(s, DOI) is None
        found = await crossref_batch_records([ArticleIds(doi=DOI), ArticleIds(doi=DOI + "0")], s)
        blob = await PmcOaFetcher().fetch(ArticleIds(pmcid="PMC7000001"), http=s)
    assert blob is None
    assert found.abandoned == {0, 1}  # never answered: worth asking live later
    levels = _levels(caplog)
    assert {"litfetch_df.sources.crossref", "litfetch_df.sources.crossref_batch"} <= set(levels)
    assert "litfetch_df.sources.pmc_oa" in levels
    assert all(logging.INFO in seen for seen in levels.values())
    assert all(max(seen) < logging.WARNING for seen in levels.values()), levels


async def test_a_transport_failure_still_warns(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="litfetch_df")
    async with mock_session(_unreachable) as s:
        assert await fetch_crossref_work(s, DOI) is None
        found = await crossref_batch_records([ArticleIds(doi=DOI), ArticleIds(doi=DOI + "0")], s)
    assert found.abandoned == {0, 1}
    levels = _levels(caplog)
    assert logging.WARNING in levels["litfetch_df.sources.crossref"]
    assert logging.WARNING in levels["litfetch_df.sources.crossref_batch"]


async def test_a_primed_failure_in_an_offline_session_is_not_in_cache(tmp_path: Path) -> None:
    url = "https://api.crossref.org/works/" + DOI
    async with mock_session(_unreachable, cache=tmp_path, offline=True) as s:
        s.prime("GET", url, failure="not in cache: the bulk lookup")
        with pytest.raises(NotInCache):
            await s.get(url)
    async with mock_session(_unreachable) as live:
        live.prime("GET", url, failure="gave up after retries")
        with pytest.raises(UpstreamUnavailable) as raised:
            await live.get(url)
        assert not isinstance(raised.value, NotInCache)


# -- the demo ---------------------------------------------------------------------------------


@pytest.fixture
def keys_in_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every credential the package reads from the environment, set."""
    for variable in ENV_CREDENTIALS:
        monkeypatch.setenv(variable, "k3y-from-the-environment")
    reset_options()
    yield
    monkeypatch.undo()
    reset_options()


class KeyWatchingWorld(DemoWorld):
    """The demo world, noting every request that carried something looking like a key."""

    def __init__(self) -> None:
        super().__init__(demo_articles())
        self.keyed: list[str] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        if "k3y" in str(request.url) or any("k3y" in v for v in request.headers.values()):
            self.keyed.append(request.url.host)
        return super().handle(request)


def _files(**call: Any) -> tuple[pd.DataFrame, list[str]]:
    world = KeyWatchingWorld()
    frame: pd.DataFrame = demo.load_demo_export().lit.list_files(
        session=world_session(world=world), progress=False, **call
    )
    return frame, world.keyed


def test_the_demo_logs_no_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="litfetch_df")
    frame = demo.load_demo_export()
    run: dict[str, Any] = {"session": demo.demo_session(), "progress": False}
    out = frame.lit.resolve(**run).lit.fetch_bodies(**run).lit.list_files(**run)
    out = out.lit.licences(**run).lit.related(**run)
    # The world answers every request: nothing is abandoned, and nothing is logged loudly.
    errors = [c for c in out.columns if c.endswith("_error")]
    assert out[errors].isna().all().all()
    assert out["n_files"].sum() > 0
    loud = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == []


def test_demo_session_ignores_keys_from_the_environment(keys_in_env: None) -> None:
    from_env, keyed = _files()
    keyless, _ = _files(credentials=dict.fromkeys(ENV_CREDENTIALS.values()))
    pd.testing.assert_frame_equal(from_env, keyless)
    assert keyed == []  # no key from the environment was sent


def test_keys_passed_to_the_call_still_apply() -> None:
    _, unkeyed = _files()
    _, keyed = _files(credentials={"semantic_scholar_api_key": "k3y-given-to-the-call"})
    assert unkeyed == []
    assert keyed and set(keyed) == {"api.semanticscholar.org"}


# -- cache info ----------------------------------------------------------------------------------


def _journal_mode(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
    finally:
        conn.close()
    return str(mode).lower()


def _cache_in_delete_mode(directory: Path) -> Path:
    with ResponseCache(directory) as cache:
        cache.save("k", CachedResponse(200, (), b"{}", "https://api.crossref.org/works/x"))
        path = cache.path
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.close()
    assert _journal_mode(path) == "delete"
    return path


def test_cache_info_leaves_the_journal_mode_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _cache_in_delete_mode(tmp_path / "cache")
    assert cli.main(["cache", "info", str(tmp_path / "cache")]) == 0
    assert "entries:  1" in capsys.readouterr().out
    assert _journal_mode(path) == "delete"
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]
    # Clearing writes, and a writer may switch the file to WAL as ever.
    assert cli.main(["cache", "clear", str(tmp_path / "cache")]) == 0


def test_cache_info_refuses_a_foreign_file_without_touching_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    foreign = tmp_path / "other.db"
    conn = sqlite3.connect(foreign, isolation_level=None)
    conn.execute("CREATE TABLE notes (text)")
    conn.close()
    before = foreign.read_bytes()
    assert cli.main(["cache", "info", str(foreign)]) == cli.EXIT_CACHE
    assert "not a usable response cache" in capsys.readouterr().err
    assert foreign.read_bytes() == before
    assert _journal_mode(foreign) == "delete"


def test_a_read_only_cache_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = _cache_in_delete_mode(tmp_path / "cache")
    with ResponseCache(path, read_only=True) as cache:
        assert cache.info().entries == 1
        assert cache.load("k") is not None
        with pytest.raises(sqlite3.OperationalError):
            cache.save("k2", CachedResponse(200, (), b"{}", "https://example.org/"))
        with pytest.raises(sqlite3.OperationalError):
            cache.clear()
    assert _journal_mode(path) == "delete"
    with pytest.raises(ValueError, match="not a usable response cache"):
        ResponseCache(tmp_path / "missing.sqlite3", read_only=True)
    assert not (tmp_path / "missing.sqlite3").exists()
