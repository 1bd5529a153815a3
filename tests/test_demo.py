"""The offline demo: no network, answers per article, and everything it reports is true.

"True" is checked against the recorded real data in tests/data/ (PROVENANCE.md),
independently of tools/build_demo.py: the ids in the export, every packaged
record, the file-sets the articles' own JATS implies, and the demo's results.
Any slice of the demo table (reversed, a head, duplicated rows) gets the same
per-row answers as the whole of it.
"""

from __future__ import annotations

import asyncio
import io
import warnings
from pathlib import Path
from typing import Any

import httpx
import pandas as pd
import pytest

import litfetch_df.demo as demo
from litfetch_df import ArticleIds, Blob, Related, RelationType
from litfetch_df.demo_world import DemoWorld, demo_articles, demo_world
from litfetch_df.frame.accessor import LitFrameAccessor
from litfetch_df.frame.engine.options import ENV_CREDENTIALS
from litfetch_df.safexml.parse import local_name, parse_xml
from tests.conftest import data_bytes, data_json

JATS = {
    "PMC3166277": "PMC3166277_bmc-microbiol_1471-2180-11-174.nxml",
    "PMC2599765": "PMC2599765_ehp-116-1694_public-domain.nxml",
    "PMC5608867": "PMC5608867_license-prose-only.xml",
    "PMC13250820": "PMC13250820_ali-license-ref_supplementary.xml",
}
# Where each JATS file was recorded (PROVENANCE.md): three from PMC's OA packages (the
# bucket's XML), PMC13250820 from Europe PMC (pyEuropePMC's "from Europe PMC open access").
RECORDED_FROM = {
    "PMC3166277": "pmc_oa_s3",
    "PMC2599765": "pmc_oa_s3",
    "PMC5608867": "pmc_oa_s3",
    "PMC13250820": "europe_pmc",
}

# The identifier chains of PROVENANCE.md ("linked chains"), for the articles without JATS.
CHAINS = {
    "10.1016/j.xgen.2025.100814": ("40120586", "PMC12008803"),
    "10.1073/pnas.1414271111": ("25349395", "PMC4234579"),
    "10.1038/s42256-024-00832-8": ("38799228", "PMC11116106"),
}

CROSSREF = {
    "10.1016/j.xgen.2025.100814": (
        "crossref_work_10.1016_j.xgen.2025.100814_elsevier-tdm-links.json"
    ),
    "10.1038/s42256-024-00832-8": "crossref_work_10.1038_s42256-024-00832-8_links-ccby.json",
    "10.1101/2024.04.01.587366": "crossref_work_10.1101_2024.04.01.587366_is-preprint-of.json",
    "10.3389/fgene.2017.00147": "crossref_work_10.3389_fgene.2017.00147_has-preprint.json",
}
UNPAYWALL = {
    "10.1016/j.xgen.2025.100814": "unpaywall_v2_10.1016_j.xgen.2025.100814_gold.json",
    "10.1073/pnas.1414271111": "unpaywall_v2_10.1073_pnas.1414271111_bronze_pmc-repository.json",
    "10.1007/s40278-023-41815-2": "unpaywall_v2_10.1007_s40278-023-41815-2_closed.json",
}
OPENALEX = {
    "10.1016/j.xgen.2025.100814": "openalex_work_doi_10.1016_j.xgen.2025.100814.json",
    "10.1073/pnas.1414271111": "openalex_work_doi_10.1073_pnas.1414271111.json",
}
S2 = {
    "10.1016/j.xgen.2025.100814": "s2_graph_paper_DOI_10.1016_j.xgen.2025.100814.json",
    "10.1038/s42256-024-00832-8": "s2_graph_paper_DOI_10.1038_s42256-024-00832-8.json",
    "10.1101/2024.04.01.587366": "s2_graph_paper_DOI_10.1101_2024.04.01.587366_404.json",
}


def jats_ids(name: str) -> dict[str, str]:
    root = parse_xml(data_bytes("jats", name))
    meta = next(el for el in root.iter() if local_name(el) == "article-meta")
    ids: dict[str, str] = {}
    for el in meta:
        if local_name(el) == "article-id" and el.text:
            ids.setdefault(el.get("pub-id-type") or "", el.text.strip())
    return {
        "pmid": ids["pmid"],
        "pmcid": ids.get("pmcid") or "PMC" + ids["pmc"],
        "doi": ids["doi"],
    }


