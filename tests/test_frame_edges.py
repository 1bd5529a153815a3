"""The DataFrame contract at its edges: odd shapes, odd dtypes, odd names, re-runs.

Every ``.lit`` method (and its ``_async`` twin, and the Series face) against
the small protocol fakes of ``tests/test_frame_pipeline.py``: zero-row
frames, MultiIndex and duplicate labels, id columns of awkward dtypes, column
labels that are not strings or that collide with an output column, all-NA id
columns, frames with no id column, inputs that must stay untouched, and
``run()`` called again on its own result. ``test_frame_accessor.py`` covers
the ordinary shapes; this file only adds what it does not.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import litfetch_df.frame  # registers .lit
from litfetch_df import ArticleIds, File, FileKind, Related, RelationType
from litfetch_df.frame.accessor import LitFrameAccessor
from litfetch_df.frame.engine.pipeline import is_abandoned
from litfetch_df.frame.series_accessor import LitSeriesAccessor
from tests.fake_upstream import FakeResponse, FakeUpstream
from tests.test_frame_accessor import LISTING, STEP_DTYPES
from tests.test_frame_pipeline import (
    EBI,
    FILES,
    IDCONV,
    NCBI,
    REST,
    EpmcFetcher,
    IdconvBatch,
    StaticFiles,
    fulltext_count,
    install,
    session_for,
)

assert litfetch_df.frame

CONTACT = "me@lab.example"
ALL_STEPS = ("resolve", "bodies", "files", "licences", "related")
METHODS = ("resolve", "fetch_bodies", "licences", "list_files", "files", "related", "run")
LONG_DTYPES: dict[str, str] = {
    **dict.fromkeys(("pmid", "pmcid", "doi", "bookid", "kind", "source", "media_type"), "string"),
    **dict.fromkeys(("uri", "filename", "credential_key", "description"), "string"),
    "size_bytes": "Int64",
}


def added_dtypes(method: str) -> dict[str, str]:
    """The columns ``method`` adds to a wide frame, with their dtypes."""
    if method == "files":
        return LONG_DTYPES
    steps = {"resolve": ["resolve"], "run": [*STEP_DTYPES]}.get(method, ["resolve", method])
    return {c: d for step in steps for c, d in STEP_DTYPES[step].items()}


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    install(fake)
    yield fake


def arguments(method: str, fake: FakeUpstream, contact: str | None = CONTACT) -> dict[str, Any]:
    args: dict[str, Any] = {
        "session": session_for(fake, contact=contact),
        "progress": False,
        "resolver": IdconvBatch(),
    }
    if method in ("fetch_bodies", "run"):
        args["fetchers"] = [EpmcFetcher()]
    if method in ("list_files", "files", "run"):
        args["sources"] = [StaticFiles("static", LISTING)]
    if method == "run":
        args["steps"] = ALL_STEPS
    return args


def lit(frame: pd.DataFrame) -> LitFrameAccessor:
    return cast(LitFrameAccessor, frame.lit)


def slit(series: pd.Series[Any]) -> LitSeriesAccessor:
    return cast(LitSeriesAccessor, series.lit)


def objects(values: Sequence[object], index: pd.Index[Any]) -> pd.Series[Any]:
    """An object column holding ``values`` as they are (tuples stay cells)."""
    column = np.empty(len(values), dtype=object)
    for i, value in enumerate(values):
        column[i] = value
    return pd.Series(column, index=index, dtype=object)


def arrow_strings(values: Sequence[str | None]) -> pd.Series[Any]:
    return pd.Series(values, dtype=pd.ArrowDtype(pa.string()))


def call(method: str, frame: pd.DataFrame, fake: FakeUpstream, **extra: Any) -> pd.DataFrame:
    out: pd.DataFrame = getattr(lit(frame), method)(**{**arguments(method, fake), **extra})
    return out


async def call_async(method: str, frame: pd.DataFrame, fake: FakeUpstream) -> pd.DataFrame:
    out: pd.DataFrame = await getattr(lit(frame), f"{method}_async")(**arguments(method, fake))
    return out


def cells(column: pd.Series[Any]) -> list[object]:
    """A column's values with every missing value as ``None`` (NA does not compare)."""
    return [None if pd.isna(v) else v for v in column.tolist()]


