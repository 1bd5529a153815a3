"""``oa_status``: one open-access status per row, beside the raw ``access`` (issue 16, item 3).

Unpaywall's recorded answers give the value; a body's own ``open-access``
gives no colour; ``diamond`` counts as ``gold``; the chained and one-pass
frames agree; a re-run keeps the column; the summary counts it.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import litfetch_df.frame  # registers .lit
from litfetch_df import Blob, File, FileKind, Session, SourceMetadata
from litfetch_df.frame.engine.oa_status import OA_STATUSES, normalise_oa_status, service_oa_status
from tests.conftest import FAST_RETRY, data_json
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream, json_response
from tests.fakes.world import CC_BY, Article, BodyHome, LicenceStyle, World
from tests.test_frame_pipeline import JATS, JATS_2, session_for

assert litfetch_df.frame

CONTACT = "me@lab.example"
UNPAYWALL = "api.unpaywall.org"

# Recorded Unpaywall answers (tests/data/PROVENANCE.md), keyed by their DOI.
RECORDED = {
    "10.1016/j.xgen.2025.100814": "unpaywall_v2_10.1016_j.xgen.2025.100814_gold.json",
    "10.1073/pnas.1414271111": "unpaywall_v2_10.1073_pnas.1414271111_bronze_pmc-repository.json",
    "10.1007/s40278-023-41815-2": "unpaywall_v2_10.1007_s40278-023-41815-2_closed.json",
}


def _values(column: pd.Series) -> list[object]:
    """A column's cells with NA as ``None``, to compare with a plain list."""
    return [None if pd.isna(v) else v for v in column.tolist()]


def _jats(content: bytes) -> Blob:
    return Blob(File(FileKind.BODY, "europe_pmc", "application/jats+xml"), content)


@pytest.fixture
def recorded(fake: FakeUpstream) -> Iterator[FakeUpstream]:
    """Unpaywall answering each recorded DOI with its recorded body, any other with a 404."""
    records = {doi: data_json("json", name) for doi, name in RECORDED.items()}

    def answer(req: FakeRequest) -> FakeResponse:
        doi = urllib.parse.unquote(req.path.removeprefix("/v2/")).lower()
        record = records.get(doi)
        if record is None:
            return FakeResponse(404, {"HTTP_status_code": 404, "error": True})
        return json_response(record)

    fake.route(UNPAYWALL, r"/v2/.+", answer)
    yield fake


# -- the vocabulary ---------------------------------------------------------------------------


@pytest.mark.parametrize("status", OA_STATUSES)
def test_every_unpaywall_status_is_kept(status: str) -> None:
    assert normalise_oa_status(status) == status
    assert normalise_oa_status(f"  {status.upper()} ") == status


@pytest.mark.parametrize("raw", ["open-access", "", "  ", "unknown", None, 3])
def test_anything_else_is_no_status(raw: object) -> None:
    assert normalise_oa_status(raw) is None


def test_diamond_counts_as_gold() -> None:
    assert normalise_oa_status("diamond") == "gold"


def test_only_a_service_status_is_a_colour() -> None:
    assert service_oa_status(SourceMetadata("cc-by", "bronze", "unpaywall")) == "bronze"
    assert service_oa_status(SourceMetadata(None, "diamond", "openalex")) == "gold"
    assert service_oa_status(SourceMetadata("cc-by", "open-access", "artifact")) is None
    # the body gave the licence, Unpaywall the status
    stated = SourceMetadata("cc-by", "hybrid", "artifact", access_basis="unpaywall")
    assert service_oa_status(stated) == "hybrid"


# -- the licences step ---------------------------------------------------------------------------


def test_recorded_unpaywall_answers_give_the_status(recorded: FakeUpstream) -> None:
    df = pd.DataFrame({"doi": [*RECORDED, "10.1000/unknown.1"]})
    out = df.lit.licences(
        resolve=False, session=session_for(recorded, contact=CONTACT), progress=False
    )
    assert str(out["oa_status"].dtype) == "string"
    assert out["oa_status"].tolist()[:3] == ["gold", "bronze", "closed"]
    assert out["access"].tolist()[:3] == ["gold", "bronze", "closed"]
    # Unpaywall does not know the last DOI: no status, and no error either (nothing to report)
    assert pd.isna(out.loc[3, "oa_status"]) and pd.isna(out.loc[3, "licence_error"])
    assert _values(out["licence_family"])[:3] == ["cc-by", None, None]


