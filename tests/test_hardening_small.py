"""Issue 14, the small hardening items: ids, XML encodings and shapes, file modes, keys, threads."""

from __future__ import annotations

import os
import stat
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import litfetch_df.frame  # registers .lit
from litfetch_df import JATS_XML, ArticleIds, Blob, File, FileKind, Http, Session
from litfetch_df.frame.engine.options import Options
from litfetch_df.frame.io.outdir import OutDir, remove_leftovers, write_atomic
from litfetch_df.ids import parse_bookid, parse_doi, parse_pmid
from litfetch_df.safexml.parse import XmlError, parse_xml, root_name, safe_root_name
from litfetch_df.sources.common import usable_credential
from litfetch_df.sources.elsevier import is_full_text
from litfetch_df.store.atomic import PartFile
from litfetch_df.store.cache import ResponseCache

assert litfetch_df.frame


# -- ids ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doi", ["10.1000/../../x", "10.1000/./x", "10.1000/a/..", "10.1000/a//b", "10.1000/a/"]
)
def test_dois_with_dot_or_empty_segments_are_invalid(doi: str) -> None:
    with pytest.raises(ValueError, match="segment"):
        parse_doi(doi)


def test_ordinary_dois_with_dots_still_parse() -> None:
    assert parse_doi("10.1000/a.b..c/d...") == "10.1000/a.b..c/d..."


def test_nbk0_and_absurd_pmids_are_invalid() -> None:
    for bad in ("NBK0", "NBK000"):
        with pytest.raises(ValueError):
            parse_bookid(bad)
    assert parse_bookid("NBK1116") == "NBK1116"
    with pytest.raises(ValueError, match="digits"):
        parse_pmid("12345678901234567890123")
    with pytest.raises(ValueError, match="digits"):
        parse_pmid("1000000000")
    assert parse_pmid("999999999") == "999999999"
    assert parse_pmid("0000041000000") == "41000000"  # leading zeros do not count


class _Echo:
    name = "echo"
    requires = frozenset({"pmcid"})

    async def fetch(
        self, article_ids: ArticleIds, *, credentials: object = None, http: Http
    ) -> Blob | None:
        assert article_ids.pmcid is not None
        return Blob(File(FileKind.BODY, "echo", JATS_XML), b"<article/>")


async def _same(batch: Sequence[ArticleIds], http: Http) -> tuple[Sequence[ArticleIds], set[int]]:
    return list(batch), set()


def test_invalid_ids_reach_every_steps_error_column() -> None:
    df = pd.DataFrame({"pmcid": ["PMC1", "PMC2", None], "doi": ["10.1000/ok", "nope", "bad"]})
    out = df.lit.fetch_bodies(
        fetchers=[_Echo()], resolver=_same, progress=False, session=Session(timeout=1)
    )
    assert out["resolve_error"].tolist()[1] == "invalid doi: 'nope'"
    assert pd.isna(out["body_error"][0])
    assert out["body_error"][1] == "invalid doi: 'nope'"
    assert out["body"][1] is not None  # the row keeps what its valid ids found
    assert out["body_error"][2] == "invalid doi: 'bad'"
    # a re-run of the step keeps saying it, once
    again = out.lit.fetch_bodies(
        fetchers=[_Echo()], resolver=_same, progress=False, force=True, session=Session()
    )
    assert again["body_error"][1] == "invalid doi: 'nope'"


# -- XML ----------------------------------------------------------------------------------------

_DOC = '<?xml version="1.0" encoding="{enc}"?>\n<!-- note --><article><p>é</p></article>'


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"])
def test_wide_encodings_are_read(encoding: str) -> None:
    content = _DOC.format(enc=encoding.upper()).encode(encoding)
    assert root_name(content) == "article"
    assert safe_root_name(content) == "article"


