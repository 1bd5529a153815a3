"""A synthetic world of every upstream service, derived from a list of :class:`Article` records.

The world is the server side of the library, written from the wire-level
reference (``upstream.md``) rather than from the library's clients, so it
cross-checks them: NCBI ID Converter, Europe PMC (search, fullTextXML,
bookXML), OpenAlex, the PMC Open Access S3 bucket, Crossref, Unpaywall,
Semantic Scholar (single paper and batch), Elsevier, Springer Nature
(OpenAccess JATS and Meta), the bioRxiv details API, and file downloads on
publisher and repository hosts (one of them through a 302 redirect).

Every answer is a pure function of the article records, so two runs over the
same records see the same bytes. :meth:`World.install` registers the routes on
a :class:`~tests.fake_upstream.FakeUpstream`; it can also add per-request
latency and per-host rate / concurrency limits (:class:`HostLimit`) that answer
429 the way the real services do, for the benchmarks.
"""

from __future__ import annotations

import base64
import collections
import enum
import hashlib
import itertools
import json
import random
import re
import threading
import time
import urllib.parse
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from tests.fake_upstream import FakeRequest, FakeResponse, FakeUpstream
from tests.fakes.faults import FaultKind, FaultPlan, fault_response
from tests.fakes.limits import HostGate, HostLimit

__all__ = [
    "ALL_HOSTS",
    "CC_BY",
    "CC_BY_NC",
    "CC_BY_NC_ND",
    "CC_ZERO",
    "HOST_BIORXIV",
    "HOST_BIORXIV_WWW",
    "HOST_CROSSREF",
    "HOST_EBI",
    "HOST_ELSEVIER",
    "HOST_NCBI",
    "HOST_OPENALEX",
    "HOST_PUBLISHER",
    "HOST_REPOSITORY",
    "HOST_S2",
    "HOST_S3",
    "HOST_SPRINGER",
    "HOST_SPRINGER_LINK",
    "HOST_UNPAYWALL",
    "Article",
    "BodyHome",
    "HostLimit",
    "LicenceStyle",
    "Publisher",
    "World",
    "articles_by_kind",
    "s3_names",
]

HOST_NCBI = "pmc.ncbi.nlm.nih.gov"
HOST_EBI = "www.ebi.ac.uk"
HOST_OPENALEX = "api.openalex.org"
HOST_S3 = "pmc-oa-opendata.s3.amazonaws.com"
HOST_CROSSREF = "api.crossref.org"
HOST_UNPAYWALL = "api.unpaywall.org"
HOST_S2 = "api.semanticscholar.org"
HOST_ELSEVIER = "api.elsevier.com"
HOST_SPRINGER = "api.springernature.com"
HOST_BIORXIV = "api.biorxiv.org"
HOST_BIORXIV_WWW = "www.biorxiv.org"
HOST_PUBLISHER = "publisher.example.org"
HOST_REPOSITORY = "repository.example.org"
HOST_SPRINGER_LINK = "link.springer.com"

ALL_HOSTS: tuple[str, ...] = (
    HOST_NCBI,
    HOST_EBI,
    HOST_OPENALEX,
    HOST_S3,
    HOST_CROSSREF,
    HOST_UNPAYWALL,
    HOST_S2,
    HOST_ELSEVIER,
    HOST_SPRINGER,
    HOST_BIORXIV,
    HOST_BIORXIV_WWW,
    HOST_PUBLISHER,
    HOST_REPOSITORY,
    HOST_SPRINGER_LINK,
)

CC_BY = "https://creativecommons.org/licenses/by/4.0/"
CC_BY_NC = "https://creativecommons.org/licenses/by-nc/4.0/"
CC_BY_NC_ND = "https://creativecommons.org/licenses/by-nc-nd/4.0/"
CC_ZERO = "https://creativecommons.org/publicdomain/zero/1.0/"

_S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_S3_BASE = f"https://{HOST_S3}"
_EBI_REST = "/europepmc/webservices/rest"


class BodyHome(enum.Enum):
    """Where an article's full text can be had."""

    PMC_OA = "pmc_oa"  # the PMC Open Access bucket (Europe PMC mirrors it)
    EUROPE_PMC = "europe_pmc"  # Europe PMC only (e.g. UK funder author manuscripts)
    ELSEVIER = "elsevier"  # Elsevier article API, full text for an open-access article
    SPRINGER = "springer"  # Springer Nature OpenAccess JATS
    BOOKSHELF = "bookshelf"  # Europe PMC bookXML (BITS)
    NONE = "none"  # nowhere


class Publisher(enum.Enum):
    """Who publishes the version of record (decides Crossref links and publisher APIs)."""

    OTHER = "other"
    ELSEVIER = "elsevier"
    SPRINGER = "springer"
    BIORXIV = "biorxiv"
    MEDRXIV = "medrxiv"


class LicenceStyle(enum.Enum):
    """How the JATS ``<license>`` states the licence."""

    XLINK = "xlink"  # <license xlink:href="URL">
    ALI = "ali"  # <ali:license_ref>URL</ali:license_ref>, license-type="open-access"
    PROSE = "prose"  # URL only inside <license-p> (an ext-link), no license-type
    TYPE_ONLY = "type_only"  # license-type="open-access" and prose without any URL
    NONE = "none"  # <permissions> with a copyright statement only


@dataclass(frozen=True, slots=True)
class Article:
    """One article as the whole upstream world knows it.

    Ids are canonical (``PMC<digits>``, DOI in its registered casing).
    ``pmc_versions`` counts version folders in the PMC OA bucket (0: not in
    it). ``in_pmc`` (default: has a PMCID and is not Europe-PMC-only) decides
    whether the NCBI ID Converter knows it. ``pdf_url`` is the best open-access
    PDF location Unpaywall and Semantic Scholar report.
    """

    pmid: str | None = None
    pmcid: str | None = None
    pmc_versions: int = 0
    doi: str | None = None
    bookid: str | None = None
    body: BodyHome = BodyHome.NONE
    publisher: Publisher = Publisher.OTHER
    licence: str | None = CC_BY
    licence_style: LicenceStyle = LicenceStyle.XLINK
    oa_status: str = "closed"
    pdf_url: str | None = None
    n_supplementary: int = 0
    n_figures: int = 0
    has_pdf_rendition: bool = True
    is_manuscript: bool = False
    preprint_doi: str | None = None
    published_doi: str | None = None
    in_pmc: bool | None = None
    in_europe_pmc_search: bool = True
    in_openalex: bool = True
    in_s2: bool = True
    in_crossref: bool = True
    in_unpaywall: bool = True
    crossref_tdm: bool = False
    title: str = "A synthetic article"

    def __post_init__(self) -> None:
        if self.pmid is not None and not re.fullmatch(r"\d+", self.pmid):
            raise ValueError(f"pmid must be digits: {self.pmid!r}")
        if self.pmcid is not None and not re.fullmatch(r"PMC\d+", self.pmcid):
            raise ValueError(f"pmcid must be PMC<digits>: {self.pmcid!r}")
        if self.bookid is not None and not re.fullmatch(r"NBK\d+", self.bookid):
            raise ValueError(f"bookid must be NBK<digits>: {self.bookid!r}")
        if self.doi is not None and not re.fullmatch(r"10\.\d+(\.\d+)*/\S+", self.doi):
            raise ValueError(f"doi is not a DOI: {self.doi!r}")
        if self.pmc_versions and self.pmcid is None:
            raise ValueError("pmc_versions needs a pmcid")
        if self.body is BodyHome.PMC_OA and not self.pmc_versions:
            raise ValueError("a PMC_OA body needs pmc_versions >= 1")
        if self.body in (BodyHome.PMC_OA, BodyHome.EUROPE_PMC) and self.pmcid is None:
            raise ValueError(f"a {self.body.value} body needs a pmcid")
        if self.body is BodyHome.BOOKSHELF and self.bookid is None:
            raise ValueError("a bookshelf body needs a bookid")
        if self.body in (BodyHome.ELSEVIER, BodyHome.SPRINGER) and self.doi is None:
            raise ValueError(f"a {self.body.value} body needs a doi")

    @property
    def known_to_ncbi(self) -> bool:
        """Whether the NCBI ID Converter maps this article (it is in PMC)."""
        if self.in_pmc is not None:
            return self.in_pmc and self.pmcid is not None
        return self.pmcid is not None and self.body is not BodyHome.EUROPE_PMC

    @property
    def in_europe_pmc_fulltext(self) -> bool:
        """Whether Europe PMC's fullTextXML serves this article."""
        return self.body in (BodyHome.PMC_OA, BodyHome.EUROPE_PMC)

    @property
    def is_open(self) -> bool:
        """Whether Unpaywall calls it open access."""
        return self.oa_status != "closed"

    @property
    def key(self) -> str:
        """A stable name for the article (its first id)."""
        return self.pmcid or self.pmid or self.doi or self.bookid or "anonymous"


def _digest(*parts: object) -> int:
    material = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(material).digest()[:8], "big")


def _quote_doi(doi: str) -> str:
    """Path-encode a DOI: every segment quoted with no safe characters."""
    return "/".join(urllib.parse.quote(seg, safe="") for seg in doi.split("/"))


def _unquote(text: str) -> str:
    return urllib.parse.unquote(text)


def _strip_doi(value: str) -> str:
    v = value.strip()
    for prefix in (
        "https://doi.org/",
        "http://doi.org/",
        "https://dx.doi.org/",
        "http://dx.doi.org/",
    ):
        if v.lower().startswith(prefix):
            v = v[len(prefix) :]
            break
    if v.lower().startswith("doi:"):
        v = v[4:].strip()
    return v