def assert_dtypes(frame: pd.DataFrame, expected: dict[str, str]) -> None:
    got = {c: str(frame[c].dtype) for c in expected}
    assert got == expected


# -- zero rows ----------------------------------------------------------------------------------

ZERO_ROWS: dict[str, Callable[[], pd.DataFrame]] = {
    "canonical": lambda: pd.DataFrame(
        {"pmcid": pd.Series([], dtype="string")}, index=pd.Index([], dtype="int64", name="row")
    ),
    "recognised": lambda: pd.DataFrame(
        {
            "PubMed ID": pd.Series([], dtype="Int64"),
            "DOI link": pd.Series([], dtype=object),
            "Title": pd.Series([], dtype="string"),
        }
    ),
}


@pytest.mark.parametrize("shape", list(ZERO_ROWS))
@pytest.mark.parametrize("method", METHODS)
def test_a_zero_row_frame_gets_typed_columns_and_sends_nothing(
    world: FakeUpstream, method: str, shape: str
) -> None:
    df = ZERO_ROWS[shape]()
    out = call(method, df, world)
    assert len(out) == 0
    assert_dtypes(out, added_dtypes(method))
    assert out.index.names == df.index.names and out.index.dtype == df.index.dtype
    if method != "files":
        pd.testing.assert_frame_equal(out[list(df.columns)], df)
    assert lit(out).summary().loc[("rows", "total"), "count"] == 0
    assert world.count() == 0


@pytest.mark.parametrize("method", METHODS)
def test_zero_rows_and_no_id_column_still_name_the_columns_looked_at(
    world: FakeUpstream, method: str
) -> None:
    df = pd.DataFrame({"Title": pd.Series([], dtype="string"), 7: pd.Series([], dtype=float)})
    with pytest.raises(ValueError, match="no identifier column found") as info:
        call(method, df, world)
    assert "'Title'" in str(info.value) and "7" in str(info.value) and "PMID" in str(info.value)
    assert world.count() == 0


async def test_an_empty_series_needs_a_name_or_kind_and_then_runs(world: FakeUpstream) -> None:
    named = pd.Series([], dtype="string", name="DOI")
    out = await slit(named).run_async(**arguments("run", world, contact=None))
    assert list(out.columns[:1]) == ["DOI"] and len(out) == 0
    assert_dtypes(out, added_dtypes("run"))
    with pytest.raises(ValueError, match="kind="):
        slit(pd.Series([], dtype="string")).resolve(progress=False)
    told = slit(pd.Series([], dtype="string")).resolve(kind="pmid", progress=False)
    assert list(told.columns) == ["pmid", "pmcid", "doi", "bookid", "resolve_error"]
    assert world.count() == 0


# -- index shapes -------------------------------------------------------------------------------

INDEXES: dict[str, Callable[[], pd.Index[Any]]] = {
    "multiindex": lambda: pd.MultiIndex.from_tuples(
        [("b", 2), ("a", 1), ("a", 1), ("c", 0)], names=["batch", "n"]
    ),
    "duplicate labels": lambda: pd.Index([7, 3, 7, 7], name="key"),
}


def by_pmcid() -> pd.Series[Any]:
    return pd.Series(["PMC7000002", "PMC7000001", None, "pmc7000001"], name="PMC ID")


