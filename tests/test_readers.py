"""Readers for PubMed exports (CSV, MEDLINE, XML) and plain tables."""

from __future__ import annotations

import gzip
import io
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litfetch_df.frame.io.readers import (
    CORE_COLUMNS,
    read_pubmed,
    read_table,
    sniff_pubmed_format,
)
from litfetch_df.ids import parse_bookid, parse_doi, parse_pmcid, parse_pmid
from litfetch_df.safexml.parse import XmlError
from tests.conftest import data_bytes, data_path

FITBIT = ("exports", "pubmed_save_csv_fitbit_10records.csv")
CHATBOT = ("exports", "pubmed_save_csv_chatbot_6records.csv")
MEDLINE4 = ("exports", "pubmed_medline_format_4records.txt")
MEDLINE2023 = ("exports", "pubmed_medline_format_1record_2023.txt")

PUBMED_CSV_COLUMNS = [
    "PMID",
    "Title",
    "Authors",
    "Citation",
    "First Author",
    "Journal/Book",
    "Publication Year",
    "Create Date",
    "PMCID",
    "NIHMS ID",
    "DOI",
]


def values(series: pd.Series) -> list[str | None]:
    """Return the column as plain Python values, NA as None."""
    return [None if pd.isna(v) else v for v in series.tolist()]


def assert_all_string(frame: pd.DataFrame) -> None:
    for name in frame.columns:
        dtype = frame[name].dtype
        assert isinstance(dtype, pd.StringDtype), (name, dtype)
        assert dtype.na_value is pd.NA, (name, dtype)
        for v in frame[name].dropna():
            assert isinstance(v, str) and v != "", (name, v)


# ------------------------------------------------------------------------ the real CSVs


def test_csv_old_layout_with_bom_every_value_quoted() -> None:
    assert data_bytes(*FITBIT).startswith(b"\xef\xbb\xbf")  # the fixture really has a BOM
    df = read_pubmed(data_path(*FITBIT))

    assert list(df.columns[: len(PUBMED_CSV_COLUMNS)]) == PUBMED_CSV_COLUMNS
    assert set(CORE_COLUMNS) <= set(df.columns)
    assert isinstance(df.index, pd.RangeIndex) and len(df) == 10
    assert values(df["PMID"]) == [
        "34957939",
        "35108106",
        "35771607",
        "34881682",
        "32569509",
        "30419745",
        "34383020",
        "34784580",
        "35552166",
        "35122753",
    ]
    assert values(df["PMCID"]) == [
        None,
        "PMC8971973",
        None,
        None,
        "PMC7884020",
        None,
        None,
        None,
        "PMC9136649",
        "PMC9261968",
    ]
    assert values(df["NIHMS ID"]) == [None] * 4 + ["NIHMS1660153"] + [None] * 4 + ["NIHMS1818225"]
    assert values(df["DOI"]) == [
        "10.1080/17461391.2021.2023656",
        "10.1089/cyber.2021.0047",
        "10.2196/37086",
        "10.1080/03091902.2021.2006350",
        "10.1080/07448481.2020.1775610",
        "10.23736/S2724-5276.18.05333-1",
        "10.1093/annweh/wxab065",
        "10.1123/pes.2021-0026",
        "10.2196/31352",
        "10.1016/S0140-6736(21)02252-2",
    ]
    # The core columns PubMed spells differently are filled from its own columns.
    assert values(df["Journal"]) == values(df["Journal/Book"])
    assert values(df["Year"]) == ["2022"] * 10
    assert df.loc[1, "Authors"] == "Wang C, Lizardo O, Hachen DS."
    assert df.loc[5, "Title"].startswith("Comparison of the Fitbit® charge")  # UTF-8 kept
    assert_all_string(df)