def true_ids() -> dict[str, tuple[str | None, str | None]]:
    """DOI (lower-cased) → (pmid, pmcid) for every demo article, from the fixtures alone."""
    known: dict[str, tuple[str | None, str | None]] = {
        doi.lower(): ids for doi, ids in CHAINS.items()
    }
    for name in JATS.values():
        ids = jats_ids(name)
        known[ids["doi"].lower()] = (ids["pmid"], ids["pmcid"])
    return known


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any real HTTP request fail the test."""

    async def refuse(self: Any, request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"the demo tried the network: {request.url}")

    monkeypatch.setattr(httpx.AsyncHTTPTransport, "handle_async_request", refuse)


@pytest.fixture(scope="module")
def result() -> pd.DataFrame:
    with pytest.MonkeyPatch.context() as mp:

        async def refuse(self: Any, request: httpx.Request) -> httpx.Response:
            raise AssertionError(f"the demo tried the network: {request.url}")

        mp.setattr(httpx.AsyncHTTPTransport, "handle_async_request", refuse)
        return demo.run_demo(stream=io.StringIO())


def row(frame: pd.DataFrame, doi: str) -> dict[str, Any]:
    matches = frame[frame["doi"].str.lower() == doi.lower()]
    assert len(matches) == 1, doi
    return {str(k): v for k, v in matches.iloc[0].to_dict().items()}


# -- the bundled files -----------------------------------------------------------------------


def test_export_ids_are_the_real_articles_ids() -> None:
    export = demo.load_demo_export()
    known = true_ids()
    assert len(export) == 10
    by_pmid = {pmid: doi for doi, (pmid, _) in known.items() if pmid}
    for record in export.to_dict("records"):
        pmid, pmcid, doi = record["PMID"], record["PMCID"], record["DOI"]
        if pd.isna(doi):
            assert not pd.isna(pmid)
            doi = by_pmid[pmid]
        facts = known.get(doi.lower())
        if facts is None:
            # Only a DOI, and we hold no PMID / PMCID for it: those cells stay blank.
            assert pd.isna(pmid) and pd.isna(pmcid)
            continue
        assert pd.isna(pmid) or pmid == facts[0]
        assert pd.isna(pmcid) or pmcid == facts[1]
    # Some ids are left out on purpose, so that resolve() has work.
    assert export["PMCID"].isna().sum() >= 3
    assert export["DOI"].isna().sum() >= 1


def test_every_packaged_record_is_a_fixture_byte_for_byte() -> None:
    records = Path(demo.__file__).parent / "data" / "demo" / "records"
    names = sorted(p.relative_to(records).as_posix() for p in records.rglob("*") if p.is_file())
    assert names, "the demo records are missing"
    for name in names:
        if name == "articles.json":
            continue
        assert (records / name).read_bytes() == data_bytes(*name.split("/")), name
    # The manifest's ids are the articles' true ids; its records are about that article.
    known = true_ids()
    for article in demo_articles():
        if article.doi.lower() in known:
            assert (article.pmid, article.pmcid) == known[article.doi.lower()]
        else:
            assert article.pmid is None and article.pmcid is None
        if article.jats:
            assert jats_ids(article.jats.removeprefix("jats/"))["doi"] == article.doi
            stated = {"pmc_oa_s3": "pmc_oa", "europe_pmc": "europe_pmc"}
            assert article.jats_from == stated[RECORDED_FROM[str(article.pmcid)]]
        for name in (article.crossref, article.unpaywall, article.s2, article.openalex):
            if name and not name.endswith("_404.json"):
                assert article.doi.replace("/", "_") in name


def test_package_data_is_small() -> None:
    demo_dir = Path(demo.__file__).parent / "data" / "demo"
    assert sum(p.stat().st_size for p in demo_dir.rglob("*") if p.is_file()) < 2_000_000


# -- the run ---------------------------------------------------------------------------------


def test_bodies_and_licences_come_from_the_real_jats(result: pd.DataFrame) -> None:
    for pmcid, name in JATS.items():
        ids = jats_ids(name)
        r = row(result, ids["doi"])
        assert r["pmcid"] == pmcid and r["pmid"] == ids["pmid"]
        # Served by the service it was recorded from: the bucket rung for PMC's own XML;
        # Europe PMC (the next rung) where the bucket's copy was not recorded.
        assert r["body_source"] == RECORDED_FROM[pmcid]
        assert isinstance(r["body"], Blob) and r["body"].content == data_bytes("jats", name)
        assert r["licence_basis"] == "artifact"
    assert row(result, "10.1186/1471-2180-11-174")["licence"] == (
        "http://creativecommons.org/licenses/by/2.0"
    )
    assert row(result, "10.1289/ehp.11570")["licence"] == (
        "http://creativecommons.org/publicdomain/mark/1.0/"
    )
    assert "creativecommons.org/licenses/by/4.0" in row(result, "10.1111/tct.70460")["licence"]


def test_resolve_fills_the_blank_ids_truthfully(result: pd.DataFrame) -> None:
    known = true_ids()
    for doi, (pmid, pmcid) in known.items():
        r = row(result, doi)
        assert (r["pmid"], r["pmcid"]) == (pmid, pmcid)
        assert pd.isna(r["resolve_error"])
    # The article whose export row had only its PMID got its DOI and PMCID.
    prose = row(result, "10.1007/s12529-016-9630-3")
    assert prose["pmcid"] == "PMC5608867"


def test_facts_we_do_not_hold_are_reported_not_invented(result: pd.DataFrame) -> None:
    # No record states a PMID or PMCID for these: the world says "not found", nothing else.
    for doi in ("10.1101/2024.04.01.587366", "10.3389/fgene.2017.00147"):
        r = row(result, doi)
        assert pd.isna(r["pmid"]) and pd.isna(r["pmcid"])
        assert pd.isna(r["body_source"]) and r["n_files"] == 0
    # No JATS is held for these PMC articles: no bucket listing is implied, no body served.
    for doi in CHAINS:
        r = row(result, doi)
        assert pd.isna(r["body_source"])
        assert not [f for f in r["files"] if "pmc_oa_s3" in f.listed_by]
    # Nothing is abandoned: every request got an answer from the world.
    errors = [c for c in result.columns if c.endswith("_error")]
    assert result[errors].isna().all().all()


def implied_names(name: str, pmcid: str) -> set[str]:
    """The file names the article's JATS states, read here independently of the package."""
    root = parse_xml(data_bytes("jats", name))
    href = "{http://www.w3.org/1999/xlink}href"
    version = "1"
    for el in root.iter():
        if local_name(el) == "article-id" and el.get("pub-id-type") == "pmcid-ver":
            version = el.text.strip().rsplit(".", 1)[1]
    folder = f"{pmcid}.{version}"
    # The XML rendition is listed only where the XML we hold is the bucket's own.
    names = {f"{folder}.xml"} if RECORDED_FROM[pmcid] == "pmc_oa_s3" else set()
    for el in root.iter():
        target = el.get(href) or ""
        if local_name(el) == "self-uri" and el.get("content-type") == "pmc-pdf":
            names.add(f"{folder}.pdf")
        elif local_name(el) in ("graphic", "media", "inline-graphic") and "." in target:
            names.add(target)
    return names


