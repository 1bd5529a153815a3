"""Fixtures of the command-line tests: a clean environment, the world served, an export."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.support import ARTICLES, EXPORT, SECRETS
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import World


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (*SECRETS, "LITFETCH_DF_CONTACT", "LITFETCH_DF_CACHE_DIR", "LITFETCH_DF_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    # A keyed Semantic Scholar pace keeps the file-set step fast.
    monkeypatch.setenv("SEMANTIC_SCHOLAR_API_KEY", SECRETS["SEMANTIC_SCHOLAR_API_KEY"])


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    World(ARTICLES).install(fake)
    yield fake


@pytest.fixture
def export(tmp_path: Path) -> Path:
    path = tmp_path / "pubmed.csv"
    path.write_text(EXPORT, encoding="utf-8")
    return path
