"""A result frame reads well: short cells, short per-row errors, a narrow view, honest counts.

Values show one short line through ``str()`` (what pandas prints in a
frame) and keep their full ``repr()``; the ``files`` / ``related`` tuples do
too, while staying tuples. Error cells name the host and the row's own id,
not the batch URL (that goes to the DEBUG log). ``df.lit.view()`` puts what
matters first without touching the display options.
"""

from __future__ import annotations

import collections.abc
import logging
import pickle

import pandas as pd
import pytest

import litfetch_df  # noqa: F401  (registers the .lit accessor)
from litfetch_df import (
    JATS_XML,
    PDF,
    ArticleIds,
    Blob,
    File,
    FileKind,
    Related,
    RelationType,
)
from litfetch_df.files import format_size, media_label
from litfetch_df.frame.engine.errors import compact, row_error
from litfetch_df.frame.io.cells import FileSet, Relations
from litfetch_df.frame.view import VIEW_COLUMNS

BODY = File(FileKind.BODY, "pmc_oa_s3", JATS_XML, uri="https://x.example/a.xml")
PDF_FILE = File(
    FileKind.BODY, "unpaywall", PDF, uri="https://x.example/a.pdf", size_bytes=1_234_567
)
SUPP = [
    File(FileKind.SUPPLEMENTARY, "pmc_oa_s3", filename=f"mmc{i}.xlsx", size_bytes=20_000)
    for i in range(3)
]
PREPRINT = Related(RelationType.PREPRINT, ArticleIds(doi="10.1101/2024.04.01.587366"))
PUBLISHED = Related(RelationType.PUBLISHED, ArticleIds(doi="10.1016/j.xgen.2025.100814"))


def result_frame() -> pd.DataFrame:
    blob = Blob(BODY, b"<article>" + b"x" * 104_000 + b"</article>")
    return pd.DataFrame(
        {
            "pmid": pd.array(["1", "2", None], dtype="string"),
            "body": pd.Series([blob, None, None], dtype=object),
            "files": pd.Series([FileSet((BODY, PDF_FILE, *SUPP)), FileSet(), None], dtype=object),
            "related": pd.Series([Relations((PREPRINT,)), Relations(), None], dtype=object),
        }
    )


def test_values_print_one_short_line_and_keep_their_full_repr() -> None:
    blob = Blob(BODY, b"x" * 104_321)
    assert str(blob) == "JATS 104 kB · pmc_oa_s3"
    assert str(PDF_FILE) == "PDF 1.2 MB · unpaywall"
    assert str(SUPP[0]) == "supplementary mmc0.xlsx 20 kB · pmc_oa_s3"
    assert str(PREPRINT) == "has preprint 10.1101/2024.04.01.587366"
    assert str(PUBLISHED) == "published as 10.1016/j.xgen.2025.100814"
    assert repr(blob).startswith("Blob(file=File(") and "104321 bytes" in repr(blob)
    assert repr(PDF_FILE).startswith("File(kind=<FileKind.BODY")
    assert repr(PREPRINT).startswith("Related(relation=")


def test_sizes_and_labels() -> None:
    assert [format_size(n) for n in (None, 0, 999, 1_000, 9_949, 104_321, 999_999)] == [
        None, "0 B", "999 B", "1.0 kB", "9.9 kB", "104 kB", "1.0 MB",
    ]  # fmt: skip
    assert media_label("application/pdf; charset=x") == "PDF"
    assert media_label(None, "table.XLSX") == "xlsx"
    assert media_label("application/x-zip") == "zip"
    assert media_label(None) == "file"


def test_the_cell_tuples_say_what_they_hold() -> None:
    assert str(FileSet((BODY, PDF_FILE, *SUPP))) == "5 files: xml, pdf, 3 supplementary"
    assert str(FileSet((PDF_FILE,))) == "1 file: pdf"
    assert str(FileSet()) == "no files"
    assert str(Relations((PREPRINT, PUBLISHED))) == (
        "has preprint 10.1101/2024.04.01.587366 (+1 more)"
    )
    assert str(Relations()) == "no relations"


def test_the_cell_tuples_are_still_plain_tuples() -> None:
    cell = FileSet((BODY, PDF_FILE))
    assert cell == (BODY, PDF_FILE) and isinstance(cell, tuple)
    assert cell[1] is PDF_FILE and list(cell) == [BODY, PDF_FILE] and len(cell) == 2
    assert not isinstance(cell, collections.abc.Iterator)
    with pytest.raises(TypeError):
        next(cell)  # type: ignore[call-overload]
    assert pickle.loads(pickle.dumps(cell)) == cell
    assert repr(cell).startswith("(File(")  # the full form, for debugging
    assert Relations((PREPRINT,)) == (PREPRINT,)


