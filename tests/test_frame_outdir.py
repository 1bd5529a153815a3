"""Output directories: safe names, no collisions, atomic writes, no escape for hostile input."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import litfetch_df.frame  # registers .lit
from litfetch_df import ArticleIds, File, FileKind
from litfetch_df.frame.io.outdir import (
    OutDir,
    extension_for,
    id_stem,
    safe_filename,
    safe_join,
    write_atomic,
)
from tests.fake_upstream import FakeUpstream
from tests.test_frame_pipeline import FILES, StaticFiles, install, session_for

assert litfetch_df.frame

HOSTILE_NAMES = [
    "../../x",
    "../../../etc/passwd",
    "/etc/passwd",
    "..",
    ".",
    "",
    "C:\\Windows\\system32\\x.dll",
    "..\\..\\boot.ini",
    "a/b/../../../c.txt",
    "file\x00name.pdf",
    "line\nbreak.csv",
    ".hidden",
    "CON",
    "nul.txt",
    "x" * 400 + ".pdf",
    "ünïcödé ☃.pdf",
    "name:stream.txt",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_safe_filename_is_one_plain_component(name: str) -> None:
    safe = safe_filename(name)
    assert safe and safe not in {".", ".."}
    assert "/" not in safe and "\\" not in safe and ":" not in safe and "\x00" not in safe
    assert not safe.startswith(".")
    assert len(safe) <= 120
    assert safe.split(".")[0].lower() not in {"con", "nul"}


def test_safe_filename_keeps_ordinary_names_and_extensions() -> None:
    assert safe_filename("supp_table-1.xlsx") == "supp_table-1.xlsx"
    assert safe_filename("x" * 400 + ".pdf").endswith(".pdf")
    assert safe_filename("../../x") == "x"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80))
def test_no_name_escapes_the_root(name: str) -> None:
    root = Path("/tmp/litfetch_df-outdir-root")
    target = safe_join(root, "PMC1", safe_filename(name))
    assert target.is_relative_to(root.resolve())
    assert target.parent.name == "PMC1"


@pytest.mark.parametrize(
    ("ids", "stem"),
    [
        (ArticleIds(pmcid="PMC7000001", pmid="30000001", doi="10.1000/a"), "PMC7000001"),
        (ArticleIds(bookid="NBK1116", pmid="30000001"), "NBK1116"),
        (ArticleIds(pmid="30000001", doi="10.1000/a"), "pmid-30000001"),
    ],
)
def test_id_stem_prefers_stable_ids(ids: ArticleIds, stem: str) -> None:
    assert id_stem(ids) == stem


def test_doi_stems_are_safe_and_distinct() -> None:
    a = id_stem(ArticleIds(doi="10.1000/abc.1"))
    assert a.startswith("doi-10.1000_abc.1-") and len(a.rsplit("-", 1)[1]) == 8
    assert id_stem(ArticleIds(doi="10.1000/ABC.1")) == a  # DOIs are case-insensitive
    # two DOIs that clean to the same text still get different names
    assert id_stem(ArticleIds(doi="10.1000/a:b")) != id_stem(ArticleIds(doi="10.1000/a;b"))
    hostile = id_stem(ArticleIds(doi="10.1000/../../../etc/passwd"))
    assert "/" not in hostile and not hostile.startswith(".")
    # ids that bypassed the parsers cannot inject path parts either
    odd = id_stem(ArticleIds(pmcid="../../x", pmid="1/2"))
    assert "/" not in odd and ".." not in odd


@pytest.mark.parametrize(
    ("media_type", "filename", "ext"),
    [
        ("application/jats+xml", None, ".xml"),
        ("application/vnd.elsevier+xml", None, ".xml"),
        ("application/pdf", None, ".pdf"),
        ("application/pdf; charset=binary", None, ".pdf"),
        ("image/jpeg", None, ".jpg"),
        (None, "table.xlsx", ".xlsx"),
        (None, None, ".bin"),
        ("application/x-unknown-thing", "../x.../", ".bin"),
    ],
)
def test_extension_for(media_type: str | None, filename: str | None, ext: str) -> None:
    assert extension_for(media_type, filename) == ext


def test_body_paths_are_collision_free_and_deterministic(tmp_path: Path) -> None:
    out = OutDir(tmp_path)
    a = out.body_path(ArticleIds(pmcid="PMC7000001"), "application/jats+xml")
    assert a == (tmp_path / "PMC7000001.xml").resolve()
    assert out.body_path(ArticleIds(pmcid="PMC7000001"), "application/jats+xml") == a
    # a different bundle that names the same stem gets its own file
    b = out.body_path(ArticleIds(pmcid="PMC7000001", doi="10.1000/x"), "application/jats+xml")
    assert b != a and b.parent == a.parent and b.name.startswith("PMC7000001-")
    # a fresh run names the same thing the same way
    assert OutDir(tmp_path).body_path(ArticleIds(pmcid="PMC7000001"), "application/jats+xml") == a


def test_a_bundle_whose_resolution_was_given_up_leaves_the_name_to_its_resolved_twin(
    tmp_path: Path,
) -> None:
    jats = "application/jats+xml"
    half = ArticleIds(pmcid="PMC7000001")  # its DOI and PMID were never learnt
    whole = ArticleIds(pmcid="PMC7000001", pmid="30000001", doi="10.1000/x")
    other = ArticleIds(pmcid="PMC7000001", pmid="30000009")  # contradicts `whole`

    # Strictly by row order, the half-resolved first row would keep the plain name and
    # its resolved twin get a hashed one: a name a run without faults never gives it.
    out = OutDir(tmp_path)
    out.reserve_bodies([half, whole, other], provisional=[0])
    assert out.body_path(whole, jats).name == "PMC7000001.xml"
    # The provisional bundle moves aside (its own file, until it is resolved) ...
    assert out.body_path(half, jats).name.startswith("PMC7000001-")
    # ... and a bundle contradicting the owner is another article: its own name.
    assert out.body_path(other, jats).name.startswith("PMC7000001-")
    assert len({out.body_path(b, jats) for b in (half, whole, other)}) == 3
    # The names a fully resolved frame gives, whatever the rows resolved late.
    clean = OutDir(tmp_path)
    clean.reserve_bodies([whole, whole, other])
    assert clean.body_path(whole, jats) == out.body_path(whole, jats)
    assert clean.body_path(other, jats) == out.body_path(other, jats)

    # Before a bundle it contradicts, a provisional one keeps the name, as by row order.
    known = ArticleIds(pmcid="PMC7000001", pmid="30000001")
    first = OutDir(tmp_path)
    first.reserve_bodies([known, other], provisional=[0])
    assert first.body_path(known, jats).name == "PMC7000001.xml"
    assert first.body_path(other, jats).name.startswith("PMC7000001-")
    # Nor does a bundle holding fewer ids take it over: the provisional one cannot become it.
    book, chapter = ArticleIds(bookid="NBK100611"), ArticleIds(bookid="NBK100611", pmid="3")
    shelf = OutDir(tmp_path)
    shelf.reserve_bodies([chapter, book], provisional=[0])
    assert shelf.body_path(chapter, jats).name == "NBK100611.xml"
    assert shelf.body_path(book, jats).name.startswith("NBK100611-")


def test_a_body_held_from_an_earlier_run_is_never_written_over_by_another_article(
    tmp_path: Path,
) -> None:
    jats = "application/jats+xml"
    mine = ArticleIds(pmcid="PMC7000001", pmid="30000001")
    other = ArticleIds(pmcid="PMC7000001", pmid="30000009")
    kept = str((tmp_path / "PMC7000001.xml").resolve())
    # An earlier call wrote `mine` at the plain name; this one redoes `other`, which now
    # comes first in row order (its resolution came late) and would take that name.
    out = OutDir(tmp_path)
    out.reserve_bodies([other, mine])
    out.hold_body(mine, kept)
    assert str(out.body_path(other, jats)) != kept
    # The same article may still write there (a re-run replacing a lower rung's body).
    again = OutDir(tmp_path)
    again.reserve_bodies([mine, other])
    again.hold_body(mine, kept)
    assert str(again.body_path(mine, jats)) == kept


def test_file_paths_for_hostile_upstream_names(tmp_path: Path) -> None:
    out = OutDir(tmp_path)
    ids = ArticleIds(pmcid="PMC7000001")
    seen = set()
    for i, name in enumerate(HOSTILE_NAMES):
        f = File(FileKind.SUPPLEMENTARY, "s", None, f"https://{FILES}/get/{i}", name)
        path = out.file_path(ids, f)
        assert path.is_relative_to(tmp_path.resolve() / "PMC7000001")
        seen.add(path)
    assert len(seen) == len(HOSTILE_NAMES)  # no two files share a path


def test_file_without_a_name_is_named_from_its_uri_or_source(tmp_path: Path) -> None:
    out = OutDir(tmp_path)
    ids = ArticleIds(doi="10.1000/abc")
    from_uri = out.file_path(
        ids, File(FileKind.BODY, "unpaywall", "application/pdf", "https://h/x/paper.pdf?dl=1")
    )
    assert from_uri.name == "paper.pdf"
    bare = out.file_path(ids, File(FileKind.BODY, "s2", "application/pdf", "https://h/"))
    assert bare.name == "h.pdf" or bare.name == "s2-body.pdf"


def test_a_planted_symlink_cannot_redirect_writes(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "out"
    root.mkdir()
    os.symlink(outside, root / "PMC7000001")
    out = OutDir(root)
    with pytest.raises(ValueError, match="outside"):
        out.file_path(ArticleIds(pmcid="PMC7000001"), File(FileKind.BODY, "s", None, None, "a.pdf"))
    with pytest.raises(ValueError):
        safe_join(root, "..", "x")
    with pytest.raises(ValueError):
        safe_join(root, "")


def test_write_atomic_leaves_no_partial_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "a" / "b.xml"
    write_atomic(target, b"one")
    assert target.read_bytes() == b"one"
    write_atomic(target, b"two")
    assert target.read_bytes() == b"two"

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="fire"):
        write_atomic(target, b"three")
    assert target.read_bytes() == b"two"  # the old content survives
    assert sorted(p.name for p in target.parent.iterdir()) == ["b.xml"]  # temp file removed


# -- through the accessor -----------------------------------------------------------------------


@pytest.fixture
def world(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    install(fake)
    yield fake


def test_fetch_files_with_hostile_filenames_stays_inside(
    world: FakeUpstream, tmp_path: Path
) -> None:
    files = tuple(
        File(FileKind.SUPPLEMENTARY, "evil", None, f"https://{FILES}/get/{i}", name)
        for i, name in enumerate(HOSTILE_NAMES)
    )
    sources = [StaticFiles("evil", {"PMC7000001": files})]
    root = tmp_path / "out"
    df = pd.DataFrame({"pmcid": ["PMC7000001"]})
    got = df.lit.fetch_files(root, sources=sources, session=session_for(world), progress=False)
    assert got["fetch_error"].isna().all()
    paths = [Path(p) for p in got["path"]]
    assert len(set(paths)) == len(HOSTILE_NAMES)
    for p in paths:
        assert p.resolve().is_relative_to(root.resolve())
        assert p.is_file()
    # nothing was written anywhere else under tmp_path
    outside = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_relative_to(root)]
    assert outside == []
    assert not any(p.name.endswith(".part") for p in root.rglob("*"))


def test_fetch_bodies_out_dir_with_hostile_dois(world: FakeUpstream, tmp_path: Path) -> None:
    from litfetch_df import JATS_XML, Blob

    class EchoFetcher:
        name = "echo"
        requires = frozenset({"doi"})

        async def fetch(
            self, article_ids: ArticleIds, *, credentials: object = None, http: object
        ) -> Blob:
            assert article_ids.doi is not None
            return Blob(File(FileKind.BODY, "echo", JATS_XML), article_ids.doi.encode())

    dois = ["10.1000/../../../etc/passwd", "10.1000/a/b/c", "10.1000/A/B/C", "10.1000/%2e%2e"]
    df = pd.DataFrame({"doi": dois})
    out = df.lit.fetch_bodies(
        fetchers=[EchoFetcher()],
        resolve=False,
        out_dir=tmp_path,
        session=session_for(world),
        progress=False,
    )
    # Since issue 14 a DOI with dot segments is invalid: reported, never fetched or written.
    assert pd.isna(out["body_path"][0])
    assert str(out["body_error"][0]).startswith("invalid doi:")
    paths = [Path(p) for p in out["body_path"][1:]]
    for p in paths:
        assert p.parent == tmp_path.resolve()
    assert paths[2].read_bytes() == dois[3].encode()
    # the same DOI in another case is one unit: fetched once, one file
    assert paths[0] == paths[1]
    assert paths[0].read_bytes() == dois[1].encode()
    assert len(set(paths)) == 2
