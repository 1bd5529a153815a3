"""The ``.lit`` accessors: new frames, untouched inputs, nullable dtypes, config, Series."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import litfetch_df.frame  # registers .lit
from litfetch_df import PDF, Blob, File, FileKind, Session
from litfetch_df.frame.accessor import LitFrameAccessor
from litfetch_df.frame.engine import options as opts
from litfetch_df.frame.series_accessor import LitSeriesAccessor
from tests.conftest import data_json
from tests.fake_upstream import FakeUpstream, json_response
from tests.test_frame_pipeline import (
    FILES,
    JATS,
    EpmcFetcher,
    IdconvBatch,
    StaticFiles,
    install,
    session_for,
)

assert litfetch_df.frame

LISTING = {
    "PMC7000001": (
        File(FileKind.BODY, "static", "application/pdf", f"https://{FILES}/get/a.pdf", "a.pdf"),
        File(
            FileKind.SUPPLEMENTARY,
            "static",
            "text/csv",
            f"https://{FILES}/get/s1.csv",
            "s1.csv",
            size_bytes=12,
        ),
    ),
    "PMC7000002": (
        File(FileKind.BODY, "static", "application/pdf", f"https://{FILES}/get/b.pdf", "b.pdf"),
    ),
}


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    install(fake)
    yield fake


def sample() -> pd.DataFrame:
    """A frame shaped like a user's: odd index, duplicate labels, extra columns, messy ids."""
    return pd.DataFrame(
        {
            "Title": ["one", "two", "three", "four", "five"],
            "PMID": ["30000001", "30000002.0", None, "bogus", "30000001"],
            "DOI link": [None, None, "https://doi.org/10.1000/abc.3", None, None],
            "year": [2020, 2021, 2022, 2023, 2024],
        },
        index=pd.Index(["z", "y", "x", "y", "w"], name="key"),
    )


STEP_DTYPES: dict[str, dict[str, str]] = {
    "resolve": {
        "pmid": "string",
        "pmcid": "string",
        "doi": "string",
        "bookid": "string",
        "resolve_error": "string",
    },
    "fetch_bodies": {
        "body": "object",
        "body_source": "string",
        "body_media_type": "string",
        "body_size": "Int64",
        "body_error": "string",
    },
    "licences": {
        "licence": "string",
        "access": "string",
        "licence_basis": "string",
        "licence_error": "string",
    },
    "list_files": {"files": "object", "n_files": "Int64", "files_error": "string"},
    "related": {
        "related": "object",
        "n_related": "Int64",
        "preprint_doi": "string",
        "published_doi": "string",
        "related_error": "string",
    },
}


def run_step(name: str, frame: pd.DataFrame, session: Session) -> pd.DataFrame:
    common: dict[str, Any] = {
        "session": session,
        "progress": False,
        "resolver": IdconvBatch(),
        "doi": "DOI link",
    }
    lit = frame.lit
    if name == "resolve":
        return lit.resolve(**common)
    if name == "fetch_bodies":
        return lit.fetch_bodies(fetchers=[EpmcFetcher()], **common)
    if name == "licences":
        return lit.licences(**common)
    if name == "list_files":
        return lit.list_files(sources=[StaticFiles("static", LISTING)], **common)
    if name == "related":
        return lit.related(**common)
    raise AssertionError(name)


@pytest.mark.parametrize("step", list(STEP_DTYPES))
def test_each_step_returns_a_new_frame_and_leaves_the_input_alone(
    world: FakeUpstream, step: str
) -> None:
    df = sample()
    before = copy.deepcopy(df)
    out = run_step(step, df, session_for(world, contact="me@lab.example"))
    assert out is not df
    pd.testing.assert_frame_equal(df, before)  # the input is unchanged
    pd.testing.assert_index_equal(out.index, df.index)  # same index, same order
    pd.testing.assert_frame_equal(out[list(df.columns)], before)  # originals untouched
    for column, dtype in STEP_DTYPES[step].items():
        assert str(out[column].dtype) == dtype, (column, out[column].dtype)
    if step != "resolve":  # the other steps resolve an unresolved frame first
        for column, dtype in STEP_DTYPES["resolve"].items():
            assert str(out[column].dtype) == dtype


