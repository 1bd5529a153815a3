"""Saving a result frame: ``df.lit.to_parquet`` / ``litfetch_df.read_parquet`` and ``to_csv``.

A frame made by a real pipeline run (every step, on the synthetic world of
``tests/fakes/world.py``) goes to Parquet and back with every added column
equal: bodies as bytes with their file reference (or paths, with
``out_dir``), file-sets and relations as the same values, the index, the
nullable dtypes and the session settings in ``attrs``. CSV flattens to
plain columns whose ids read back as text.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq
import pytest

import litfetch_df
from litfetch_df import Blob, File, FileKind, Related, Session
from litfetch_df.frame.io.cells import FileSet, Relations
from litfetch_df.frame.io.parquet import METADATA_KEY
from tests.cli.support import ARTICLES
from tests.conftest import FAST_RETRY
from tests.fake_upstream import FakeUpstream
from tests.fakes.world import World

STEPS = ("resolve", "bodies", "files", "licences", "related")
ADDED = (
    "pmid", "pmcid", "doi", "bookid", "resolve_error", "body", "body_source",
    "body_media_type", "body_size", "body_error", "files", "n_files", "files_error",
    "licence", "licence_family", "access", "oa_status", "licence_basis", "licence_error", "related",
    "n_related", "preprint_doi", "published_doi", "related_error",
)  # fmt: skip


# A PMC OA article with supplementary files, a Europe PMC one, a DOI-only one with a
# preprint (tests/cli/support.py), one the world does not know, and a duplicate row.
FRAME = pd.DataFrame(
    {
        "PMID": ["30000001", "30000002", None, "39999999", "30000001"],
        "DOI": [None, None, "10.5555/xyz-9", None, None],
        "Title": ["One", "Two", "Three", "Unknown", "One again"],
    },
    index=pd.Index([f"r{i}" for i in range(5)], name="row"),
    dtype="string",
)


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    World(ARTICLES).install(fake)
    yield fake


async def _run(fake: FakeUpstream, **kwargs: Any) -> pd.DataFrame:
    session = Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact="me@x.org")
    return await FRAME.lit.run_async(STEPS, session=session, progress=False, **kwargs)


async def test_a_pipeline_frame_round_trips_through_parquet(
    world: FakeUpstream, tmp_path: Path
) -> None:
    out = await _run(world)
    assert set(ADDED) <= set(out.columns)
    # The run found what the round trip must carry: bodies, supplementary files, relations.
    assert any(isinstance(b, Blob) for b in out["body"])
    kinds = {f.kind for cell in out["files"] if isinstance(cell, tuple) for f in cell}
    assert kinds == {FileKind.BODY, FileKind.SUPPLEMENTARY}
    assert any(isinstance(c, tuple) and c for c in out["related"])
    before = out.copy()

    path = tmp_path / "articles.parquet"
    out.lit.to_parquet(path)
    pd.testing.assert_frame_equal(out, before)  # writing never changes the frame
    back = litfetch_df.read_parquet(path)

    pd.testing.assert_frame_equal(back, out)
    for column in ADDED:
        assert back[column].tolist() == out[column].tolist(), column
    assert back.attrs == out.attrs
    cells = [c for c in back["files"] if c is not None]
    assert cells and all(isinstance(c, FileSet) for c in cells)
    assert all(isinstance(c, Relations) for c in back["related"] if c is not None)
    blob = next(b for b in back["body"] if isinstance(b, Blob))
    assert isinstance(blob.file, File) and blob.content.startswith(b"<")
    # The schema is named in the file for other readers.
    meta = json.loads(pq.read_schema(path).metadata[METADATA_KEY])
    assert meta["columns"] == {"body": "blob", "files": "files", "related": "related"}


async def test_bodies_written_to_out_dir_round_trip_as_paths(
    world: FakeUpstream, tmp_path: Path
) -> None:
    out = await _run(world, out_dir=tmp_path / "bodies")
    assert "body" not in out.columns and out["body_path"].notna().any()
    out.lit.to_parquet(tmp_path / "a.parquet")
    back = litfetch_df.read_parquet(tmp_path / "a.parquet")
    pd.testing.assert_frame_equal(back, out)
    assert all(Path(p).is_file() for p in back["body_path"].dropna())


def test_a_frame_with_no_results_round_trips(tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {
            "doi": pd.array(["10.1/a", None], dtype="string"),
            "body": pd.Series([None, None], dtype=object),
            "files": pd.Series([FileSet(), None], dtype=object),
            "related": pd.Series([Relations(), Relations()], dtype=object),
            "n_files": pd.array([0, None], dtype="Int64"),
        }
    )
    frame.lit.to_parquet(tmp_path / "e.parquet")
    back = litfetch_df.read_parquet(tmp_path / "e.parquet")
    pd.testing.assert_frame_equal(back, frame)
    assert back["files"].tolist() == [(), None]


def test_keys_never_reach_a_saved_file(tmp_path: Path) -> None:
    frame = pd.DataFrame({"doi": ["10.1/a"]})
    frame.attrs = {
        "litfetch_df": {"contact": "me@x.org", "offline": False, "api_key": "SEKRIT-KEY"},
        "mine": "kept",
    }
    frame.lit.to_parquet(tmp_path / "k.parquet")
    assert b"SEKRIT-KEY" not in (tmp_path / "k.parquet").read_bytes()
    back = litfetch_df.read_parquet(tmp_path / "k.parquet")
    assert back.attrs["mine"] == "kept"
    assert back.attrs["litfetch_df"]["contact"] == "me@x.org"


def test_reading_back_raises_no_warning_even_as_errors(tmp_path: Path) -> None:
    # A caller running with warnings as errors reads its own file back on every supported
    # pandas/pyarrow pair, including pandas 2.2.0 with pyarrow 14, whose conversion warns
    # (the project-wide filter in pyproject.toml is reset here, so this checks the library).
    frame = pd.DataFrame({"doi": pd.array(["10.1/a", None], dtype="string"), "n": [1, 2]})
    frame.lit.to_parquet(tmp_path / "w.parquet")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = litfetch_df.read_parquet(tmp_path / "w.parquet")
        table = litfetch_df.read_table(tmp_path / "w.parquet")
    pd.testing.assert_frame_equal(back, frame)
    assert table["doi"].tolist() == ["10.1/a", pd.NA] and table["n"].tolist() == ["1", "2"]


async def test_csv_flattens_and_ids_read_back_as_text(world: FakeUpstream, tmp_path: Path) -> None:
    out = await _run(world)
    path = tmp_path / "articles.csv"
    out.lit.to_csv(path)
    text = path.read_text(encoding="utf-8")
    assert "Blob(" not in text and "File(" not in text and "ArticleIds(" not in text
    back = litfetch_df.read_table(path)
    assert "body" not in back.columns
    assert list(back.index) == list(range(len(out)))
    for column in ("pmid", "pmcid", "doi", "body_source", "licence"):
        expected = [None if pd.isna(v) else str(v) for v in out[column]]
        assert [None if pd.isna(v) else v for v in back[column]] == expected, column
    assert not any(str(v).endswith(".0") for v in back["pmid"].dropna())
    # File-sets become their references; relations "relation:doi".
    i = next(i for i, c in enumerate(out["files"]) if isinstance(c, tuple) and c)
    assert back["files"].iloc[i].split("; ")[0] == (out["files"].iloc[i][0].uri)
    j = next(j for j, c in enumerate(out["related"]) if isinstance(c, tuple) and c)
    first: Related = out["related"].iloc[j][0]
    assert back["related"].iloc[j].startswith(f"{first.relation.value}:{first.ids.doi}")


def test_csv_writes_float_id_columns_as_whole_numbers(tmp_path: Path) -> None:
    frame = pd.DataFrame({"PMID": [21810267.0, None], "Title": ["a", "b"]})
    frame.lit.to_csv(tmp_path / "f.csv")
    assert (tmp_path / "f.csv").read_text().splitlines()[1] == "21810267,a"
    assert frame["PMID"].dtype == "float64"  # the caller's frame is untouched