@pytest.mark.parametrize("shape", list(INDEXES))
@pytest.mark.parametrize("method", METHODS)
def test_the_index_comes_back_as_it_was_and_long_forms_key_back(
    world: FakeUpstream, method: str, shape: str
) -> None:
    df = by_pmcid().to_frame().set_axis(INDEXES[shape]())
    out = call(method, df, world)
    if method == "files":
        # One row per file, each under the label of the row it came from, in row order.
        counts = [len(LISTING.get(p, ())) for p in ("PMC7000002", "PMC7000001", "", "PMC7000001")]
        expected = [label for label, n in zip(df.index, counts, strict=True) for _ in range(n)]
        assert list(out.index) == expected
        assert out.index.names == df.index.names
        assert out["filename"].tolist() == ["b.pdf", "a.pdf", "s1.csv", "a.pdf", "s1.csv"]
        return
    pd.testing.assert_index_equal(out.index, df.index)
    pd.testing.assert_frame_equal(out[["PMC ID"]], df)
    if method in ("fetch_bodies", "run"):
        assert out["body_source"].isna().tolist() == [False, False, True, False]


@pytest.mark.parametrize("shape", list(INDEXES))
def test_relations_key_back_to_the_original_labels(shape: str) -> None:
    preprint = Related(RelationType.PREPRINT, ArticleIds(doi="10.1101/pre.1"))
    published = Related(RelationType.PUBLISHED, ArticleIds(doi="10.1000/pub.1"))
    index = INDEXES[shape]()
    df = pd.DataFrame({"doi": ["10.1000/a", "10.1000/b", "10.1000/c", "10.1000/d"]}, index=index)
    df["related"] = objects([(preprint, published), None, (), (published,)], index)
    long = lit(df).relations()  # the frame holds `related`: no request, no session
    assert list(long.index) == [df.index[0], df.index[0], df.index[3]]
    assert long.index.names == df.index.names
    assert long["related_doi"].tolist() == ["10.1101/pre.1", "10.1000/pub.1", "10.1000/pub.1"]
    assert long["doi"].tolist() == ["10.1000/a", "10.1000/a", "10.1000/d"]


def test_long_forms_on_a_frame_indexed_by_tuples() -> None:
    pdf = File(FileKind.BODY, "static", "application/pdf", f"https://{FILES}/get/a.pdf", "a.pdf")
    df = pd.DataFrame({"pair": [("x", 1), ("y", 2)], "pmcid": ["PMC1", "PMC2"]})
    df = df.set_index("pair")
    df["files"] = objects([(pdf,), (pdf, pdf)], df.index)
    assert not isinstance(df.index, pd.MultiIndex)
    long = lit(df).files()
    assert list(long.index) == [("x", 1), ("y", 2), ("y", 2)]
    assert not isinstance(long.index, pd.MultiIndex) and long.index.name == "pair"


# -- id columns of awkward dtypes ----------------------------------------------------------------

FOUND = ["PMC7000001", None, "PMC7000002", "PMC7000001"]
CLEAN: list[str | None] = [None] * 4
DOIS = ["10.1000/abc.1", None, "https://doi.org/10.1000/ABC.2", "doi:10.1000/ABC.1"]
# case: (column, values, pmcid expected per row, resolve_error expected per row)
AWKWARD: dict[str, tuple[str, Any, list[str | None], list[str | None]]] = {
    "Int64 + NA": ("PMID", pd.array([30000001, None, 30000002, 30000001], "Int64"), FOUND, CLEAN),
    "float + NaN": ("PMID", np.array([30000001.0, np.nan, 30000002.0, 30000001]), FOUND, CLEAN),
    "categorical": ("PMCID", pd.Categorical([*FOUND[:3], "pmc7000001"]), FOUND, CLEAN),
    "arrow string": ("DOI", arrow_strings(DOIS), FOUND, CLEAN),
    "string[pyarrow]": ("DOI", pd.array(DOIS, "string[pyarrow]"), FOUND, CLEAN),
    "object ints and strings": (
        "PMID",
        pd.array([30000001, "x", "30000002", " 30000001 "], dtype=object),
        FOUND,
        [None, "invalid pmid: 'x'", None, None],
    ),
    "bytes": (
        "PMCID",
        pd.array([b"PMC7000001", b"\xff", b"PMC7000002", True], dtype=object),
        [*FOUND[:3], None],
        [None, "invalid pmcid: b'\\xff'", None, "invalid pmcid: True"],
    ),
}