def test_steps_chain_and_read_what_came_before(world: FakeUpstream) -> None:
    df = sample()
    before = copy.deepcopy(df)
    session = session_for(world, contact="me@lab.example")
    out = (
        df.lit.resolve(session=session, progress=False, resolver=IdconvBatch(), doi="DOI link")
        .lit.fetch_bodies(session=session, progress=False, fetchers=[EpmcFetcher()])
        .lit.licences(session=session, progress=False)
        .lit.list_files(session=session, progress=False, sources=[StaticFiles("static", LISTING)])
    )
    pd.testing.assert_frame_equal(df, before)
    assert out["pmcid"].tolist()[:2] == ["PMC7000001", "PMC7000002"]
    assert out["resolve_error"].tolist()[3] == "invalid pmid: 'bogus'"
    assert out.iloc[0]["body"].content == JATS
    assert out["licence_basis"].tolist()[:2] == ["artifact", "artifact"]
    assert out["n_files"].tolist()[:2] == [2, 1]
    long = out.lit.files()
    assert list(long.index) == ["z", "z", "y", "w", "w"]
    assert long.index.name == "key"
    assert long["filename"].tolist() == ["a.pdf", "s1.csv", "b.pdf", "a.pdf", "s1.csv"]
    assert str(long["size_bytes"].dtype) == "Int64"
    assert long["pmcid"].tolist() == ["PMC7000001"] * 2 + ["PMC7000002"] + ["PMC7000001"] * 2
    summary = out.lit.summary()
    assert summary.loc[("rows", "total"), "count"] == 5
    assert summary.loc[("resolved", "pmcid"), "count"] == 4
    assert summary.loc[("bodies", "europe_pmc"), "count"] == 3
    assert summary.loc[("errors", "resolve"), "count"] == 1
    assert summary.loc[("abandoned", "resolve"), "count"] == 0
    assert summary.loc[("files", "files"), "count"] == 5
    assert str(summary["count"].dtype) == "Int64"


def test_files_lists_first_when_needed_and_fetch_files_downloads(
    world: FakeUpstream, tmp_path: Path
) -> None:
    df = pd.DataFrame({"pmcid": ["PMC7000001", "PMC7000002", None]}, index=[5, 6, 7])
    session = session_for(world)
    sources = [StaticFiles("static", LISTING)]
    long = df.lit.files(sources=sources, session=session, progress=False, resolve=False)
    assert list(long.index) == [5, 5, 6]
    before = copy.deepcopy(long)
    got = long.lit.fetch_files(tmp_path, sources=sources, session=session, progress=False)
    pd.testing.assert_frame_equal(long, before)
    pd.testing.assert_frame_equal(got[list(long.columns)], before)
    assert str(got["path"].dtype) == "string" and str(got["size"].dtype) == "Int64"
    paths = [Path(p) for p in got["path"]]
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == [
        "PMC7000001/a.pdf",
        "PMC7000001/s1.csv",
        "PMC7000002/b.pdf",
    ]
    assert paths[0].read_bytes() == b"bytes of /get/a.pdf"
    assert got["size"].tolist() == [len(b"bytes of /get/a.pdf"), 20, 19]
    assert got["fetch_error"].isna().all()
    # a wide frame goes through files() on the way
    direct = df.lit.fetch_files(
        tmp_path / "direct", sources=sources, session=session, progress=False
    )
    assert len(direct) == 3


