"""``litfetch-df text``: a table to a text corpus in Parquet, fetching bodies when needed."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import litfetch_df as lf
from litfetch_df.frame.fulltext import TEXT_COLUMNS
from litfetch_df.frame.text_long import LONG_COLUMNS
from tests.cli.support import one_line_error, run
from tests.fake_upstream import FakeUpstream

pytest.importorskip("pyarrow")


def test_an_export_becomes_a_corpus_with_long_parts(
    world: FakeUpstream, export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "corpus.parquet"
    code = run(
        ["text", str(export), "-o", str(out), "--long", "sections,references", "--no-progress"],
        world,
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    wide = lf.read_parquet(out)
    assert list(wide["Title"]) == ["One", "Two", "Three"]  # every row, in order
    assert set(TEXT_COLUMNS) <= set(wide.columns) and "body" not in wide.columns
    read = wide["text_format"].notna()
    assert read.sum() >= 2 and (wide.loc[read, "n_paragraphs"] > 0).all()
    assert pd.isna(wide.loc[2, "text_format"])  # the closed article has no body: NA
    sections = lf.read_parquet(tmp_path / "corpus.sections.parquet")
    assert list(sections.columns) == list(LONG_COLUMNS["sections"])
    assert set(sections.index) <= set(wide.index[read]) and len(sections) > 0
    assert (tmp_path / "corpus.references.parquet").exists()
    assert "3 rows:" in captured.out


def test_a_saved_run_with_bodies_is_read_without_a_request(
    world: FakeUpstream, export: Path, tmp_path: Path
) -> None:
    saved = tmp_path / "run.parquet"
    bodies = ["--steps", "resolve,bodies", "--bodies-dir", str(tmp_path / "bodies")]
    assert run(["run", str(export), "-o", str(saved), *bodies, "--no-progress"], world) == 0
    before = world.count()
    out = tmp_path / "text.parquet"
    assert run(["text", str(saved), "-o", str(out), "-q"], world) == 0
    assert world.count() == before
    assert lf.read_parquet(out)["text_format"].notna().sum() >= 2
    # Saved without its bodies, a fetched row says where its text went, never a silent NA.
    assert run(["run", str(export), "-o", str(saved), "--steps", "bodies", "-q"], world) == 0
    assert run(["text", str(saved), "-o", str(out), "-q"], world) == 0
    errors = lf.read_parquet(out)["text_error"].dropna()
    assert len(errors) >= 1 and errors.str.startswith("no body bytes in the frame").all()


def test_text_writes_only_parquet_and_names_bad_parts(
    export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["text", str(export), "-o", str(tmp_path / "x.csv")]) == 2
    one_line_error(capsys.readouterr().err, "must end in .parquet")
    assert run(["text", str(export), "-o", str(tmp_path / "x.parquet"), "--long", "words"]) == 2
    assert "unknown part" in capsys.readouterr().err