def test_bucket_file_sets_are_what_the_jats_names(result: pd.DataFrame) -> None:
    supplementary = 0
    for pmcid, name in JATS.items():
        r = row(result, jats_ids(name)["doi"])
        bucket = [f for f in r["files"] if f.source == "pmc_oa_s3"]
        assert {f.filename for f in bucket} == implied_names(name, pmcid)
        supplementary += sum(f.kind.value == "supplementary" for f in bucket)
    assert supplementary >= 5  # PMC3166277's .DOC, PMC13250820's four .docx and a figure


def test_recorded_bytes_download_and_unrecorded_ones_fail_plainly(
    result: pd.DataFrame, tmp_path: Path, no_network: None
) -> None:
    files = LitFrameAccessor(result).files()
    fetched = LitFrameAccessor(files).fetch_files(
        tmp_path, session=demo.demo_session(), progress=False
    )
    got = fetched[fetched["path"].notna()]
    in_bucket = [p for p, source in RECORDED_FROM.items() if source == "pmc_oa_s3"]
    # The bucket's JATS renditions: their bytes are recorded.
    assert sorted(got["pmcid"]) == sorted(in_bucket)
    for path, pmcid in zip(got["path"], got["pmcid"], strict=True):
        assert Path(path).read_bytes() == data_bytes("jats", JATS[pmcid])
    rest = fetched[fetched["path"].isna()]
    assert len(rest) == len(fetched) - len(in_bucket)
    assert rest["fetch_error"].fillna("").str.startswith("abandoned").sum() == 0


def test_relations_are_the_crossref_assertions(result: pd.DataFrame) -> None:
    preprint = row(result, "10.1101/2024.04.01.587366")
    assert (
        Related(RelationType.PUBLISHED, ArticleIds(doi="10.1016/j.xgen.2025.100814"))
        in (preprint["related"])
    )
    assert preprint["published_doi"] == "10.1016/j.xgen.2025.100814"
    stated = data_json("json", CROSSREF["10.3389/fgene.2017.00147"])["message"]["relation"]
    assert (
        row(result, "10.3389/fgene.2017.00147")["preprint_doi"] == (stated["has-preprint"][0]["id"])
    )