def test_a_url_two_sources_list_for_one_article_is_downloaded_once(
    world: FakeUpstream, tmp_path: Path
) -> None:
    pdf = f"https://{FILES}/get/a.pdf"
    one = StaticFiles("one", {"PMC7000001": (File(FileKind.BODY, "one", PDF, pdf, "a.pdf"),)})
    two = StaticFiles(
        "two",
        {
            "PMC7000001": (File(FileKind.BODY, "two", PDF, pdf, "paper.pdf"),),
            "PMC7000002": (File(FileKind.BODY, "two", PDF, pdf, "a.pdf"),),
        },
    )
    df = pd.DataFrame({"pmcid": ["PMC7000001", "PMC7000002"]})
    common: dict[str, Any] = {"session": session_for(world), "progress": False}
    listed = df.lit.list_files(sources=[one, two], resolve=False, **common)
    # Since issue 15 an article's file list holds a URL once, naming every source that
    # listed it (it used to hold one row per source).
    (first,) = listed.loc[0, "files"]
    assert (first.source, first.also_listed_by) == ("one", ("two",))
    long = listed.lit.files()
    assert long["source"].tolist() == ["one", "two"]
    got = long.lit.fetch_files(tmp_path, sources=[one, two], **common)
    downloads = [r for r in world.requests(FILES) if r.path == "/get/a.pdf"]
    assert len(downloads) == 2  # once for the first article, once for the second
    paths = got["path"].tolist()
    assert len(paths) == 2 and paths[0] != paths[1]
    assert got["fetch_error"].isna().all()
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.pdf")) == [
        "PMC7000001/a.pdf",
        "PMC7000002/a.pdf",
    ]


def test_fetch_files_works_on_a_long_frame_read_back_from_csv(
    world: FakeUpstream, tmp_path: Path
) -> None:
    df = pd.DataFrame({"pmcid": ["PMC7000002"]})
    sources = [StaticFiles("static", LISTING)]
    session = session_for(world)
    long = df.lit.files(sources=sources, session=session, progress=False, resolve=False)
    long.to_csv(tmp_path / "files.csv")
    again = pd.read_csv(tmp_path / "files.csv", dtype=str, index_col=0)
    got = again.lit.fetch_files(tmp_path / "out", sources=sources, session=session, progress=False)
    assert Path(got["path"].iloc[0]).read_bytes() == b"bytes of /get/b.pdf"


# -- id columns -----------------------------------------------------------------------------------


def test_no_id_column_is_a_value_error_naming_what_was_looked_for() -> None:
    df = pd.DataFrame({"Title": ["a"], "Year": [2020]})
    with pytest.raises(ValueError) as info:
        df.lit.resolve(progress=False)
    message = str(info.value)
    assert "'Title'" in message and "'Year'" in message
    assert "PMID" in message and "PMCID" in message and "DOI" in message and "NBK" in message


def test_explicit_column_names_win(world: FakeUpstream) -> None:
    df = pd.DataFrame({"DOI": ["junk"], "Paper": ["10.1000/abc.2"]})
    out = df.lit.resolve(
        doi="Paper", resolver=IdconvBatch(), session=session_for(world), progress=False
    )
    assert out.loc[0, "doi"] == "10.1000/abc.2"
    assert out.loc[0, "pmcid"] == "PMC7000002"
    assert pd.isna(out.loc[0, "resolve_error"])
    assert out.loc[0, "DOI"] == "junk"  # a differently named input column stays as it was
    with pytest.raises(KeyError, match="Nope"):
        df.lit.resolve(doi="Nope", progress=False)


def test_id_columns_reports_detection() -> None:
    df = pd.DataFrame(columns=["PubMed ID", "PMC ID", "DOI link", "Bookshelf ID"])
    cols = df.lit.id_columns()
    assert (cols.pmid, cols.pmcid, cols.doi, cols.bookid) == (
        "PubMed ID",
        "PMC ID",
        "DOI link",
        "Bookshelf ID",
    )


def test_empty_frame_gets_typed_empty_columns(world: FakeUpstream) -> None:
    df = pd.DataFrame({"pmcid": pd.Series([], dtype="string")})
    out = df.lit.fetch_bodies(
        fetchers=[EpmcFetcher()], resolve=False, session=session_for(world), progress=False
    )
    assert len(out) == 0 and str(out["body_size"].dtype) == "Int64"
    assert world.count() == 0


# -- Series ---------------------------------------------------------------------------------------


def test_series_kind_from_name_values_or_argument() -> None:
    assert pd.Series(["x"], name="DOI").lit.kind() == "doi"
    assert pd.Series(["10.1000/a", "10.1000/b"]).lit.kind() == "doi"
    assert pd.Series(["PMC1", "pmc2"], name="ids").lit.kind() == "pmcid"
    assert pd.Series(["123", 456.0]).lit.kind() == "pmid"
    assert pd.Series(["NBK1116"]).lit.kind() == "bookid"
    assert pd.Series(["whatever"]).lit.kind("doi") == "doi"
    with pytest.raises(ValueError, match="kind="):
        pd.Series(["hello", "world"]).lit.kind()