def test_entity_declarations_are_refused_in_utf16_too() -> None:
    doc = '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE a [<!ENTITY x "y">]><a>&x;</a>'
    with pytest.raises(XmlError, match="entities"):
        parse_xml(doc.encode("utf-16"))


def test_over_deep_documents_are_refused() -> None:
    deep = b"<article>" + b"<p>" * 300 + b"</p>" * 300 + b"</article>"
    assert root_name(deep) == "article"  # the cheap look says article ...
    assert safe_root_name(deep) is None  # ... the parse refuses it


_ELS_NS = b'xmlns:ce="http://www.elsevier.com/xml/common/dtd"'
_ELS = (
    b"<full-text-retrieval-response " + _ELS_NS + b"><ce:sections><ce:para>x</ce:para>"
    b"</ce:sections></full-text-retrieval-response>"
)


def test_elsevier_bodies_must_parse_safely() -> None:
    assert is_full_text(_ELS)
    bomb = b'<!DOCTYPE full-text-retrieval-response [<!ENTITY a "aaaa">]>' + _ELS
    assert not is_full_text(bomb)
    deep = _ELS.replace(b"<ce:para>x</ce:para>", b"<x>" * 300 + b"</x>" * 300)
    assert not is_full_text(deep)
    assert not is_full_text(_ELS[:-10])  # truncated


# -- files on disk ------------------------------------------------------------------------------


def test_cache_file_is_private(tmp_path: Path) -> None:
    root = tmp_path / "cache-dir"
    cache = ResponseCache(root)
    try:
        assert stat.S_IMODE(root.stat().st_mode) == 0o700
        assert stat.S_IMODE(cache.path.stat().st_mode) == 0o600
    finally:
        cache.close()


def test_output_files_honour_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "a.xml", b"x")
        os.umask(0o077)
        write_atomic(tmp_path / "b.xml", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.xml").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.xml").stat().st_mode) == 0o600


def test_leftover_part_files_are_swept(tmp_path: Path) -> None:
    (tmp_path / "PMC1").mkdir()
    (tmp_path / ".PMC1.xml.ab12cd34.part").write_bytes(b"half")
    (tmp_path / "PMC1" / ".data.csv.00ff00ff.part").write_bytes(b"half")
    (tmp_path / "PMC1" / "keep.part").write_bytes(b"a user's own file")
    OutDir(tmp_path)
    left = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert left == ["PMC1", "PMC1/keep.part"]
    assert remove_leftovers(tmp_path / "missing") == 0


@pytest.mark.skipif(sys.platform == "win32", reason="no advisory locks: every leftover goes")
def test_a_sweep_leaves_the_part_files_of_live_writers(tmp_path: Path) -> None:
    # The partitions of a Dask run open one directory at once: each sweeps it on opening,
    # and must not take the file another one is writing.
    (tmp_path / ".dead.xml.ab12cd34.part").write_bytes(b"half")
    with PartFile(tmp_path / "live.xml") as part:
        part.fh.write(b"in progress")
        OutDir(tmp_path)
        assert [p.name for p in tmp_path.iterdir()] == [part.tmp.name]
        part.commit()
    assert [p.name for p in tmp_path.iterdir()] == ["live.xml"]
    assert (tmp_path / "live.xml").read_bytes() == b"in progress"


@pytest.mark.skipif(sys.platform == "win32", reason="no advisory locks: every leftover goes")
def test_a_sweep_while_a_writer_commits_leaves_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another partition opens the directory at the very moment this writer moves its file
    # into place: the sweep must still see a live writer's .part, not a leftover.
    swept: list[int] = []
    real_replace = os.replace

    def replace_after_a_sweep(src: Any, dst: Any) -> None:
        swept.append(remove_leftovers(tmp_path))
        real_replace(src, dst)

    with PartFile(tmp_path / "live.xml") as part:
        part.fh.write(b"whole")
        monkeypatch.setattr(os, "replace", replace_after_a_sweep)
        part.commit()
        monkeypatch.setattr(os, "replace", real_replace)
    assert swept == [0]
    assert [p.name for p in tmp_path.iterdir()] == ["live.xml"]
    assert (tmp_path / "live.xml").read_bytes() == b"whole"


