"""Outputs of ``ddf.lit`` that leave the process: Parquet datasets and ``out_dir`` URLs.

On Dask's synchronous and threaded schedulers (one process, no cluster): the
``memory://`` filesystem is per process, and what is tested here is the
writing, not the pacing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

dask = pytest.importorskip("dask")
dd = pytest.importorskip("dask.dataframe")
fsspec = pytest.importorskip("fsspec")
pytest.importorskip("pyarrow")

import litfetch_df  # noqa: E402
import litfetch_df.dask  # noqa: E402  (registers ddf.lit)
from litfetch_df import Blob  # noqa: E402
from tests.dask_support import session_factory  # noqa: E402
from tests.fake_upstream import FakeUpstream  # noqa: E402
from tests.fakes.world import World  # noqa: E402

CONTACT = "dask-test@example.org"


@pytest.fixture
def world(fake: FakeUpstream) -> World:
    world = World.from_corpus(12, seed=5)
    world.install(fake)
    return world


@pytest.fixture
def memory_url() -> Iterator[str]:
    root = f"memory://litfetch-dask-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _table(world: World) -> pd.DataFrame:
    ids = [(a.pmid, a.doi) for a in world.articles]
    frame = pd.DataFrame(ids + ids[:3], columns=["pmid", "doi"], dtype=object)
    frame.index = pd.Index([f"row-{i:02d}" for i in range(len(frame))], name="label")
    return frame


def _result(fake: FakeUpstream, world: World, **kwargs: Any) -> Any:
    ddf = dd.from_pandas(_table(world), npartitions=3, sort=False)
    return ddf.lit.run(
        ["resolve", "bodies", "files", "licences", "related"],
        session_factory=session_factory(fake.port),
        contact=CONTACT,
        **kwargs,
    )


@pytest.mark.parametrize("where", ["local", "memory"])
def test_a_result_round_trips_through_a_parquet_dataset(
    fake: FakeUpstream, world: World, tmp_path: Path, memory_url: str, where: str
) -> None:
    with dask.config.set(scheduler="sync"):
        lazy = _result(fake, world).persist()
        expected = lazy.compute()
        folder = str(tmp_path / "out") if where == "local" else memory_url + "/out"
        written = lazy.lit.to_parquet(folder)
        back = litfetch_df.dask.read_parquet(folder)
        got = back.compute()
    assert len(written) == lazy.npartitions
    assert back.npartitions == lazy.npartitions
    assert any(isinstance(b, Blob) for b in expected["body"])  # values worth carrying
    assert list(back.columns) == list(lazy.columns)
    assert list(back._meta.dtypes) == list(lazy._meta.dtypes)
    pd.testing.assert_frame_equal(got, expected)
    if where == "local":  # and the pandas reader takes the whole directory
        pd.testing.assert_frame_equal(litfetch_df.read_parquet(folder), expected)


def test_a_shorter_dataset_replaces_a_longer_one(
    fake: FakeUpstream, world: World, tmp_path: Path
) -> None:
    folder = tmp_path / "out"
    with dask.config.set(scheduler="sync"):
        table = dd.from_pandas(_table(world), npartitions=4, sort=False)
        table.lit.to_parquet(folder)
        shorter = table.repartition(npartitions=2)
        shorter.lit.to_parquet(folder)
        back = litfetch_df.dask.read_parquet(folder).compute()
        expected = shorter.compute()
    assert sorted(p.name for p in folder.iterdir()) == ["part.00000.parquet", "part.00001.parquet"]
    pd.testing.assert_frame_equal(back, expected)


@pytest.mark.parametrize("scheme", ["memory", "file"])
def test_bodies_and_files_go_to_an_out_dir_url(
    fake: FakeUpstream, world: World, tmp_path: Path, memory_url: str, scheme: str
) -> None:
    base = memory_url if scheme == "memory" else (tmp_path / "out").as_uri()
    with dask.config.set(scheduler="threads"):
        ddf = dd.from_pandas(_table(world), npartitions=3, sort=False)
        sf = session_factory(fake.port)
        got = ddf.lit.fetch_bodies(
            session_factory=sf, contact=CONTACT, out_dir=base + "/bodies"
        ).compute()
        long = ddf.lit.files(session_factory=sf, contact=CONTACT)
        files = long.lit.fetch_files(base + "/files", session_factory=sf).compute()
        expected = _table(world).lit.fetch_bodies(session=sf(contact=CONTACT))
    paths = got["body_path"].dropna()
    assert len(paths) == expected["body"].notna().sum() > 0
    blobs = expected.loc[paths.index, "body"]
    for path, blob in zip(paths, blobs, strict=True):
        if scheme == "memory":
            assert path.startswith(base + "/bodies/")
            data = fsspec.open(path, "rb").open().read()
        else:
            assert Path(path).parent == (tmp_path / "out" / "bodies").resolve()
            data = Path(path).read_bytes()
        assert data == blob.content
    done = files.dropna(subset=["path"])
    assert len(done) > 0 and done["fetch_error"].isna().all()
    # A link the world does not serve says so (issue 26): never a blank row.
    missing = files.loc[files["path"].isna(), "fetch_error"]
    assert missing.str.match(r"HTTP \d{3}").all(), missing.tolist()
    for path, size in zip(done["path"], done["size"], strict=True):
        if scheme == "memory":
            assert fsspec.filesystem("memory").size(fsspec.core.url_to_fs(path)[1]) == size
        else:
            assert Path(path).stat().st_size == size
