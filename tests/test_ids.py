"""Identifier parsing over the messy forms users hold, plus property tests (hypothesis)."""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litfetch_df.ids import (
    FIELDS,
    RESOLVABLE,
    ArticleIds,
    Pmcid,
    doi_key,
    doi_path,
    is_preprint_doi,
    parse_bookid,
    parse_doi,
    parse_pmcid,
    parse_pmcid_versioned,
    parse_pmid,
)

# -- PMID -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("30000001", "30000001"),
        (30000001, "30000001"),
        (30000001.0, "30000001"),  # a float column
        ("30000001.0", "30000001"),  # a float column written to CSV
        ("12345.0", "12345"),
        ("  30000001\t\n", "30000001"),
        (b"30000001", "30000001"),
        ("PMID: 123", "123"),
        ("PMID:123", "123"),
        ("pmid 123", "123"),
        ("PubMed: 123", "123"),
        ("030000001", "30000001"),  # leading zeros are not part of the id
        ("https://pubmed.ncbi.nlm.nih.gov/30000001", "30000001"),
        ("https://pubmed.ncbi.nlm.nih.gov/30000001/", "30000001"),  # OpenAlex, sometimes
        ("http://pubmed.ncbi.nlm.nih.gov/30000001/?from=search", "30000001"),
        ("https://www.ncbi.nlm.nih.gov/pubmed/30000001", "30000001"),
        ("pubmed.ncbi.nlm.nih.gov/30000001", "30000001"),
    ],
)
def test_parse_pmid_accepts_real_world_forms(raw: object, expected: str) -> None:
    assert parse_pmid(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        "0",
        "000",
        "-5",
        -5,
        12.5,
        "12.5",
        "12345.01",
        math.nan,
        math.inf,
        True,
        "PMC123",
        "123abc",
        "1 2 3",
        "１２３",  # full-width digits
        "١٢٣",  # Arabic-Indic digits
        "123,456",
        "https://pubmed.ncbi.nlm.nih.gov/",
        "https://pubmed.ncbi.nlm.nih.gov/123/extra",
        "https://example.org/30000001",
        "30000001 OR 1=1",
        "EXT_ID:30000001",
        None,
        b"\xff\xfe",
        "9" * 2000,
    ],
)
def test_parse_pmid_rejects_with_value_error(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_pmid(raw)


def test_parse_pmid_error_names_the_value() -> None:
    with pytest.raises(ValueError, match="PMC123"):
        parse_pmid("PMC123")


# -- PMCID ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("PMC7000001", Pmcid("PMC7000001", None)),
        ("pmc7000001", Pmcid("PMC7000001", None)),
        ("Pmc7000001", Pmcid("PMC7000001", None)),
        ("7000001", Pmcid("PMC7000001", None)),
        (7000001, Pmcid("PMC7000001", None)),
        (7000001.0, Pmcid("PMC7000001", None)),
        ("  PMC7000001 \n", Pmcid("PMC7000001", None)),
        ("PMC123", Pmcid("PMC123", None)),
        ("123", Pmcid("PMC123", None)),
        ("pmc123", Pmcid("PMC123", None)),
        ("PMC123.2", Pmcid("PMC123", 2)),
        ("pmc7000001.12", Pmcid("PMC7000001", 12)),
        ("PMCID: PMC7000001", Pmcid("PMC7000001", None)),
        ("PMC0007000001", Pmcid("PMC7000001", None)),
        (b"PMC7000001", Pmcid("PMC7000001", None)),
        ("https://pmc.ncbi.nlm.nih.gov/articles/PMC7000001/", Pmcid("PMC7000001", None)),
        ("https://pmc.ncbi.nlm.nih.gov/articles/PMC7000001", Pmcid("PMC7000001", None)),
        ("https://www.ncbi.nlm.nih.gov/pmc/articles/PMC7000001/", Pmcid("PMC7000001", None)),
        ("https://www.ncbi.nlm.nih.gov/pmc/articles/7000001", Pmcid("PMC7000001", None)),
        ("http://www.ncbi.nlm.nih.gov/pmc/articles/PMC7000001/#sec2", Pmcid("PMC7000001", None)),
        ("https://pmc.ncbi.nlm.nih.gov/articles/PMC7000001.3/", Pmcid("PMC7000001", 3)),
        ("https://europepmc.org/article/PMC/PMC7000001", Pmcid("PMC7000001", None)),
        ("https://europepmc.org/article/pmc/7000001", Pmcid("PMC7000001", None)),
        ("https://europepmc.org/articles/PMC7000001/", Pmcid("PMC7000001", None)),
        ("https://europepmc.org/abstract/PMC/PMC7000001", Pmcid("PMC7000001", None)),
    ],
)
def test_parse_pmcid_versioned_accepts_real_world_forms(raw: object, expected: Pmcid) -> None:
    assert parse_pmcid_versioned(raw) == expected
    assert parse_pmcid(raw) == expected.pmcid


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "PMC",
        "PMC0",
        "PMC123.0",
        "PMC123.",
        "PMC123.2.3",
        "PMC-123",
        "PMCX123",
        "PMC１２３",  # full-width digits
        "PMC123/../x",
        "PMC123?x=1",
        "NBK123",
        "10.1000/abc",
        -1,
        1.5,
        math.nan,
        False,
        None,
        "https://europepmc.org/article/MED/30000001",
        "https://example.org/articles/PMC7000001",
    ],
)
def test_parse_pmcid_rejects_with_value_error(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_pmcid_versioned(raw)
    with pytest.raises(ValueError):
        parse_pmcid(raw)


# -- DOI --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("10.1000/xyz123", "10.1000/xyz123"),
        ("10.1000/XYZ123", "10.1000/XYZ123"),  # case kept
        ("doi:10.1000/xyz123", "10.1000/xyz123"),
        ("DOI: 10.1000/xyz123", "10.1000/xyz123"),
        ("https://doi.org/10.1000/xyz123", "10.1000/xyz123"),
        ("HTTPS://DOI.ORG/10.1000/xyz123", "10.1000/xyz123"),
        ("http://doi.org/10.1000/xyz123", "10.1000/xyz123"),
        ("https://dx.doi.org/10.1000/xyz123", "10.1000/xyz123"),
        ("http://dx.doi.org/10.1000/xyz123", "10.1000/xyz123"),
        ("https://doi.org/doi:10.1000/xyz123", "10.1000/xyz123"),
        ("  10.1000/xyz123\n", "10.1000/xyz123"),
        ("\t https://doi.org/10.1000/xyz123 ", "10.1000/xyz123"),
        (b"10.1000/xyz123", "10.1000/xyz123"),
        ("10.1000.10/abc", "10.1000.10/abc"),  # dotted registrant
        ("10.1000/a/b/c", "10.1000/a/b/c"),  # slashes in the suffix
        ("10.1000/S0140-6736(20)30183-5", "10.1000/S0140-6736(20)30183-5"),
        # a doi.org URL carries the DOI percent-encoded
        ("https://doi.org/10.1000/a%3Fb%23c", "10.1000/a?b#c"),
        ("https://doi.org/10.1000%2Fxyz123", "10.1000/xyz123"),
        ("10.1000%2Fxyz123", "10.1000/xyz123"),  # URL-encoded as a whole
    ],
)
def test_parse_doi_accepts_real_world_forms(raw: object, expected: str) -> None:
    assert parse_doi(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        "10.1000",
        "10.1000/",
        "10./abc",
        "10.abc/def",
        "11.1000/abc",
        "doi:",
        "https://doi.org/",
        "https://example.org/10.1000/abc",
        "10.1000/a\x00b",
        "10.1000/a\nb",
        "10.1000 /abc",
        "1000/abc",
        10.1,
        1000,
        None,
        True,
        "10.1000/" + "x" * 2000,
    ],
)
def test_parse_doi_rejects_with_value_error(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_doi(raw)


def test_parse_doi_error_names_the_value() -> None:
    with pytest.raises(ValueError, match="not-a-doi"):
        parse_doi("not-a-doi")


def test_doi_key_compares_case_insensitively() -> None:
    assert doi_key(parse_doi("https://doi.org/10.1000/ABC")) == doi_key("10.1000/abc")
    assert doi_key("10.1000/ABC") != doi_key("10.1000/ABD")


@pytest.mark.parametrize(
    ("doi", "encoded"),
    [
        # the table in upstream.md section 1.1
        ("10.1000/xyz123", "10.1000/xyz123"),
        ("10.1000/a?b#c d", "10.1000/a%3Fb%23c%20d"),
        ("10.1000/S0140-6736(20)30183-5", "10.1000/S0140-6736%2820%2930183-5"),
        (
            "10.1002/1521-3773(20010316)40:6<9999::AID-ANIE9999>3.0.CO;2-A",
            "10.1002/1521-3773%2820010316%2940%3A6%3C9999%3A%3AAID-ANIE9999%3E3.0.CO%3B2-A",
        ),
        # slashes inside the suffix stay literal; a percent sign is escaped
        ("10.1000/a/b", "10.1000/a/b"),
        ("10.1000/100%", "10.1000/100%25"),
        # normalised first
        ("https://doi.org/10.1000/xyz123", "10.1000/xyz123"),
        ("doi:10.1000/ab&c=d", "10.1000/ab%26c%3Dd"),
    ],
)
def test_doi_path_encodes_each_segment(doi: str, encoded: str) -> None:
    assert doi_path(doi) == encoded


@pytest.mark.parametrize(
    "doi",
    [
        "10.1000/../secret",
        "10.1000/..",
        "10.1000/./x",
        "10.1000/.",
        "10.1000/a/../../b",
        "https://doi.org/10.1000/%2E%2E/secret",  # decoded by parse_doi, then refused
        "not a doi",
    ],
)
def test_doi_path_rejects_traversal(doi: str) -> None:
    with pytest.raises(ValueError):
        doi_path(doi)


def test_doi_path_keeps_dots_that_are_not_whole_segments() -> None:
    assert doi_path("10.1000/...x") == "10.1000/...x"
    assert doi_path("10.1000/a..b") == "10.1000/a..b"


@pytest.mark.parametrize(
    ("doi", "expected"),
    [
        ("10.1101/2024.04.01.587366", True),
        ("10.64898/2026.04.07.716663", True),
        ("10.1101/ABC", True),
        ("https://doi.org/10.1101/2024.04.01.587366", True),
        ("doi:10.64898/2026.04.07.716663", True),
        ("10.1000/10.1101", False),
        ("10.11011/abc", False),
        ("10.1016/j.xgen.2025.100814", False),
        ("junk", False),
    ],
)
def test_is_preprint_doi(doi: str, expected: bool) -> None:
    assert is_preprint_doi(doi) is expected


# -- Bookshelf --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("NBK1116", "NBK1116"),
        ("nbk1116", "NBK1116"),
        ("  NBK1116 ", "NBK1116"),
        (b"NBK1116", "NBK1116"),
    ],
)
def test_parse_bookid_accepts(raw: object, expected: str) -> None:
    assert parse_bookid(raw) == expected