def test_a_body_with_a_doi_takes_its_colour_from_unpaywall(recorded: FakeUpstream) -> None:
    df = pd.DataFrame(
        {"doi": ["10.1073/pnas.1414271111", "10.1000/unknown.1"], "body": [_jats(JATS)] * 2}
    )
    out = df.lit.licences(
        resolve=False, session=session_for(recorded, contact=CONTACT), progress=False
    )
    # the body's own terms stay as they are, raw; the colour is Unpaywall's
    assert out["access"].tolist() == ["open-access", "open-access"]
    assert out["access_basis"].tolist() == ["artifact", "artifact"]
    assert out["licence_family"].tolist() == ["cc-by", "cc-by"]
    assert out.loc[0, "oa_status"] == "bronze"
    # a body Unpaywall knows nothing about: open, but no colour is invented
    assert pd.isna(out.loc[1, "oa_status"])
    assert recorded.count(UNPAYWALL) == 2


def test_a_body_alone_gives_no_colour(fake: FakeUpstream) -> None:
    # No DOI to ask about (and no contact): only the body's statement.
    df = pd.DataFrame({"pmcid": ["PMC3166277", "PMC2599765"], "body": [_jats(JATS), _jats(JATS_2)]})
    out = df.lit.licences(resolve=False, session=session_for(fake), progress=False)
    assert out["access"].tolist() == ["open-access", "open-access"]
    assert out["licence_family"].tolist() == ["cc-by", "public-domain"]
    assert out["oa_status"].isna().all()
    assert out["licence_error"].isna().all()
    assert fake.count() == 0


def test_a_rerun_keeps_the_status_without_asking_again(recorded: FakeUpstream) -> None:
    df = pd.DataFrame({"doi": list(RECORDED)})
    session = session_for(recorded, contact=CONTACT)
    once = df.lit.licences(resolve=False, session=session, progress=False)
    asked = recorded.count(UNPAYWALL)
    twice = once.lit.licences(resolve=False, session=session, progress=False)
    assert recorded.count(UNPAYWALL) == asked
    pd.testing.assert_frame_equal(twice, once)
    assert twice["oa_status"].tolist() == ["gold", "bronze", "closed"]


def test_the_summary_counts_statuses(recorded: FakeUpstream) -> None:
    df = pd.DataFrame({"doi": [*RECORDED, "10.1000/unknown.1"]})
    out = df.lit.licences(
        resolve=False, session=session_for(recorded, contact=CONTACT), progress=False
    )
    report = out.lit.summary()
    for status in ("gold", "bronze", "closed", "none"):
        assert report.loc[("oa_status", status), "count"] == 1
    assert "oa_status" in out.lit.view().columns


# -- chained and one pass --------------------------------------------------------------------


ARTICLES = (
    Article(
        pmid="30000001",
        pmcid="PMC7000001",
        pmc_versions=1,
        doi="10.1000/oa.1",
        body=BodyHome.PMC_OA,
        licence=CC_BY,
        licence_style=LicenceStyle.XLINK,
        oa_status="hybrid",
    ),
    Article(pmid="30000002", doi="10.1000/oa.2", oa_status="diamond", licence=CC_BY),
    Article(pmid="30000003", doi="10.1000/oa.3", oa_status="closed", licence=None),
    Article(pmid="30000004", oa_status="green"),  # no DOI: nothing to ask
)


def _session(fake: FakeUpstream) -> Session:
    return Session(client_factory=fake.client_factory(), retry=FAST_RETRY, contact=CONTACT)


async def test_one_pass_gives_the_chained_status(fake: FakeUpstream) -> None:
    World(ARTICLES).install(fake)
    df = pd.DataFrame({"PMID": [a.pmid for a in ARTICLES]}, dtype="string")
    cfg: dict[str, Any] = {"progress": False}
    chained = await df.lit.resolve_async(session=_session(fake), **cfg)
    chained = await chained.lit.fetch_bodies_async(session=_session(fake), **cfg)
    chained = await chained.lit.licences_async(session=_session(fake), **cfg)
    one_pass = await df.lit.run_async(
        ("resolve", "bodies", "licences"), session=_session(fake), **cfg
    )
    pd.testing.assert_frame_equal(one_pass, chained)
    assert _values(chained["oa_status"]) == ["hybrid", "gold", "closed", None]
    # the PMC body states open-access itself; the colour is still Unpaywall's
    assert chained.loc[0, "access"] == "open-access"