def test_series_methods_return_frames(world: FakeUpstream) -> None:
    s = pd.Series(["PMC7000001", "PMC7000009", "PMC7000001"], index=[3, 1, 2], name="PMC ID")
    before = s.copy(deep=True)
    out = s.lit.fetch_bodies(
        fetchers=[EpmcFetcher()], resolve=False, session=session_for(world), progress=False
    )
    pd.testing.assert_series_equal(s, before)
    assert isinstance(out, pd.DataFrame)
    assert list(out.index) == [3, 1, 2]
    pd.testing.assert_series_equal(out["PMC ID"], before)
    assert out["body_source"].tolist()[0] == "europe_pmc"
    assert pd.isna(out["body_source"].tolist()[1])
    # an unnamed Series of DOIs
    dois = pd.Series(["https://doi.org/10.1000/abc.1"])
    resolved = dois.lit.resolve(resolver=IdconvBatch(), session=session_for(world), progress=False)
    assert resolved.loc[0, "pmcid"] == "PMC7000001"
    assert resolved.loc[0, "doi"] == "10.1000/abc.1"


async def test_series_async_twin(world: FakeUpstream) -> None:
    s = pd.Series(["PMC7000002"], name="pmcid")
    out = await s.lit.fetch_bodies_async(
        fetchers=[EpmcFetcher()], resolve=False, session=session_for(world), progress=False
    )
    assert out.loc[0, "body_source"] == "europe_pmc"


def test_accessors_are_registered_and_hold_nothing() -> None:
    df = pd.DataFrame({"pmid": ["1"]})
    assert isinstance(df.lit, LitFrameAccessor)
    assert isinstance(df["pmid"].lit, LitSeriesAccessor)
    # pandas 2.x keeps one accessor per frame, pandas 3 builds one per access: either
    # way it holds the frame and nothing else, before and after a call.
    assert set(vars(df.lit)) == {"_frame"} and df.lit._frame is df
    df.lit.id_columns()
    assert set(vars(df.lit)) == {"_frame"}
    litfetch_df.frame.register()  # idempotent: no warning (warnings are errors here)


# -- configuration ---------------------------------------------------------------------------------


def test_options_from_environment_hide_keys() -> None:
    env = {
        "NCBI_API_KEY": "ncbi-secret",
        "ELSEVIER_API_KEY": "els-secret",
        "SPRINGER_API_KEY": "spr-secret",
        "SPRINGER_META_API_KEY": "meta-secret",
        "SEMANTIC_SCHOLAR_API_KEY": "s2-secret",
        "OPENALEX_API_KEY": "oa-secret",
        "LITFETCH_DF_CONTACT": " me@lab.example ",
    }
    o = opts.options_from_env(env)
    assert o.contact == "me@lab.example"
    assert dict(o.credentials) == {
        "ncbi_api_key": "ncbi-secret",
        "elsevier_api_key": "els-secret",
        "springer_api_key": "spr-secret",
        "springer_meta_api_key": "meta-secret",
        "semantic_scholar_api_key": "s2-secret",
        "openalex_api_key": "oa-secret",
    }
    shown = repr(o) + str(o)
    assert "secret" not in shown
    assert "elsevier_api_key" in shown
    assert opts.options_from_env({}).credentials == {}


def test_option_context_overrides_and_restores() -> None:
    base = opts.get_options()
    with opts.option_context(concurrency=3, credentials={"elsevier_api_key": "k"}) as inner:
        assert opts.get_options() is inner
        assert inner.concurrency == 3
        assert inner.credentials["elsevier_api_key"] == "k"
        call = opts.effective(concurrency=7, credentials={"springer_api_key": "s"})
        assert call.concurrency == 7
        assert set(call.credentials) >= {"elsevier_api_key", "springer_api_key"}
    assert opts.get_options() == base
    with pytest.raises(TypeError, match="unknown option"):
        opts.set_options(colour="red")
    with pytest.raises(ValueError):
        opts.Options(concurrency=0)


