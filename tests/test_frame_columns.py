"""Id column detection by name and value normalisation, over synthetic and real exports."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from litfetch_df.frame.io.columns import (
    IdColumns,
    bundle_key,
    detect_id_columns,
    kind_of_name,
    normalise_name,
    parse_cell,
    parse_rows,
    sniff_kind,
)
from litfetch_df.ids import ArticleIds
from tests.conftest import data_path


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("PMID", "pmid"),
        ("pmid", "pmid"),
        ("PubMed ID", "pmid"),
        ("pubmed_id", "pmid"),
        ("PubMed-ID", "pmid"),
        ("ids.pmid", "pmid"),
        ("\ufeffPMID", "pmid"),  # a byte-order mark glued to the first header
        ("PMCID", "pmcid"),
        ("PMC ID", "pmcid"),
        ("pmc", "pmcid"),
        ("ids.pmcid", "pmcid"),
        ("DOI", "doi"),
        ("doi_url", "doi"),
        ("DOI link", "doi"),
        ("ids.doi", "doi"),
        ("bookid", "bookid"),
        ("NBK", "bookid"),
        ("Bookshelf ID", "bookid"),
        ("book accession", "bookid"),
        ("Title", None),
        ("NIHMS ID", None),
        ("doi_year", None),
    ],
)
def test_kind_of_name(name: str, kind: str | None) -> None:
    assert kind_of_name(name) == kind


def test_normalise_name_ignores_case_and_punctuation() -> None:
    assert normalise_name(" PubMed-ID ") == normalise_name("pubmed_id") == "pubmedid"
    assert normalise_name(("a", 1)) == "a1"


def test_canonical_column_is_preferred_over_other_names() -> None:
    cols = detect_id_columns(["DOI link", "PMID", "doi", "PubMed ID"])
    assert cols == IdColumns(pmid="PMID", doi="doi")


def test_detection_prefers_the_better_name_then_the_first_column() -> None:
    assert detect_id_columns(["DOI link", "DOI"]).doi == "DOI"
    assert detect_id_columns(["Doi", "DOI"]).doi == "Doi"


def test_explicit_names_override_and_are_checked() -> None:
    assert detect_id_columns(["X", "PMID"], {"doi": "X"}) == IdColumns(pmid="PMID", doi="X")
    assert detect_id_columns([0, 1], {"pmid": 1}) == IdColumns(pmid=1)
    with pytest.raises(KeyError):
        detect_id_columns(["PMID"], {"doi": "missing"})
    with pytest.raises(TypeError):
        detect_id_columns(["PMID"], {"isbn": "PMID"})


def test_nothing_found_names_columns_and_accepted_names() -> None:
    with pytest.raises(ValueError) as info:
        detect_id_columns(["Title", "Authors"])
    text = str(info.value)
    for expected in ("'Title'", "'Authors'", "PubMed ID", "PMC ID", "DOI link", "Bookshelf ID"):
        assert expected in text


@pytest.mark.parametrize(
    ("kind", "raw", "canonical"),
    [
        ("pmid", "30000001", "30000001"),
        ("pmid", "30000001.0", "30000001"),  # a float column read as text
        ("pmid", 30000001.0, "30000001"),
        ("pmid", np.int64(30000001), "30000001"),
        ("pmid", " 30000001\t", "30000001"),
        ("pmid", "https://pubmed.ncbi.nlm.nih.gov/30000001/", "30000001"),
        ("pmid", "PMID: 30000001", "30000001"),
        ("pmcid", "PMC7000001", "PMC7000001"),
        ("pmcid", "pmc7000001", "PMC7000001"),
        ("pmcid", "7000001", "PMC7000001"),
        ("pmcid", "PMC7000001.2", "PMC7000001"),
        ("pmcid", "https://www.ncbi.nlm.nih.gov/pmc/articles/PMC7000001/", "PMC7000001"),
        ("doi", "10.1000/abc.1", "10.1000/abc.1"),
        ("doi", "https://doi.org/10.1000/ABC.1", "10.1000/ABC.1"),
        ("doi", "http://dx.doi.org/10.1000/abc.1", "10.1000/abc.1"),
        ("doi", "doi: 10.1000/abc.1 ", "10.1000/abc.1"),
        ("bookid", "NBK1116", "NBK1116"),
        ("bookid", " nbk1116 ", "NBK1116"),
    ],
)
def test_values_are_normalised(kind: str, raw: object, canonical: str) -> None:
    assert parse_cell(kind, raw) == (canonical, None)


@pytest.mark.parametrize("blank", [None, "", "   ", float("nan"), pd.NA, np.nan])
def test_blank_cells_are_absent_not_errors(blank: object) -> None:
    for kind in ("pmid", "pmcid", "doi", "bookid"):
        assert parse_cell(kind, blank) == (None, None)


@pytest.mark.parametrize(
    ("kind", "raw", "message"),
    [
        ("doi", "foo", "invalid doi: 'foo'"),
        ("pmid", "12a", "invalid pmid: '12a'"),
        ("pmid", True, "invalid pmid: True"),
        ("pmcid", "PMC7000001.0", "invalid pmcid: 'PMC7000001.0'"),
        ("bookid", "NBK1116/../x", "invalid bookid: 'NBK1116/../x'"),
        ("doi", "10.1000/" + "x" * 2000, None),
    ],
)
def test_invalid_values_are_reported(kind: str, raw: object, message: str | None) -> None:
    value, error = parse_cell(kind, raw)
    assert value is None and error is not None
    if message is not None:
        assert error == message
    assert len(error) < 100  # long junk is shortened


def test_parse_rows_keeps_other_valid_ids() -> None:
    df = pd.DataFrame({"PMID": ["bad", "30000002", None], "DOI": ["10.1000/a", "also bad", None]})
    parsed = parse_rows(df, detect_id_columns(df.columns))
    assert parsed.bundles == (
        ArticleIds(doi="10.1000/a"),
        ArticleIds(pmid="30000002"),
        ArticleIds(),
    )
    assert parsed.errors == ("invalid pmid: 'bad'", "invalid doi: 'also bad'", None)


def test_bundle_key_folds_doi_case() -> None:
    assert bundle_key(ArticleIds(doi="10.1000/ABC")) == bundle_key(ArticleIds(doi="10.1000/abc"))
    assert bundle_key(ArticleIds(pmid="1")) == ArticleIds(pmid="1")


def test_sniff_kind() -> None:
    assert sniff_kind(["10.1000/a", None, "https://doi.org/10.1000/b"]) == "doi"
    assert sniff_kind(["PMC1", "PMC2"]) == "pmcid"
    assert sniff_kind(["1", "2", 3.0]) == "pmid"
    assert sniff_kind(["NBK1", "nbk2"]) == "bookid"
    assert sniff_kind([None, ""]) is None
    assert sniff_kind(["a", "b", "10.1000/x"]) is None


@given(st.text(max_size=60))
def test_parse_cell_never_raises(text: str) -> None:
    for kind in ("pmid", "pmcid", "doi", "bookid"):
        value, error = parse_cell(kind, text)
        assert value is None or error is None
        if value is not None and kind == "pmid":
            assert value.isdigit()


# -- the real PubMed exports --------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["pubmed_save_csv_chatbot_6records.csv", "pubmed_save_csv_fitbit_10records.csv"]
)
def test_pubmed_csv_exports(name: str) -> None:
    df = pd.read_csv(data_path("exports", name), dtype=str)
    cols = detect_id_columns(df.columns)
    assert normalise_name(cols.pmid) == "pmid"
    assert cols.pmcid == "PMCID" and cols.doi == "DOI" and cols.bookid is None
    parsed = parse_rows(df, cols)
    assert all(e is None for e in parsed.errors)
    for bundle, pmid, pmcid, doi in zip(
        parsed.bundles, df[cols.pmid], df["PMCID"], df["DOI"], strict=True
    ):
        assert bundle.pmid == pmid.strip()
        assert bundle.pmcid == (pmcid if isinstance(pmcid, str) and pmcid.strip() else None)
        assert bundle.doi == (doi if isinstance(doi, str) and doi.strip() else None)
    assert any(b.pmcid for b in parsed.bundles)


def test_pubmed_csv_read_with_default_dtypes_loses_nothing() -> None:
    # without dtype=str pandas makes PMID an int and an all-blank column float: still fine
    df = pd.read_csv(data_path("exports", "pubmed_save_csv_chatbot_6records.csv"))
    parsed = parse_rows(df, detect_id_columns(df.columns))
    assert all(b.pmid and b.pmid.isdigit() for b in parsed.bundles)
    assert all(e is None for e in parsed.errors)
    floaty = pd.DataFrame({"PMID": [30000001.0, math.nan]})
    assert parse_rows(floaty, detect_id_columns(floaty.columns)).bundles == (
        ArticleIds(pmid="30000001"),
        ArticleIds(),
    )


def test_float_pmcid_column_from_digits() -> None:
    df = pd.DataFrame({"pmc": [7000001.0, np.nan]})
    parsed = parse_rows(df, detect_id_columns(df.columns))
    assert parsed.bundles[0] == ArticleIds(pmcid="PMC7000001")


def test_duplicate_column_labels_are_reported() -> None:
    df = pd.DataFrame([["1", "2"]], columns=["PMID", "PMID"])
    with pytest.raises(ValueError, match="more than once"):
        parse_rows(df, detect_id_columns(df.columns))