@pytest.mark.parametrize(
    "raw",
    [
        "1116",
        1116,
        "NBK",
        "PMC1116",
        "NBK1116/../x",
        "NBK1116?x=1",
        "NB\u212a1116",  # KELVIN SIGN, which case-folds to 'k'
        "nb\u212a1116",
        "NBK\u0661\u0661\u0661\u0666",  # Arabic-Indic digits
        "NBK１１１６",  # full-width digits
        "NBK 1116",
        "",
        None,
        1116.0,
    ],
)
def test_parse_bookid_rejects(raw: object) -> None:
    with pytest.raises(ValueError):
        parse_bookid(raw)


# -- ArticleIds -------------------------------------------------------------------------------


def test_article_ids_merge_fills_gaps_and_never_overwrites() -> None:
    mine = ArticleIds(pmid="30000001", doi="10.1000/Mine")
    theirs = ArticleIds(pmid="30000002", pmcid="PMC7000001", doi="10.1000/theirs")
    merged = mine.merge(theirs)
    assert merged == ArticleIds(pmid="30000001", pmcid="PMC7000001", doi="10.1000/Mine")
    assert mine == ArticleIds(pmid="30000001", doi="10.1000/Mine")  # unchanged (frozen)
    assert ArticleIds().merge(theirs) == theirs
    assert theirs.merge(ArticleIds()) == theirs