@pytest.mark.parametrize("case", list(AWKWARD))
def test_id_columns_of_awkward_dtypes(world: FakeUpstream, case: str) -> None:
    column, values, pmcids, errors = AWKWARD[case]
    df = pd.DataFrame({column: values, "n": range(4)})
    before = copy.deepcopy(df)
    out = call("fetch_bodies", df, world)
    pd.testing.assert_frame_equal(df, before)
    pd.testing.assert_frame_equal(out[[column, "n"]], before)  # read, never rewritten
    assert cells(out["pmcid"]) == pmcids
    assert cells(out["resolve_error"]) == errors
    found = [p is not None for p in pmcids]
    assert out["body_source"].notna().tolist() == found
    # however the ids were spelt, each article is fetched once
    assert fulltext_count(world, "PMC7000001") == 1 and fulltext_count(world, "PMC7000002") == 1
    assert not any("xff" in r.path or "True" in r.path for r in world.requests())


def test_a_series_of_an_awkward_dtype_comes_back_as_the_first_column(
    world: FakeUpstream,
) -> None:
    s = pd.Series(
        pd.Categorical(["PMC7000001", None, "pmc7000001"]),
        index=pd.MultiIndex.from_tuples([("a", 1), ("a", 1), ("b", 2)]),
        name="PMC ID",
    )
    out = slit(s).fetch_bodies(**arguments("fetch_bodies", world))
    pd.testing.assert_series_equal(out["PMC ID"], s)
    assert out["body_source"].notna().tolist() == [True, False, True]
    assert fulltext_count(world, "PMC7000001") == 1


# -- column names --------------------------------------------------------------------------------


def test_a_non_string_column_label_stays_and_only_the_canonical_column_is_rewritten(
    world: FakeUpstream,
) -> None:
    df = pd.DataFrame(
        {
            0: ["first", "second"],
            "DOI": ["junk", "kept as typed"],
            "doi": ["https://doi.org/10.1000/ABC.1", None],
        }
    )
    out = call("run", df, world)
    pd.testing.assert_series_equal(out[0], df[0])
    pd.testing.assert_series_equal(out["DOI"], df["DOI"])  # a differently named column stays
    # the column called exactly `doi` wins detection and is replaced by its normalised form
    assert out["doi"].tolist()[0] == "10.1000/ABC.1" and str(out["doi"].dtype) == "string"
    assert out.loc[0, "body_source"] == "europe_pmc"
    assert out["resolve_error"].isna().all()
    assert list(out.columns[:3]) == [0, "DOI", "doi"]
    assert lit(out).summary().loc[("bodies", "europe_pmc"), "count"] == 1


def test_a_user_column_named_like_a_step_error_column_counts_as_a_previous_run(
    world: FakeUpstream,
) -> None:
    # Documented: called on a frame with `body_error`, the step works only rows whose
    # error starts with "abandoned"; a user's own notes there stop the fetch.
    df = pd.DataFrame(
        {"pmcid": ["PMC7000001", "PMC7000002"], "body_error": ["my note", "abandoned: mine"]}
    )
    out = call("fetch_bodies", df, world)
    assert fulltext_count(world, "PMC7000001") == 0 and fulltext_count(world, "PMC7000002") == 1
    assert cells(out["body_error"]) == ["my note", None]
    assert out["body_source"].isna().tolist() == [True, False]


@pytest.mark.parametrize(
    ("method", "column"),
    [("fetch_bodies", "body_source"), ("licences", "licence"), ("licences", "access")],
)
def test_a_user_column_named_like_an_output_column_is_replaced(
    world: FakeUpstream, method: str, column: str
) -> None:
    # The step's column takes the place of the caller's, and says so (docs/accessor-reference).
    df = pd.DataFrame({"pmcid": ["PMC7000001", "PMC7000009"], column: ["mine", "mine too"]})
    with pytest.warns(UserWarning, match=rf"'{column}' already in the frame are replaced"):
        out = call(method, df, world)
    assert cells(df[column]) == ["mine", "mine too"]  # the input frame keeps its own
    assert not {"mine", "mine too"} & set(cells(out[column]))
    assert str(out[column].dtype) == "string"
    assert list(out.columns).count(column) == 1


