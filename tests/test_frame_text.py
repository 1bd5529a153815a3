"""``df.lit.text()`` and ``df.lit.text_long()``: wide text columns and long text frames."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import litfetch_df as lf
from litfetch_df import Blob, File, FileKind
from litfetch_df.frame.fulltext import TEXT_COLUMNS, TEXT_PATH_COLUMNS
from litfetch_df.frame.text_long import LONG_COLUMNS, TEXT_PARTS
from tests.fake_upstream import FakeUpstream
from tests.test_frame_pipeline import JATS, EpmcFetcher, IdconvBatch, install, session_for

FIXTURES = Path("/work/shared/fixtures/text")
ELIFE = (FIXTURES / "elife-56337.nxml").read_bytes()
ELSEVIER = (FIXTURES / "S0167577X14001256.elsevier.xml").read_bytes()


def _blob(content: bytes, media: str = "application/xml") -> Blob:
    return Blob(File(FileKind.BODY, "test", media), content)


def frame() -> pd.DataFrame:
    """Five rows: eLife, Elsevier, a PDF, no body, the eLife body again (shared)."""
    elife = _blob(ELIFE)
    return pd.DataFrame(
        {
            "pmcid": pd.array(["PMC7289599", "PMC1", "PMC2", "PMC3", "PMC7289599"], "string"),
            "body": [
                elife,
                _blob(ELSEVIER),
                _blob(b"%PDF-1.4 ...", "application/pdf"),
                None,
                elife,
            ],
            "note": ["a", "b", "c", "d", "e"],
        },
        index=pd.Index([10, 11, 12, 13, 14], name="row"),
    )


def test_text_adds_declared_columns_keeps_rows_and_says_why_a_row_has_none() -> None:
    df = frame()
    out = df.lit.text()
    assert list(out.index) == list(df.index) and list(out["note"]) == list(df["note"])
    assert list(out.columns) == [*df.columns, *TEXT_COLUMNS]
    assert {c: str(out[c].dtype) for c in TEXT_COLUMNS} == dict(TEXT_COLUMNS)
    elife = out.loc[10]
    assert elife["text_format"] == "jats" and elife["title"].startswith("KRAB-zinc finger")
    assert elife["abstract"].startswith("The Krüppel-associated box")  # NFC, not folded
    assert "KRAB-ZFP" in elife["keywords"].split("; ")
    assert elife["n_figures"] >= 11 and elife["n_tables"] >= 1 and elife["n_references"] > 50
    assert elife["n_words"] > 5000 and elife["n_paragraphs"] > 30
    assert "sub-article×2" in elife["text_loss"] and pd.isna(elife["text_error"])
    assert "No competing interests declared" in elife["competing_interests"]
    assert "GSE115291" in elife["data_availability"]
    assert elife["funding_statement"]
    assert out.loc[11, "text_format"] == "elsevier" and out.loc[11, "text_loss"] == ""
    # A PDF body: the reason, and nothing else; no body at all: NA (body_error says why).
    assert out.loc[12, "text_error"] == "not a text format: PDF"
    assert pd.isna(out.loc[12, "title"])
    assert out.loc[13].isna()[list(TEXT_COLUMNS)].all()
    # The shared body gives the same cells.
    assert out.loc[14, "body_text"] == out.loc[10, "body_text"]
    assert "body_text" not in df.columns  # the input is untouched


def test_text_with_out_dir_writes_the_text_and_keeps_its_path(tmp_path: Path) -> None:
    out = frame().lit.text(out_dir=tmp_path)
    assert list(out.columns)[-len(TEXT_PATH_COLUMNS) :] == list(TEXT_PATH_COLUMNS)
    path = out.loc[10, "text_path"]
    assert path == out.loc[14, "text_path"] and Path(path).parent == tmp_path
    body_text = frame().lit.text().loc[10, "body_text"]
    assert Path(path).read_text(encoding="utf-8") == body_text
    assert pd.isna(out.loc[12, "text_path"]) and len(list(tmp_path.iterdir())) == 2


def test_text_reads_bodies_on_disk_and_reports_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "a.xml").write_bytes(ELSEVIER)
    df = pd.DataFrame(
        {
            "doi": ["10.1/a", "10.1/b"],
            "body_path": [str(tmp_path / "a.xml"), str(tmp_path / "gone.xml")],
        }
    )
    out = df.lit.text()
    assert out.loc[0, "text_format"] == "elsevier"
    assert out.loc[1, "text_error"].startswith("unreadable: FileNotFoundError")


def test_columns_built_in_chunks_match_one_chunk_and_share_bodies_across_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Chunks of two rows: the eLife Blob (rows 10 and 14) and a file two rows hold
    # (rows 15 and 17) are read once each although their rows sit in other chunks.
    (tmp_path / "a.xml").write_bytes(ELSEVIER)
    df = pd.concat(
        [
            frame(),
            pd.DataFrame(
                {"pmcid": pd.array(["PMC5", "PMC6", "PMC7"], "string"), "note": ["f", "g", "h"]},
                index=pd.Index([15, 16, 17], name="row"),
            ),
        ]
    )
    df["body_path"] = pd.array(
        [None] * 5 + [str(tmp_path / "a.xml"), None, str(tmp_path / "a.xml")], "string"
    )
    whole = df.lit.text()
    reads: list[object] = []
    real = lf.frame.fulltext.read_body

    def counted(held: Blob | str, math: str) -> lf.Document:
        reads.append(held)
        return real(held, math)

    monkeypatch.setattr(lf.frame.fulltext, "_CHUNK", 2)
    monkeypatch.setattr(lf.frame.fulltext, "read_body", counted)
    chunked = df.lit.text()
    pd.testing.assert_frame_equal(chunked, whole)
    assert len(reads) == 4  # eLife, Elsevier Blob, the PDF, the shared file
    assert chunked.loc[15, "title"] == chunked.loc[17, "title"] == whole.loc[11, "title"]
    assert {c: str(chunked[c].dtype) for c in TEXT_COLUMNS} == dict(TEXT_COLUMNS)


def test_two_bodies_with_one_stem_get_two_text_files(tmp_path: Path) -> None:
    for sub, body in (("a", ELSEVIER), ("b", ELIFE)):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "x.xml").write_bytes(body)
    paths = [str(tmp_path / "a" / "x.xml"), str(tmp_path / "b" / "x.xml")]
    df = pd.DataFrame({"body_path": pd.array([*paths, paths[0]], "string")})
    out = df.lit.text(out_dir=tmp_path / "text")
    first, second, again = out["text_path"]
    assert first != second and again == first  # the shared body keeps its one file
    assert Path(first).read_text(encoding="utf-8") == df.lit.text().loc[0, "body_text"]
    assert Path(second).read_text(encoding="utf-8") == df.lit.text().loc[1, "body_text"]


def test_bad_math_fails_before_any_body_is_read() -> None:
    with pytest.raises(ValueError, match="math"):
        frame().lit.text(math="mathml")
    with pytest.raises(ValueError, match="part"):
        frame().lit.text_long("words")


def test_text_fetches_bodies_first_when_the_frame_has_none(fake: FakeUpstream) -> None:
    install(fake)
    df = pd.DataFrame({"pmcid": ["PMC7000001", "PMC7000003"]})
    out = df.lit.text(
        fetchers=[EpmcFetcher()], resolver=IdconvBatch(), session=session_for(fake), progress=False
    )
    assert list(out["text_format"].astype(object).fillna("-")) == ["jats", "-"]
    assert "body_source" in out.columns and out.loc[0, "n_paragraphs"] > 0
    assert out.loc[0, "title"] == lf.frame.fulltext.read_text(JATS).title


@pytest.mark.parametrize("part", TEXT_PARTS)
def test_long_frames_join_back_to_their_rows(part: str) -> None:
    df = frame()
    long = df.lit.text_long(part)
    assert list(long.columns) == list(LONG_COLUMNS[part])
    assert {c: str(long[c].dtype) for c in long.columns} == dict(LONG_COLUMNS[part])
    assert long.index.name == "row" and set(long.index) == {10, 11, 14}
    joined = long.join(df[["note"]])
    assert set(joined.loc[10, "note"]) == {"a"}
    assert (long.loc[10, "pmcid"] == "PMC7289599").all()


def test_long_frames_count_what_the_wide_frame_counts() -> None:
    df = frame().iloc[:2]
    wide = df.lit.text()
    assert len(df.lit.text_long("paragraphs").loc[10]) == wide.loc[10, "n_paragraphs"]
    assert len(df.lit.text_long("references").loc[11]) == wide.loc[11, "n_references"]
    assert len(df.lit.text_long("sections").loc[10]) == wide.loc[10, "n_sections"]
    caps = df.lit.text_long("captions")
    assert (caps.loc[10, "kind"] == "figure").sum() == wide.loc[10, "n_figures"]
    paras = df.lit.text_long("paragraphs")
    body = wide.loc[10, "body_text"]
    first = paras.loc[10].iloc[3]
    assert body[first["start"] : first["end"]] == first["text"]


def test_citations_point_at_their_reference_and_their_words() -> None:
    cites = frame().iloc[:1].lit.text_long("citations")
    refs = frame().iloc[:1].lit.text_long("references")
    first = cites.iloc[0]
    assert first["cited_text"] == "Chuong et al., 2016"
    assert refs.iloc[int(first["reference_index"])]["ref_id"] == first["ref_id"] == "bib6"


def test_text_columns_survive_the_parquet_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    out = frame().lit.text()
    out.lit.to_parquet(tmp_path / "t.parquet")
    back = lf.read_parquet(tmp_path / "t.parquet")
    pd.testing.assert_frame_equal(back, out)
    # A text frame read back is a frame with bodies: its long forms need no fetch.
    pd.testing.assert_frame_equal(back.lit.text_long("sections"), out.lit.text_long("sections"))