# -- keys ---------------------------------------------------------------------------------------


def test_keys_with_control_characters_are_refused_without_echo() -> None:
    with pytest.raises(ValueError, match="control character") as info:
        Options(credentials={"elsevier_api_key": "abc\ndef-secret"})
    assert "secret" not in str(info.value)
    # a key read from a file with its trailing newline is fine
    assert Options(credentials={"elsevier_api_key": "abcdef\n"}).credentials


def test_sources_never_send_a_key_with_control_characters(caplog: pytest.LogCaptureFixture) -> None:
    creds: Mapping[str, object] = {"k": "abc\r\nX-Injected: 1"}
    assert usable_credential(creds, "k") is None
    assert "Injected" not in caplog.text
    assert usable_credential({"k": " abc "}, "k") == "abc"


# -- one Session, several threads -----------------------------------------------------------


class _Blocking:
    """A fetcher that holds its call open until released, so calls overlap for sure."""

    name = "blocking"
    requires = frozenset({"pmcid"})

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    async def fetch(
        self, article_ids: ArticleIds, *, credentials: object = None, http: Http
    ) -> Blob | None:
        import asyncio

        self.entered.set()
        while not self.release.is_set():
            await asyncio.sleep(0.001)
        return Blob(File(FileKind.BODY, "blocking", JATS_XML), b"<article/>")


def test_one_unopened_session_in_two_threads_at_once() -> None:
    session = Session()
    first = _Blocking()
    df = pd.DataFrame({"pmcid": ["PMC1"]})
    results: list[object] = []

    def call() -> None:
        results.append(
            df.lit.fetch_bodies(fetchers=[first], resolve=False, session=session, progress=False)
        )

    worker = threading.Thread(target=call)
    worker.start()
    try:
        assert first.entered.wait(10)
        with pytest.raises(RuntimeError, match="another"):
            df.lit.fetch_bodies(fetchers=[_Echo()], resolve=False, session=session, progress=False)
    finally:
        first.release.set()
        worker.join(10)
    (out,) = results
    assert isinstance(out, pd.DataFrame) and out["body_source"][0] == "blocking"
    # once the first call is done, the session serves the next one
    again = df.lit.fetch_bodies(fetchers=[_Echo()], resolve=False, session=session, progress=False)
    assert again["body_source"][0] == "echo"


def test_a_session_opened_by_one_call_is_never_borrowed_by_another_loop() -> None:
    # The accessor refuses a session that is already open; this is the window behind that
    # check: a second call, on its own loop, reaching the engine while the first holds it.
    import asyncio

    from litfetch_df.frame.engine import pipeline

    session = Session()
    first = _Blocking()
    df = pd.DataFrame({"pmcid": ["PMC1"]})
    config: pipeline.CallOptions = {"session": session, "progress": False}
    worker = threading.Thread(
        target=lambda: asyncio.run(
            pipeline.fetch_bodies(df, fetchers=[first], resolve=False, config=config)
        )
    )
    worker.start()
    try:
        assert first.entered.wait(10)
        with pytest.raises(RuntimeError, match="in use by another"):
            asyncio.run(pipeline.fetch_bodies(df, fetchers=[_Echo()], resolve=False, config=config))
    finally:
        first.release.set()
        worker.join(10)
    assert not session.is_open


# -- out_dir names across calls -----------------------------------------------------------------


