"""``out_dir`` as an fsspec URL (``memory://``, ``file://``) on the pandas accessor.

Bodies and files land under the same names as on a local disk, the path
cells hold their URLs, and a file appears whole or not at all.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

fsspec = pytest.importorskip("fsspec")

import litfetch_df.frame  # noqa: E402  (registers .lit)
from litfetch_df import Blob, Session  # noqa: E402
from litfetch_df.frame.io.outdir import OutDir  # noqa: E402
from litfetch_df.frame.io.outputs import open_out  # noqa: E402
from litfetch_df.frame.io.urlout import UrlOutDir, is_url  # noqa: E402
from tests.cli.support import ARTICLES  # noqa: E402
from tests.conftest import FAST_RETRY  # noqa: E402
from tests.fake_upstream import FakeUpstream  # noqa: E402
from tests.fakes.world import World  # noqa: E402

assert litfetch_df.frame

FRAME = pd.DataFrame(
    {
        "PMID": ["30000001", "30000002", None, "30000001"],
        "DOI": [None, None, "10.5555/xyz-9", None],
    },
    dtype="string",
)


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    World(ARTICLES).install(fake)
    yield fake


@pytest.fixture
def memory_url() -> Iterator[str]:
    root = f"memory://litfetch-test-{uuid.uuid4().hex[:8]}"
    yield root
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


def _session(fake: FakeUpstream) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact="me@x.org")


async def _run(fake: FakeUpstream, steps: tuple[str, ...], **kwargs: Any) -> pd.DataFrame:
    return await FRAME.lit.run_async(steps, session=_session(fake), progress=False, **kwargs)


def _names(url: str) -> list[str]:
    fs, path = fsspec.core.url_to_fs(url)
    return sorted(str(p)[len(path.rstrip("/")) + 1 :] for p in fs.find(path))


STEPS = ("resolve", "bodies", "licences")


async def test_bodies_go_to_a_memory_url_under_the_local_names(
    world: FakeUpstream, memory_url: str, tmp_path: Path
) -> None:
    in_memory = await _run(world, STEPS)
    on_disk = await _run(world, STEPS, out_dir=tmp_path)
    remote = await _run(world, STEPS, out_dir=memory_url + "/bodies")
    paths = remote["body_path"].dropna().tolist()
    assert paths and all(p.startswith(memory_url + "/bodies/") for p in paths)
    # The same names as on the local disk, and the bytes of the in-memory run.
    assert [p.rsplit("/", 1)[1] for p in paths] == [
        Path(p).name for p in on_disk["body_path"].dropna()
    ]
    blobs = [b for b in in_memory["body"] if isinstance(b, Blob)]
    assert [fsspec.open(p, "rb").open().read() for p in paths] == [b.content for b in blobs]
    assert not [n for n in _names(memory_url) if n.endswith(".part")]
    # The licences step read the bodies it wrote: the same terms as in memory.
    columns = ["licence", "access", "licence_basis", "licence_error"]
    pd.testing.assert_frame_equal(remote[columns], in_memory[columns])


async def test_licences_read_bodies_back_from_a_url(world: FakeUpstream, memory_url: str) -> None:
    written = await _run(world, ("resolve", "bodies"), out_dir=memory_url)
    # A later call: the bytes are no longer in the run's scratch, only at the URLs.
    later = await written.lit.licences_async(session=_session(world), progress=False)
    reference = await (await _run(world, ("resolve", "bodies"))).lit.licences_async(
        session=_session(world), progress=False
    )
    pd.testing.assert_series_equal(later["licence"], reference["licence"])
    assert later["licence_basis"].eq("artifact").any()


async def test_files_download_to_a_memory_url(world: FakeUpstream, memory_url: str) -> None:
    long = await FRAME.lit.files_async(session=_session(world), progress=False)
    assert len(long) > 0
    got = await long.lit.fetch_files_async(
        memory_url + "/files", session=_session(world), progress=False
    )
    written = got.dropna(subset=["path"])
    assert len(written) > 0 and got["fetch_error"].isna().all()
    fs = fsspec.filesystem("memory")
    for path, size in zip(written["path"], written["size"], strict=True):
        assert path.startswith(memory_url + "/files/")
        assert fs.size(fsspec.core.url_to_fs(path)[1]) == size


async def test_a_file_url_is_the_local_disk(world: FakeUpstream, tmp_path: Path) -> None:
    local = await _run(world, STEPS, out_dir=tmp_path / "a")
    url = await _run(world, STEPS, out_dir=(tmp_path / "b").as_uri())
    names = [Path(p) for p in url["body_path"].dropna()]
    assert names and all(p.is_file() and p.parent == (tmp_path / "b").resolve() for p in names)
    assert [p.name for p in names] == [Path(p).name for p in local["body_path"].dropna()]
    assert isinstance(open_out((tmp_path / "c").as_uri()), OutDir)
    assert not is_url((tmp_path / "d").as_uri()) and is_url("s3://bucket/x")
    assert not is_url("C:\\data\\x")


def test_a_failed_put_leaves_nothing_under_the_final_name(
    memory_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = UrlOutDir(memory_url)
    location = out.locate("a.xml")
    out.write_to(location, b"one")
    fs = fsspec.filesystem("memory")

    def broken(path: str, value: bytes, **kwargs: Any) -> None:
        raise OSError("network down")

    monkeypatch.setattr(fs, "pipe_file", broken)
    with pytest.raises(OSError, match="network down"):
        out.write_to(location, b"two")
    assert fsspec.open(location, "rb").open().read() == b"one"


def test_a_filesystem_with_renames_writes_a_temporary_name_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # local:// is fsspec's view of the local disk: not an object store, so write then move.
    out = UrlOutDir(f"local://{tmp_path}")
    location = out.locate("a.xml")
    out.write_to(location, b"one")
    assert (tmp_path / "a.xml").read_bytes() == b"one"
    moves: list[tuple[str, str]] = []
    fs = out._fs

    def broken_move(src: str, dst: str, **kwargs: Any) -> None:
        moves.append((src, dst))
        raise OSError("rename refused")

    monkeypatch.setattr(fs, "mv", broken_move)
    with pytest.raises(OSError, match="rename refused"):
        out.write_to(location, b"two")
    assert (tmp_path / "a.xml").read_bytes() == b"one"
    ((src, _),) = moves
    assert Path(src).name.startswith(".a.xml.") and src.endswith(".part")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.xml"]  # the temporary one removed


def test_without_fsspec_a_url_fails_at_once_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "fsspec", None)
    monkeypatch.setitem(sys.modules, "fsspec.core", None)
    with pytest.raises(ImportError, match="pip install fsspec"):
        open_out("memory://nowhere")
