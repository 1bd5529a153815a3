"""Build the offline demo data: ``litfetch_df/data/demo/{pubmed-demo.csv,responses.sqlite3}``.

Run from the repository root (no network is used)::

    .venv/bin/python tools/build_demo.py            # rebuild both files
    .venv/bin/python tools/build_demo.py --check    # rebuild in a temp dir; exit 1 on drift

How it works (docs/demo-data.md tells the story with provenance):

1. The articles are real, and every fact about them comes from a file in
   ``tests/data/`` (see tests/data/PROVENANCE.md): the four PMC JATS files, the
   recorded Crossref / Unpaywall / Semantic Scholar / OpenAlex / NCBI answers,
   and the identifier chains listed there. :data:`ARTICLES` names them; the
   identifiers of the JATS articles are read from the files themselves.
2. The export is written from those facts (title, authors, journal and year
   from the article's own JATS, Crossref, Unpaywall or OpenAlex record).
3. A local fake upstream (``tests/fake_upstream.py``) answers the library's
   requests from the same facts only: recorded bodies byte for byte where we
   hold one for exactly that request, answers synthesized in the documented
   shape where only the shape is missing (an ID Converter or Europe PMC record
   stating a mapping the facts state), and **503 for everything else**, so no
   request is ever answered with something we do not know. 503 is not stored
   by the cache; on replay those requests report "not in cache".
4. :func:`litfetch_df.demo.run_pipeline` runs once against the fake through a
   :class:`~litfetch_df.Session` with a persistent cache and
   :data:`litfetch_df.demo.DEMO_CONTACT`; the cache is then normalised
   (fixed timestamp, only ``content-type`` kept, rows in key order) so a
   rebuild gives the same bytes, and replayed offline to check it gives the
   same result.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import dataclasses
import hashlib
import io
import json
import logging
import math
import re
import shutil
import sqlite3
import sys
import tempfile
import urllib.parse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pandas as pd  # noqa: E402
from lxml import etree  # noqa: E402

from litfetch_df import RetryPolicy, Session  # noqa: E402
from litfetch_df._xml import local_name, parse_xml  # noqa: E402
from litfetch_df.cache import ResponseCache  # noqa: E402
from litfetch_df.demo import (  # noqa: E402
    CACHE_NAME,
    DEMO_CONTACT,
    EXPORT_NAME,
    run_pipeline,
)
from litfetch_df.frame import bulk as frame_bulk  # noqa: E402
from litfetch_df.frame.readers import read_pubmed  # noqa: E402
from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream  # noqa: E402

DATA = ROOT / "tests" / "data"
OUT = ROOT / "litfetch_df" / "data" / "demo"

#: Every stored entry gets this time (2026-11-30T00:00:00Z, the day the fixtures were
#: checked), so that the file is the same on every build. The demo replays with no TTL.
STORED_AT = 1795996800.0

#: The columns of PubMed's "Save -> CSV" export, in its order.
PUBMED_COLUMNS = (
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
)

HOSTS = (
    "pmc.ncbi.nlm.nih.gov",
    "www.ncbi.nlm.nih.gov",
    "eutils.ncbi.nlm.nih.gov",
    "www.ebi.ac.uk",
    "api.openalex.org",
    "pmc-oa-opendata.s3.amazonaws.com",
    "api.crossref.org",
    "api.unpaywall.org",
    "api.semanticscholar.org",
    "api.elsevier.com",
    "api.springernature.com",
    "api.biorxiv.org",
    "www.biorxiv.org",
    "www.medrxiv.org",
)


@dataclasses.dataclass(frozen=True)
class Article:
    """One demo article: its true identifiers and the recorded files that state facts about it.

    ``blank`` names the export columns left empty so that resolve() has work.
    ``pmid``/``pmcid``/``doi`` of a JATS article are read from the file and
    checked against the values given here.
    """

    doi: str
    pmid: str | None = None
    pmcid: str | None = None
    jats: str | None = None
    crossref: str | None = None
    unpaywall: str | None = None
    s2: str | None = None
    openalex: str | None = None
    blank: frozenset[str] = frozenset()


ARTICLES: tuple[Article, ...] = (
    Article(
        doi="10.1186/1471-2180-11-174",
        pmid="21810267",
        pmcid="PMC3166277",
        jats="PMC3166277_bmc-microbiol_1471-2180-11-174.nxml",
        blank=frozenset({"PMCID"}),
    ),
    Article(
        doi="10.1289/ehp.11570",
        pmid="19079722",
        pmcid="PMC2599765",
        jats="PMC2599765_ehp-116-1694_public-domain.nxml",
    ),
    Article(
        doi="10.1007/s12529-016-9630-3",
        pmid="28405917",
        pmcid="PMC5608867",
        jats="PMC5608867_license-prose-only.xml",
        blank=frozenset({"PMCID", "DOI"}),
    ),
    Article(
        doi="10.1111/tct.70460",
        pmid="42267590",
        pmcid="PMC13250820",
        jats="PMC13250820_ali-license-ref_supplementary.xml",
    ),
    # PROVENANCE.md, linked chains: PMID 40120586 and PMC12008803 (S2 externalIds,
    # Unpaywall's PMC location, OpenAlex ids.pmid).
    Article(
        doi="10.1016/j.xgen.2025.100814",
        pmid="40120586",
        pmcid="PMC12008803",
        crossref="crossref_work_10.1016_j.xgen.2025.100814_elsevier-tdm-links.json",
        unpaywall="unpaywall_v2_10.1016_j.xgen.2025.100814_gold.json",
        s2="s2_graph_paper_DOI_10.1016_j.xgen.2025.100814.json",
        openalex="openalex_work_doi_10.1016_j.xgen.2025.100814.json",
        blank=frozenset({"PMCID"}),
    ),
    # PMID 25349395, PMC4234579 (OpenAlex ids; Unpaywall's PMC location).
    Article(
        doi="10.1073/pnas.1414271111",
        pmid="25349395",
        pmcid="PMC4234579",
        unpaywall="unpaywall_v2_10.1073_pnas.1414271111_bronze_pmc-repository.json",
        openalex="openalex_work_doi_10.1073_pnas.1414271111.json",
        blank=frozenset({"PMCID"}),
    ),
    # PMID 38799228, PMC11116106 (S2 externalIds).
    Article(
        doi="10.1038/s42256-024-00832-8",
        pmid="38799228",
        pmcid="PMC11116106",
        crossref="crossref_work_10.1038_s42256-024-00832-8_links-ccby.json",
        s2="s2_graph_paper_DOI_10.1038_s42256-024-00832-8.json",
    ),
    # The bioRxiv preprint of the Cell Genomics article; its PMID / PMCID are unknown to us.
    Article(
        doi="10.1101/2024.04.01.587366",
        crossref="crossref_work_10.1101_2024.04.01.587366_is-preprint-of.json",
        s2="s2_graph_paper_DOI_10.1101_2024.04.01.587366_404.json",
    ),
    Article(
        doi="10.3389/fgene.2017.00147",
        crossref="crossref_work_10.3389_fgene.2017.00147_has-preprint.json",
    ),
    Article(
        doi="10.1007/s40278-023-41815-2",
        unpaywall="unpaywall_v2_10.1007_s40278-023-41815-2_closed.json",
    ),
)


# -- facts from the recorded files -------------------------------------------------------------


def _json(name: str) -> Any:
    return json.loads((DATA / "json" / name).read_text(encoding="utf-8"))


def _text(el: etree._Element | None) -> str | None:
    if el is None:
        return None
    text = " ".join("".join(str(t) for t in el.itertext()).split())
    return text or None


def _find(root: etree._Element, *path: str) -> etree._Element | None:
    el: etree._Element | None = root
    for step in path:
        if el is None:
            return None
        el = next((c for c in el.iter() if local_name(c) == step), None)
    return el


def _initials(given: str) -> str:
    return "".join(part[0].upper() for part in re.split(r"[\s.\-]+", given) if part)


def _authors(names: Iterable[tuple[str, str]], *, initials: bool = False) -> str | None:
    # ``initials``: the second item already is the initials (JATS states them).
    shown = [
        f"{family} {given if initials else _initials(given)}".strip()
        for family, given in names
        if family
    ]
    return ", ".join(shown) + "." if shown else None


def _citation(
    journal: str | None, year: str | None, volume: Any, issue: Any, pages: Any, doi: str
) -> str:
    where = f"{year}" if year else ""
    if volume:
        where += f";{volume}"
        if issue:
            where += f"({issue})"
        if pages:
            where += f":{pages}"
    head = ". ".join(p for p in ((journal or "").rstrip("."), where) if p)
    return f"{head}. doi: {doi}." if head else f"doi: {doi}."


@dataclasses.dataclass(frozen=True)
class Meta:
    """The descriptive export cells of one article."""

    title: str | None
    authors: str | None
    journal: str | None
    year: str | None
    citation: str | None


def jats_facts(name: str) -> tuple[dict[str, str], Meta]:
    """Return the article-ids and the descriptive metadata a JATS file states."""
    root = parse_xml((DATA / "jats" / name).read_bytes())
    meta = _find(root, "article-meta")
    assert meta is not None, name
    ids: dict[str, str] = {}
    for el in meta:
        if local_name(el) == "article-id":
            kind = el.get("pub-id-type") or ""
            value = _text(el)
            if value and kind not in ids:
                ids[kind] = value
    names = []
    for contrib in meta.iter():
        if local_name(contrib) == "contrib" and contrib.get("contrib-type") == "author":
            name_el = _find(contrib, "name")
            family = _text(_find(name_el, "surname")) if name_el is not None else None
            given_el = _find(name_el, "given-names") if name_el is not None else None
            stated = given_el.get("initials") if given_el is not None else None
            given = stated or _initials(_text(given_el) or "")
            if family:
                names.append((family, given))
    dates = {
        d.get("pub-type") or d.get("date-type"): d for d in meta if local_name(d) == "pub-date"
    }
    date = next((dates[k] for k in ("ppub", "collection", "epub") if k in dates), None)
    year = _text(_find(date, "year")) if date is not None else None
    journal = next(
        (
            _text(el)
            for el in root.iter()
            if local_name(el) == "journal-id" and el.get("journal-id-type") == "nlm-ta"
        ),
        None,
    )
    first, last = _text(_find(meta, "fpage")), _text(_find(meta, "lpage"))
    pages = first if not last or last == first else f"{first}-{last}"
    pages = pages or _text(_find(meta, "elocation-id"))
    issue_el = next((el for el in meta if local_name(el) == "issue"), None)
    volume_el = next((el for el in meta if local_name(el) == "volume"), None)
    doi = ids.get("doi", "")
    return ids, Meta(
        title=_text(_find(meta, "article-title")),
        authors=_authors(names, initials=True),
        journal=journal,
        year=year,
        citation=_citation(journal, year, _text(volume_el), _text(issue_el), pages, doi),
    )


def crossref_meta(name: str) -> Meta:
    """Return the descriptive metadata a recorded Crossref work states."""
    work = _json(name)["message"]
    names = [(a.get("family", ""), a.get("given", "")) for a in work.get("author", [])]
    short = work.get("short-container-title") or work.get("container-title") or []
    institution = [i.get("name") for i in work.get("institution", []) if i.get("name")]
    journal = short[0] if short else (institution[0] if institution else None)
    parts = (work.get("published") or work.get("posted") or {}).get("date-parts") or [[None]]
    year = str(parts[0][0]) if parts[0][0] else None
    pages = work.get("page") or work.get("article-number")
    return Meta(
        title=(work.get("title") or [None])[0],
        authors=_authors(names),
        journal=journal,
        year=year,
        citation=_citation(
            journal, year, work.get("volume"), work.get("issue"), pages, work["DOI"]
        ),
    )


def unpaywall_meta(article: Article) -> Meta:
    """Return what the recorded Unpaywall (and, for volume/issue, OpenAlex) record states."""
    assert article.unpaywall is not None
    record = _json(article.unpaywall)
    names = []
    for author in record.get("z_authors") or []:
        raw = (author.get("raw_author_name") or "").split()
        if raw:
            names.append((raw[-1], " ".join(raw[:-1])))
    biblio = _json(article.openalex).get("biblio", {}) if article.openalex else {}
    year = str(record["year"]) if record.get("year") else None
    journal = record.get("journal_name")
    return Meta(
        title=record.get("title"),
        authors=_authors(names),
        journal=journal,
        year=year,
        citation=_citation(
            journal, year, biblio.get("volume"), biblio.get("issue"), None, article.doi
        ),
    )


@dataclasses.dataclass(frozen=True)
class Facts:
    """Everything the fake may say, indexed the way requests ask for it."""

    articles: tuple[Article, ...]
    jats: Mapping[str, bytes]  # PMCID -> JATS bytes
    metas: Mapping[str, Meta]  # doi -> export metadata

    def by_pmid(self, pmid: str) -> Article | None:
        return next((a for a in self.articles if a.pmid == pmid), None)

    def by_pmcid(self, pmcid: str) -> Article | None:
        return next(
            (a for a in self.articles if a.pmcid and a.pmcid.lower() == pmcid.lower()), None
        )

    def by_doi(self, doi: str) -> Article | None:
        return next((a for a in self.articles if a.doi.lower() == doi.lower()), None)


def gather_facts() -> Facts:
    """Read and cross-check every fact the demo uses; fail loudly on a contradiction."""
    jats: dict[str, bytes] = {}
    metas: dict[str, Meta] = {}
    for article in ARTICLES:
        if article.jats:
            ids, meta = jats_facts(article.jats)
            pmc = ids.get("pmcid") or ("PMC" + ids["pmc"])
            assert ids["pmid"] == article.pmid, (article, ids)
            assert pmc == article.pmcid, (article, ids)
            assert ids["doi"] == article.doi, (article, ids)
            jats[pmc] = (DATA / "jats" / article.jats).read_bytes()
        elif article.crossref:
            meta = crossref_meta(article.crossref)
        else:
            meta = unpaywall_meta(article)
        metas[article.doi] = meta
        # The recorded answers must name this article and agree with its ids.
        if article.crossref:
            assert _json(article.crossref)["message"]["DOI"].lower() == article.doi.lower()
        if article.unpaywall:
            assert _json(article.unpaywall)["doi"].lower() == article.doi.lower()
        if article.s2 and not article.s2.endswith("_404.json"):
            external = _json(article.s2)["externalIds"]
            assert external["DOI"].lower() == article.doi.lower()
            assert external["PubMed"] == article.pmid
            assert "PMC" + external["PubMedCentral"] == article.pmcid
        if article.openalex:
            work_ids = _json(article.openalex)["ids"]
            assert work_ids["pmid"].rstrip("/").rsplit("/", 1)[-1] == article.pmid
            if "pmcid" in work_ids:
                assert "PMC" + work_ids["pmcid"].rsplit("/", 1)[-1] == article.pmcid
    return Facts(ARTICLES, jats, metas)


# -- the export --------------------------------------------------------------------------------


def export_rows(facts: Facts) -> list[dict[str, str]]:
    """Return the export's rows: true ids (some left blank on purpose) and true metadata."""
    rows = []
    for article in facts.articles:
        meta = facts.metas[article.doi]
        first = meta.authors.split(",")[0].rstrip(".") if meta.authors else ""
        row = {
            "PMID": article.pmid or "",
            "Title": meta.title or "",
            "Authors": meta.authors or "",
            "Citation": meta.citation or "",
            "First Author": first,
            "Journal/Book": meta.journal or "",
            "Publication Year": meta.year or "",
            "Create Date": "",
            "PMCID": article.pmcid or "",
            "NIHMS ID": "",
            "DOI": article.doi,
        }
        for column in article.blank:
            row[column] = ""
        rows.append(row)
    return rows