def test_a_column_named_for_one_kind_is_not_also_read_as_another(world: FakeUpstream) -> None:
    s = pd.Series(["10.1000/abc.1"], name="pmid")
    out = slit(s).resolve(kind="doi", **arguments("resolve", world))
    assert out.loc[0, "pmcid"] == "PMC7000001"
    assert cells(out["resolve_error"]) == [None]


# -- all-NA ids ----------------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_all_na_id_columns_send_nothing_and_report_nothing(
    world: FakeUpstream, method: str
) -> None:
    df = pd.DataFrame(
        {
            "PMID": [None, np.nan, pd.NA],
            "DOI": pd.array([None, None, " "], dtype="string"),
            "PMCID": pd.Categorical([None, None, None]),
            "x": [1, 2, 3],
        }
    )
    # No contact: with no DOI to ask about, the licence step has nothing to warn of.
    out: pd.DataFrame = getattr(lit(df), method)(**arguments(method, world, contact=None))
    assert world.count() == 0
    if method == "files":
        assert len(out) == 0
        return
    assert len(out) == 3
    assert_dtypes(out, added_dtypes(method))
    for name in added_dtypes(method):
        assert out[name].isna().all(), name


# -- the input stays untouched -------------------------------------------------------------------


def awkward_frame() -> pd.DataFrame:
    index = pd.MultiIndex.from_tuples([("a", 1), ("a", 1), ("b", 2), ("c", 3)], names=["g", "n"])
    return pd.DataFrame(
        {
            "PMID": pd.array([30000001, None, 30000002, 30000001], dtype="Int64"),
            "PMC ID": pd.Categorical(["PMC7000001", None, None, "pmc7000001"]),
            "DOI link": arrow_strings([None, "https://doi.org/10.1000/abc.3", None, None]).array,
            7: pd.array([b"x", 1, "y", None], dtype=object),
        },
        index=index,
    )


@pytest.mark.parametrize("mode", ["sync", "async on its own result"])
@pytest.mark.parametrize("method", [*METHODS, "summary"])
async def test_no_method_mutates_its_input(world: FakeUpstream, method: str, mode: str) -> None:
    df = awkward_frame()
    if mode != "sync" and method != "summary":
        # A re-run reads (and must not write) the previous step's columns and Blobs.
        df = await call_async("list_files" if method == "files" else method, df, world)
    before = copy.deepcopy(df)
    if method == "summary":
        out = lit(df).summary() if mode == "sync" else await lit(df).summary_async()
    elif mode == "sync":
        out = call(method, df, world)  # the sync face inside a running loop, as in Jupyter
    else:
        out = await call_async(method, df, world)
    pd.testing.assert_frame_equal(df, before, check_exact=True)
    assert out is not df
    assert list(df.columns) == list(before.columns)
    if method not in ("files", "summary"):
        pd.testing.assert_index_equal(out.index, before.index)
        untouched = [c for c in before.columns if c not in ("pmid", "pmcid", "doi", "bookid")]
        pd.testing.assert_frame_equal(out[untouched], before[untouched])


# -- run() again on its own result ----------------------------------------------------------------


def test_run_again_keeps_finished_rows_and_works_only_the_abandoned(world: FakeUpstream) -> None:
    world.fail_next(EBI, f"{REST}/PMC7000002/", *[FakeResponse(503, b"busy")] * 3)
    df = by_pmcid().to_frame().set_axis(pd.Index([5, 5, 1, 0], name="key"))
    steps = ("resolve", "bodies", "files")
    first = call("run", df, world, steps=steps)
    assert first["body_error"].map(is_abandoned).tolist() == [True, False, False, False]
    world.reset_log()

    again = call("run", first, world, steps=steps)
    assert [r.path for r in world.requests()] == [f"{REST}/PMC7000002/fullTextXML"]
    assert again.loc[:, "body_error"].isna().all()
    assert again.iloc[0]["body_source"] == "europe_pmc"
    pd.testing.assert_frame_equal(again.iloc[1:], first.iloc[1:])  # finished rows kept as is
    assert again.iloc[1]["body"] is first.iloc[1]["body"]
    world.reset_log()

    # Nothing abandoned is left; a step not run before works every row, the others none.
    more = call("run", again, world, steps=(*steps, "related"))
    assert not world.requests(EBI) and not world.requests(NCBI) and not world.requests(FILES)
    pd.testing.assert_frame_equal(more[list(again.columns)], again)
    assert_dtypes(more, STEP_DTYPES["related"])
    world.reset_log()
    last = call("run", more, world, steps=(*steps, "related"))
    assert world.count() == 0
    pd.testing.assert_frame_equal(last, more)