def test_csv_new_layout_quoted_header_unquoted_empties() -> None:
    raw = data_bytes(*CHATBOT)
    assert raw.startswith(b'"PMID","Title"') and b",,," in raw
    df = read_pubmed(data_path(*CHATBOT))

    assert list(df.columns[: len(PUBMED_CSV_COLUMNS)]) == PUBMED_CSV_COLUMNS
    assert values(df["PMID"]) == [
        "35227408",
        "34847056",
        "34846321",
        "36693014",
        "34713095",
        "35137107",
    ]
    assert values(df["PMCID"]) == [None, "PMC8669585", None, None, "PMC8521912", "PMC8903403"]
    assert values(df["NIHMS ID"]) == [None] * 6
    assert values(df["DOI"]) == [
        "10.1016/j.beth.2021.09.007",
        "10.2196/27850",
        "10.1097/NCM.0000000000000504",
        "10.1177/14604582221146719",
        "10.3389/fdgth.2021.617013",
        "10.1093/jamia/ocac014",
    ]
    assert values(df["Year"]) == ["2022", "2021", "2022", "2023", "2021", "2022"]
    assert_all_string(df)


def test_both_csv_layouts_give_the_same_columns() -> None:
    old = read_pubmed(data_path(*FITBIT))
    new = read_pubmed(data_path(*CHATBOT))
    assert list(old.columns) == list(new.columns)
    assert "\ufeffPMID" not in old.columns


def test_bom_is_dropped_from_buffers_and_text_too() -> None:
    raw = data_bytes(*FITBIT)
    from_bytes = read_pubmed(raw)
    from_binary = read_pubmed(io.BytesIO(raw))
    from_text = read_pubmed(io.StringIO(raw.decode("utf-8")))  # str still carrying the BOM
    for df in (from_bytes, from_binary, from_text):
        assert df.columns[0] == "PMID"
        assert df.loc[0, "PMID"] == "34957939"


# ------------------------------------------------------------------------ the real MEDLINE files


def test_medline_four_records_with_leading_blank_line() -> None:
    assert data_bytes(*MEDLINE4).startswith(b"\n")
    df = read_pubmed(data_path(*MEDLINE4))

    assert list(df.columns) == [*CORE_COLUMNS, "Abstract", "Citation"]
    assert values(df["PMID"]) == ["16403221", "16377612", "14871861", "14630660"]
    assert values(df["PMCID"]) == ["PMC1373603", None, None, None]
    assert values(df["DOI"]) == [
        "10.1186/1471-2105-7-10",  # the [pii] AID before it is not a DOI
        "10.1093/bioinformatics/btk021",
        "10.1093/bioinformatics/bth078",  # [doi] listed before [pii]
        None,  # no AID at all
    ]
    assert values(df["Year"]) == ["2006", "2006", "2004", "2003"]
    assert values(df["Journal"]) == [
        "BMC Bioinformatics",
        "Bioinformatics",
        "Bioinformatics",
        "Bioinformatics",
    ]
    assert df.loc[0, "Authors"] == "Casbon JA, Crooks GE, Saqi MA."
    assert df.loc[2, "Authors"] == "de Hoon MJ, Imoto S, Nolan J, Miyano S."
    assert df.loc[0, "Citation"] == "BMC Bioinformatics. 2006 Jan 10;7:10."
    assert_all_string(df)


def test_medline_continuation_lines_are_joined_with_single_spaces() -> None:
    df = read_pubmed(data_path(*MEDLINE4))
    assert df.loc[1, "Title"] == (
        "GenomeDiagram: a python package for the visualization of large-scale genomic data."
    )
    abstract = df.loc[0, "Abstract"]
    assert abstract.startswith("BACKGROUND: Benchmarking algorithms in structural bioinformatics")
    # lines with trailing blanks ("The ASTRAL ") join without doubled spaces
    assert "The ASTRAL compendium provides" in abstract
    assert "  " not in abstract and "\n" not in abstract
    assert abstract.endswith("use in structural genomics easier and more principled.")