def export_bytes(rows: list[dict[str, str]]) -> bytes:
    """Write the rows in PubMed's current CSV layout: quoted fields, empty ones bare."""

    def cell(value: str) -> str:
        return '"' + value.replace('"', '""') + '"' if value else ""

    lines = [",".join(cell(c) for c in PUBMED_COLUMNS)]
    lines += [",".join(cell(row[c]) for c in PUBMED_COLUMNS) for row in rows]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    # The layout must be what csv (and so read_pubmed) reads back unchanged.
    back = list(csv.DictReader(io.StringIO(data.decode("utf-8"))))
    assert [dict(r) for r in back] == rows
    return data


# -- the fake upstream ------------------------------------------------------------------------


def _unavailable(req: FakeRequest) -> FakeResponse:
    return FakeResponse(503, "no recorded fact for this request", {"Retry-After": "0"})


def _json_bytes(obj: Any) -> FakeResponse:
    return FakeResponse(
        200, json.dumps(obj, ensure_ascii=False).encode(), {"Content-Type": "application/json"}
    )


def _recorded_json(name: str, status: int = 200) -> FakeResponse:
    return FakeResponse(
        status, (DATA / "json" / name).read_bytes(), {"Content-Type": "application/json"}
    )


def _doi_from_path(path: str, prefix: str) -> str:
    return urllib.parse.unquote(path[len(prefix) :])