@pytest.mark.parametrize("render", ["to_string", "_repr_html_"])
def test_a_frame_shows_every_value_cell_in_one_short_line(render: str) -> None:
    frame = result_frame()
    with pd.option_context("display.max_colwidth", 1000):
        shown = getattr(frame, render)()
    for full in ("Blob(", "File(", "ArticleIds(", "Related(", "RelationType."):
        assert full not in shown
    for text in (
        "JATS 104 kB · pmc_oa_s3",
        "5 files: xml, pdf, 3 supplementary",
        "has preprint 10.1101/2024.04.01.587366",
        "no files",
    ):
        assert text in shown
    if render == "to_string":
        assert len(shown.splitlines()) == 1 + len(frame)
    assert render != "to_string" or all(len(line) < 200 for line in shown.splitlines())


def test_error_text_names_the_host_and_the_row_not_the_batch_url(
    caplog: pytest.LogCaptureFixture,
) -> None:
    batch = (
        "not in cache: GET https://api.crossref.org/works?filter=doi%3A10.1%2Fa%2Cdoi%3A10.1%2Fb"
    )
    with caplog.at_level(logging.DEBUG, logger="litfetch_df"):
        text = row_error(f"abandoned: {batch}", ArticleIds(pmid="21810267", doi="10.1/a"))
    assert text == "abandoned: not in cache: api.crossref.org [pmid 21810267]"
    assert "filter=doi" in caplog.text  # the whole request, for whoever asks for DEBUG
    primed = (
        "abandoned: not in cache: POST https://api.semanticscholar.org/graph/v1/paper/batch "
        "(Semantic Scholar batch): GET https://api.semanticscholar.org/graph/v1/paper/DOI:10.1/a"
    )
    assert row_error(primed, ArticleIds(doi="10.1/a")) == (
        "abandoned: not in cache: api.semanticscholar.org (Semantic Scholar batch) [doi 10.1/a]"
    )
    # Idempotent, and only abandoned errors are tagged.
    assert row_error(text, ArticleIds(pmid="21810267")) == text
    assert row_error("error: ValueError: boom", ArticleIds(pmid="1")) == "error: ValueError: boom"
    assert row_error(None, ArticleIds(pmid="1")) is None
    assert compact("HTTP 503 from api.unpaywall.org after 3 attempts") == (
        "HTTP 503 from api.unpaywall.org after 3 attempts"
    )


def test_view_puts_what_matters_first_without_touching_display_options() -> None:
    frame = result_frame().assign(
        Title=["a", "b", "c"],
        body_source=pd.array(["pmc_oa_s3", None, None], dtype="string"),
        licence_family=pd.array(["cc-by", None, None], dtype="string"),
        access=pd.array(["open-access", None, None], dtype="string"),
        n_files=pd.array([5, 0, None], dtype="Int64"),
        body_error=pd.array([None, "abandoned: x", None], dtype="string"),
        licence=pd.array(["https://creativecommons.org/licenses/by/4.0/", None, None]),
    )
    frame.index = pd.Index([10, 11, 12])
    options = {o: pd.get_option(o) for o in ("display.max_columns", "display.width")}
    seen = frame.lit.view()
    assert list(seen.columns) == [
        "pmid", "body_source", "licence_family", "access", "n_files", "body_error",
    ]  # fmt: skip
    assert list(seen.columns) == [c for c in VIEW_COLUMNS if c in frame.columns]
    assert list(seen.index) == [10, 11, 12]
    assert list(frame.lit.view("Title").columns)[:2] == ["pmid", "Title"]
    assert {o: pd.get_option(o) for o in options} == options
    with pytest.raises(KeyError):
        frame.lit.view("nope")
    # A frame no step has run on shows its id columns.
    assert list(pd.DataFrame({"PMID": ["1"], "x": [1]}).lit.view().columns) == ["PMID"]


def test_summary_does_not_show_files_over_rows_as_a_share() -> None:
    frame = pd.DataFrame({"n_files": pd.array([5, 2, 0, None], dtype="Int64")})
    table = frame.lit.summary()
    assert table.loc[("files", "files"), "count"] == 7
    assert pd.isna(table.loc[("files", "files"), "share"])
    assert table.loc[("files", "rows with files"), "share"] == 0.5