def test_medline_2023_layout_without_trailing_newline() -> None:
    raw = data_bytes(*MEDLINE2023)
    assert not raw.endswith(b"\n")
    df = read_pubmed(data_path(*MEDLINE2023))

    assert len(df) == 1
    row = df.iloc[0]
    assert row["PMID"] == "37195739"
    assert row["DOI"] == "10.1091/mbc.E22-12-0560"
    assert pd.isna(row["PMCID"])
    assert row["Year"] == "2023"
    assert row["Journal"] == "Mol Biol Cell"
    assert row["Title"] == (
        "High extracellular glucose promotes cell motility by modulating cell deformability "
        "and contractility via cAMP-RhoA-ROCK axis in human breast cancer cells."
    )
    assert row["Authors"] == "Oh M, Batty S, Banerjee N, Kim TH."
    assert row["Citation"].endswith("doi: 10.1091/mbc.E22-12-0560.")  # last line, no newline


def test_medline_crlf_and_missing_blank_separators_read_the_same() -> None:
    text = data_bytes(*MEDLINE4).decode("ascii")
    expected = read_pubmed(data_path(*MEDLINE4))
    crlf = read_pubmed(text.replace("\n", "\r\n").encode("ascii"))
    squeezed = read_pubmed("\n".join(ln for ln in text.split("\n") if ln.strip()).encode())
    pd.testing.assert_frame_equal(crlf, expected)
    pd.testing.assert_frame_equal(squeezed, expected)


def test_medline_book_record_gets_nbk_and_book_title() -> None:
    text = (
        "PMID- 30000003\n"
        "DP  - 2019\n"
        "TI  - An example chapter about a\n"
        "      condition.\n"
        "BTI - Example Handbook\n"
        "FAU - Roe, Richard\n"
        "AU  - Roe R\n"
        "CN  - Example Working Group\n"
        "MID - NIHMS7000003\n"
        "AID - NBK700003 [bookaccession]\n"
        "\n"
        "PMID- 30000004\n"
        "LID - 10.1000/xyz-lid [doi]\n"
        "DP  - 1998 Dec-1999 Jan\n"
        "TI  - A journal record\n"
        "TA  - J Ex\n"
    )
    df = read_pubmed(text.encode(), format="nbib")
    assert list(df.columns) == [*CORE_COLUMNS, "NBK", "NIHMS ID", "Abstract", "Citation"]
    assert values(df["NBK"]) == ["NBK700003", None]
    assert values(df["NIHMS ID"]) == ["NIHMS7000003", None]
    assert values(df["Title"]) == ["An example chapter about a condition.", "A journal record"]
    assert values(df["Journal"]) == ["Example Handbook", "J Ex"]
    assert values(df["DOI"]) == [None, "10.1000/xyz-lid"]  # LID when there is no AID
    assert values(df["Year"]) == ["2019", "1998"]
    assert values(df["Authors"]) == ["Roe R, Example Working Group.", None]


def test_medline_junk_before_first_tag_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"<bytes>: not MEDLINE text"):
        read_pubmed(b"this is not medline\nPMID- 30000001\n", format="medline")


_WORD = st.text(
    alphabet=st.characters(max_codepoint=0x2FF, categories=("L", "N", "P", "S")),
    min_size=1,
    max_size=15,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_WORD, min_size=1, max_size=40))
