"""Build the offline demo data: ``litfetch_df/data/demo/{pubmed-demo.csv,records/}``.

Run from the repository root (no network is used)::

    .venv/bin/python tools/build_demo.py            # rebuild the export and the records
    .venv/bin/python tools/build_demo.py --check    # exit 1 if the packaged files drifted

How it works (docs/demo-data.md tells the story with provenance):

1. The articles are real, and every fact about them comes from a file in
   ``tests/data/`` (see tests/data/PROVENANCE.md): the four PMC JATS files, the
   recorded Crossref / Unpaywall / Semantic Scholar / OpenAlex answers, and the
   identifier chains listed there. :data:`ARTICLES` names them; the
   identifiers of the JATS articles are read from the files themselves and
   every recorded answer is checked to name its article.
2. The export is written from those facts (title, authors, journal and year
   from the article's own JATS, Crossref, Unpaywall or OpenAlex record).
3. The recorded files are copied, byte for byte, into ``records/`` with a
   manifest (``records/articles.json``) naming each article's ids and records.
   :mod:`litfetch_df.demo_world` serves the library's requests from them at
   run time, per article; nothing is recorded from a run.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import re
import shutil
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lxml import etree  # noqa: E402

from litfetch_df.demo import EXPORT_NAME  # noqa: E402
from litfetch_df.demo_world import FROM_EUROPE_PMC, FROM_PMC_OA, MANIFEST  # noqa: E402
from litfetch_df.safexml.parse import local_name, parse_xml  # noqa: E402

DATA = ROOT / "tests" / "data"
OUT = ROOT / "litfetch_df" / "data" / "demo"

#: The records folder, inside the demo directory.
RECORDS = "records"

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


@dataclasses.dataclass(frozen=True)
class Article:
    """One demo article: its true identifiers and the recorded files that state facts about it.

    ``blank`` names the export columns left empty so that resolve() has work.
    ``pmid``/``pmcid``/``doi`` of a JATS article are read from the file and
    checked against the values given here. ``jats_from`` is where the JATS file
    was recorded (PROVENANCE.md): PMC's OA packages, or Europe PMC.
    """

    doi: str
    pmid: str | None = None
    pmcid: str | None = None
    jats: str | None = None
    jats_from: str = FROM_PMC_OA
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
        # PROVENANCE.md: pyEuropePMC's benchmark files are "from Europe PMC open access".
        jats_from=FROM_EUROPE_PMC,
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


# -- the records the demo world serves ---------------------------------------------------------


def manifest(facts: Facts) -> dict[str, Any]:
    """Return ``records/articles.json``: per article its ids and the records held about it."""
    entries = []
    for article in facts.articles:
        entry: dict[str, Any] = {"doi": article.doi, "pmid": article.pmid, "pmcid": article.pmcid}
        if article.jats:
            entry["jats"] = f"jats/{article.jats}"
            entry["jats_from"] = article.jats_from
        for kind in ("crossref", "unpaywall", "s2", "openalex"):
            name = getattr(article, kind)
            if name:
                entry[kind] = f"json/{name}"
        entries.append(entry)
    return {
        "about": (
            "The demo articles and the recorded files (copies of tests/data, see its "
            "PROVENANCE.md) that state facts about each; written by tools/build_demo.py."
        ),
        "articles": entries,
    }


def record_files(facts: Facts) -> dict[str, bytes]:
    """Return every packaged file, relative to the demo directory, with its bytes."""
    files = {EXPORT_NAME: export_bytes(export_rows(facts))}
    listing = manifest(facts)
    text = json.dumps(listing, indent=2, ensure_ascii=False) + "\n"
    files[f"{RECORDS}/{MANIFEST}"] = text.encode("utf-8")
    for entry in listing["articles"]:
        for kind in ("jats", "crossref", "unpaywall", "s2", "openalex"):
            if kind in entry:
                files[f"{RECORDS}/{entry[kind]}"] = (DATA / entry[kind]).read_bytes()
    return files


def build(target_dir: Path) -> dict[str, bytes]:
    """Write the export and the records into ``target_dir`` (stale records removed)."""
    files = record_files(gather_facts())
    records = target_dir / RECORDS
    if records.exists():
        shutil.rmtree(records)
    for name, content in files.items():
        path = target_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return files


def drift(target_dir: Path) -> list[str]:
    """Name every demo file that differs from what the builder makes today (or should not be)."""
    wanted = record_files(gather_facts())
    found = {
        p.relative_to(target_dir).as_posix()
        for p in target_dir.rglob("*")
        if p.is_file() and p.name != "__init__.py"
    }
    changed = [
        name
        for name, content in wanted.items()
        if not (target_dir / name).is_file() or (target_dir / name).read_bytes() != content
    ]
    return sorted(changed + [name for name in found - set(wanted)])


def main(argv: list[str] | None = None) -> int:
    """Build (or with ``--check``, verify) the demo data; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="verify the committed files")
    args = parser.parse_args(argv)
    if args.check:
        stale = drift(OUT)
        if stale:
            print(f"demo data out of date: {', '.join(stale)}; run tools/build_demo.py")
            return 1
        print("demo data is up to date")
        return 0
    files = build(OUT)
    for name in sorted(files):
        print(f"wrote {(OUT / name).relative_to(ROOT)} ({len(files[name])} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
