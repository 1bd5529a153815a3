"""``ddf.lit`` and ``ds.lit`` on Dask's threaded scheduler (one process, no cluster)."""

from __future__ import annotations

import pandas as pd
import pytest

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")

import litfetch_df.dask  # noqa: E402, F401  (registers ddf.lit)
from litfetch_df import Session  # noqa: E402
from tests.dask_support import session_factory  # noqa: E402
from tests.fake_upstream import FakeUpstream  # noqa: E402
from tests.fakes.world import World  # noqa: E402


@pytest.fixture
def world(fake: FakeUpstream) -> World:
    world = World.from_corpus(12, seed=3)
    world.install(fake)
    return world


def test_a_series_of_dois_resolves_as_the_pandas_one_does(fake: FakeUpstream, world: World) -> None:
    dois = pd.Series([a.doi for a in world.articles if a.doi], name="DOI", dtype=object)
    ds = dd.from_pandas(dois, npartitions=3, sort=False)
    with dask.config.set(scheduler="threads"):
        lazy = ds.lit.resolve(session_factory=session_factory(fake.port))
        got = lazy.compute()
        expected = ds.compute().lit.resolve(session=session_factory(fake.port)())
    pd.testing.assert_frame_equal(got, expected)
    assert list(lazy.columns) == list(expected.columns)


def test_summary_counts_the_whole_table(fake: FakeUpstream, world: World) -> None:
    table = pd.DataFrame({"pmid": [a.pmid for a in world.articles]}, dtype=object)
    ddf = dd.from_pandas(table, npartitions=3, sort=False)
    with dask.config.set(scheduler="threads"):
        resolved = ddf.lit.resolve(session_factory=session_factory(fake.port))
        summary = resolved.lit.summary().compute()
        expected = resolved.compute().lit.summary()
    pd.testing.assert_frame_equal(summary, expected)


def test_a_session_object_is_refused_before_anything_runs(fake: FakeUpstream) -> None:
    ddf = dd.from_pandas(pd.DataFrame({"pmid": ["1"]}), npartitions=1)
    with pytest.raises(TypeError, match="session_factory"):
        ddf.lit.resolve(session=Session())
    with pytest.raises(ValueError, match="no identifier column"):
        dd.from_pandas(pd.DataFrame({"x": [1]}), npartitions=1).lit.resolve()
    assert fake.count() == 0
