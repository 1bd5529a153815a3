"""A seeded generator of synthetic article corpora and the messy input frame a user would hold.

:func:`generate` returns the :class:`~tests.fakes.world.Article` records the
fake world serves and a pandas frame of ids as they arrive in real exports:
PMC prefixes missing, ``PMID: `` prefixes, doi.org URLs, float-looking PMIDs,
stray whitespace, a few invalid values, and duplicate rows. The same ``n`` and
``seed`` always give the same corpus.
"""

from __future__ import annotations

import collections
import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from tests.fakes.world import (
    CC_BY,
    CC_BY_NC,
    CC_BY_NC_ND,
    CC_ZERO,
    HOST_PUBLISHER,
    HOST_REPOSITORY,
    Article,
    BodyHome,
    LicenceStyle,
    Publisher,
    World,
)

__all__ = ["CATEGORIES", "Corpus", "Row", "generate"]

# Category → share of distinct articles. The mix follows what a biomedical
# bibliography export looks like: most rows are in PMC's open-access subset,
# a sizeable minority are DOI-only or publisher-hosted, a few are book parts.
CATEGORIES: dict[str, float] = {
    "pmc_oa": 0.42,
    "europe_pmc_only": 0.07,
    "doi_openalex": 0.12,
    "elsevier": 0.08,
    "springer": 0.07,
    "bookshelf": 0.03,
    "preprint": 0.04,
    "pubmed_only": 0.07,
    "nothing": 0.10,
}

DUPLICATE_SHARE = 0.05
"""Share of input rows that repeat an earlier article (often in another id form)."""

INVALID_SHARE = 0.01
"""Share of input rows whose only id is malformed."""


@dataclass(frozen=True, slots=True)
class Row:
    """The truth behind one input row: which article it names and which ids it validly gives."""

    article: int | None
    category: str
    pmid: str | None = None
    pmcid: str | None = None
    doi: str | None = None
    bookid: str | None = None
    duplicate: bool = False


@dataclass(frozen=True)
class Corpus:
    """A generated corpus: the world's articles, the input frame, and per-row truth."""

    articles: tuple[Article, ...]
    frame: pd.DataFrame
    rows: tuple[Row, ...]
    seed: int
    categories: tuple[str, ...] = field(default=())

    def world(self, **kwargs: Any) -> World:
        """Return a :class:`World` serving this corpus."""
        return World(self.articles, **kwargs)

    def mix(self) -> dict[str, int]:
        """Return how many input rows fall in each category (duplicates and invalid included)."""
        return dict(collections.Counter(r.category for r in self.rows))