def test_access_terms_and_files_match_the_recorded_answers(result: pd.DataFrame) -> None:
    # A DOI OpenAlex knows takes its terms from OpenAlex's recorded work (the frame's bulk
    # works filter); Unpaywall's recorded answer serves only the DOIs OpenAlex does not know.
    for doi, name in UNPAYWALL.items():
        r = row(result, doi)
        licence = None if pd.isna(r["licence"]) else r["licence"]
        if doi in OPENALEX:
            work = data_json("json", OPENALEX[doi])
            assert r["access"] == work["open_access"]["oa_status"]
            assert licence == (work["best_oa_location"] or {}).get("license")
            assert r["licence_basis"] == "openalex"
        else:
            record = data_json("json", name)
            assert r["access"] == record["oa_status"]
            assert licence == (record["best_oa_location"] or {}).get("license")
            assert r["licence_basis"] == "unpaywall"
    assert any(doi not in OPENALEX for doi in UNPAYWALL)  # Unpaywall still answers some
    # The best-OA PDF is OpenAlex's too: PNAS's recorded work names none (its best OA
    # location has no pdf_url), so Unpaywall's PDF, asked of no one, is not listed.
    pnas = row(result, "10.1073/pnas.1414271111")
    best = data_json("json", OPENALEX["10.1073/pnas.1414271111"])["best_oa_location"]
    assert best["pdf_url"] is None
    unpaywall_best = data_json("json", UNPAYWALL["10.1073/pnas.1414271111"])["best_oa_location"]
    assert unpaywall_best["url_for_pdf"] not in {f.uri for f in pnas["files"]}
    assert [f.uri for f in pnas["files"]] == []
    nmi = row(result, "10.1038/s42256-024-00832-8")
    links = data_json("json", CROSSREF["10.1038/s42256-024-00832-8"])["message"]["link"]
    tdm = {link["URL"] for link in links if link["intended-application"] == "text-mining"}
    # A URL Semantic Scholar lists too is one file naming both sources (issue 15).
    assert {f.uri for f in nmi["files"] if "crossref_tdm" in f.listed_by} == tdm


def test_run_demo_prints_and_writes(tmp_path: Path, no_network: None) -> None:
    out = io.StringIO()
    target = tmp_path / "demo-result.csv"
    frame = demo.run_demo(target, stream=out)
    text = out.getvalue()
    assert "Summary" in text and "PMC3166277" in text and "published 10.1016/j.xgen" in text
    assert "not in cache" not in text
    written = pd.read_csv(target, dtype="string")
    assert len(written) == len(frame) == 10
    assert "body" not in written.columns and "body_size" in written.columns
    assert "<article" not in target.read_text(encoding="utf-8")
    files = pd.read_csv(tmp_path / "demo-result.files.csv", dtype="string")
    assert len(files) == int(frame["n_files"].sum())


def test_demo_session_serves_the_accessor_offline(no_network: None) -> None:
    export = demo.load_demo_export()
    resolved = LitFrameAccessor(export).resolve(session=demo.demo_session(), progress=False)
    assert resolved.loc[0, "pmcid"] == "PMC3166277"


# -- any slice gives the same per-row answers ------------------------------------------------------

STEPS = ("resolve", "bodies", "files", "licences", "related")


def per_row(frame: pd.DataFrame) -> list[tuple[object, ...]]:
    """What a row says: its ids, body source, licence, files and relations."""

    def cell(value: object) -> object:
        return None if value is None or (not isinstance(value, tuple) and pd.isna(value)) else value

    out = []
    for record in frame.to_dict("records"):
        files = record["files"] if isinstance(record["files"], tuple) else ()
        out.append(
            (
                *(cell(record[c]) for c in ("pmid", "pmcid", "doi", "body_source", "body_size")),
                *(cell(record[c]) for c in ("licence", "access", "licence_basis")),
                tuple(sorted((f.uri or "", f.kind.value, f.source) for f in files)),
                cell(record["related"]),
                tuple(c for c in frame.columns if c.endswith("_error") and cell(record[c])),
            )
        )
    return out


def run_on(frame: pd.DataFrame) -> pd.DataFrame:
    return LitFrameAccessor(frame).run(STEPS, session=demo.demo_session(), progress=False)