def test_set_and_reset_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITFETCH_DF_CONTACT", "env@lab.example")
    try:
        assert opts.reset_options().contact == "env@lab.example"
        assert opts.set_options(contact="set@lab.example").contact == "set@lab.example"
        assert opts.get_options().contact == "set@lab.example"
    finally:
        monkeypatch.delenv("LITFETCH_DF_CONTACT")
        opts.reset_options()


def test_contact_and_credentials_reach_the_session_and_sources(world: FakeUpstream) -> None:
    seen: list[tuple[str | None, object]] = []

    class Spy(EpmcFetcher):
        async def fetch(self, article_ids: Any, *, credentials: Any = None, http: Any) -> Any:
            seen.append((http.contact, (credentials or {}).get("elsevier_api_key")))
            return None

    df = pd.DataFrame({"pmcid": ["PMC7000001"]})
    with opts.option_context(contact="ctx@lab.example", credentials={"elsevier_api_key": "k1"}):
        # no session given: the frame builds one from the options (routed nowhere: the
        # spy sends no request)
        df.lit.fetch_bodies(fetchers=[Spy()], resolve=False, progress=False)
        df.lit.fetch_bodies(
            fetchers=[Spy()],
            resolve=False,
            progress=False,
            contact="call@lab.example",
            credentials={"elsevier_api_key": "k2"},
        )
    assert seen == [("ctx@lab.example", "k1"), ("call@lab.example", "k2")]


async def test_sync_method_with_an_open_session_points_to_the_async_twin(
    world: FakeUpstream,
) -> None:
    df = pd.DataFrame({"pmcid": ["PMC7000001"]})
    async with session_for(world) as session:
        with pytest.raises(RuntimeError, match="fetch_bodies_async"):
            df.lit.fetch_bodies(session=session, resolve=False, progress=False)
        out = await df.lit.fetch_bodies_async(
            session=session, fetchers=[EpmcFetcher()], resolve=False, progress=False
        )
        assert out.loc[0, "body_source"] == "europe_pmc"
        assert session.client is not None  # a session the caller opened stays open


def test_session_level_settings_cannot_be_mixed_with_a_session(world: FakeUpstream) -> None:
    df = pd.DataFrame({"pmcid": ["PMC7000001"]})
    with pytest.raises(ValueError, match="contact"):
        df.lit.fetch_bodies(session=session_for(world), contact="x@y.z", progress=False)


def test_licence_step_warns_without_a_contact(world: FakeUpstream) -> None:
    df = pd.DataFrame({"doi": ["10.1000/abc.3"]})
    with pytest.warns(UserWarning, match="contact"):
        out = df.lit.licences(resolve=False, session=session_for(world), progress=False)
    assert pd.isna(out.loc[0, "licence"]) and pd.isna(out.loc[0, "licence_error"])


def test_licences_fall_back_to_unpaywall_when_bytes_carry_none(world: FakeUpstream) -> None:
    record = data_json("json", "unpaywall_v2_10.1016_j.xgen.2025.100814_gold.json")
    world.route("api.unpaywall.org", r"/v2/.+", json_response(record))
    pdf = Blob(File(FileKind.BODY, "x", "application/pdf"), b"%PDF-1.7")
    jats = Blob(File(FileKind.BODY, "europe_pmc", "application/jats+xml"), JATS)
    df = pd.DataFrame(
        {"doi": ["10.1000/abc.1", "10.1000/abc.2", "10.1000/abc.3"], "body": [pdf, None, jats]}
    )
    out = df.lit.licences(
        resolve=False, session=session_for(world, contact="me@lab.example"), progress=False
    )
    # a PDF body carries no licence and row 1 has none: both take their terms from Unpaywall;
    # the JATS row keeps its own terms but asks too, for its open-access colour (oa_status)
    assert world.count("api.unpaywall.org") == 3
    assert out["licence_basis"].tolist() == ["unpaywall", "unpaywall", "artifact"]
    assert out["access"].tolist()[:2] == [record["oa_status"]] * 2
    assert out["oa_status"].tolist() == ["gold"] * 3
