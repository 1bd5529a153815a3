"""``ddf.lit.text()`` and ``ddf.lit.text_long()`` give what the pandas methods give."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")

import litfetch_df.dask  # noqa: E402, F401  (registers ddf.lit)
from litfetch_df.frame.fulltext import TEXT_COLUMNS  # noqa: E402
from litfetch_df.frame.text_long import TEXT_PARTS  # noqa: E402
from tests.dask_support import session_factory  # noqa: E402
from tests.fake_upstream import FakeUpstream  # noqa: E402
from tests.fakes.world import World  # noqa: E402
from tests.test_frame_text import frame  # noqa: E402

CONTACT = "dask-text@example.org"


def test_a_frame_with_bodies_is_read_partition_by_partition_as_pandas_reads_it() -> None:
    df = frame()
    # Blob cells stay objects (by default Dask would turn an object column into text).
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_pandas(df, npartitions=2, sort=False)
    with dask.config.set(scheduler="sync"):
        lazy = ddf.lit.text()
        got = lazy.compute()
        assert list(lazy.columns) == list(got.columns)
        expected = df.lit.text()
        # Dask turns the caller's object text columns into its own strings; ours keep theirs.
        pd.testing.assert_frame_equal(got[list(TEXT_COLUMNS)], expected[list(TEXT_COLUMNS)])
        for part in TEXT_PARTS:
            pd.testing.assert_frame_equal(ddf.lit.text_long(part).compute(), df.lit.text_long(part))


def test_a_frame_without_bodies_has_them_fetched_first(fake: FakeUpstream, tmp_path: Path) -> None:
    world = World.from_corpus(8, seed=5)
    world.install(fake)
    table = pd.DataFrame({"pmid": [a.pmid for a in world.articles]}, dtype=object)
    with dask.config.set(scheduler="threads"):
        ddf = dd.from_pandas(table, npartitions=3, sort=False)
        sf = session_factory(fake.port)
        got = ddf.lit.text(session_factory=sf, contact=CONTACT, out_dir=tmp_path).compute()
    assert list(got.index) == list(table.index)
    read = got["text_format"].notna()
    assert read.any() and (got.loc[read, "n_paragraphs"] > 0).all()
    for path in got["text_path"].dropna():
        assert Path(path).parent == tmp_path.resolve() and Path(path).stat().st_size > 0
    # A row whose body is no text format says so; a row with no body is NA throughout.
    fetched = got["body_path"].notna()
    assert (got.loc[fetched, "text_format"].notna() | got.loc[fetched, "text_error"].notna()).all()
