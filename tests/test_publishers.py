"""Publisher gating: who a DOI belongs to, and the Springer rungs asking only about their own."""

from __future__ import annotations

import httpx
import pytest

from litfetch_df import ArticleIds
from litfetch_df.publishers import (
    ELSEVIER_PREFIXES,
    SPRINGER_NATURE_PREFIXES,
    Publisher,
    by_crossref,
    by_prefix,
    doi_prefix,
    publisher_of,
)
from litfetch_df.sources.springer import SpringerFetcher, SpringerFileSource, springer_serves
from litfetch_df.sources.springer_batch import springer_batch_key, springer_batch_records
from tests.conftest import data_json, mock_session

OA_KEY = "sk-OA-gating-0123"
META_KEY = "sk-META-gating-4567"


@pytest.mark.parametrize(
    ("doi", "publisher"),
    [
        ("10.1007/s00000-026-00001-x", Publisher.SPRINGER_NATURE),  # Springer
        ("10.1186/s12864-020-6510-1", Publisher.SPRINGER_NATURE),  # BioMed Central
        ("10.1038/s42256-024-00832-8", Publisher.SPRINGER_NATURE),  # Nature
        ("10.1057/palcomms.2016.1", Publisher.SPRINGER_NATURE),  # Palgrave Macmillan
        ("10.1016/j.xgen.2025.100814", Publisher.ELSEVIER),
        ("10.1053/j.gastro.2020.01.001", Publisher.ELSEVIER),  # W.B. Saunders
        ("10.1067/mcp.2001.1", Publisher.ELSEVIER),  # Mosby
        ("10.1383/medc.2005.1", Publisher.ELSEVIER),
        ("10.1371/journal.pone.0000001", Publisher.OTHER),  # PLOS
        ("10.10070/not.springer", Publisher.OTHER),  # a longer prefix is another prefix
        ("10.1101/2024.04.01.587366", Publisher.OTHER),
    ],
)
def test_prefixes_name_their_publisher(doi: str, publisher: Publisher) -> None:
    assert by_prefix(doi) is publisher
    assert publisher_of(doi) is publisher


def test_the_prefix_lists_hold_only_prefixes_and_do_not_overlap() -> None:
    for prefix in SPRINGER_NATURE_PREFIXES | ELSEVIER_PREFIXES:
        assert doi_prefix(f"{prefix}/x") == prefix
    assert not SPRINGER_NATURE_PREFIXES & ELSEVIER_PREFIXES
    assert {"10.1007", "10.1186", "10.1038", "10.1057"} <= SPRINGER_NATURE_PREFIXES
    assert {"10.1016", "10.1053", "10.1054", "10.1067", "10.1078", "10.1383"} <= ELSEVIER_PREFIXES
    assert doi_prefix("not a doi") is None
    assert by_prefix("not a doi") is Publisher.OTHER


def test_a_recorded_crossref_record_names_its_member() -> None:
    nature = data_json("json", "crossref_work_10.1038_s42256-024-00832-8_links-ccby.json")[
        "message"
    ]
    elsevier = data_json("json", "crossref_work_10.1016_j.xgen.2025.100814_elsevier-tdm-links.json")
    assert by_crossref(nature) is Publisher.SPRINGER_NATURE
    assert by_crossref(elsevier["message"]) is Publisher.ELSEVIER


@pytest.mark.parametrize(
    ("record", "publisher"),
    [
        ({"member": "297", "publisher": "Anything"}, Publisher.SPRINGER_NATURE),
        ({"member": 339}, Publisher.SPRINGER_NATURE),
        ({"member": "78"}, Publisher.ELSEVIER),
        # An unknown member id: the registrant's name decides.
        (
            {"member": "4242", "publisher": "Springer Science and Business Media LLC"},
            Publisher.SPRINGER_NATURE,
        ),
        ({"member": "4242", "publisher": "BioMed Central"}, Publisher.SPRINGER_NATURE),
        ({"member": "4242", "publisher": "Elsevier BV"}, Publisher.ELSEVIER),
        ({"member": "311", "publisher": "Wiley"}, Publisher.OTHER),
        ({"publisher": "Public Library of Science (PLoS)"}, Publisher.OTHER),
    ],
)
def test_crossref_member_then_name_settle_the_publisher(
    record: dict[str, object], publisher: Publisher
) -> None:
    assert by_crossref(record) is publisher


def test_a_crossref_record_outweighs_the_prefix_and_silence_leaves_it_to_the_prefix() -> None:
    # A journal that moved away keeps its old prefix; Crossref names the registrant today.
    moved = {"member": "311", "publisher": "Wiley"}
    assert publisher_of("10.1007/s1-moved", moved) is Publisher.OTHER
    acquired = {"member": "297", "publisher": "Springer Science and Business Media LLC"}
    assert publisher_of("10.9999/acquired.1", acquired) is Publisher.SPRINGER_NATURE
    assert by_crossref({}) is None
    assert publisher_of("10.1007/s1-x", {}) is Publisher.SPRINGER_NATURE
    assert publisher_of("10.1000/x", {"member": None, "publisher": "  "}) is Publisher.OTHER


# -- the Springer rungs ask only about Springer Nature's DOIs --------------------------------------


def test_springer_serves_its_prefixes_only() -> None:
    assert springer_serves("10.1007/s1-x") and springer_serves("10.1186/abc")
    assert not springer_serves("10.1016/j.x.1") and not springer_serves("10.1000/abc.1")


async def test_springer_rungs_make_no_request_for_another_publishers_doi() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"records": []})

    creds = {"springer_api_key": OA_KEY, "springer_meta_api_key": META_KEY}
    async with mock_session(handler) as session:
        for doi in ("10.1016/j.xgen.2025.100814", "10.1000/abc.1", "10.1101/2024.04.01.587366"):
            ids = ArticleIds(doi=doi)
            assert await SpringerFetcher().fetch(ids, credentials=creds, http=session) is None
            files = await SpringerFileSource().list_files(ids, credentials=creds, http=session)
            assert files == ()
        assert session.failures == ()  # not asked is not failed
        # A Springer Nature DOI is asked, by both.
        ids = ArticleIds(doi="10.1186/s12864-020-6510-1")
        await SpringerFetcher().fetch(ids, credentials=creds, http=session)
        await SpringerFileSource().list_files(ids, credentials=creds, http=session)
    assert [r.url.path for r in seen] == ["/openaccess/jats", "/meta/v2/json"]
    assert all(r.url.params["q"] == "doi:10.1186/s12864-020-6510-1" for r in seen)


async def test_springer_bulk_lookup_asks_only_springer_nature_dois() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"records": []})

    batch = [
        ArticleIds(doi="10.1007/s1-a"),
        ArticleIds(doi="10.1016/j.x.1"),
        ArticleIds(doi="10.1038/s2-b"),
        ArticleIds(doi="10.1000/abc.1"),
        ArticleIds(pmid="1"),
    ]
    assert [springer_batch_key(ids) is not None for ids in batch] == [
        True,
        False,
        True,
        False,
        False,
    ]
    async with mock_session(handler) as session:
        result = await springer_batch_records(
            batch, session, credentials={"springer_meta_api_key": META_KEY}
        )
    assert list(result.values) == [None] * len(batch) and not result.abandoned
    (request,) = seen
    assert request.url.params["q"] == "doi:10.1007/s1-a OR doi:10.1038/s2-b"