_WORDS: tuple[str, ...] = (
    "cell",
    "protein",
    "gene",
    "expression",
    "cohort",
    "analysis",
    "signal",
    "pathway",
    "model",
    "tissue",
    "response",
    "variant",
    "sample",
    "clinical",
    "outcome",
    "network",
    "receptor",
    "binding",
    "assay",
    "patient",
    "dose",
    "sequence",
    "structure",
    "membrane",
    "regulation",
    "marker",
    "survival",
    "trial",
    "population",
)


def _prose(seed: int, words: int) -> str:
    out = []
    for i in range(words):
        out.append(_WORDS[(seed >> (i % 40) ^ (i * 2654435761)) % len(_WORDS)])
    text = " ".join(out)
    return text[:1].upper() + text[1:] + "."


_UNPAYWALL_LICENCE = {
    CC_BY: "cc-by",
    CC_BY_NC: "cc-by-nc",
    CC_BY_NC_ND: "cc-by-nc-nd",
    CC_ZERO: "cc0",
}
_S2_LICENCE = {CC_BY: "CCBY", CC_BY_NC: "CCBYNC", CC_BY_NC_ND: "CCBYNCND", CC_ZERO: "CC0"}
_LICENCE_CODE = {CC_BY: "CC BY", CC_BY_NC: "CC BY-NC", CC_BY_NC_ND: "CC BY-NC-ND", CC_ZERO: "CC0"}
_SUPP_EXT = ("xlsx", "docx", "pdf", "csv", "zip", "mp4")