def test_out_dir_names_are_stable_across_reruns_and_force(tmp_path: Path) -> None:
    import httpx

    from tests.conftest import mock_session

    failing = {"a": True}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host == "a.example" and failing["a"]:
            return httpx.Response(503)
        return httpx.Response(200, content=f"from {request.url.host}\n".encode())

    files = pd.DataFrame(
        {
            "pmcid": ["PMC1", "PMC1"],
            "kind": ["supplementary", "supplementary"],
            "source": ["unpaywall", "unpaywall"],
            "media_type": ["text/csv", "text/csv"],
            "filename": ["data.csv", "data.csv"],
            "uri": ["https://a.example/data.csv", "https://b.example/data.csv"],
        }
    )
    first = files.lit.fetch_files(out_dir=tmp_path, session=mock_session(handler), progress=False)
    assert str(first["fetch_error"][0]).startswith("abandoned")
    b_path = Path(first["path"][1])
    assert b_path.read_text() == "from b.example\n"
    assert b_path.name != "data.csv"  # the name in row order belongs to the first file

    failing["a"] = False
    again = first.lit.fetch_files(out_dir=tmp_path, session=mock_session(handler), progress=False)
    a_path = Path(again["path"][0])
    assert a_path.name == "data.csv" and a_path.read_text() == "from a.example\n"
    assert Path(again["path"][1]) == b_path and b_path.read_text() == "from b.example\n"

    forced = again.lit.fetch_files(
        out_dir=tmp_path, session=mock_session(handler), progress=False, force=True
    )
    assert forced["path"].tolist() == again["path"].tolist()
    assert sorted(p.name for p in (tmp_path / "PMC1").iterdir()) == sorted(
        [a_path.name, b_path.name]
    )


class _FlakyBodies:
    """Gives each article a body naming its DOI, asked of a host that fails for ``failing``."""

    name = "flaky"
    requires = frozenset({"pmcid"})

    def __init__(self, failing: set[str]) -> None:
        self.failing = failing

    def session(self) -> Session:
        import httpx

        from tests.conftest import mock_session

        def handler(request: httpx.Request) -> httpx.Response:
            doi = request.url.params["doi"]
            if doi in self.failing:
                return httpx.Response(503)
            return httpx.Response(200, content=f"<article>{doi}</article>".encode())

        return mock_session(handler)

    async def fetch(
        self, article_ids: ArticleIds, *, credentials: object = None, http: Http
    ) -> Blob | None:
        assert article_ids.doi is not None
        response = await http.get("https://bodies.example/", params={"doi": article_ids.doi})
        if response.status_code != 200:
            return None
        return Blob(File(FileKind.BODY, "flaky", JATS_XML), response.content)


@pytest.mark.parametrize("method", ["fetch_bodies", "run"])
def test_body_names_follow_row_order_not_completion(tmp_path: Path, method: str) -> None:
    df = pd.DataFrame({"pmcid": ["PMC1", "PMC1"], "doi": ["10.1000/a", "10.1000/b"]})
    fetcher = _FlakyBodies({"10.1000/a"})

    def call(frame: pd.DataFrame, **kw: object) -> pd.DataFrame:
        common: dict[str, object] = {
            "fetchers": [fetcher],
            "out_dir": tmp_path,
            "session": fetcher.session(),
            "progress": False,
        }
        if method == "run":
            return frame.lit.run(steps=("bodies",), **common, **kw)  # type: ignore[arg-type]
        return frame.lit.fetch_bodies(resolve=False, **common, **kw)  # type: ignore[arg-type]

    first = call(df)
    assert str(first["body_error"][0]).startswith("abandoned")
    b_path = Path(first["body_path"][1])
    assert b_path.name != "PMC1.xml" and b_path.name.startswith("PMC1-")
    fetcher.failing.clear()
    again = call(first)
    assert Path(again["body_path"][0]).name == "PMC1.xml"
    assert Path(again["body_path"][0]).read_bytes() == b"<article>10.1000/a</article>"
    assert b_path.read_bytes() == b"<article>10.1000/b</article>"
    forced = call(again, force=True)
    assert forced["body_path"].tolist() == again["body_path"].tolist()