@pytest.mark.parametrize(
    "pick",
    [
        pytest.param(lambda f: f.iloc[::-1], id="reversed"),
        pytest.param(lambda f: f.head(3), id="head3"),
        pytest.param(lambda f: f.iloc[[9, 4, 4, 0, 7, 0]], id="duplicated"),
        pytest.param(lambda f: f.iloc[[6]], id="one-row"),
    ],
)
def test_any_slice_gets_the_same_per_row_answers(
    result: pd.DataFrame, pick: Any, no_network: None
) -> None:
    whole = dict(zip(result.index, per_row(result), strict=True))
    part = pick(demo.load_demo_export())
    answered = run_on(part)
    assert list(answered.index) == list(part.index)
    assert per_row(answered) == [whole[i] for i in part.index]


def test_the_world_builds_batch_answers_per_id_in_any_order() -> None:
    world = DemoWorld(demo_articles())
    url = "https://pmc.ncbi.nlm.nih.gov/tools/idconv/api/v1/articles/"

    def records(ids: list[str]) -> list[dict[str, Any]]:
        answer = world.handle(httpx.Request("GET", url, params={"ids": ",".join(ids)}))
        assert answer.status_code == 200
        return list(answer.json()["records"])

    ids = ["21810267", "10.3389/fgene.2017.00147", "PMC2599765"]
    forward = records(ids)
    assert [r["requested-id"] for r in forward] == ids
    assert records(ids[::-1]) == forward[::-1]
    assert records([ids[0], ids[0]]) == [forward[0], forward[0]]
    assert forward[0]["pmcid"] == "PMC3166277" and forward[1]["status"] == "error"
    s2 = world.handle(
        httpx.Request(
            "POST",
            "https://api.semanticscholar.org/graph/v1/paper/batch",
            params={"fields": "externalIds"},
            json={"ids": ["DOI:10.9999/unknown", "PMID:38799228"]},
        )
    ).json()
    assert s2[0] is None and s2[1]["externalIds"]["PubMed"] == "38799228"


def test_the_world_never_reaches_a_real_host(no_network: None) -> None:
    world = demo_world()
    before = world.requests
    answer = world.handle(httpx.Request("GET", "https://www.pnas.org/doi/pdf/10.1073/x"))
    assert answer.status_code == 404 and "not among the demo's records" in answer.text
    assert world.requests == before + 1

    async def ask() -> int:
        async with demo.demo_session() as session:
            transport = session.client._transport
            assert isinstance(transport, httpx.MockTransport)
            return (await session.client.get("https://example.org/")).status_code

    assert asyncio.run(ask()) == 404


def test_a_later_step_on_a_demo_frame_stays_in_the_world(no_network: None) -> None:
    resolved = LitFrameAccessor(demo.load_demo_export()).resolve(
        session=demo.demo_session(), progress=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "going online" warning
        listed = LitFrameAccessor(resolved.iloc[::-1]).list_files(progress=False)
    assert listed["files_error"].isna().all()
    # The file-sets of the whole demo: docs/demo-data.md's 15, less Unpaywall's PNAS PDF
    # (OpenAlex knows that DOI and its recorded work names no PDF, so Unpaywall is not asked).
    assert int(listed["n_files"].sum()) == 14


def test_the_demo_cache_replays_offline(tmp_path: Path, no_network: None) -> None:
    cache = demo.copy_demo_cache(tmp_path / "cache")
    assert cache.is_file()
    frame = demo.load_demo_export()
    # The cache was written without keys: replay it without keys too (whatever an
    # earlier test or the environment left in the package options).
    replayed = LitFrameAccessor(frame).run(
        STEPS,
        cache=tmp_path / "cache",
        offline=True,
        contact=demo.DEMO_CONTACT,
        credentials=dict.fromkeys(ENV_CREDENTIALS.values()),
        progress=False,
    )
    assert per_row(replayed) == per_row(run_on(frame))


def test_the_bundled_demo_data_is_what_the_builder_makes_today() -> None:
    """If a source changes the requests it sends, the replay cache must be rebuilt."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "tools" / "build_demo.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "up to date" in done.stdout + done.stderr


def test_the_coverage_tool_tells_what_the_demo_shows() -> None:
    """tools/demo_coverage.py (the tables docs/demo-data.md quotes) runs offline and is right."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "tools" / "demo_coverage.py")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = set(done.stdout.splitlines())
    # Bodies from two sources, each where its bytes were recorded.
    assert {"| pmc_oa_s3 | 3 |", "| europe_pmc | 1 |"} <= lines
    # The bucket's three recorded XML renditions download; no supplementary bytes are held.
    assert {"| body | pmc_oa_s3 | 4 | 3 |", "| supplementary | pmc_oa_s3 | 6 | 0 |"} <= lines
    assert "| 10.1101/2024.04.01.587366 | published | 10.1016/j.xgen.2025.100814 |" in lines
    assert "| 10.3389/fgene.2017.00147 | preprint | 10.1101/171108 |" in lines