class World:
    """Every upstream service, answering from ``articles`` in the documented shapes.

    ``keys`` optionally fixes the accepted credentials per product
    (``"elsevier"``, ``"springer_openaccess"``, ``"springer_meta"``); a product
    without an entry accepts any non-blank key, but never another product's
    configured key. Construction fails on duplicate ids.
    """

    def __init__(
        self,
        articles: Iterable[Article],
        *,
        keys: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.articles: tuple[Article, ...] = tuple(articles)
        self.keys: dict[str, str] = dict(keys or {})
        self._by_pmid: dict[str, Article] = {}
        self._by_pmcid: dict[str, Article] = {}
        self._by_doi: dict[str, Article] = {}
        self._by_bookid: dict[str, Article] = {}
        self._by_pii: dict[str, Article] = {}
        self._by_paper_id: dict[str, Article] = {}
        self._by_download: dict[str, Article] = {}
        for a in self.articles:
            for index, value in (
                (self._by_pmid, a.pmid),
                (self._by_pmcid, a.pmcid),
                (self._by_doi, a.doi.lower() if a.doi else None),
                (self._by_bookid, a.bookid),
            ):
                if value is None:
                    continue
                if value in index:
                    raise ValueError(f"duplicate id {value!r} in the world")
                index[value] = a
            if a.doi and a.publisher is Publisher.ELSEVIER:
                self._by_pii[self.pii(a)] = a
            self._by_paper_id[self.paper_id(a)] = a
            if a.pdf_url:
                self._by_download[self._download_key(a.pdf_url)] = a
            for link in self._tdm_links(a):
                self._by_download[self._download_key(link["URL"])] = a
        self._bucket_stems: list[str] = sorted(
            f"{a.pmcid}." for a in self.articles if a.pmcid and a.pmc_versions
        )
        self._stem_set: frozenset[str] = frozenset(self._bucket_stems)
        self._lock = threading.Lock()
        self._clock = clock
        self._gates: dict[str, HostGate] = {}
        self._limits: dict[str, HostLimit] = {}
        self._not_before: dict[str, tuple[float, float]] = {}
        """Per host, the latest Retry-After window: from when the client knew, until its end."""
        self._latency: dict[str | None, float] = {}
        self.served: collections.Counter[str] = collections.Counter()
        self.throttled: collections.Counter[str] = collections.Counter()
        self.throttle_log: list[tuple[str, float]] = []
        self.over_in_flight: collections.Counter[str] = collections.Counter()
        self.early: collections.Counter[str] = collections.Counter()
        self.faulted: collections.Counter[str] = collections.Counter()
        self.fault_kinds: collections.Counter[str] = collections.Counter()
        self._faults: FaultPlan | None = None
        self._rules: Any = None
        self._jitter = 0.0
        self._jitter_rng = random.Random(0)
        self.marks: list[tuple[str, float]] = []

    # -- construction helpers ----------------------------------------------------------------

    @classmethod
    def from_corpus(cls, n: int = 1000, *, seed: int = 0, **kwargs: Any) -> World:
        """Return a world holding the articles of ``benchmarks.corpus.generate(n, seed=seed)``."""
        from benchmarks.corpus import generate  # type: ignore[import-not-found,unused-ignore]

        return cls(generate(n, seed=seed).articles, **kwargs)

    # -- lookups -----------------------------------------------------------------------------

    def by_pmid(self, pmid: str) -> Article | None:
        """Return the article with this PMID, if any."""
        return self._by_pmid.get(pmid.strip())

    def by_pmcid(self, pmcid: str) -> Article | None:
        """Return the article with this PMCID (any case, prefix optional, version ignored)."""
        m = re.fullmatch(r"\s*(?:PMC)?(\d+)(?:\.\d+)?\s*", pmcid, re.IGNORECASE)
        return self._by_pmcid.get(f"PMC{m.group(1)}") if m else None

    def by_doi(self, doi: str) -> Article | None:
        """Return the article with this DOI (case-insensitive; URL and ``doi:`` forms accepted)."""
        return self._by_doi.get(_strip_doi(doi).lower())

    def by_bookid(self, bookid: str) -> Article | None:
        """Return the Bookshelf article with this accession."""
        return self._by_bookid.get(bookid.strip().upper())

    # -- derived identities ------------------------------------------------------------------

    @staticmethod
    def pii(article: Article) -> str:
        """Return the Elsevier PII the world gives an article."""
        return f"S{_digest('pii', article.key) % 10**16:016d}"

    @staticmethod
    def paper_id(article: Article) -> str:
        """Return the Semantic Scholar paper id (40 hex) the world gives an article."""
        return hashlib.sha1(f"s2:{article.key}".encode(), usedforsecurity=False).hexdigest()

    @staticmethod
    def elsevier_url(article: Article) -> str:
        """Return the Crossref-advertised Elsevier text/xml link of an article."""
        return (
            f"https://{HOST_ELSEVIER}/content/article/PII:{World.pii(article)}?httpAccept=text/xml"
        )

    @staticmethod
    def springer_openurl(article: Article) -> str:
        """Return the Springer Meta openURL PDF link (it redirects, 302)."""
        return f"http://{HOST_SPRINGER_LINK}/openurl/pdf?id=doi:{article.doi}"

    def s3_keys(self, article: Article, version: int) -> list[tuple[str, int]]:
        """Return the sorted ``(key, size)`` pairs of one version folder in the bucket."""
        if not article.pmcid or not 1 <= version <= article.pmc_versions:
            return []
        return sorted(
            (key, len(self.s3_object(key) or b"")) for key in self._s3_names(article, version)
        )

    def _s3_names(self, a: Article, version: int) -> list[str]:
        return s3_names(a, version)

    @staticmethod
    def _slug(a: Article) -> str:
        return _slug(a)

    def expected_licence(self, article: Article) -> str | None:
        """Return the licence URL the article's JATS/BITS body states, if its style states one."""
        if article.licence_style in (LicenceStyle.NONE, LicenceStyle.TYPE_ONLY):
            return None
        return article.licence

    # -- bodies ------------------------------------------------------------------------------

    def jats(self, a: Article, *, version: int | None = None, doctype: bool = True) -> bytes:
        """Return a small JATS article (root ``<article>``) for ``a``."""
        seed = _digest("jats", a.key, version)
        ids = []
        if a.pmcid:
            ids.append(f'<article-id pub-id-type="pmcid">{a.pmcid}</article-id>')
            if version:
                ids.append(f'<article-id pub-id-type="pmcid-ver">{a.pmcid}.{version}</article-id>')
        if a.pmid:
            ids.append(f'<article-id pub-id-type="pmid">{a.pmid}</article-id>')
        if a.doi:
            ids.append(f'<article-id pub-id-type="doi">{escape(a.doi)}</article-id>')
        slug = self._slug(a)
        figs = "".join(
            f'<fig id="f{i}"><label>Figure {i}</label><caption><p>{_prose(seed + i, 8)}</p>'
            f'</caption><graphic xlink:href="{slug}-g{i:03d}.jpg"/></fig>'
            for i in range(1, min(a.n_figures, 3) + 1)
        )
        supp = "".join(
            f'<supplementary-material id="sup{i}" content-type="local-data"><media '
            f'xlink:href="{slug}-s{i:03d}.{_SUPP_EXT[i % len(_SUPP_EXT)]}"/>'
            "</supplementary-material>"
            for i in range(1, min(a.n_supplementary, 3) + 1)
        )
        back = f'<back><sec sec-type="supplementary-material">{supp}</sec></back>' if supp else ""
        head = '<?xml version="1.0" encoding="UTF-8"?>\n'
        if doctype:
            head += (
                '<!DOCTYPE article PUBLIC "-//NLM//DTD JATS (Z39.96) Journal Archiving and '
                'Interchange DTD v1.3 20210610//EN" "JATS-archivearticle1-3.dtd">\n'
            )
        text = (
            f"{head}"
            '<article xmlns:xlink="http://www.w3.org/1999/xlink" '
            'xmlns:mml="http://www.w3.org/1998/Math/MathML" '
            'xmlns:ali="http://www.niso.org/schemas/ali/1.0/" '
            'article-type="research-article" dtd-version="1.3" xml:lang="en">'
            "<front><journal-meta>"
            '<journal-id journal-id-type="nlm-ta">J Synth Ex</journal-id>'
            "<journal-title-group><journal-title>Journal of Synthetic Examples</journal-title>"
            '</journal-title-group><issn pub-type="epub">0000-0000</issn>'
            "<publisher><publisher-name>Example Press</publisher-name></publisher></journal-meta>"
            f"<article-meta>{''.join(ids)}"
            f"<title-group><article-title>{escape(a.title)}</article-title></title-group>"
            '<contrib-group><contrib contrib-type="author"><name><surname>Doe</surname>'
            "<given-names>Jane</given-names></name></contrib></contrib-group>"
            '<pub-date pub-type="epub"><day>5</day><month>1</month><year>2026</year></pub-date>'
            f"{self._permissions(a)}"
            f"<abstract><p>{_prose(seed, 30)}</p></abstract>"
            "</article-meta></front>"
            f'<body><sec id="s1"><title>Introduction</title><p>{_prose(seed + 1, 60)}</p></sec>'
            f'<sec id="s2"><title>Results</title><p>{_prose(seed + 2, 60)}</p>{figs}</sec>'
            f'<sec id="s3"><title>Discussion</title><p>{_prose(seed + 3, 40)}</p></sec></body>'
            f"{back}</article>\n"
        )
        return text.encode()

    def _permissions(self, a: Article) -> str:
        copyright_ = "<copyright-statement>© 2026 The Authors</copyright-statement>"
        url = a.licence or CC_BY
        style = a.licence_style if a.licence else LicenceStyle.NONE
        if style is LicenceStyle.XLINK:
            lic = (
                f'<license xlink:href={quoteattr(url)} license-type="open-access">'
                "<license-p>Reuse is permitted under the licence named here.</license-p></license>"
            )
        elif style is LicenceStyle.ALI:
            lic = (
                '<license license-type="open-access"><ali:license_ref specific-use="textmining" '
                f'content-type="ccbylicense">{escape(url)}</ali:license_ref>'
                "<license-p>This article is distributed under a Creative Commons licence."
                "</license-p></license>"
            )
        elif style is LicenceStyle.PROSE:
            lic = (
                "<license><license-p>Distributed under the terms of the "
                f'<ext-link ext-link-type="uri" xlink:href={quoteattr(url)}>Creative Commons'
                "</ext-link> licence.</license-p></license>"
            )
        elif style is LicenceStyle.TYPE_ONLY:
            lic = (
                '<license license-type="open-access"><license-p>This is an open access article.'
                "</license-p></license>"
            )
        else:
            lic = ""
        return f"<permissions>{copyright_}{lic}</permissions>"

    def bits(self, a: Article) -> bytes:
        """Return a small BITS book part (root ``<book-part-wrapper>``) for a Bookshelf article."""
        seed = _digest("bits", a.key)
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<book-part-wrapper xmlns:xlink="http://www.w3.org/1999/xlink" '
            'xmlns:mml="http://www.w3.org/1998/Math/MathML" '
            'xmlns:ali="http://www.niso.org/schemas/ali/1.0/" '
            'dtd-version="2.0" content-type="chapter">'
            '<book-meta><book-id book-id-type="publisher">synthetic-reviews</book-id>'
            "<book-title-group><book-title>Synthetic Reviews</book-title></book-title-group>"
            "<permissions><copyright-statement>Copyright © 2001-2026, Example University."
            '</copyright-statement><license xlink:href="https://books.example.org/terms/">'
            "<license-p>Chapters may be reproduced for non-commercial research use.</license-p>"
            "</license></permissions></book-meta>"
            f'<book-part book-part-type="chapter" id="{a.bookid}"><book-part-meta>'
            f"<title-group><title>{escape(a.title)}</title></title-group>"
            f"{self._permissions(a)}</book-part-meta>"
            f"<body><sec><title>Summary</title><p>{_prose(seed, 80)}</p>"
            '<fig id="bf1"><permissions><license xlink:href="https://figures.example.org/terms">'
            "<license-p>Figure terms.</license-p></license></permissions></fig></sec></body>"
            "</book-part></book-part-wrapper>\n"
        ).encode()

    def elsevier_xml(self, a: Article) -> bytes:
        """Return an Elsevier full-text-retrieval-response (full text only for an OA body)."""
        seed = _digest("els", a.key)
        full = a.body is BodyHome.ELSEVIER
        licence = (
            f"<openaccessUserLicense>{escape(a.licence)}</openaccessUserLicense>"
            if full and a.licence
            else ""
        )
        text = (
            "<originalText><xocs:doc><xocs:serial-item>"
            '<article xmlns="http://www.elsevier.com/xml/ja/dtd"><body><ce:sections>'
            f'<ce:section id="s0005"><ce:section-title>Introduction</ce:section-title>'
            f"<ce:para>{_prose(seed, 50)}</ce:para><ce:para>{_prose(seed + 1, 50)}</ce:para>"
            "</ce:section></ce:sections></body></article>"
            "</xocs:serial-item></xocs:doc></originalText>"
            if full
            else ""
        )
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<full-text-retrieval-response xmlns="http://www.elsevier.com/xml/svapi/article/dtd" '
            'xmlns:ce="http://www.elsevier.com/xml/common/dtd" '
            'xmlns:dc="http://purl.org/dc/elements/1.1/" '
            'xmlns:prism="http://prismstandard.org/namespaces/basic/2.0/" '
            'xmlns:xocs="http://www.elsevier.com/xml/xocs/dtd"><coredata>'
            f"<prism:url>https://{HOST_ELSEVIER}/content/article/pii/{self.pii(a)}</prism:url>"
            f"<dc:identifier>doi:{escape(a.doi or '')}</dc:identifier><pii>{self.pii(a)}</pii>"
            f"<prism:doi>{escape(a.doi or '')}</prism:doi><dc:title>{escape(a.title)}</dc:title>"
            f"<openaccess>{1 if full else 0}</openaccess>"
            f"<openaccessArticle>{'true' if full else 'false'}</openaccessArticle>"
            f"{licence}<dc:description>{_prose(seed + 2, 30)}</dc:description></coredata>"
            f"{text}</full-text-retrieval-response>\n"
        ).encode()

    def pdf(self, a: Article, label: str = "article") -> bytes:
        """Return small but real-looking PDF bytes for ``a``."""
        return (
            b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog >>\nendobj\n"
            + f"% {label} {a.key}\n".encode()
            + b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"
        )

    # -- S3 objects --------------------------------------------------------------------------

    def s3_object(self, key: str) -> bytes | None:
        """Return the bytes stored under a bucket key, or ``None`` if there is no such key."""
        m = re.fullmatch(r"metadata/(PMC\d+)\.(\d+)\.json", key)
        if m:
            a = self._by_pmcid.get(m.group(1))
            v = int(m.group(2))
            if a is None or not 1 <= v <= a.pmc_versions:
                return None
            return json.dumps(self.s3_metadata(a, v), indent=1).encode()
        m = re.fullmatch(r"(PMC\d+)\.(\d+)/([^/]+)", key)
        if not m:
            return None
        a = self._by_pmcid.get(m.group(1))
        v = int(m.group(2))
        if a is None or not 1 <= v <= a.pmc_versions or key not in self._s3_names(a, v):
            return None
        name = m.group(3)
        stem = f"{a.pmcid}.{v}"
        if name == f"{stem}.xml":
            return self.jats(a, version=v)
        if name == f"{stem}.txt":
            return f"{a.title}\n\n{_prose(_digest('txt', a.key, v), 80)}\n".encode()
        if name == f"{stem}.json":
            return json.dumps(self.s3_metadata(a, v), indent=1).encode()
        if name.endswith(".pdf"):
            return self.pdf(a, name)
        return f"synthetic {name} of {a.key}\n".encode() * (1 + _digest(name) % 8)

    def s3_metadata(self, a: Article, version: int) -> dict[str, Any]:
        """Return the ``metadata/PMC<n>.<v>.json`` record of one version."""
        stem = f"{a.pmcid}.{version}"

        def url(name: str) -> str:
            md5 = hashlib.md5(name.encode(), usedforsecurity=False).hexdigest()
            return f"s3://pmc-oa-opendata/{stem}/{name}?md5={md5}"

        media = [n.split("/", 1)[1] for n in self._s3_names(a, version)]
        record: dict[str, Any] = {
            "pmcid": a.pmcid,
            "version": version,
            "pmid": int(a.pmid) if a.pmid else None,
            "doi": a.doi,
            "title": a.title,
            "citation": "J Synth Ex. 2026 Jan 5;12(1):34-56.",
            "is_pmc_openaccess": a.body is BodyHome.PMC_OA,
            "is_manuscript": a.is_manuscript,
            "is_historical_ocr": False,
            "is_retracted": False,
            "license_code": "TDM"
            if a.is_manuscript
            else _LICENCE_CODE.get(a.licence or "", "CC BY"),
            "xml_url": url(f"{stem}.xml"),
            "text_url": url(f"{stem}.txt"),
        }
        if a.has_pdf_rendition:
            record["pdf_url"] = url(f"{stem}.pdf")
        extra = [m for m in media if not m.startswith(f"{stem}.")]
        if extra:
            record["media_urls"] = [url(m) for m in extra]
        return record

    # -- installation ------------------------------------------------------------------------

    def install(
        self,
        fake: FakeUpstream,
        *,
        latency: float | Mapping[str, float] = 0.0,
        limits: Mapping[str, HostLimit] | None = None,
        faults: FaultPlan | None = None,
        rules: Any = None,
        jitter: float = 0.0,
        jitter_seed: int = 0,
    ) -> None:
        """Register every service's routes on ``fake``.

        ``rules`` (a :class:`tests.fakes.rules2026.Rules2026`) enforces the published 2026
        limits, pools, page sizes and quotas on the hosts it knows, in place of ``limits``.
        ``jitter`` delays each answer by its latency times uniform(1 - j, 1 + j), drawn from
        ``jitter_seed`` (real services do not answer in a constant time).

        ``latency`` delays every answer (a number, or seconds per host).
        ``limits`` enforces a :class:`HostLimit` per host; each 429 it sends is
        counted in :attr:`throttled`, each request a route saw in :attr:`served`.
        ``faults`` fails a share of the admitted requests of every host
        (:class:`~tests.fakes.faults.FaultPlan`), counted in :attr:`faulted`
        per host and :attr:`fault_kinds` per kind.
        """
        self._faults = faults
        if isinstance(latency, Mapping):
            self._latency = {k: float(v) for k, v in latency.items()}
        else:
            self._latency = {None: float(latency)}
        self._limits = dict(limits or {})
        self._rules = rules
        self._jitter = max(0.0, min(1.0, float(jitter)))
        self._jitter_rng = random.Random(f"litfetch-bench-jitter-{jitter_seed}")
        r = self._route_on(fake)
        # NCBI ID Converter
        r(HOST_NCBI, r"/tools/idconv/api/v1/articles/?", self._idconv)
        # Europe PMC
        r(HOST_EBI, rf"{_EBI_REST}/search/?", self._epmc_search)
        r(HOST_EBI, rf"{_EBI_REST}/([^/]+)/fullTextXML", self._epmc_fulltext)
        r(HOST_EBI, rf"{_EBI_REST}/([^/]+)/bookXML", self._epmc_book)
        # OpenAlex
        r(HOST_OPENALEX, r"/works/?", self._openalex_works)
        r(HOST_OPENALEX, r"/works/(.+)", self._openalex_single)
        # PMC S3 bucket: objects, then the listing on "/"
        r(HOST_S3, r"/(.+)", self._s3_get)
        r(HOST_S3, r"/", self._s3_list)
        # Crossref
        r(HOST_CROSSREF, r"/works/(.+)", self._crossref_work)
        r(HOST_CROSSREF, r"/works/?", self._crossref_list)
        # Unpaywall
        r(HOST_UNPAYWALL, r"/v2/(.+)", self._unpaywall)
        # Semantic Scholar
        r(HOST_S2, r"/graph/v1/paper/(.+)", self._s2_paper)
        r(HOST_S2, r"/graph/v1/paper/batch", self._s2_batch, method="POST")
        # Elsevier
        r(HOST_ELSEVIER, r"/content/article/(PII:|pii/|doi/)(.+)", self._elsevier)
        # Springer Nature
        r(HOST_SPRINGER, r"/openaccess/jats/?", self._springer_jats)
        r(HOST_SPRINGER, r"/meta/v2/json/?", self._springer_meta)
        # bioRxiv / medRxiv
        r(HOST_BIORXIV, r"/details/(biorxiv|medrxiv)/(.+?)(?:/na/json)?", self._biorxiv)
        # downloads
        for host in (HOST_PUBLISHER, HOST_REPOSITORY):
            r(host, r"/.+", self._download)
        r(HOST_SPRINGER_LINK, r"/openurl/pdf", self._springer_openurl)
        r(HOST_SPRINGER_LINK, r"/content/pdf/(.+)\.pdf", self._springer_pdf)
        # a control host the benchmark client uses to mark phase boundaries in the log
        fake.route("bench.control", r"/mark/.+", self._mark)

    def _route_on(self, fake: FakeUpstream) -> Callable[..., None]:
        def add(
            host: str,
            pattern: str,
            handler: Callable[..., FakeResponse],
            *,
            method: str = "GET",
        ) -> None:
            regex = re.compile(pattern)

            def serve(req: FakeRequest) -> FakeResponse:
                m = regex.fullmatch(req.path)
                groups = m.groups() if m else ()
                return self._guarded(host, lambda: handler(req, *groups), req)

            fake.route(host, pattern, serve, method=method)

        return add

    def _guarded(
        self, host: str, answer: Callable[[], FakeResponse], req: FakeRequest | None = None
    ) -> FakeResponse | str:
        limit = self._limits.get(host)
        now = self._clock()
        refused: FakeResponse | None = None
        gate: HostGate | None = None
        announced: dict[str, str] = {}
        held: list[HostGate] = []
        with self._lock:
            self.served[host] += 1
            told, until = self._not_before.get(host, (0.0, float("-inf")))
            if told <= now < until:
                self.early[host] += 1
            decision = (
                self._rules.decide(host, req, now)
                if self._rules is not None and req is not None
                else None
            )
            if decision is not None:
                # the published rules replace the host's fixed / drawn limit
                limit = None
                announced = dict(decision.headers)
                held = decision.release
                if decision.refusal is not None:
                    # a 403 (premium page size) or 400 (per_page) is a refusal, not a throttle
                    if decision.refusal.status == 429:
                        self.throttled[host] += 1
                        self.throttle_log.append((host, now))
                    refused = decision.refusal
            if limit is not None:
                gate = self._gates.setdefault(host, HostGate(limit))
                verdict = gate.admit(now)
                announced = verdict.headers
                if not verdict.admitted:
                    self.throttled[host] += 1
                    self.throttle_log.append((host, now))
                    self.over_in_flight[host] += verdict.over_in_flight
                    if verdict.retry_after is not None:
                        # a client learns of a new wait when the 429 reaches it, a latency later
                        if now >= until:
                            told = now + self._latency.get(host, self._latency.get(None, 0.0))
                        until = max(until, now + verdict.retry_after)
                        self._not_before[host] = (told, until)
                    refused = FakeResponse(limit.status, limit.body, announced)
                    gate = None
        fault: FaultKind | None = None
        if refused is None and self._faults is not None and req is not None:
            query = urllib.parse.urlencode(sorted(req.query.items()), doseq=True)
            if req.body:  # a POST's body tells its requests apart
                query += "#" + hashlib.sha256(req.body).hexdigest()
            fault = self._faults.draw(host, req.method, req.path, query)
            if fault is not None:
                with self._lock:
                    self.faulted[host] += 1
                    self.fault_kinds[fault.value] += 1
        delay = self._latency.get(host, self._latency.get(None, 0.0))
        if delay and self._jitter:
            with self._lock:
                delay *= self._jitter_rng.uniform(1.0 - self._jitter, 1.0 + self._jitter)
        try:
            if fault is not None and self._faults is not None:
                whole = answer() if fault is FaultKind.TRUNCATED else FakeResponse()
                if delay:
                    time.sleep(delay)
                return fault_response(fault, whole, stall=self._faults.stall)
            response = refused if refused is not None else answer()
            if announced and refused is None:
                response = FakeResponse(
                    response.status, response.body, {**response.headers, **announced}
                )
            if delay:
                time.sleep(delay)
            return response
        finally:
            if gate is not None or held:
                with self._lock:
                    for one in [gate, *held] if gate is not None else held:
                        one.release()

    def _mark(self, req: FakeRequest) -> FakeResponse:
        with self._lock:
            self.marks.append((_unquote(req.path[len("/mark/") :]), req.at))
        return FakeResponse(204, b"")

    # -- counting ----------------------------------------------------------------------------

    @staticmethod
    def requests_per_host(
        fake: FakeUpstream, *, since: float | None = None, until: float | None = None
    ) -> collections.Counter[str]:
        """Count the requests ``fake`` logged per host, optionally in a monotonic time window."""
        counts: collections.Counter[str] = collections.Counter()
        for req in fake.requests():
            if req.host == "bench.control":
                continue
            if since is not None and req.at < since:
                continue
            if until is not None and req.at >= until:
                continue
            counts[req.host] += 1
        return counts

    def reset_counts(self) -> None:
        """Forget the served / throttled counters and the marks (not the rate-limit state)."""
        with self._lock:
            self.served.clear()
            self.throttled.clear()
            self.throttle_log.clear()
            self.over_in_flight.clear()
            self.early.clear()
            self.faulted.clear()
            self.fault_kinds.clear()
            self.marks.clear()

    # -- NCBI ID Converter -------------------------------------------------------------------

    def _idconv(self, req: FakeRequest) -> FakeResponse:
        raw = req.param("ids")
        query = urllib.parse.urlencode([(k, v) for k, vs in req.query.items() for v in vs])
        base = {
            "responseDate": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(0)),
            "request": query,
        }
        if not raw or not raw.strip():
            return FakeResponse(
                400, {"status": "error", "message": "ids parameter is required", **base}
            )
        ids = [s.strip() for s in raw.split(",") if s.strip()]
        if len(ids) > 200:
            return FakeResponse(
                400, {"status": "error", "message": "too many ids (at most 200)", **base}
            )
        idtype = (req.param("idtype") or "").lower() or None
        records = []
        for value in ids:
            kind = self._idconv_type(value, idtype)
            if kind is None and idtype is not None:
                # the service refuses the whole request when an id does not fit idtype
                msg = urllib.parse.quote(f"ID type '{idtype}' mismatch for '{value}'")
                return FakeResponse(200, {"status": "error", "message": msg, **base})
            a = self._idconv_lookup(value, kind)
            if a is None or not a.known_to_ncbi:
                err = "invalid article id" if kind is None else "Identifier not found in PMC"
                records.append({"requested-id": value, "status": "error", "errmsg": err})
                continue
            rec: dict[str, Any] = {"requested-id": value, "pmcid": a.pmcid}
            if a.pmid:
                rec["pmid"] = int(a.pmid)
            if a.doi:
                rec["doi"] = a.doi
            if a.is_manuscript:
                rec["mid"] = f"NIHMS{_digest('mid', a.key) % 10**6:06d}"
            if req.param("versions") == "yes" and a.pmc_versions:
                rec["versions"] = [
                    {
                        "pmcid": f"{a.pmcid}.{v}",
                        **({"current": "true"} if v == a.pmc_versions else {}),
                    }
                    for v in range(1, a.pmc_versions + 1)
                ]
            records.append(rec)
        return FakeResponse(200, {"status": "ok", **base, "records": records})

    @staticmethod
    def _idconv_type(value: str, idtype: str | None) -> str | None:
        if idtype is None:
            if re.fullmatch(r"(?i)PMC\d+(\.\d+)?", value):
                return "pmcid"
            if re.fullmatch(r"\d+", value):
                return "pmid"
            if re.fullmatch(r"10\.\d+(\.\d+)*/.+", value):
                return "doi"
            if re.fullmatch(r"(?i)(NIHMS|UKMS|EMS)\d+", value):
                return "mid"
            return None
        if idtype == "pmcid":
            return "pmcid" if re.fullmatch(r"(?i)(PMC)?\d+(\.\d+)?", value) else None
        if idtype == "pmid":
            return "pmid" if re.fullmatch(r"\d+", value) else None
        if idtype == "doi":
            return "doi" if re.fullmatch(r"10\.\d+(\.\d+)*/.+", value) else None
        if idtype == "mid":
            return "mid"
        return None

    def _idconv_lookup(self, value: str, kind: str | None) -> Article | None:
        if kind == "pmcid":
            return self.by_pmcid(value)
        if kind == "pmid":
            return self.by_pmid(value)
        if kind == "doi":
            return self.by_doi(value)
        return None

    # -- Europe PMC --------------------------------------------------------------------------

    _EXT_ID = re.compile(r"EXT_ID:\"?([^\s\")]+)\"?", re.IGNORECASE)
    _DOI_Q = re.compile(r"DOI:\"?([^\s\")]+)\"?", re.IGNORECASE)
    _PMCID_Q = re.compile(r"PMCID:\"?(PMC\d+)\"?", re.IGNORECASE)

    def _epmc_search(self, req: FakeRequest) -> FakeResponse:
        query = req.param("query") or ""
        if (req.param("format") or "xml").lower() != "json":
            return FakeResponse(400, "this fake answers format=json only")
        page_size = max(1, min(1000, int(req.param("pageSize") or 25)))
        found: dict[str, Article] = {}
        for pmid in self._EXT_ID.findall(query):
            a = self.by_pmid(pmid)
            if a is not None and a.pmid and a.in_europe_pmc_search:
                found[a.key] = a
        for doi in self._DOI_Q.findall(query):
            a = self.by_doi(doi)
            if a is not None and a.pmid and a.in_europe_pmc_search:
                found[a.key] = a
        for pmcid in self._PMCID_Q.findall(query):
            a = self.by_pmcid(pmcid)
            if a is not None and a.pmid and a.in_europe_pmc_search:
                found[a.key] = a
        # relevance order, not request order: correlate by content
        hits = sorted(found.values(), key=lambda a: _digest("epmc-order", a.key))
        cursor = req.param("cursorMark") or "*"
        start = 0 if cursor == "*" else int(base64.b64decode(cursor).decode().split(":")[1])
        page = hits[start : start + page_size]
        nxt = base64.b64encode(f"offset:{start + len(page)}".encode()).decode()
        results = [self._epmc_lite(a) for a in page]
        return FakeResponse(
            200,
            {
                "version": "6.9",
                "hitCount": len(hits),
                "nextCursorMark": nxt,
                "request": {
                    "queryString": query,
                    "resultType": req.param("resultType") or "lite",
                    "cursorMark": cursor,
                    "pageSize": page_size,
                    "sort": "",
                    "synonym": False,
                },
                "resultList": {"result": results},
            },
        )

    @staticmethod
    def _epmc_lite(a: Article) -> dict[str, Any]:
        rec: dict[str, Any] = {"id": a.pmid, "source": "MED", "pmid": a.pmid}
        if a.pmcid:
            rec["pmcid"] = a.pmcid
        if a.doi:
            rec["doi"] = a.doi
        yes_no = {True: "Y", False: "N"}
        rec.update(
            {
                "title": a.title,
                "authorString": "Doe J.",
                "journalTitle": "J Synth Ex",
                "pubYear": "2026",
                "pubType": "journal article",
                "isOpenAccess": yes_no[a.in_europe_pmc_fulltext],
                "inEPMC": yes_no[a.in_europe_pmc_fulltext],
                "inPMC": yes_no[a.known_to_ncbi],
                "hasPDF": yes_no[a.in_europe_pmc_fulltext],
            }
        )
        return rec

    def _epmc_fulltext(self, req: FakeRequest, ident: str) -> FakeResponse:
        a = self.by_pmcid(ident) if re.fullmatch(r"(?i)PMC\d+", ident) else None
        if a is None:
            return FakeResponse(404, b"")
        if not a.in_europe_pmc_fulltext:
            return self._epmc_envelope(a.pmcid or ident, "No open access full text is available.")
        return FakeResponse(
            200, self.jats(a, doctype=False), {"Content-Type": "application/xml;charset=UTF-8"}
        )

    def _epmc_book(self, req: FakeRequest, ident: str) -> FakeResponse:
        a = self.by_bookid(ident) if re.fullmatch(r"(?i)NBK\d+", ident) else None
        if a is None or a.body is not BodyHome.BOOKSHELF:
            return self._epmc_envelope(ident, "No open access book part is available.")
        return FakeResponse(200, self.bits(a), {"Content-Type": "application/xml;charset=UTF-8"})

    @staticmethod
    def _epmc_envelope(ident: str, message: str) -> FakeResponse:
        body = (
            '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
            f"<fullTextXMLBean><fullTextXML><pmId>{escape(ident)}</pmId>"
            f"<message>{escape(message)}</message><isOpenAccess>N</isOpenAccess>"
            "</fullTextXML></fullTextXMLBean>\n"
        )
        return FakeResponse(200, body.encode(), {"Content-Type": "application/xml;charset=UTF-8"})

    # -- OpenAlex ----------------------------------------------------------------------------

    def _openalex_works(self, req: FakeRequest) -> FakeResponse:
        flt = req.param("filter") or ""
        if not flt:
            return FakeResponse(400, {"error": "Invalid query", "message": "a filter is required"})
        selected: list[set[str]] = []
        for clause in flt.split(","):
            name, _, values = clause.partition(":")
            name = name.strip().lower()
            alternatives = [v for v in values.split("|") if v.strip()]
            if name not in ("doi", "pmid", "ids.pmid", "pmcid", "ids.pmcid") or not alternatives:
                return FakeResponse(
                    400,
                    {
                        "error": "Invalid query parameters error.",
                        "message": f"bad filter {clause!r}",
                    },
                )
            if len(alternatives) > 100:
                return FakeResponse(
                    400,
                    {"error": "Invalid query", "message": "at most 100 values in an OR filter"},
                )
            keys: set[str] = set()
            for v in alternatives:
                a = self._openalex_lookup(name, v)
                if a is not None and a.in_openalex:
                    keys.add(a.key)
            selected.append(keys)
        matched = set.intersection(*selected) if selected else set()
        works = sorted(
            (a for a in self.articles if a.key in matched),
            key=lambda a: _digest("openalex-order", a.key),
        )
        per_page = max(1, min(200, int(req.param("per-page") or req.param("per_page") or 25)))
        page = max(1, int(req.param("page") or 1))
        chunk = works[(page - 1) * per_page : page * per_page]
        select = req.param("select")
        results = [self._openalex_work(a, select) for a in chunk]
        return FakeResponse(
            200,
            {
                "meta": {
                    "count": len(works),
                    "db_response_time_ms": 12,
                    "page": page,
                    "per_page": per_page,
                    "groups_count": None,
                },
                "results": results,
                "group_by": [],
            },
        )

    def _openalex_lookup(self, name: str, value: str) -> Article | None:
        v = value.strip()
        if name == "doi":
            return self.by_doi(v)
        if name.endswith("pmid"):
            return self.by_pmid(v.rstrip("/").rsplit("/", 1)[-1])
        return self.by_pmcid(v.rstrip("/").rsplit("/", 1)[-1])

    def _openalex_single(self, req: FakeRequest, ident: str) -> FakeResponse:
        ident = _unquote(ident)
        a: Article | None = None
        if ident.lower().startswith("doi:") or "doi.org/" in ident.lower():
            a = self.by_doi(ident)
        elif ident.lower().startswith("pmid:"):
            a = self.by_pmid(ident[5:])
        if a is None or not a.in_openalex:
            return FakeResponse(404, {"error": "404 Not Found", "message": "not found"})
        return FakeResponse(200, self._openalex_work(a, req.param("select")))

    def _openalex_work(self, a: Article, select: str | None) -> dict[str, Any]:
        wid = f"https://openalex.org/W{4390000000 + _digest('oa', a.key) % 10**8}"
        ids: dict[str, str] = {"openalex": wid}
        if a.doi:
            ids["doi"] = f"https://doi.org/{a.doi.lower()}"
        if a.pmid:
            ids["pmid"] = f"https://pubmed.ncbi.nlm.nih.gov/{a.pmid}"
        if a.pmcid:
            digits = a.pmcid[3:]
            # OpenAlex writes PMCIDs three ways; clients must take the last non-empty segment
            form = _digest("pmcid-form", a.key) % 3
            tail = (digits, a.pmcid, a.pmcid + "/")[form]
            ids["pmcid"] = f"https://www.ncbi.nlm.nih.gov/pmc/articles/{tail}"
        work: dict[str, Any] = {
            "id": wid,
            "doi": ids.get("doi"),
            "title": a.title,
            "display_name": a.title,
            "publication_year": 2026,
            "ids": ids,
        }
        work.update(self._openalex_access(a))
        if select:
            wanted = [s.strip() for s in select.split(",") if s.strip()]
            return {k: work.get(k) for k in wanted}
        return work

    @staticmethod
    def _openalex_access(a: Article) -> dict[str, Any]:
        """A work's OA facts, from the same pipeline as its Unpaywall record (since 2025).

        ``open_access`` / ``best_oa_location`` / ``locations`` in OpenAlex's shape: the
        best location carries the same PDF link, licence code and version as the
        Unpaywall answer; ``locations`` also lists the closed publisher copy.
        """
        doi_url = f"https://doi.org/{a.doi.lower()}" if a.doi else None
        licence = _UNPAYWALL_LICENCE.get(a.licence) if a.licence and a.is_open else None
        best: dict[str, Any] | None = None
        if a.is_open:
            repository = a.oa_status == "green"
            best = {
                "is_oa": True,
                "landing_page_url": doi_url,
                "pdf_url": a.pdf_url,
                "source": {
                    "display_name": "Europe PMC" if repository else "Journal of Synthetic Examples",
                    "type": "repository" if repository else "journal",
                },
                "license": licence,
                "license_id": f"https://openalex.org/licenses/{licence}" if licence else None,
                "version": "acceptedVersion" if a.is_manuscript else "publishedVersion",
                "is_accepted": True,
                "is_published": not a.is_manuscript,
            }
        publisher = {
            "is_oa": a.is_open and a.oa_status != "green",
            "landing_page_url": doi_url,
            "pdf_url": None,
            "source": {"display_name": "Journal of Synthetic Examples", "type": "journal"},
            "license": None,
            "license_id": None,
            "version": "publishedVersion",
            "is_accepted": True,
            "is_published": True,
        }
        locations = [best, publisher] if best else [publisher]
        return {
            "open_access": {
                "is_oa": a.is_open,
                "oa_status": a.oa_status,
                "oa_url": (a.pdf_url or doi_url) if a.is_open else None,
                "any_repository_has_fulltext": a.oa_status == "green",
            },
            "best_oa_location": best,
            "locations": locations,
            "locations_count": len(locations),
        }

    # -- PMC S3 bucket -----------------------------------------------------------------------

    def _s3_error(self, status: int, code: str, message: str, key: str = "") -> FakeResponse:
        rid = f"{_digest('rid', key, code) % 16**16:016X}"
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n<Error>'
            f"<Code>{code}</Code><Message>{escape(message)}</Message>"
            + (f"<Key>{escape(key)}</Key>" if key else "")
            + f"<RequestId>{rid}</RequestId><HostId>synthetic</HostId></Error>"
        )
        return FakeResponse(status, body.encode(), {"Content-Type": "application/xml"})

    def _s3_get(self, req: FakeRequest, raw_key: str) -> FakeResponse:
        key = _unquote(raw_key)
        data = self.s3_object(key)
        if data is None:
            return self._s3_error(404, "NoSuchKey", "The specified key does not exist.", key)
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
        ctype = {
            "xml": "text/xml",
            "txt": "text/plain",
            "json": "application/json",
            "pdf": "application/pdf",
            "jpg": "image/jpeg",
        }.get(key.rsplit(".", 1)[-1], "binary/octet-stream")
        return FakeResponse(200, data, {"Content-Type": ctype, "ETag": f'"{etag}"'})

    def _bucket_entries(self, prefix: str) -> Iterator[str]:
        """Yield every bucket key starting with ``prefix``, in S3's lexicographic order."""
        m = re.match(r"(PMC\d+)\.", prefix)
        if m:
            stems = [f"{m.group(1)}."] if f"{m.group(1)}." in self._stem_set else []
        else:
            start = bisect_left(self._bucket_stems, prefix)
            stems = []
            for stem in itertools.islice(self._bucket_stems, start, None):
                if not stem.startswith(prefix) and not prefix.startswith(stem):
                    break
                stems.append(stem)
        for stem in stems:
            a = self._by_pmcid[stem[:-1]]
            names = sorted(
                itertools.chain.from_iterable(
                    self._s3_names(a, v) for v in range(1, a.pmc_versions + 1)
                )
            )
            for name in names:
                if name.startswith(prefix):
                    yield name
        if "metadata/".startswith(prefix) or prefix.startswith("metadata/"):
            for stem in self._bucket_stems:
                a = self._by_pmcid[stem[:-1]]
                for v in range(1, a.pmc_versions + 1):
                    name = f"metadata/{a.pmcid}.{v}.json"
                    if name.startswith(prefix):
                        yield name

    def _s3_list(self, req: FakeRequest) -> FakeResponse:
        if req.param("list-type") != "2":
            return self._s3_error(400, "InvalidArgument", "this fake serves ListObjectsV2 only")
        prefix = req.param("prefix") or ""
        delimiter = req.param("delimiter") or None
        try:
            max_keys = max(0, min(1000, int(req.param("max-keys") or 1000)))
        except ValueError:
            return self._s3_error(400, "InvalidArgument", "max-keys must be an integer")
        token = req.param("continuation-token")
        after = req.param("start-after") or ""
        if token:
            try:
                after = base64.b64decode(token.encode()).decode()
            except ValueError:
                return self._s3_error(400, "InvalidArgument", "The continuation token is invalid.")
        entries: list[tuple[str, bool]] = []  # (key or common prefix, is_prefix)
        truncated = False
        seen_prefixes: set[str] = set()
        for key in self._bucket_entries(prefix):
            if after and (
                key <= after or (after.endswith(delimiter or "\0") and key.startswith(after))
            ):
                continue
            item, is_prefix = key, False
            if delimiter:
                cut = key.find(delimiter, len(prefix))
                if cut >= 0:
                    item, is_prefix = key[: cut + len(delimiter)], True
                    if item in seen_prefixes:
                        continue
                    seen_prefixes.add(item)
            if len(entries) == max_keys:
                truncated = True
                break
            entries.append((item, is_prefix))
        parts = [
            '<?xml version="1.0" encoding="UTF-8"?>\n',
            f'<ListBucketResult xmlns="{_S3_NS}"><Name>pmc-oa-opendata</Name>',
            f"<Prefix>{escape(prefix)}</Prefix>",
        ]
        if token:
            parts.append(f"<ContinuationToken>{escape(token)}</ContinuationToken>")
        parts.append(f"<KeyCount>{len(entries)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>")
        if delimiter:
            parts.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
        parts.append(f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>")
        if truncated and entries:
            nxt = base64.b64encode(entries[-1][0].encode()).decode()
            parts.append(f"<NextContinuationToken>{nxt}</NextContinuationToken>")
        for item, is_prefix in entries:
            if is_prefix:
                continue
            data = self.s3_object(item) or b""
            etag = hashlib.md5(data, usedforsecurity=False).hexdigest()
            parts.append(
                f"<Contents><Key>{escape(item)}</Key>"
                "<LastModified>2026-01-09T04:12:55.000Z</LastModified>"
                f"<ETag>&quot;{etag}&quot;</ETag><Size>{len(data)}</Size>"
                "<StorageClass>STANDARD</StorageClass></Contents>"
            )
        for item, is_prefix in entries:
            if is_prefix:
                parts.append(f"<CommonPrefixes><Prefix>{escape(item)}</Prefix></CommonPrefixes>")
        parts.append("</ListBucketResult>")
        return FakeResponse(200, "".join(parts).encode(), {"Content-Type": "application/xml"})

    # -- Crossref ----------------------------------------------------------------------------

    def _crossref_headers(self) -> dict[str, str]:
        limit = self._limits.get(HOST_CROSSREF)
        rate = int(limit.per_second) if limit else 50
        return {"x-rate-limit-limit": str(rate), "x-rate-limit-interval": "1s"}

    def _crossref_work(self, req: FakeRequest, raw: str) -> FakeResponse:
        a = self.by_doi(_unquote(raw))
        if a is None or not a.in_crossref:
            return FakeResponse(404, "Resource not found.", self._crossref_headers())
        return FakeResponse(
            200,
            {
                "status": "ok",
                "message-type": "work",
                "message-version": "1.0.0",
                "message": self._crossref_message(a, None),
            },
            self._crossref_headers(),
        )

    def _crossref_list(self, req: FakeRequest) -> FakeResponse:
        flt = req.param("filter") or ""
        try:
            rows = int(req.param("rows") or 20)
        except ValueError:
            rows = -1
        if rows < 0 or rows > 1000:
            return FakeResponse(
                400,
                {
                    "status": "failed",
                    "message-type": "validation-failure",
                    "message": [{"type": "integer-not-valid", "value": req.param("rows")}],
                },
            )
        found: dict[str, Article] = {}
        for clause in flt.split(","):
            if not clause:
                continue
            name, _, value = clause.partition(":")
            if name.strip().lower() != "doi" or not value:
                return FakeResponse(
                    400,
                    {
                        "status": "failed",
                        "message-type": "validation-failure",
                        "message": [{"type": "filter-not-available", "value": name}],
                    },
                )
            a = self.by_doi(value)
            if a is not None and a.in_crossref:
                found[a.key] = a
        # Crossref promises no order: match items to the request by DOI
        items = sorted(found.values(), key=lambda a: _digest("crossref-order", a.key))
        select = req.param("select")
        return FakeResponse(
            200,
            {
                "status": "ok",
                "message-type": "work-list",
                "message-version": "1.0.0",
                "message": {
                    "facets": {},
                    "total-results": len(items),
                    "items": [self._crossref_message(a, select) for a in items[:rows]],
                    "items-per-page": rows,
                    "query": {"start-index": 0, "search-terms": None},
                },
            },
            self._crossref_headers(),
        )

    def _tdm_links(self, a: Article) -> list[dict[str, str]]:
        if not a.doi:
            return []
        doi = _quote_doi(a.doi)
        if a.publisher is Publisher.ELSEVIER:
            base = self.elsevier_url(a)
            return [
                {
                    "URL": base,
                    "content-type": "text/xml",
                    "content-version": "vor",
                    "intended-application": "text-mining",
                },
                {
                    "URL": base.replace("text/xml", "text/plain"),
                    "content-type": "text/plain",
                    "content-version": "vor",
                    "intended-application": "text-mining",
                },
            ]
        if a.publisher is Publisher.SPRINGER:
            return [
                {
                    "URL": f"https://{HOST_SPRINGER_LINK}/content/pdf/{doi}.pdf",
                    "content-type": "application/pdf",
                    "content-version": "vor",
                    "intended-application": "text-mining",
                }
            ]
        if a.crossref_tdm:
            return [
                {
                    "URL": f"https://{HOST_PUBLISHER}/tdm/{doi}.pdf",
                    "content-type": "application/pdf",
                    "content-version": "vor",
                    "intended-application": "text-mining",
                },
                {
                    "URL": f"https://{HOST_PUBLISHER}/tdm/{doi}.xml",
                    "content-type": "text/xml",
                    "content-version": "vor",
                    "intended-application": "text-mining",
                },
            ]
        return []

    def _crossref_message(self, a: Article, select: str | None) -> dict[str, Any]:
        assert a.doi is not None
        links = [
            *self._tdm_links(a),
            {
                "URL": f"https://{HOST_PUBLISHER}/landing/{_quote_doi(a.doi)}",
                "content-type": "unspecified",
                "content-version": "vor",
                "intended-application": "similarity-checking",
            },
        ]
        relation: dict[str, list[dict[str, str]]] = {}
        if a.preprint_doi:
            relation["has-preprint"] = [
                {"id-type": "doi", "id": a.preprint_doi, "asserted-by": "subject"}
            ]
        if a.published_doi:
            relation["is-preprint-of"] = [
                {"id-type": "doi", "id": a.published_doi, "asserted-by": "subject"}
            ]
        publisher = {
            Publisher.ELSEVIER: "Elsevier BV",
            Publisher.SPRINGER: "Springer Science and Business Media LLC",
            Publisher.BIORXIV: "Cold Spring Harbor Laboratory",
            Publisher.MEDRXIV: "Cold Spring Harbor Laboratory",
        }.get(a.publisher, "Example Press")
        msg: dict[str, Any] = {
            "DOI": a.doi,
            "type": "posted-content" if a.published_doi else "journal-article",
            "prefix": a.doi.split("/", 1)[0],
            "member": str(1000 + _digest("member", a.publisher.value) % 9000),
            "publisher": publisher,
            "title": [a.title],
            "link": links,
            "relation": relation,
        }
        if a.licence and a.is_open:
            msg["license"] = [
                {
                    "URL": a.licence.replace("https://", "http://"),
                    "start": {
                        "date-parts": [[2026, 1, 5]],
                        "date-time": "2026-01-05T00:00:00Z",
                        "timestamp": 1767571200000,
                    },
                    "delay-in-days": 0,
                    "content-version": "vor",
                }
            ]
        if select:
            wanted = [s.strip() for s in select.split(",") if s.strip()]
            return {k: msg[k] for k in wanted if k in msg}
        return msg

    # -- Unpaywall ---------------------------------------------------------------------------

    def _unpaywall(self, req: FakeRequest, raw: str) -> FakeResponse:
        email = (req.param("email") or "").strip()
        if not re.fullmatch(r"[^@\s]+@[^@\s]+\.[^@\s]+", email) or email.lower().endswith(
            "@example.com"
        ):
            return FakeResponse(
                422,
                {
                    "HTTP_status_code": 422,
                    "error": True,
                    "message": "Please use a valid email address in the email parameter.",
                },
            )
        doi = _unquote(raw)
        a = self.by_doi(doi)
        if a is None or not a.in_unpaywall or not a.doi:
            return FakeResponse(
                404,
                {
                    "HTTP_status_code": 404,
                    "error": True,
                    "message": f"'{doi}' is an invalid doi. See https://doi.org/{doi}",
                },
            )
        best: dict[str, Any] | None = None
        if a.is_open:
            best = {
                "url": a.pdf_url or f"https://doi.org/{a.doi}",
                "url_for_pdf": a.pdf_url,
                "url_for_landing_page": f"https://doi.org/{a.doi}",
                "evidence": "open (via page says license)",
                "license": _UNPAYWALL_LICENCE.get(a.licence) if a.licence else None,
                "version": "acceptedVersion" if a.is_manuscript else "publishedVersion",
                "host_type": "repository" if a.oa_status == "green" else "publisher",
                "is_best": True,
                "pmh_id": None,
                "endpoint_id": None,
                "repository_institution": None,
                "oa_date": "2026-01-05",
                "updated": "2026-02-01T10:11:12.000000",
            }
        return FakeResponse(
            200,
            {
                "doi": a.doi.lower(),
                "doi_url": f"https://doi.org/{a.doi.lower()}",
                "title": a.title,
                "genre": "posted-content" if a.published_doi else "journal-article",
                "is_paratext": False,
                "published_date": "2026-01-05",
                "year": 2026,
                "journal_name": "Journal of Synthetic Examples",
                "journal_issn_l": "0000-0000",
                "journal_is_oa": a.oa_status == "gold",
                "journal_is_in_doaj": a.oa_status == "gold",
                "publisher": "Example Press",
                "is_oa": a.is_open,
                "oa_status": a.oa_status,
                "has_repository_copy": a.oa_status == "green",
                "best_oa_location": best,
                "oa_locations": [best] if best else [],
                "first_oa_location": best,
                "updated": "2026-02-01T10:11:12.000000",
            },
        )

    # -- Semantic Scholar --------------------------------------------------------------------

    def _s2_lookup(self, ident: str) -> Article | None:
        kind, _, value = ident.partition(":")
        kind = kind.upper()
        if kind == "DOI":
            return self.by_doi(value)
        if kind == "PMID":
            return self.by_pmid(value)
        if kind == "PMCID":
            return self.by_pmcid(value)
        if not value and re.fullmatch(r"[0-9a-f]{40}", ident):
            return self._by_paper_id.get(ident)
        return None

    def _s2_record(self, a: Article, fields: str | None) -> dict[str, Any]:
        wanted = {f.strip() for f in (fields or "").split(",") if f.strip()}
        rec: dict[str, Any] = {"paperId": self.paper_id(a)}
        if "externalIds" in wanted:
            ext: dict[str, Any] = {}
            if a.doi:
                ext["DOI"] = a.doi
            if a.pmid:
                ext["PubMed"] = a.pmid
            if a.pmcid:
                ext["PubMedCentral"] = a.pmcid[3:]
            ext["CorpusId"] = _digest("corpus", a.key) % 10**9
            rec["externalIds"] = ext
        if "openAccessPdf" in wanted:
            if a.pdf_url and a.is_open:
                rec["openAccessPdf"] = {
                    "url": a.pdf_url,
                    "status": a.oa_status.upper(),
                    "license": _S2_LICENCE.get(a.licence or ""),
                    "disclaimer": "Notice: this synthetic record is for testing.",
                }
            elif _digest("s2-null", a.key) % 2:
                rec["openAccessPdf"] = None
            else:
                # newer answers: an object whose url is empty instead of null
                rec["openAccessPdf"] = {
                    "url": "",
                    "status": None,
                    "license": None,
                    "disclaimer": "",
                }
        if "title" in wanted:
            rec["title"] = a.title
        return rec

    def _s2_paper(self, req: FakeRequest, raw: str) -> FakeResponse:
        ident = _unquote(raw)
        a = self._s2_lookup(ident)
        if a is None or not a.in_s2:
            return FakeResponse(404, {"error": f"Paper with id {ident} not found"})
        return FakeResponse(200, self._s2_record(a, req.param("fields")))

    def _s2_batch(self, req: FakeRequest) -> FakeResponse:
        try:
            payload = req.json()
        except ValueError:
            return FakeResponse(400, {"error": "Unacceptable JSON body"})
        ids = payload.get("ids") if isinstance(payload, dict) else None
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return FakeResponse(400, {"error": "Body must be a JSON object with a list of ids"})
        if len(ids) > 500:
            return FakeResponse(400, {"error": "Cannot process more than 500 ids in one request"})
        out: list[dict[str, Any] | None] = []
        for ident in ids:
            a = self._s2_lookup(ident)
            out.append(self._s2_record(a, req.param("fields")) if a and a.in_s2 else None)
        return FakeResponse(200, out)

    # -- Elsevier ----------------------------------------------------------------------------

    def _key_ok(self, product: str, given: str | None) -> bool:
        if not given or not given.strip():
            return False
        expected = self.keys.get(product)
        if expected is not None:
            return given == expected
        return given not in self.keys.values()

    @staticmethod
    def _elsevier_error(status: int, code: str, text: str) -> FakeResponse:
        body = (
            f"<service-error><status><statusCode>{code}</statusCode>"
            f"<statusText>{escape(text)}</statusText></status></service-error>"
        )
        return FakeResponse(status, body.encode(), {"Content-Type": "text/xml"})

    def _elsevier(self, req: FakeRequest, form: str, raw: str) -> FakeResponse:
        if not self._key_ok("elsevier", req.headers.get("x-els-apikey")):
            return self._elsevier_error(401, "AUTHENTICATION_ERROR", "Invalid API Key")
        value = _unquote(raw)
        a = self.by_doi(value) if form == "doi/" else self._by_pii.get(value)
        if a is None or a.publisher is not Publisher.ELSEVIER:
            return self._elsevier_error(
                404, "RESOURCE_NOT_FOUND", "The resource specified cannot be found."
            )
        return FakeResponse(200, self.elsevier_xml(a), {"Content-Type": "text/xml;charset=UTF-8"})

    # -- Springer Nature ---------------------------------------------------------------------

    _Q_DOI = re.compile(r"doi:\"?([^\s\"()]+)\"?", re.IGNORECASE)

    def _springer_query(self, req: FakeRequest) -> list[Article]:
        q = req.param("q") or ""
        out: dict[str, Article] = {}
        for doi in self._Q_DOI.findall(q):
            a = self.by_doi(doi)
            if a is not None and a.publisher is Publisher.SPRINGER:
                out[a.key] = a
        return sorted(out.values(), key=lambda a: _digest("springer-order", a.key))

    def _springer_jats(self, req: FakeRequest) -> FakeResponse:
        if not self._key_ok("springer_openaccess", req.param("api_key")):
            return FakeResponse(401, {"status": "Fail", "message": "Authentication failed"})
        q = req.param("q") or ""
        hits = [a for a in self._springer_query(req) if a.body is BodyHome.SPRINGER]
        records = "".join(
            self.jats(a, doctype=False).decode().split("\n", 1)[1].strip() for a in hits
        )
        body = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<?xml-stylesheet type="text/xsl" href="/resources/spdi-openaccess-jats.xsl"?>\n'
            "<!DOCTYPE response [\n"
            '<!ENTITY % article SYSTEM "http://jats.nlm.nih.gov/archiving/1.2/JATS-archivearticle1.dtd">\n'
            "]>\n<response><apiMessage>This XML was provided by Springer Nature</apiMessage>"
            f"<query>{escape(q)}</query><result><total>{len(hits)}</total><start>1</start>"
            f"<pageLength>10</pageLength><recordsDisplayed>{len(hits)}</recordsDisplayed></result>"
            + (f"<records>{records}</records>" if hits else "<records/>")
            + "<facets/></response>\n"
        )
        return FakeResponse(200, body.encode(), {"Content-Type": "application/xml"})

    def _springer_meta(self, req: FakeRequest) -> FakeResponse:
        key = req.param("api_key")
        if not self._key_ok("springer_meta", key):
            return FakeResponse(401, {"status": "Fail", "message": "Authentication failed"})
        hits = self._springer_query(req)
        try:
            size = max(1, min(100, int(req.param("p") or 10)))
            start = max(1, int(req.param("s") or 1))
        except ValueError:
            return FakeResponse(400, {"status": "Fail", "message": "bad paging"})
        page = hits[start - 1 : start - 1 + size]
        records = []
        for a in page:
            assert a.doi is not None
            records.append(
                {
                    "contentType": "Article",
                    "identifier": f"doi:{a.doi}",
                    "language": "en",
                    "url": [
                        {
                            "format": "html",
                            "platform": "",
                            "value": f"http://{HOST_SPRINGER_LINK}/openurl/fulltext?id=doi:{a.doi}",
                        },
                        {"format": "pdf", "platform": "", "value": self.springer_openurl(a)},
                    ],
                    "title": a.title,
                    "publicationName": "Journal of Synthetic Examples",
                    "doi": a.doi,
                    "publisher": "Springer",
                    "publicationDate": "2026-02-01",
                    "openaccess": "true" if a.body is BodyHome.SPRINGER else "false",
                }
            )
        return FakeResponse(
            200,
            {
                "apiMessage": "This JSON was provided by Springer Nature",
                "query": req.param("q") or "",
                # the real API echoes the caller's key; a client must never persist it
                "apiKey": key,
                "result": [
                    {
                        "total": str(len(hits)),
                        "start": str(start),
                        "pageLength": str(size),
                        "recordsDisplayed": str(len(records)),
                    }
                ],
                "records": records,
                "facets": [],
            },
        )

    # -- bioRxiv -----------------------------------------------------------------------------

    def _biorxiv(self, req: FakeRequest, server: str, raw: str) -> FakeResponse:
        a = self.by_doi(_unquote(raw))
        want = Publisher.BIORXIV if server == "biorxiv" else Publisher.MEDRXIV
        if a is None or a.publisher is not want or not a.doi:
            return FakeResponse(200, {"messages": [{"status": "no posts found"}], "collection": []})
        versions = 1 + _digest("preprint-versions", a.key) % 2
        suffix = a.doi.split("/", 1)[1]
        collection = []
        for v in range(1, versions + 1):
            collection.append(
                {
                    "doi": a.doi,
                    "title": a.title,
                    "authors": "Doe, J.; Roe, R.",
                    "author_corresponding": "Jane Doe",
                    "author_corresponding_institution": "Example University",
                    "date": f"2026-0{v}-07",
                    "version": str(v),
                    "type": "new results",
                    "license": "cc_by",
                    "category": "genomics",
                    "jatsxml": f"https://www.{server}.org/content/early/2026/0{v}/07/{suffix}.source.xml",
                    "abstract": _prose(_digest("abs", a.key), 20),
                    # only the latest version knows where it was published
                    "published": (a.published_doi or "NA") if v == versions else "NA",
                    "server": "bioRxiv" if server == "biorxiv" else "medRxiv",
                }
            )
        return FakeResponse(200, {"messages": [{"status": "ok"}], "collection": collection})

    # -- downloads ---------------------------------------------------------------------------

    @staticmethod
    def _download_key(url: str) -> str:
        parts = urllib.parse.urlsplit(url)
        return f"{parts.hostname}{_unquote(parts.path)}"

    def _download(self, req: FakeRequest) -> FakeResponse:
        key = f"{req.host}{_unquote(req.path)}"
        a = self._by_download.get(key)
        if a is None:
            return FakeResponse(
                404, b"<html><body>Not Found</body></html>", {"Content-Type": "text/html"}
            )
        if "/tdm/" in req.path and not a.is_open:
            return FakeResponse(
                403,
                b"<html><body>Forbidden: no entitlement</body></html>",
                {"Content-Type": "text/html"},
            )
        if req.path.endswith(".xml"):
            return FakeResponse(200, self.jats(a, doctype=False), {"Content-Type": "text/xml"})
        return FakeResponse(200, self.pdf(a), {"Content-Type": "application/pdf"})

    def _springer_openurl(self, req: FakeRequest) -> FakeResponse:
        ident = req.param("id") or ""
        a = self.by_doi(ident[4:]) if ident.lower().startswith("doi:") else None
        if a is None or a.publisher is not Publisher.SPRINGER or not a.doi:
            return FakeResponse(
                404, b"<html><body>Not Found</body></html>", {"Content-Type": "text/html"}
            )
        target = f"https://{HOST_SPRINGER_LINK}/content/pdf/{_quote_doi(a.doi)}.pdf"
        return FakeResponse(302, b"", {"Location": target})

    def _springer_pdf(self, req: FakeRequest, raw: str) -> FakeResponse:
        a = self.by_doi(_unquote(raw))
        if a is None or a.publisher is not Publisher.SPRINGER:
            return FakeResponse(
                404, b"<html><body>Not Found</body></html>", {"Content-Type": "text/html"}
            )
        if a.body is not BodyHome.SPRINGER:
            return FakeResponse(
                403,
                b"<html><body>Forbidden: no entitlement</body></html>",
                {"Content-Type": "text/html"},
            )
        return FakeResponse(200, self.pdf(a), {"Content-Type": "application/pdf"})


def _slug(a: Article) -> str:
    return f"jex-{(a.pmcid or 'x')[3:]}"


def s3_names(a: Article, version: int) -> list[str]:
    """Return the bucket keys of one version folder of ``a`` (unsorted; empty if absent)."""
    if not a.pmcid or not 1 <= version <= a.pmc_versions:
        return []
    stem = f"{a.pmcid}.{version}"
    names = [f"{stem}/{stem}.xml", f"{stem}/{stem}.txt", f"{stem}/{stem}.json"]
    if a.has_pdf_rendition:
        names.append(f"{stem}/{stem}.pdf")
    if not a.is_manuscript:
        slug = _slug(a)
        names += [f"{stem}/{slug}-g{i:03d}.jpg" for i in range(1, a.n_figures + 1)]
        names += [
            f"{stem}/{slug}-s{i:03d}.{_SUPP_EXT[i % len(_SUPP_EXT)]}"
            for i in range(1, a.n_supplementary + 1)
        ]
    return names


def articles_by_kind(articles: Sequence[Article]) -> dict[str, int]:
    """Return how many articles live in each :class:`BodyHome` (for reports)."""
    return dict(collections.Counter(a.body.value for a in articles))
