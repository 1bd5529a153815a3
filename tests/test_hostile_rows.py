"""A hostile or broken server costs one row and says why (issue 26, items 3-6).

Through the ``.lit`` accessors, over ``httpx.MockTransport`` sessions and the
synthetic world on the fake upstream (``tests/fakes/world.py``): every row
that was tried says what happened, a bad answer from one source leaves what
the others gave, and file names are safe on every filesystem.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers the .lit accessor)
from benchmarks.client import CREDENTIALS, WORLD_KEYS
from benchmarks.corpus import generate
from litfetch_df import ArticleIds, Blob, File, FileKind, Session
from litfetch_df.frame.engine.outcome import is_abandoned
from litfetch_df.sources.europe_pmc import EuropePmcFetcher
from tests.conftest import FAST_RETRY, mock_session
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream
from tests.fakes.world import HOST_UNPAYWALL, World

FILES_HOST = "files.example.org"


class LinkFiles:
    """A file source listing fixed links per PMCID, downloaded (streamed) from their URL."""

    name = "links"

    def __init__(self, listing: Mapping[str, tuple[File, ...]]) -> None:
        self.listing = dict(listing)

    async def list_files(
        self, article_ids: ArticleIds, *, credentials: Mapping[str, object] | None = None, http: Any
    ) -> tuple[File, ...]:
        return self.listing.get(article_ids.pmcid or "", ())

    async def fetch_file(
        self, file: File, *, credentials: Mapping[str, object] | None = None, http: Any
    ) -> Blob | None:
        raise AssertionError("a Session streams the download instead")

    def download_url(self, file: File, *, credentials: Mapping[str, object] | None = None) -> str:
        assert file.uri is not None
        return file.uri


def _link(name: str) -> File:
    return File(FileKind.SUPPLEMENTARY, "links", None, f"https://{FILES_HOST}/get/{name}", name)


def _fetch_files(
    names: list[str], handler: Any, out: Path, **kwargs: Any
) -> tuple[pd.DataFrame, Session]:
    source = LinkFiles({"PMC7000001": tuple(_link(n) for n in names)})
    session = mock_session(handler, **kwargs)
    common: dict[str, Any] = {"session": session, "progress": False}
    df = pd.DataFrame({"pmcid": ["PMC7000001"]})
    long = df.lit.files(sources=[source], resolve=False, **common)
    return long.lit.fetch_files(out, sources=[source], **common), session


# -- 5. a file link that does not answer 200 says so ---------------------------------------------


@pytest.mark.parametrize(
    ("status", "said"),
    [
        (401, "HTTP 401 from files.example.org"),
        (403, "HTTP 403 from files.example.org"),
        (404, "HTTP 404 from files.example.org"),
        (410, "HTTP 410 from files.example.org"),
        (204, "HTTP 204 (no content) from files.example.org"),
        (300, "HTTP 300 from files.example.org"),
        (451, "HTTP 451 from files.example.org"),
        (302, "HTTP 302 without a Location to follow from files.example.org"),
    ],
)
def test_a_file_link_not_answered_200_names_the_status_and_host(
    status: int, said: str, tmp_path: Path
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=b"" if status in (204, 302) else b"no")

    got, _ = _fetch_files(["s1.csv"], handler, tmp_path)
    assert got["path"].isna().all()
    assert got["fetch_error"].tolist() == [said]
    assert not is_abandoned(said)  # a verdict on the file, not a failure to retry
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_a_file_link_that_fails_every_retry_is_still_abandoned(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, content=b"busy")

    got, _ = _fetch_files(["s1.csv"], handler, tmp_path)
    error = got["fetch_error"].iloc[0]
    assert is_abandoned(error) and "HTTP 503 from files.example.org" in error


# -- 6. names safe on every filesystem -----------------------------------------------------------

HOSTILE_NAMES = [
    "CON.tar.gz",
    "nul.tar.gz",
    "COM1.csv.txt",
    "LPT0.txt",
    "COM\u00b9.txt",  # superscript one: Windows reserves it too
    "aux",
    "report. . ",
    "data.csv",
    "Data.csv",
    "DATA.CSV",
    "caf\u00e9.csv",  # composed
    "cafe\u0301.csv",  # decomposed: the same name on macOS
]
_RESERVED = {"con", "prn", "aux", "nul"} | {f"{d}{i}" for d in ("com", "lpt") for i in range(10)}


def test_hostile_file_names_get_distinct_safe_names_the_same_on_every_os(
    tmp_path: Path,
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=f"bytes of {request.url.path}".encode())

    got, _ = _fetch_files(HOSTILE_NAMES, handler, tmp_path / "one")
    again, _ = _fetch_files(HOSTILE_NAMES, handler, tmp_path / "two")
    assert got["fetch_error"].isna().all()
    names = [Path(p).name for p in got["path"]]
    for name in names:
        stem = unicodedata.normalize("NFKD", name).split(".", 1)[0].lower()
        assert stem not in _RESERVED, name
        assert not name.endswith((".", " ")), name
        assert name.isascii(), name
    folded = {unicodedata.normalize("NFC", n).casefold() for n in names}
    assert len(folded) == len(HOSTILE_NAMES)
    # Deterministic: the same names wherever and whenever the frame is fetched.
    assert [Path(p).name for p in again["path"]] == names
    assert names[:4] == ["_CON.tar.gz", "_nul.tar.gz", "_COM1.csv.txt", "_LPT0.txt"]
    assert names[7] == "data.csv"


# -- 5. a body refused for declaring entities says so --------------------------------------------

ENTITY_BODY = (
    b'<?xml version="1.0"?><!DOCTYPE article [<!ENTITY a "aaaaaaaaaa">'
    b'<!ENTITY b "&a;&a;&a;&a;">]><article><body><p>&b;</p></body></article>'
)


def test_a_body_that_declares_entities_says_so_in_body_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=ENTITY_BODY, headers={"Content-Type": "text/xml"})

    df = pd.DataFrame({"pmcid": ["PMC7000001"]})
    got = df.lit.fetch_bodies(
        fetchers=[EuropePmcFetcher()],
        resolve=False,
        session=mock_session(handler),
        progress=False,
    )
    assert got["body"].isna().all()
    error = got["body_error"].iloc[0]
    assert "XML that declares entities, refused" in error, error
    assert "www.ebi.ac.uk" in error


# -- 3. (the part owned here) a reason is never blank -------------------------------------------


@pytest.mark.parametrize("exc", [httpx.ReadError(""), httpx.ConnectError(""), OSError()])
def test_a_transport_error_without_a_message_still_leaves_a_reason(exc: Exception) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    df = pd.DataFrame({"pmcid": ["PMC7000001"]})
    got = df.lit.fetch_bodies(
        fetchers=[EuropePmcFetcher()],
        resolve=False,
        session=mock_session(handler),
        progress=False,
    )
    error = got["body_error"].iloc[0]
    reason = error.split(":", 1)[1].strip()
    assert reason and not reason.startswith("["), error
    assert type(exc).__name__ in error, error
    if isinstance(exc, httpx.TransportError):
        assert "www.ebi.ac.uk" in error, error


async def test_an_empty_reason_given_to_the_session_is_never_recorded_blank() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadError("")

    async with mock_session(handler, retry=FAST_RETRY) as s:
        with pytest.raises(httpx.TransportError) as caught:
            await s.get("https://api.example.org/x")
        assert s.failures == ("ReadError from api.example.org after 3 attempts",)
    assert str(caught.value).startswith("ReadError from api.example.org")


# -- 4. a bad answer from one source never costs the row what the others gave -------------------


async def test_deep_json_from_one_licence_source_leaves_the_others_facts(
    fake: FakeUpstream,
) -> None:
    corpus = generate(60, seed=3)
    World(corpus.articles, keys=WORLD_KEYS).install(fake)

    def settings() -> dict[str, Any]:
        session = Session(
            client_factory=fake.client_factory(), retry=FAST_RETRY, contact="me@lab.example"
        )
        return {"session": session, "progress": False, "credentials": dict(CREDENTIALS)}

    # The bodies' own licence (basis "artifact") and Unpaywall's both state terms.
    steps = ("resolve", "bodies", "licences")
    clean = await corpus.frame.lit.run_async(steps, **settings())
    deep = b"[" * 100_000 + b"]" * 100_000

    def poisoned(req: FakeRequest) -> FakeResponse:
        return FakeResponse(200, deep, {"Content-Type": "application/json"})

    fake.route(HOST_UNPAYWALL, r"/v2/.+", poisoned)
    got = await corpus.frame.lit.run_async(steps, **settings())

    # A body Unpaywall located (a PDF link) is lost with it, and its licence too: only
    # rows whose body came the same way both times hold facts the other sources gave.
    same_body = clean["body_source"].fillna("-").eq(got["body_source"].fillna("-"))
    others = clean["licence_basis"].notna() & clean["licence_basis"].ne("unpaywall") & same_body
    lost = clean["licence_basis"].eq("unpaywall").fillna(False)
    assert others.sum() >= 5 and lost.sum() >= 1, "the world must exercise both kinds of row"
    for column in ("licence", "access", "licence_basis"):
        pd.testing.assert_series_equal(got.loc[others, column], clean.loc[others, column])
    for i in got.index[lost]:
        error = got.at[i, "licence_error"]
        assert isinstance(error, str) and "JSON nested deeper than 256 levels" in error, error
    assert not got["licence_error"].fillna("").str.contains("RecursionError").any()