def test_article_ids_has_and_missing() -> None:
    ids = ArticleIds(pmid="30000001", doi="10.1000/x")
    assert ids.has(["pmid"])
    assert ids.has(("pmid", "doi"))
    assert not ids.has(("pmid", "pmcid"))
    assert ids.has(())
    assert ids.missing(RESOLVABLE) == frozenset({"pmcid"})
    assert ArticleIds().missing(FIELDS) == frozenset(FIELDS)
    assert ArticleIds().is_empty()
    assert not ids.is_empty()


def test_article_ids_is_frozen() -> None:
    ids = ArticleIds(pmid="1")
    with pytest.raises(AttributeError):
        ids.pmid = "2"  # type: ignore[misc]


def test_article_ids_parse_normalises_every_field() -> None:
    ids = ArticleIds.parse(
        pmid=30000001.0,
        pmcid="pmc7000001.2",
        doi=" https://doi.org/10.1000/ABC ",
        bookid="nbk1116",
    )
    assert ids == ArticleIds(
        pmid="30000001", pmcid="PMC7000001", doi="10.1000/ABC", bookid="NBK1116"
    )


@pytest.mark.parametrize("blank", [None, "", "   ", math.nan])
def test_article_ids_parse_treats_blanks_as_absent(blank: object) -> None:
    assert ArticleIds.parse(pmid=blank, pmcid=blank, doi=blank, bookid=blank) == ArticleIds()