def test_medline_wrapped_value_round_trips(words: list[str]) -> None:
    title = " ".join(words)
    # PubMed wraps at spaces only, never inside a word or after a hyphen.
    lines = textwrap.wrap(
        title,
        width=80,
        initial_indent="TI  - ",
        subsequent_indent="      ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    doc = "PMID- 30000001\n" + "\n".join(lines) + "\nDP  - 2020\n"
    df = read_pubmed(doc.encode("utf-8"), format="medline")
    assert df.loc[0, "Title"] == title
    assert df.loc[0, "Year"] == "2020"


# ------------------------------------------------------------------------ PubMed XML

PUBMED_XML = b"""<?xml version="1.0" ?>
<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" \
"https://dtd.nlm.nih.gov/ncbi/pubmed/out/pubmed_250101.dtd">
<PubmedArticleSet>
<PubmedArticle>
    <MedlineCitation Status="MEDLINE" Owner="NLM" IndexingMethod="Automated">
        <PMID Version="1">30000001</PMID>
        <DateCompleted><Year>2021</Year><Month>04</Month><Day>01</Day></DateCompleted>
        <Article PubModel="Print-Electronic">
            <Journal>
                <ISSN IssnType="Electronic">1000-0001</ISSN>
                <JournalIssue CitedMedium="Internet">
                    <Volume>12</Volume>
                    <Issue>3</Issue>
                    <PubDate><Year>2021</Year><Month>Mar</Month></PubDate>
                </JournalIssue>
                <Title>Journal of examples</Title>
                <ISOAbbreviation>J. Ex.</ISOAbbreviation>
            </Journal>
            <ArticleTitle>Measuring <i>in vitro</i> growth
                of CO<sub>2</sub>-fixing cells.</ArticleTitle>
            <Pagination><StartPage>1</StartPage><MedlinePgn>1-9</MedlinePgn></Pagination>
            <ELocationID EIdType="doi" ValidYN="Y">10.1000/xyz123</ELocationID>
            <Abstract>
                <AbstractText Label="BACKGROUND" NlmCategory="BACKGROUND">Cells grow.</AbstractText>
                <AbstractText Label="RESULTS" NlmCategory="RESULTS"
                    >They grew &amp; divided.</AbstractText>
            </Abstract>
            <AuthorList CompleteYN="Y">
                <Author ValidYN="Y">
                    <LastName>Doe</LastName><ForeName>Jane A</ForeName><Initials>JA</Initials>
                    <AffiliationInfo>
                        <Affiliation>Example University.</Affiliation>
                    </AffiliationInfo>
                </Author>
                <Author ValidYN="Y"><CollectiveName>Example Consortium</CollectiveName></Author>
            </AuthorList>
            <Language>eng</Language>
            <PublicationTypeList>
                <PublicationType UI="D016428">Journal Article</PublicationType>
            </PublicationTypeList>
            <ArticleDate DateType="Electronic">
                <Year>2020</Year><Month>12</Month><Day>01</Day>
            </ArticleDate>
        </Article>
        <MedlineJournalInfo>
            <Country>United States</Country>
            <MedlineTA>J Ex</MedlineTA>
            <NlmUniqueID>100000001</NlmUniqueID>
            <ISSNLinking>1000-0001</ISSNLinking>
        </MedlineJournalInfo>
    </MedlineCitation>
    <PubmedData>
        <History>
            <PubMedPubDate PubStatus="pubmed">
                <Year>2020</Year><Month>12</Month><Day>2</Day>
            </PubMedPubDate>
        </History>
        <PublicationStatus>ppublish</PublicationStatus>
        <ArticleIdList>
            <ArticleId IdType="pubmed">30000001</ArticleId>
            <ArticleId IdType="pmc">PMC7000001</ArticleId>
            <ArticleId IdType="doi">10.1000/xyz123</ArticleId>
            <ArticleId IdType="mid">NIHMS7000001</ArticleId>
        </ArticleIdList>
    </PubmedData>
</PubmedArticle>
<PubmedArticle>
    <MedlineCitation Status="PubMed-not-MEDLINE" Owner="NLM">
        <PMID Version="1">30000002</PMID>
        <Article PubModel="Print">
            <Journal>
                <JournalIssue CitedMedium="Print">
                    <PubDate><MedlineDate>1998 Dec-1999 Jan</MedlineDate></PubDate>
                </JournalIssue>
                <Title>Journal of examples</Title>
            </Journal>
            <ArticleTitle>A second article.</ArticleTitle>
            <ELocationID EIdType="pii" ValidYN="Y">S0000-0000(98)00002-2</ELocationID>
            <ELocationID EIdType="doi" ValidYN="Y">10.1000/abc456</ELocationID>
            <AuthorList CompleteYN="Y">
                <Author ValidYN="Y"><LastName>Smith</LastName><ForeName>Ann</ForeName></Author>
            </AuthorList>
        </Article>
    </MedlineCitation>
    <PubmedData>
        <PublicationStatus>ppublish</PublicationStatus>
        <ArticleIdList>
            <ArticleId IdType="pubmed">30000002</ArticleId>
        </ArticleIdList>
        <ReferenceList>
            <Reference>
                <Citation>A cited work. J Ex. 1990;1:1.</Citation>
                <ArticleIdList>
                    <ArticleId IdType="pubmed">30000009</ArticleId>
                    <ArticleId IdType="pmc">PMC7000009</ArticleId>
                    <ArticleId IdType="doi">10.1000/cited</ArticleId>
                </ArticleIdList>
            </Reference>
        </ReferenceList>
    </PubmedData>
</PubmedArticle>
<PubmedBookArticle>
    <BookDocument>
        <PMID Version="1">30000003</PMID>
        <ArticleIdList>
            <ArticleId IdType="bookaccession">NBK700003</ArticleId>
        </ArticleIdList>
        <Book>
            <Publisher>
                <PublisherName>Example Press</PublisherName>
                <PublisherLocation>Bethesda (MD)</PublisherLocation>
            </Publisher>
            <BookTitle book="exbook">Example Handbook</BookTitle>
            <PubDate><Year>2019</Year></PubDate>
            <AuthorList Type="editors">
                <Author><LastName>Editor</LastName><ForeName>Ed</ForeName><Initials>E</Initials></Author>
            </AuthorList>
            <Medium>Internet</Medium>
        </Book>
        <LocationLabel Type="chapter">Chapter 1</LocationLabel>
        <ArticleTitle book="exbook" part="ch1">An example chapter</ArticleTitle>
        <Language>eng</Language>
        <AuthorList Type="authors">
            <Author><LastName>Roe</LastName><ForeName>Richard</ForeName><Initials>R</Initials></Author>
        </AuthorList>
        <PublicationType UI="D016454">Review</PublicationType>
        <Abstract><AbstractText>A chapter abstract.</AbstractText></Abstract>
    </BookDocument>
    <PubmedBookData>
        <History>
            <PubMedPubDate PubStatus="pubmed">
                <Year>2019</Year><Month>1</Month><Day>1</Day>
            </PubMedPubDate>
        </History>
        <PublicationStatus>ppublish</PublicationStatus>
        <ArticleIdList>
            <ArticleId IdType="bookaccession">NBK700003</ArticleId>
            <ArticleId IdType="pubmed">30000003</ArticleId>
        </ArticleIdList>
    </PubmedBookData>
</PubmedBookArticle>
<DeleteCitation><PMID Version="1">30000008</PMID></DeleteCitation>
</PubmedArticleSet>
"""


def test_xml_articles_and_book_article() -> None:
    df = read_pubmed(PUBMED_XML)

    assert list(df.columns) == [*CORE_COLUMNS, "NBK", "NIHMS ID", "Abstract"]
    assert values(df["PMID"]) == ["30000001", "30000002", "30000003"]  # DeleteCitation skipped
    assert values(df["PMCID"]) == ["PMC7000001", None, None]  # a cited work's PMC id is not ours
    assert values(df["DOI"]) == ["10.1000/xyz123", "10.1000/abc456", None]  # ELocationID fallback
    assert values(df["NBK"]) == [None, None, "NBK700003"]
    assert values(df["NIHMS ID"]) == ["NIHMS7000001", None, None]
    assert values(df["Year"]) == ["2021", "1998", "2019"]
    assert values(df["Journal"]) == ["J Ex", "Journal of examples", "Example Handbook"]
    assert values(df["Title"]) == [
        "Measuring in vitro growth of CO2-fixing cells.",
        "A second article.",
        "An example chapter",
    ]
    assert values(df["Authors"]) == ["Doe JA, Example Consortium.", "Smith.", "Roe R."]
    assert values(df["Abstract"]) == [
        "BACKGROUND: Cells grow. RESULTS: They grew & divided.",
        None,
        "A chapter abstract.",
    ]
    assert_all_string(df)


def test_xml_is_sniffed_from_paths_and_text_streams(tmp_path: Path) -> None:
    path = tmp_path / "pubmed.xml"
    path.write_bytes(PUBMED_XML)
    expected = read_pubmed(PUBMED_XML, format="xml")
    pd.testing.assert_frame_equal(read_pubmed(path), expected)
    pd.testing.assert_frame_equal(read_table(path), expected)
    pd.testing.assert_frame_equal(read_pubmed(io.StringIO(PUBMED_XML.decode())), expected)


def test_xml_single_article_root_and_empty_set() -> None:
    start = PUBMED_XML.index(b"<PubmedBookArticle>")
    end = PUBMED_XML.index(b"</PubmedBookArticle>") + len(b"</PubmedBookArticle>")
    one = read_pubmed(PUBMED_XML[start:end])
    assert values(one["PMID"]) == ["30000003"]
    assert values(one["NBK"]) == ["NBK700003"]

    empty = read_pubmed(b"<PubmedArticleSet></PubmedArticleSet>")
    assert len(empty) == 0 and list(empty.columns) == [*CORE_COLUMNS, "Abstract"]
    assert_all_string(empty)


BILLION_LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE PubmedArticleSet [
  <!ENTITY lol "lol">
  <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
  <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
  <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
]>
<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>30000001</PMID>
<Article><ArticleTitle>&lol4;</ArticleTitle></Article></MedlineCitation></PubmedArticle>
</PubmedArticleSet>
"""

XXE = b"""<?xml version="1.0"?>
<!DOCTYPE PubmedArticleSet [<!ENTITY xxe SYSTEM "file:///etc/hostname">]>
<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>30000001</PMID>
<Article><ArticleTitle>&xxe;</ArticleTitle></Article></MedlineCitation></PubmedArticle>
</PubmedArticleSet>
"""


@pytest.mark.parametrize("doc", [BILLION_LAUGHS, XXE], ids=["bomb", "xxe"])
def test_xml_entity_tricks_are_refused_with_a_clear_error(doc: bytes, tmp_path: Path) -> None:
    path = tmp_path / "evil.xml"
    path.write_bytes(doc)
    with pytest.raises(XmlError, match=r"evil\.xml: .*entities; refused"):
        read_pubmed(path)
    with pytest.raises(ValueError, match="entities"):
        read_table(path)


def test_xml_external_dtd_is_never_fetched(tmp_path: Path) -> None:
    # A SYSTEM id pointing at a local file that would break the parse if it were loaded.
    dtd = tmp_path / "evil.dtd"
    dtd.write_text("this is not a DTD <<<")
    doc = (
        f'<?xml version="1.0"?>\n<!DOCTYPE PubmedArticleSet SYSTEM "{dtd.as_uri()}">\n'
        "<PubmedArticleSet><PubmedArticle><MedlineCitation><PMID>30000001</PMID>"
        "</MedlineCitation></PubmedArticle></PubmedArticleSet>"
    ).encode()
    assert values(read_pubmed(doc)["PMID"]) == ["30000001"]


def test_xml_that_is_not_pubmed_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"not PubMed XML \(root element <article>"):
        read_pubmed(b"<article><front/></article>")
    with pytest.raises(XmlError, match="malformed"):
        read_pubmed(b"<PubmedArticleSet><PubmedArticle>", format="xml")


# ------------------------------------------------------------------------ ids, sniffing, input


def test_ids_from_every_format_are_canonical_for_the_parsers() -> None:
    """What the readers put in PMID / PMCID / DOI / NBK is what the accessor's parsers accept."""
    frames = [
        read_pubmed(data_path(*FITBIT)),
        read_pubmed(data_path(*CHATBOT)),
        read_pubmed(data_path(*MEDLINE4)),
        read_pubmed(data_path(*MEDLINE2023)),
        read_pubmed(PUBMED_XML),
    ]
    seen = 0
    for df in frames:
        for column, parse in (
            ("PMID", parse_pmid),
            ("PMCID", parse_pmcid),
            ("DOI", parse_doi),
            ("NBK", parse_bookid),
        ):
            if column not in df.columns:
                continue
            for value in df[column].dropna():
                assert parse(value) == value
                seen += 1
    # fitbit 10+4+10, chatbot 6+3+6, MEDLINE 4+1+3 and 1+0+1, XML 3+1+2 (+1 NBK)
    assert seen == 24 + 15 + 8 + 2 + 7


def test_ids_stay_strings_even_with_blank_cells() -> None:
    csv = (
        b'"PMID","Title","PMCID","DOI"\n'
        b'"30000001","A",,\n'
        b',"B","PMC7000002",\n'
        b'"30000003",,7000003,\n'
    )
    df = read_pubmed(csv)
    assert values(df["PMID"]) == ["30000001", None, "30000003"]
    assert values(df["PMCID"]) == [None, "PMC7000002", "7000003"]  # values are not rewritten
    assert values(df["Year"]) == [None, None, None]  # a core column PubMed did not write
    assert_all_string(df)


def test_keep_na_like_words_as_text() -> None:
    df = read_pubmed(b"PMID,Title\n30000001,NA\n30000002,null\n")
    assert values(df["Title"]) == ["NA", "null"]


def test_sniffing_and_explicit_format() -> None:
    assert sniff_pubmed_format(data_bytes(*FITBIT)) == "csv"
    assert sniff_pubmed_format(data_bytes(*CHATBOT)) == "csv"
    assert sniff_pubmed_format(data_bytes(*MEDLINE4)) == "medline"
    assert sniff_pubmed_format(data_bytes(*MEDLINE2023).decode()) == "medline"
    assert sniff_pubmed_format(PUBMED_XML) == "xml"
    assert sniff_pubmed_format(b"\xef\xbb\xbf  <PubmedArticleSet/>") == "xml"
    with pytest.raises(ValueError, match="unknown PubMed export format 'ris'"):
        read_pubmed(data_path(*MEDLINE4), format="ris")
    # Forcing CSV on MEDLINE text fails loudly instead of returning nonsense.
    with pytest.raises(ValueError, match="not a PubMed CSV export"):
        read_pubmed(data_path(*MEDLINE4), format="csv")


def test_open_text_file(tmp_path: Path) -> None:
    with data_path(*MEDLINE2023).open(encoding="utf-8") as fh:
        df = read_pubmed(fh)
    assert values(df["PMID"]) == ["37195739"]


def test_missing_path_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "export.csv"
    with pytest.raises(FileNotFoundError) as info:
        read_pubmed(missing)
    assert info.value.filename == str(missing)
    with pytest.raises(FileNotFoundError, match=r"export\.csv") as info2:
        read_table(missing)
    assert info2.value.filename == str(missing)


def test_latin1_file_is_a_clear_error_until_the_encoding_is_given(tmp_path: Path) -> None:
    medline = tmp_path / "export.nbib"
    medline.write_bytes("PMID- 30000001\nTI  - Caf\u00e9 society\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"export\.nbib: not valid utf-8 text .*encoding=") as info:
        read_table(medline)
    assert "0xe9" in str(info.value)
    assert read_table(medline, encoding="latin-1").loc[0, "Title"] == "Caf\u00e9 society"

    csv = tmp_path / "table.csv"
    csv.write_bytes("PMID,Title\n30000001,Caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"table\.csv: not valid utf-8 text .*encoding="):
        read_table(csv)
    with pytest.raises(ValueError, match=r"table\.csv: not valid utf-8 text"):
        read_pubmed(csv)
    assert read_pubmed(csv, encoding="latin-1").loc[0, "Title"] == "Caf\u00e9"
    assert read_table(csv, encoding="latin-1").loc[0, "Title"] == "Caf\u00e9"


# ------------------------------------------------------------------------ read_table


@pytest.mark.parametrize(
    "name", ["articles.xlsx", "articles.docx", "articles", "articles.json.gz", "a.txt.gz"]
)
def test_unknown_suffix_is_a_clear_error(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"PMID\n30000001\n")
    with pytest.raises(ValueError, match=r"(cannot read|not read|not supported|no suffix)"):
        read_table(path)


def test_unknown_suffix_message_lists_what_is_supported(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"cannot read '\.docx' files; supported: \.csv, \.tsv"):
        read_table(tmp_path / "a.docx")
    with pytest.raises(ValueError, match="save the sheet as CSV"):
        read_table(tmp_path / "a.XLSX")


def test_read_table_csv_keeps_pubmed_columns_and_drops_bom() -> None:
    df = read_table(data_path(*FITBIT))
    assert list(df.columns) == PUBMED_CSV_COLUMNS  # a plain table: nothing added
    assert df.loc[1, "PMCID"] == "PMC8971973"
    assert pd.isna(df.loc[0, "PMCID"])
    assert_all_string(df)


def test_read_table_tsv_and_compressed_csv(tmp_path: Path) -> None:
    tsv = tmp_path / "ids.tab"
    tsv.write_text("PubMed ID\tDOI_link\n30000001\thttps://doi.org/10.1000/a\n\t\n00042\tx\n")
    df = read_table(tsv)
    assert values(df["PubMed ID"]) == ["30000001", None, "00042"]  # leading zeros survive
    assert values(df["DOI_link"]) == ["https://doi.org/10.1000/a", None, "x"]

    gz = tmp_path / "ids.csv.gz"
    gz.write_bytes(gzip.compress(b"\xef\xbb\xbfpmid,score\n30000001,1\n30000002,\n"))
    df = read_table(gz)
    assert list(df.columns) == ["pmid", "score"]
    assert values(df["score"]) == ["1", None]


def test_read_table_passes_reader_options(tmp_path: Path) -> None:
    path = tmp_path / "semi.csv"
    path.write_text("pmid;doi\n30000001;10.1000/a\n")
    df = read_table(path, sep=";")
    assert values(df["doi"]) == ["10.1000/a"]


def test_read_table_parquet_every_column_text(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    source = pd.DataFrame(
        {
            "pmid": pd.Series([30000001, 30000002, 30000003], dtype="int64"),
            "pmcid_digits": [7000001.0, float("nan"), 7000003.0],
            "score": [0.5, 1.0, float("nan")],
            "doi": ["10.1000/a", None, "10.1000/c"],
            "oa": [True, False, True],
        }
    )
    path = tmp_path / "t.parquet"
    source.to_parquet(path)
    df = read_table(path)
    assert values(df["pmid"]) == ["30000001", "30000002", "30000003"]
    assert values(df["pmcid_digits"]) == ["7000001", None, "7000003"]  # never 7000001.0
    assert values(df["score"]) == ["0.5", "1.0", None]  # real fractions stay as written
    assert values(df["doi"]) == ["10.1000/a", None, "10.1000/c"]
    assert values(df["oa"]) == ["True", "False", "True"]
    assert_all_string(df)


def test_frames_are_what_id_detection_finds() -> None:
    columns = pytest.importorskip("litfetch_df.frame.io.columns")
    for df in (
        read_pubmed(data_path(*FITBIT)),
        read_pubmed(data_path(*CHATBOT)),
        read_pubmed(data_path(*MEDLINE4)),
        read_pubmed(data_path(*MEDLINE2023)),
    ):
        found = columns.detect_id_columns(df.columns)
        assert (found.pmid, found.pmcid, found.doi, found.bookid) == ("PMID", "PMCID", "DOI", None)
    found = columns.detect_id_columns(read_pubmed(PUBMED_XML).columns)
    assert (found.pmid, found.pmcid, found.doi, found.bookid) == ("PMID", "PMCID", "DOI", "NBK")