def test_run_again_after_an_abandoned_resolution_fetches_the_newly_resolved_rows(
    world: FakeUpstream,
) -> None:
    world.fail_next(NCBI, IDCONV, *[FakeResponse(503, b"busy")] * 3)
    df = pd.DataFrame({"PMID": ["30000001", "30000002"]})
    first = call("run", df, world, steps=("resolve", "bodies"))
    assert first["resolve_error"].map(is_abandoned).all()
    again = call("run", first, world, steps=("resolve", "bodies"))
    assert again["pmcid"].tolist() == ["PMC7000001", "PMC7000002"]
    assert cells(again["body_source"]) == ["europe_pmc", "europe_pmc"]


def test_a_step_after_an_abandoned_resolution_is_abandoned_until_the_ids_are_resolved(
    world: FakeUpstream,
) -> None:
    world.fail_next(NCBI, IDCONV, *[FakeResponse(503, b"busy")] * 3)
    df = pd.DataFrame({"PMID": ["30000001", "30000002"]})
    first = call("fetch_bodies", df, world)
    assert first["resolve_error"].map(is_abandoned).all()
    body_errors = cells(first["body_error"])
    # Nothing found, but only because the PMCIDs were never learnt: abandoned, not absent.
    assert all(
        isinstance(e, str) and e.startswith("abandoned: ids not resolved") for e in body_errors
    )
    again = call("fetch_bodies", call("resolve", first, world), world)
    assert cells(again["pmcid"]) == ["PMC7000001", "PMC7000002"]
    assert cells(again["body_source"]) == ["europe_pmc", "europe_pmc"]
    assert cells(again["body_error"]) == [None, None]


def test_a_step_that_finds_something_despite_an_abandoned_resolution_is_partial(
    world: FakeUpstream,
) -> None:
    world.fail_next(NCBI, IDCONV, *[FakeResponse(503, b"busy")] * 3)
    df = pd.DataFrame({"PMCID": ["PMC7000001"], "PMID": ["30000001"]})
    out = call("fetch_bodies", df, world)
    assert is_abandoned(cells(out["resolve_error"])[0])
    assert cells(out["body_source"]) == ["europe_pmc"]  # the PMCID it had served a body ...
    # ... but an id the resolution would have added might have served a better one: the
    # row keeps the body and says so, and a re-run once the ids are resolved redoes it.
    error = cells(out["body_error"])[0]
    assert isinstance(error, str) and error.startswith("partial: resolve abandoned: "), error
    assert is_abandoned(error)
    again = call("fetch_bodies", call("resolve", out, world), world)
    assert cells(again["body_source"]) == ["europe_pmc"]
    assert cells(again["body_error"]) == [None]


def test_a_files_column_of_the_callers_own_is_not_taken_for_a_listing(
    world: FakeUpstream,
) -> None:
    df = pd.DataFrame({"pmcid": ["PMC7000001"], "files": ["a.pdf; s1.csv"]})
    with pytest.warns(UserWarning, match="'files' already in the frame are replaced"):
        long = call("files", df, world)
    assert len(long) > 0 and set(long["source"]) == {"static"}
    listed = call("list_files", df.drop(columns="files"), world)
    again = call("files", listed, world)  # listed before (files_error): no new listing
    pd.testing.assert_frame_equal(again, long)