def _pick(rng: random.Random, weights: dict[str, float]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


_LICENCES = {CC_BY: 0.6, CC_BY_NC: 0.2, CC_BY_NC_ND: 0.1, CC_ZERO: 0.1}
_STYLES = {
    LicenceStyle.XLINK: 0.40,
    LicenceStyle.ALI: 0.35,
    LicenceStyle.PROSE: 0.10,
    LicenceStyle.TYPE_ONLY: 0.10,
    LicenceStyle.NONE: 0.05,
}


def _licence(rng: random.Random) -> tuple[str, LicenceStyle]:
    lic = _pick(rng, _LICENCES)
    style = rng.choices(list(_STYLES), weights=list(_STYLES.values()))[0]
    return lic, style


def _pdf_url(rng: random.Random, doi: str | None, i: int) -> str | None:
    roll = rng.random()
    if doi and roll < 0.6:
        return f"https://{HOST_PUBLISHER}/article/{doi}.pdf"
    if roll < 0.8:
        return f"https://{HOST_REPOSITORY}/bitstream/{i}/paper.pdf"
    return None


def _versions(rng: random.Random) -> int:
    roll = rng.random()
    if roll < 0.80:
        return 1
    if roll < 0.95:
        return 2
    if roll < 0.99:
        return 3
    return rng.randint(10, 12)  # ".10" must sort above ".9"


def _article(rng: random.Random, i: int, category: str) -> Article:
    pmid = str(30000001 + i)
    pmcid = f"PMC{7000001 + i}"
    title = f"Synthetic study {i} of {rng.choice(['cells', 'cohorts', 'genes', 'trials'])}"
    lic, style = _licence(rng)
    common: dict[str, Any] = {"title": title, "in_s2": rng.random() < 0.95}
    if category == "pmc_oa":
        # a tenth of registered DOIs carry capitals, so case-insensitive matching is exercised
        doi = f"10.1000/bench.{i}" if rng.random() < 0.9 else f"10.1000/Bench.ABC{i}"
        manuscript = rng.random() < 0.10
        roll = rng.random()
        supp = 0 if roll < 0.5 else rng.randint(1, 5)
        if roll > 0.998:
            supp = 1200  # more keys than one listing page holds
        return Article(
            pmid=pmid,
            pmcid=pmcid,
            pmc_versions=_versions(rng),
            doi=doi,
            body=BodyHome.PMC_OA,
            licence=lic,
            licence_style=style,
            oa_status=rng.choice(["gold", "hybrid", "green"]),
            pdf_url=_pdf_url(rng, doi, i),
            n_supplementary=0 if manuscript else supp,
            n_figures=0 if manuscript else rng.randint(0, 4),
            has_pdf_rendition=rng.random() < 0.9,
            is_manuscript=manuscript,
            crossref_tdm=rng.random() < 0.3,
            **common,
        )
    if category == "europe_pmc_only":
        return Article(
            pmid=pmid,
            pmcid=pmcid,
            doi=f"10.1000/ukms.{i}" if rng.random() < 0.7 else None,
            body=BodyHome.EUROPE_PMC,
            licence=lic,
            licence_style=style,
            oa_status="green",
            pdf_url=_pdf_url(rng, None, i),
            is_manuscript=True,
            in_openalex=rng.random() < 0.8,
            **common,
        )
    if category == "doi_openalex":
        in_pubmed = rng.random() < 0.7
        return Article(
            pmid=pmid if in_pubmed else None,
            doi=f"10.5555/oa-{i}",
            oa_status=rng.choice(["closed", "bronze", "green", "hybrid"]),
            pdf_url=_pdf_url(rng, f"10.5555/oa-{i}", i),
            licence=lic,
            crossref_tdm=rng.random() < 0.3,
            **common,
        )
    if category == "elsevier":
        oa = rng.random() < 0.5
        doi = f"10.1016/j.bench.2026.{i:06d}"
        return Article(
            pmid=pmid if rng.random() < 0.6 else None,
            doi=doi,
            body=BodyHome.ELSEVIER if oa else BodyHome.NONE,
            publisher=Publisher.ELSEVIER,
            licence=CC_BY if oa else None,
            oa_status="hybrid" if oa else "closed",
            pdf_url=_pdf_url(rng, doi, i) if oa else None,
            **common,
        )
    if category == "springer":
        oa = rng.random() < 0.6
        doi = f"10.1007/s{10000 + i % 90000}-026-{i:05d}-x"
        return Article(
            pmid=pmid if rng.random() < 0.6 else None,
            doi=doi,
            body=BodyHome.SPRINGER if oa else BodyHome.NONE,
            publisher=Publisher.SPRINGER,
            licence=lic if oa else None,
            licence_style=style,
            oa_status="gold" if oa else "closed",
            pdf_url=f"http://link.springer.com/openurl/pdf?id=doi:{doi}" if oa else None,
            **common,
        )
    if category == "bookshelf":
        return Article(
            pmid=pmid if rng.random() < 0.5 else None,
            bookid=f"NBK{100000 + i}",
            body=BodyHome.BOOKSHELF,
            licence=lic,
            licence_style=style,
            in_openalex=False,
            in_crossref=False,
            in_unpaywall=False,
            **{**common, "in_s2": False},
        )
    if category == "preprint":
        server = Publisher.BIORXIV if rng.random() < 0.8 else Publisher.MEDRXIV
        return Article(
            doi=f"10.1101/2026.01.05.{600000 + i}",
            publisher=server,
            oa_status="green",
            licence=CC_BY,
            pdf_url=f"https://{HOST_REPOSITORY}/bitstream/{i}/paper.pdf",
            **common,
        )
    if category == "pubmed_only":
        # in PubMed, not in PMC: only Europe PMC search (or OpenAlex) can give its DOI
        return Article(
            pmid=pmid,
            doi=f"10.5555/pubmed-{i}",
            oa_status="closed",
            in_openalex=rng.random() < 0.5,
            **common,
        )
    # nothing: known to few services, no body, no open copy
    if rng.random() < 0.5:
        return Article(pmid=pmid, oa_status="closed", in_openalex=False, **common)
    return Article(
        doi=f"10.5555/nothing-{i}",
        oa_status="closed",
        in_openalex=rng.random() < 0.3,
        in_unpaywall=rng.random() < 0.5,
        in_crossref=rng.random() < 0.7,
        **common,
    )


def _row_ids(rng: random.Random, a: Article, category: str) -> dict[str, str | None]:
    """Choose which ids the input row gives, the way real exports are partial."""
    ids: dict[str, str | None] = {"pmid": None, "pmcid": None, "doi": None, "bookid": None}
    if a.bookid:
        ids["bookid"] = a.bookid
        if a.pmid and rng.random() < 0.5:
            ids["pmid"] = a.pmid
        return ids
    choices: list[tuple[str, float]]
    if category == "pmc_oa":
        choices = [("pmid", 0.35), ("pmcid", 0.25), ("doi", 0.25), ("all", 0.15)]
    elif category == "europe_pmc_only":
        choices = [("pmid", 0.7), ("pmcid", 0.15), ("doi", 0.15)]
    elif category in ("elsevier", "springer"):
        choices = [("doi", 0.7), ("pmid", 0.3)]
    elif category == "pubmed_only":
        choices = [("pmid", 1.0)]
    else:
        choices = [("doi", 0.6), ("pmid", 0.4)]
    names = [c for c, _ in choices]
    pick = rng.choices(names, weights=[w for _, w in choices])[0]
    wanted = ("pmid", "pmcid", "doi") if pick == "all" else (pick,)
    for name in wanted:
        ids[name] = getattr(a, name)
    if not any(ids.values()):
        for name in ("doi", "pmid", "pmcid"):
            if getattr(a, name):
                ids[name] = getattr(a, name)
                break
    return ids


def _messy_pmid(rng: random.Random, pmid: str) -> object:
    roll = rng.random()
    if roll < 0.08:
        return f"PMID: {pmid}"
    if roll < 0.16:
        return float(pmid)  # a PMID column read as floats
    if roll < 0.22:
        return f"{pmid}.0"
    if roll < 0.28:
        return f"  {pmid} "
    return pmid


def _messy_pmcid(rng: random.Random, pmcid: str, versions: int) -> str:
    roll = rng.random()
    digits = pmcid[3:]
    if roll < 0.15:
        return digits
    if roll < 0.22:
        return f"pmc{digits}"
    if roll < 0.28 and versions:
        return f"{pmcid}.{rng.randint(1, versions)}"
    if roll < 0.33:
        return f" {pmcid}\t"
    return pmcid


def _messy_doi(rng: random.Random, doi: str) -> str:
    roll = rng.random()
    if roll < 0.12:
        return f"https://doi.org/{doi}"
    if roll < 0.16:
        return f"http://dx.doi.org/{doi}"
    if roll < 0.22:
        return f"doi:{doi}"
    if roll < 0.30:
        return doi.upper()
    if roll < 0.35:
        return f" {doi} "
    return doi


_INVALID = {
    "pmid": ["n/a", "12ab", "PMID", "-5"],
    "pmcid": ["PMCX12", "PMC", "PMC12/../x"],
    "doi": ["10.1000", "not a doi", "10.abc/xyz"],
    "bookid": ["1116", "NBK", "PMC1116"],
}


def generate(n: int, *, seed: int = 0) -> Corpus:
    """Return a corpus whose input frame has ``n`` rows (1,000 to 50,000 is the intended range).

    Row shares: :data:`DUPLICATE_SHARE` repeat an earlier article,
    :data:`INVALID_SHARE` carry only a malformed id, the rest name a fresh
    article drawn from :data:`CATEGORIES`. Columns: ``PMID``, ``PMCID``,
    ``DOI``, ``bookid``, ``Title``.
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    rng = random.Random(seed)
    articles: list[Article] = []
    categories: list[str] = []
    rows: list[Row] = []
    cells: list[dict[str, object]] = []
    for _ in range(n):
        roll = rng.random()
        if roll < INVALID_SHARE:
            kind = rng.choice(list(_INVALID))
            cell: dict[str, object] = {k: None for k in ("PMID", "PMCID", "DOI", "bookid")}
            cell[{"pmid": "PMID", "pmcid": "PMCID", "doi": "DOI", "bookid": "bookid"}[kind]] = (
                rng.choice(_INVALID[kind])
            )
            cell["Title"] = "invalid id"
            cells.append(cell)
            rows.append(Row(article=None, category="invalid"))
            continue
        if roll < INVALID_SHARE + DUPLICATE_SHARE and articles:
            index = rng.randrange(len(articles))
            duplicate = True
        else:
            category = _pick(rng, CATEGORIES)
            index = len(articles)
            articles.append(_article(rng, index, category))
            categories.append(category)
            duplicate = False
        a = articles[index]
        category = categories[index]
        ids = _row_ids(rng, a, category)
        rows.append(Row(article=index, category=category, duplicate=duplicate, **ids))
        cells.append(
            {
                "PMID": _messy_pmid(rng, ids["pmid"]) if ids["pmid"] else None,
                "PMCID": _messy_pmcid(rng, ids["pmcid"], a.pmc_versions) if ids["pmcid"] else None,
                "DOI": _messy_doi(rng, ids["doi"]) if ids["doi"] else None,
                "bookid": ids["bookid"],
                "Title": a.title,
            }
        )
    articles = _link_preprints(articles, categories, rng)
    frame = pd.DataFrame(cells, columns=["PMID", "PMCID", "DOI", "bookid", "Title"])
    frame["PMID"] = frame["PMID"].astype(object)
    return Corpus(tuple(articles), frame, tuple(rows), seed, tuple(categories))


def _link_preprints(
    articles: list[Article], categories: Sequence[str], rng: random.Random
) -> list[Article]:
    """Pair half the preprints with a published PMC article (bioRxiv ``published`` and
    Crossref ``is-preprint-of`` / ``has-preprint`` on both sides)."""
    out = list(articles)
    published = [i for i, c in enumerate(categories) if c == "pmc_oa"]
    rng.shuffle(published)
    for i, category in enumerate(categories):
        if category != "preprint" or not published or rng.random() < 0.5:
            continue
        j = published.pop()
        out[i] = dataclasses.replace(out[i], published_doi=out[j].doi)
        out[j] = dataclasses.replace(out[j], preprint_doi=out[i].doi)
    return out