def test_article_ids_parse_names_the_failing_field() -> None:
    with pytest.raises(ValueError, match=r"doi: .*not-a-doi"):
        ArticleIds.parse(pmid="1", doi="not-a-doi")


# -- property tests ---------------------------------------------------------------------------

PARSERS: dict[str, Callable[[object], str]] = {
    "pmid": parse_pmid,
    "pmcid": parse_pmcid,
    "doi": parse_doi,
    "bookid": parse_bookid,
    "doi_path": doi_path,  # type: ignore[dict-item]
}


class _Weird:
    """An object whose str() itself fails, as a broken cell value might."""

    def __str__(self) -> str:
        raise RuntimeError("boom")


_arbitrary: st.SearchStrategy[Any] = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=30),
    st.binary(),
    st.floats(),
    st.integers(),
    st.none(),
    st.booleans(),
    st.decimals(),
    st.fractions(),
    st.complex_numbers(),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just(_Weird()),
    st.just(Decimal("12345.0")),
    st.just(Fraction(5, 1)),
)

# Messy forms built from valid parts, so the success paths are exercised too.
_digits = st.from_regex(r"[0-9]{1,12}", fullmatch=True)
_space = st.sampled_from(["", " ", "  ", "\t", "\n", " \r\n"])
_pmid_like = st.builds(
    lambda pre, d, post, lead, trail: f"{lead}{pre}{d}{post}{trail}",
    st.sampled_from(
        [
            "",
            "PMID: ",
            "pmid:",
            "PubMed ",
            "https://pubmed.ncbi.nlm.nih.gov/",
            "pubmed.ncbi.nlm.nih.gov/",
        ]
    ),
    _digits,
    st.sampled_from(["", ".0", ".00", "/", "/?x=1"]),
    _space,
    _space,
)
_pmcid_like = st.builds(
    lambda pre, d, ver, post, lead, trail: f"{lead}{pre}{d}{ver}{post}{trail}",
    st.sampled_from(
        [
            "",
            "PMC",
            "pmc",
            "PMCID: PMC",
            "https://pmc.ncbi.nlm.nih.gov/articles/PMC",
            "https://www.ncbi.nlm.nih.gov/pmc/articles/",
            "https://europepmc.org/article/PMC/PMC",
        ]
    ),
    _digits,
    st.sampled_from(["", ".1", ".2", ".10", ".0"]),
    st.sampled_from(["", "/"]),
    _space,
    _space,
)
_doi_suffix = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=30
)
_doi_like = st.builds(
    lambda pre, reg, suffix, lead, trail: f"{lead}{pre}10.{reg}/{suffix}{trail}",
    st.sampled_from(["", "doi:", "DOI: ", "https://doi.org/", "http://dx.doi.org/"]),
    st.from_regex(r"[0-9]{4,5}(\.[0-9]{1,3})?", fullmatch=True),
    _doi_suffix,
    _space,
    _space,
)
_bookid_like = st.builds(
    lambda pre, d, lead, trail: f"{lead}{pre}{d}{trail}",
    st.sampled_from(["NBK", "nbk", "Nbk", "NB\u212a", "NBK "]),
    _digits,
    _space,
    _space,
)
_messy = st.one_of(_arbitrary, _pmid_like, _pmcid_like, _doi_like, _bookid_like)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=300, deadline=None)
@given(value=_messy)
def test_only_value_error_escapes(name: str, value: object) -> None:
    parser = PARSERS[name]
    try:
        result = parser(value)
    except ValueError:
        return
    assert isinstance(result, str)
    assert result == result.strip()
    assert result.isprintable() or name == "doi"