def install(fake: FakeUpstream, facts: Facts) -> None:
    """Register the fact-only routes (later routes win over the catch-all 503s)."""
    for host in HOSTS:
        for method in ("GET", "POST"):
            fake.route(host, r".*", _unavailable, method=method)

    def idconv(req: FakeRequest) -> FakeResponse:
        ids = [i for i in (req.param("ids") or "").split(",") if i]
        records = []
        for requested in ids:
            article = (
                facts.by_pmid(requested) or facts.by_pmcid(requested) or facts.by_doi(requested)
            )
            if article is None or article.pmid is None or article.pmcid is None:
                return _unavailable(req)  # one unknown id: the whole answer is unknown
            records.append(
                {
                    "requested-id": requested,
                    "pmcid": article.pmcid,
                    "pmid": int(article.pmid),
                    "doi": article.doi,
                }
            )
        query = urllib.parse.urlencode({k: v[0] for k, v in req.query.items()})
        return _json_bytes(
            {
                "status": "ok",
                "responseDate": "2026-11-30 00:00:00",
                "request": query,
                "records": records,
            }
        )

    fake.route("pmc.ncbi.nlm.nih.gov", r"/tools/idconv/api/v1/articles/", idconv)

    def epmc_search(req: FakeRequest) -> FakeResponse:
        query = req.param("query") or ""
        pmids = re.findall(r"EXT_ID:(\d+)", query)
        if not pmids or "SRC:MED" not in query:
            return _unavailable(req)
        results = []
        for pmid in pmids:
            article = facts.by_pmid(pmid)
            if article is None:
                return _unavailable(req)
            record: dict[str, Any] = {"id": pmid, "source": "MED", "pmid": pmid}
            if article.pmcid:
                record["pmcid"] = article.pmcid
            record["doi"] = article.doi
            title = facts.metas[article.doi].title
            if title:
                record["title"] = title
            results.append(record)
        return _json_bytes(
            {
                "hitCount": len(results),
                "request": {
                    "queryString": query,
                    "resultType": req.param("resultType") or "lite",
                    "pageSize": int(req.param("pageSize") or 25),
                },
                "resultList": {"result": results},
            }
        )

    fake.route("www.ebi.ac.uk", r"/europepmc/webservices/rest/search", epmc_search)

    def full_text(req: FakeRequest) -> FakeResponse:
        pmcid = req.path.split("/")[-2]
        body = facts.jats.get(pmcid.upper())
        if body is None:
            return _unavailable(req)
        return FakeResponse(200, body, {"Content-Type": "application/xml"})

    fake.route("www.ebi.ac.uk", r"/europepmc/webservices/rest/PMC\d+/fullTextXML", full_text)

    def crossref(req: FakeRequest) -> FakeResponse:
        article = facts.by_doi(_doi_from_path(req.path, "/works/"))
        if article is None or article.crossref is None:
            return _unavailable(req)
        return _recorded_json(article.crossref)

    fake.route("api.crossref.org", r"/works/.+", crossref)

    def unpaywall(req: FakeRequest) -> FakeResponse:
        article = facts.by_doi(_doi_from_path(req.path, "/v2/"))
        if article is None or article.unpaywall is None or not req.param("email"):
            return _unavailable(req)
        return _recorded_json(article.unpaywall)

    fake.route("api.unpaywall.org", r"/v2/.+", unpaywall)

    def s2_paper(req: FakeRequest) -> FakeResponse:
        paper = _doi_from_path(req.path, "/graph/v1/paper/")
        if not paper.startswith("DOI:"):
            return _unavailable(req)
        article = facts.by_doi(paper.removeprefix("DOI:"))
        if article is None or article.s2 is None:
            return _unavailable(req)
        if article.s2.endswith("_404.json"):
            return _recorded_json(article.s2, 404)  # "not found" holds whatever was asked
        record = _json(article.s2)
        fields = [f for f in (req.param("fields") or "").split(",") if f]
        if not fields or any(f not in record for f in fields):
            return _unavailable(req)
        return _json_bytes({"paperId": record["paperId"], **{f: record[f] for f in fields}})

    fake.route("api.semanticscholar.org", r"/graph/v1/paper/.+", s2_paper)

    def openalex(req: FakeRequest) -> FakeResponse:
        wanted = (req.param("filter") or "").removeprefix("doi:").split("|")
        results = []
        for doi in wanted:
            article = facts.by_doi(doi)
            if article is None or article.openalex is None:
                return _unavailable(req)
            work = _json(article.openalex)
            results.append({"ids": work["ids"], "doi": work["doi"]})
        return _json_bytes(
            {
                "meta": {"count": len(results), "page": 1, "per_page": len(wanted)},
                "results": results,
            }
        )

    fake.route("api.openalex.org", r"/works", openalex)


