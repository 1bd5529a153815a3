"""Access terms in answers the services already give: Crossref, S2, OpenAlex (issue 15).

Each reader is checked on real recorded answers (tests/data/json, see PROVENANCE.md).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from litfetch_df import SourceMetadata
from litfetch_df.frame.engine.licence_family import licence_family
from litfetch_df.sources.crossref import crossref_licence
from litfetch_df.sources.openalex import openalex_access
from litfetch_df.sources.semantic_scholar import s2_access
from tests.conftest import data_bytes


def recorded(name: str) -> Any:
    return json.loads(data_bytes("json", name))


def test_crossref_version_of_record_licence_beats_the_tdm_licences() -> None:
    # Elsevier: two publisher TDM licences listed before the CC BY version of record.
    record = recorded("crossref_work_10.1016_j.xgen.2025.100814_elsevier-tdm-links.json")
    got = crossref_licence(record["message"])
    assert got == SourceMetadata(
        licence="http://creativecommons.org/licenses/by/4.0/", basis="crossref"
    )
    assert licence_family(got.licence) == "cc-by"


def test_crossref_nature_record() -> None:
    record = recorded("crossref_work_10.1038_s42256-024-00832-8_links-ccby.json")
    assert (
        crossref_licence(record["message"]).licence == "https://creativecommons.org/licenses/by/4.0"
    )


def test_crossref_without_licences_states_nothing() -> None:
    record = recorded("crossref_work_10.3389_fgene.2017.00147_has-preprint.json")
    assert crossref_licence(record["message"]) == SourceMetadata()


@pytest.mark.parametrize(
    ("entries", "licence"),
    [
        (  # accepted manuscript before "unspecified"; vor absent
            [
                {"content-version": "unspecified", "URL": "https://publisher.example/terms"},
                {"content-version": "am", "URL": "https://creativecommons.org/licenses/by-nc/4.0/"},
            ],
            "https://creativecommons.org/licenses/by-nc/4.0/",
        ),
        (  # within the version of record, the open licence URL first
            [
                {"content-version": "vor", "URL": "https://publisher.example/terms"},
                {"content-version": "vor", "URL": "https://creativecommons.org/licenses/by/4.0/"},
            ],
            "https://creativecommons.org/licenses/by/4.0/",
        ),
        ([{"content-version": "vor", "URL": " "}, "junk", {"URL": 3}], None),
    ],
)
def test_crossref_ranking(entries: list[object], licence: str | None) -> None:
    assert crossref_licence({"license": entries}).licence == licence


def test_semantic_scholar_status_and_licence() -> None:
    nature = recorded("s2_graph_paper_DOI_10.1038_s42256-024-00832-8.json")
    assert s2_access(nature) == SourceMetadata("CCBY", "HYBRID", "semantic_scholar")
    assert licence_family("CCBY") == "cc-by"
    # The status stands though the "PDF" URL is a doi.org landing page.
    xgen = recorded("s2_graph_paper_DOI_10.1016_j.xgen.2025.100814.json")
    assert s2_access(xgen) == SourceMetadata("CCBY", "GOLD", "semantic_scholar")
    assert s2_access({"openAccessPdf": None}) == SourceMetadata()


def test_openalex_open_access() -> None:
    pnas = recorded("openalex_work_doi_10.1073_pnas.1414271111.json")
    assert openalex_access(pnas) == SourceMetadata(None, "bronze", "openalex")
    xgen = recorded("openalex_work_doi_10.1016_j.xgen.2025.100814.json")
    assert openalex_access(xgen) == SourceMetadata("cc-by", "gold", "openalex")
    assert openalex_access({"open_access": {"oa_status": " "}}) == SourceMetadata()


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("true", SourceMetadata(access="open-access", basis="springer")),
        ("false", SourceMetadata(access="closed", basis="springer")),
        (True, SourceMetadata()),  # the API sends strings; anything else states nothing
        (None, SourceMetadata()),
    ],
)
def test_springer_meta_openaccess_flag(flag: object, expected: SourceMetadata) -> None:
    from litfetch_df.sources.springer import springer_meta_access

    assert springer_meta_access({"doi": "10.1007/x", "openaccess": flag}) == expected