@pytest.mark.parametrize("name", ["pmid", "pmcid", "doi", "bookid"])
@settings(max_examples=300, deadline=None)
@given(value=_messy)
def test_normalising_twice_equals_normalising_once(name: str, value: object) -> None:
    parser = PARSERS[name]
    try:
        once = parser(value)
    except ValueError:
        return
    assert parser(once) == once


@settings(max_examples=300, deadline=None)
@given(value=_messy)
def test_parse_pmcid_versioned_is_idempotent_with_its_version(value: object) -> None:
    try:
        once = parse_pmcid_versioned(value)
    except ValueError:
        return
    text = once.pmcid if once.version is None else f"{once.pmcid}.{once.version}"
    assert parse_pmcid_versioned(text) == once
    assert once.pmcid.startswith("PMC") and once.pmcid[3:].isdigit()
    assert once.version is None or once.version >= 1


@settings(max_examples=500, deadline=None)
@given(value=st.one_of(_doi_like, st.text()))
def test_doi_path_output_cannot_reshape_a_url(value: str) -> None:
    try:
        path = doi_path(value)
    except ValueError:
        return
    assert "?" not in path
    assert "#" not in path
    assert all(seg not in {".", "..", ""} for seg in path.split("/"))
    assert path.isascii()
    assert not any(c.isspace() for c in path)
    # the segment count is the DOI's: nothing was added or merged
    assert path.count("/") == parse_doi(value).count("/")


@settings(max_examples=200, deadline=None)
@given(value=_doi_like)
def test_doi_path_round_trips_through_unquote(value: str) -> None:
    import urllib.parse

    try:
        doi = parse_doi(value)
        path = doi_path(doi)
    except ValueError:
        return
    assert urllib.parse.unquote(path) == doi


@settings(max_examples=200, deadline=None)
@given(
    pmid=st.one_of(st.none(), _pmid_like, _arbitrary),
    pmcid=st.one_of(st.none(), _pmcid_like, _arbitrary),
    doi=st.one_of(st.none(), _doi_like, _arbitrary),
)
def test_article_ids_parse_only_raises_value_error_and_is_idempotent(
    pmid: object, pmcid: object, doi: object
) -> None:
    try:
        ids = ArticleIds.parse(pmid=pmid, pmcid=pmcid, doi=doi)
    except ValueError:
        return
    again = ArticleIds.parse(pmid=ids.pmid, pmcid=ids.pmcid, doi=ids.doi, bookid=ids.bookid)
    assert again == ids