# -- recording and normalising -----------------------------------------------------------------


async def _record(frame: pd.DataFrame, cache: ResponseCache, fake: FakeUpstream) -> pd.DataFrame:
    # Record the per-article requests only. We hold per-article records, never a
    # bulk answer (a DOI-list or batch answer would also assert the absence of every
    # DOI we know nothing about); on replay the bulk request misses and the frame
    # falls back to these stored per-article answers.
    bulk_was, frame_bulk._ENABLED = frame_bulk._ENABLED, False
    try:
        # One attempt: a 503 (no fact) is final at once and, being transient, never stored.
        async with Session(
            client_factory=fake.client_factory(),
            retry=RetryPolicy(max_attempts=1),
            contact=DEMO_CONTACT,
            cache=cache,
        ) as session:
            return await run_pipeline(frame, session=session)
    finally:
        frame_bulk._ENABLED = bulk_was


def _normalise(recorded: Path, target: Path) -> None:
    """Copy the recorded entries into a fresh file: fixed time, content-type only, key order."""
    if target.exists():
        target.unlink()
    ResponseCache(target).close()  # creates the schema exactly as the library does
    with sqlite3.connect(recorded) as src:
        rows = src.execute(
            "SELECT key, status, headers, content, codec, size, url FROM litfetch_responses"
            " ORDER BY key"
        ).fetchall()
    conn = sqlite3.connect(target, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for key, status, headers, content, codec, size, url in rows:
            kept = [[k, v] for k, v in json.loads(headers) if k.lower() == "content-type"]
            conn.execute(
                "INSERT INTO litfetch_responses"
                " (key, status, headers, content, codec, size, url, stored_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    status,
                    json.dumps(kept, separators=(",", ":")),
                    content,
                    codec,
                    size,
                    url,
                    STORED_AT,
                ),
            )
        conn.execute("COMMIT")
        conn.execute("PRAGMA journal_mode = DELETE").fetchall()
        conn.execute("VACUUM")
        # Leave the file in the mode ResponseCache keeps its files in, so that opening it
        # (``litfetch-df cache info`` on it, say) finds nothing to change.
        conn.execute("PRAGMA journal_mode = WAL").fetchall()
    finally:
        conn.close()
    for suffix in ("-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)


# Columns whose values must match between the recording run and the offline replay.
COMPARED = (
    "pmid",
    "pmcid",
    "doi",
    "body_source",
    "body_media_type",
    "body_size",
    "licence",
    "access",
    "licence_basis",
    "n_files",
    "n_related",
    "preprint_doi",
    "published_doi",
)


def _comparable(frame: pd.DataFrame) -> list[tuple[object, ...]]:
    errors = [c for c in frame.columns if str(c).endswith("_error")]
    out = []
    for record in frame.to_dict("records"):
        values = tuple(None if pd.isna(record[c]) else record[c] for c in COMPARED)
        failed = tuple(c for c in errors if isinstance(record[c], str))
        out.append((*values, failed))
    return out


def build(target_dir: Path) -> pd.DataFrame:
    """Write the export and the replay cache into ``target_dir``; return the recorded result."""
    facts = gather_facts()
    target_dir.mkdir(parents=True, exist_ok=True)
    export = export_bytes(export_rows(facts))
    (target_dir / EXPORT_NAME).write_bytes(export)
    frame = read_pubmed(export, format="csv")
    fake = FakeUpstream().start()
    try:
        install(fake, facts)
        with tempfile.TemporaryDirectory() as tmp:
            recorded = Path(tmp) / "recorded.sqlite3"
            cache = ResponseCache(recorded, ttl=math.inf)
            try:
                result = asyncio.run(_record(frame, cache, fake))
            finally:
                cache.close()
            _normalise(recorded, target_dir / CACHE_NAME)
        unknown_hosts = {r.host for r in fake.requests()} - set(HOSTS)
        if unknown_hosts:
            raise SystemExit(f"requests went to hosts the build has no rule for: {unknown_hosts}")
    finally:
        fake.stop()
    replayed = asyncio.run(_replay(frame, target_dir / CACHE_NAME))
    if _comparable(result) != _comparable(replayed):
        raise SystemExit("the offline replay differs from the recording run")
    return replayed


async def _replay(frame: pd.DataFrame, cache_file: Path) -> pd.DataFrame:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / CACHE_NAME
        shutil.copyfile(cache_file, copy)
        store = ResponseCache(copy, ttl=math.inf)
        try:
            async with Session(contact=DEMO_CONTACT, cache=store, offline=True) as session:
                return await run_pipeline(frame, session=session)
        finally:
            store.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    """Build (or with ``--check``, verify) the demo data; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="verify the committed files")
    args = parser.parse_args(argv)
    # Requests answered 503 on purpose are logged as failures; they are expected here.
    logging.getLogger("litfetch_df").setLevel(logging.ERROR)
    if args.check:
        with tempfile.TemporaryDirectory() as tmp:
            build(Path(tmp))
            drift = [
                name
                for name in (EXPORT_NAME, CACHE_NAME)
                if _digest(Path(tmp) / name) != _digest(OUT / name)
            ]
        if drift:
            print(f"demo data out of date: {', '.join(drift)}; run tools/build_demo.py")
            return 1
        print("demo data is up to date")
        return 0
    result = build(OUT)
    for name in (EXPORT_NAME, CACHE_NAME):
        path = OUT / name
        size, digest = path.stat().st_size, _digest(path)[:12]
        print(f"wrote {path.relative_to(ROOT)} ({size} bytes, sha256 {digest})")
    shown = [
        "pmid",
        "pmcid",
        "doi",
        "body_source",
        "licence",
        "access",
        "n_files",
        "published_doi",
        "preprint_doi",
    ]
    with pd.option_context(
        "display.width", 250, "display.max_columns", 20, "display.max_colwidth", 40
    ):
        print(result[shown].to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
