"""The demo world: a small offline stand-in for the upstream services, answering per article.

The demo's articles are real, and so is every record the world serves: the
packaged files in ``litfetch_df/data/demo/records/`` are byte-for-byte copies
of recorded upstream answers and PMC JATS files (``tests/data/PROVENANCE.md``
says where each comes from; ``records/articles.json`` says which article each
one is about). :class:`DemoWorld` answers any request the library sends,
whatever its shape, from those per-article records:

* a per-article request (a Crossref work, an Unpaywall record, a Semantic
  Scholar paper, a Europe PMC full text) gets the recorded answer, byte for
  byte, or the documented subset of it that the request selects;
* a batch request (NCBI ID Converter, Europe PMC search, OpenAlex and Crossref
  DOI filters, Semantic Scholar's paper batch) gets an answer assembled from
  the records of the ids it names, in any number, order or repetition, so a
  slice of the demo table gets the same per-row answers as the whole of it;
* a JATS file is served by the service it was recorded from: the bucket's XML
  rendition for one taken from PMC's Open Access packages, Europe PMC's
  ``fullTextXML`` for one fetched from Europe PMC (``jats_from`` in the
  manifest); Europe PMC mirrors PMC's open-access XML, so it serves both;
* the PMC Open Access bucket, of which no listing is recorded, lists for an
  article whose JATS we hold the files that JATS names (its PDF rendition when
  the JATS names one, figures and supplementary files with a stated file
  name, and the XML rendition when the XML we hold is PMC's own): a listing
  *implied* by the article's own XML. Only the XML's bytes are recorded;
  downloading another file of the listing is answered with a plain "bytes not
  recorded" refusal;
* anything else is answered as the real service answers an id it does not
  know (404, an error record, an empty result). In the demo world that means
  "not among the demo's records", never a claim about the real service.

:func:`world_session` returns a :class:`~litfetch_df.Session` whose client
sends every request to this world through an :class:`httpx.MockTransport`: no
request can reach a real host. Pacing pauses are skipped (:class:`InstantClock`),
since no real service is asked.

(About 580 lines, over the project's 550: one answer shape per upstream service the
library asks, each a few dozen lines; they share the per-article record lookup.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from importlib import resources
from typing import Any, Final
from xml.sax.saxutils import escape

import httpx

from .safexml.parse import local_name, parse_xml
from .session import Session

__all__ = [
    "DEMO_CONTACT",
    "FROM_EUROPE_PMC",
    "FROM_PMC_OA",
    "DemoArticle",
    "DemoWorld",
    "InstantClock",
    "WorldSession",
    "bucket_keys",
    "demo_articles",
    "demo_world",
    "record_bytes",
    "world_session",
]

DEMO_CONTACT: Final = "demo@litfetch-df.invalid"
"""The contact address the demo sends (``.invalid`` is a reserved domain: it reaches nobody)."""

RECORDS_DIR: Final = "data/demo/records"
"""Where the packaged records live inside the package."""

MANIFEST: Final = "articles.json"
"""The file naming, per article, its ids and its records."""

FROM_PMC_OA: Final = "pmc_oa"
"""``jats_from`` of a JATS file taken from PMC's Open Access packages (the bucket's XML)."""

FROM_EUROPE_PMC: Final = "europe_pmc"
"""``jats_from`` of a JATS file recorded as Europe PMC's ``fullTextXML`` answer."""

UNRECORDED: Final = "litfetch_df demo: not among the demo's records"
"""The wording of every not-found answer the world gives (it states nothing about the service)."""

BUCKET: Final = "pmc-oa-opendata.s3.amazonaws.com"
_S3_NS: Final = "http://s3.amazonaws.com/doc/2006-03-01/"
_XLINK: Final = "{http://www.w3.org/1999/xlink}href"
# A file name the JATS states with an extension; an extension-less name (a PMC figure
# reference) does not tell the bucket's file name, so it is not listed.
_NAMED_FILE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\.[A-Za-z0-9]{2,5}$")


@dataclasses.dataclass(frozen=True, slots=True)
class DemoArticle:
    """One demo article: its true ids and the file names of the records held about it.

    Record names are relative to the records directory (``jats/…`` or ``json/…``).
    ``pmid``/``pmcid`` are ``None`` where no record states them. ``jats_from``
    says where the JATS file was recorded (:data:`FROM_PMC_OA` or
    :data:`FROM_EUROPE_PMC`), so the world serves it from there.
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

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> DemoArticle:
        """Build one article from its manifest entry."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in fields})


def record_bytes(name: str) -> bytes:
    """Return the bytes of one packaged record (``jats/…``, ``json/…`` or the manifest)."""
    return resources.files("litfetch_df").joinpath(RECORDS_DIR, name).read_bytes()


def demo_articles() -> tuple[DemoArticle, ...]:
    """Return the demo articles as the packaged manifest names them."""
    raw = json.loads(record_bytes(MANIFEST))
    return tuple(DemoArticle.from_json(entry) for entry in raw["articles"])


def bucket_keys(
    pmcid: str, jats: bytes, *, xml_is_pmcs: bool = True
) -> list[tuple[str, int | None]]:
    """Return the bucket listing an article's JATS implies: ``(key, size or None)``.

    The version folder is the one the XML names (``pmcid-ver``), else ``.1``.
    The keys are the XML itself when ``xml_is_pmcs`` (the file we hold is
    PMC's own rendition; its size is the recorded file's), the PDF rendition
    when a ``self-uri`` of ``content-type="pmc-pdf"`` says PMC holds one, and
    every figure, media or supplementary file the XML names with a file
    extension. Sizes other than the XML's are not stated, so not given.
    """
    root = parse_xml(jats)
    version = "1"
    for el in root.iter():
        if local_name(el) == "article-id" and el.get("pub-id-type") == "pmcid-ver":
            stated = (el.text or "").strip().rsplit(".", 1)
            if len(stated) == 2 and stated[1].isdigit():
                version = stated[1]
    folder = f"{pmcid}.{version}"
    keys: list[tuple[str, int | None]] = []
    if xml_is_pmcs:
        keys.append((f"{folder}/{folder}.xml", len(jats)))
    named: list[str] = []
    for el in root.iter():
        name = local_name(el)
        href = el.get(_XLINK)
        if href is None:
            continue
        if name == "self-uri" and el.get("content-type") == "pmc-pdf":
            named.append(f"{folder}.pdf")
        elif name in ("graphic", "media", "inline-graphic") and _NAMED_FILE.match(href):
            named.append(href)
    for file_name in dict.fromkeys(named):
        keys.append((f"{folder}/{file_name}", None))
    return keys


class InstantClock:
    """A clock whose pauses take no time: the demo asks no real service, so it need not wait.

    ``now()`` moves forward by every pause taken, so pacing still sees time pass.
    """

    def __init__(self) -> None:
        self._skipped = 0.0

    def now(self) -> float:
        """Return monotonic seconds plus every pause skipped so far."""
        return time.monotonic() + self._skipped

    def wall(self) -> float:
        """Return the wall time plus every pause skipped so far."""
        return time.time() + self._skipped

    async def sleep(self, seconds: float) -> None:
        """Skip the pause (just yield to the event loop)."""
        self._skipped += max(0.0, seconds)
        await asyncio.sleep(0)


def _json(obj: Any, status: int = 200) -> httpx.Response:
    body = json.dumps(obj, ensure_ascii=False).encode()
    return httpx.Response(status, content=body, headers={"Content-Type": "application/json"})


def _raw(body: bytes, media_type: str, status: int = 200) -> httpx.Response:
    return httpx.Response(status, content=body, headers={"Content-Type": media_type})


def _text(status: int, text: str) -> httpx.Response:
    return _raw(text.encode(), "text/plain; charset=utf-8", status)


def _s3_error(status: int, code: str, message: str, key: str) -> httpx.Response:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{escape(message)}</Message>"
        f"<Key>{escape(key)}</Key></Error>"
    )
    return _raw(body.encode(), "application/xml", status)


def _select(record: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """The record cut to the requested top-level fields (those it holds), values unchanged."""
    return {f: record[f] for f in fields if f in record}


def _split(value: str | None, sep: str) -> list[str]:
    return [part.strip() for part in (value or "").split(sep) if part.strip()]


def _doi_of(value: str) -> str:
    text = urllib.parse.unquote(value).strip()
    for prefix in ("https://doi.org/", "http://doi.org/", "doi.org/", "doi:", "DOI:"):
        if text.lower().startswith(prefix.lower()):
            return text[len(prefix) :]
    return text


class DemoWorld:
    """The upstream services, as far as the demo's records state them; see the module docstring.

    Call :meth:`handle` with any :class:`httpx.Request`; it always returns a
    response and never does I/O. ``requests`` counts what it was asked.
    """

    def __init__(
        self, articles: Iterable[DemoArticle], read: Callable[[str], bytes] = record_bytes
    ) -> None:
        self.articles = tuple(articles)
        self._read = read
        self.requests = 0
        self._routes: dict[str, Callable[[httpx.Request], httpx.Response]] = {
            "pmc.ncbi.nlm.nih.gov": self._ncbi,
            "www.ebi.ac.uk": self._ebi,
            "api.openalex.org": self._openalex,
            BUCKET: self._bucket,
            "api.crossref.org": self._crossref,
            "api.unpaywall.org": self._unpaywall,
            "api.semanticscholar.org": self._s2,
            "api.biorxiv.org": self._biorxiv,
        }

    # -- lookups ------------------------------------------------------------------------------

    def by_pmid(self, pmid: str) -> DemoArticle | None:
        """The article with this PMID, if the records state it."""
        return next((a for a in self.articles if a.pmid == pmid.strip()), None)

    def by_pmcid(self, pmcid: str) -> DemoArticle | None:
        """The article with this PMCID (``PMC`` prefix optional, case-insensitive)."""
        wanted = pmcid.strip().upper()
        wanted = wanted if wanted.startswith("PMC") else "PMC" + wanted
        return next((a for a in self.articles if a.pmcid and a.pmcid.upper() == wanted), None)

    def by_doi(self, doi: str) -> DemoArticle | None:
        """The article with this DOI (case-insensitive; URL and ``doi:`` forms accepted)."""
        wanted = _doi_of(doi).lower()
        return next((a for a in self.articles if a.doi.lower() == wanted), None)

    def by_any(self, ident: str) -> DemoArticle | None:
        """The article this PMID, PMCID or DOI names."""
        text = ident.strip()
        if text.isdigit():
            return self.by_pmid(text)
        if text.upper().startswith("PMC"):
            return self.by_pmcid(text)
        return self.by_doi(text)

    def _record(self, name: str) -> Any:
        return json.loads(self._read(name))

    def listing(self, article: DemoArticle) -> list[tuple[str, int | None]]:
        """The bucket keys of ``article`` (empty without JATS: no listing is implied)."""
        if article.jats is None or article.pmcid is None:
            return []
        return _listing(self._read(article.jats), article.pmcid, article.jats_from == FROM_PMC_OA)

    # -- dispatch -----------------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        """Answer ``request`` from the records (see the module docstring)."""
        self.requests += 1
        route = self._routes.get(request.url.host.lower())
        if route is None:
            # A publisher's PDF, a landing page, an API the demo holds nothing of.
            return _text(404, f"{UNRECORDED}: no recorded bytes for {request.url.host}")
        return route(request)

    # -- NCBI ID Converter --------------------------------------------------------------------

    def _ncbi(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.startswith("/tools/idconv/api/v1/articles"):
            return _text(404, UNRECORDED)
        params = request.url.params
        records: list[dict[str, Any]] = []
        for ident in _split(params.get("ids"), ","):
            article = self.by_any(ident)
            if article is None or article.pmid is None or article.pmcid is None:
                records.append({"requested-id": ident, "status": "error", "errmsg": UNRECORDED})
                continue
            records.append(
                {
                    "requested-id": ident,
                    "pmcid": article.pmcid,
                    "pmid": int(article.pmid),
                    "doi": article.doi,
                }
            )
        return _json(
            {
                "status": "ok",
                "responseDate": "2026-11-30 00:00:00",
                "request": str(request.url.query, "ascii"),
                "records": records,
            }
        )

    # -- Europe PMC ---------------------------------------------------------------------------

    def _ebi(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        rest = "/europepmc/webservices/rest/"
        if path == rest + "search":
            return self._epmc_search(request)
        match = re.fullmatch(re.escape(rest) + r"(PMC\d+)/fullTextXML", path, re.IGNORECASE)
        if match:
            article = self.by_pmcid(match.group(1))
            if article is not None and article.jats is not None:
                return _raw(self._read(article.jats), "application/xml")
        return _text(404, UNRECORDED)

    def _epmc_search(self, request: httpx.Request) -> httpx.Response:
        query = request.url.params.get("query") or ""
        named: list[DemoArticle | None] = []
        named += [self.by_pmid(p) for p in re.findall(r"EXT_ID:(\d+)", query)]
        named += [self.by_pmcid(p) for p in re.findall(r"PMCID:(PMC\d+)", query, re.I)]
        named += [self.by_doi(d) for d in re.findall(r'DOI:"?([^"\s)]+)"?', query, re.I)]
        results = []
        for article in dict.fromkeys(a for a in named if a is not None and a.pmid):
            record: dict[str, Any] = {"id": article.pmid, "source": "MED", "pmid": article.pmid}
            if article.pmcid:
                record["pmcid"] = article.pmcid
            record["doi"] = article.doi
            results.append(record)
        return _json(
            {
                "hitCount": len(results),
                "request": {
                    "queryString": query,
                    "resultType": request.url.params.get("resultType") or "lite",
                    "pageSize": int(request.url.params.get("pageSize") or 25),
                },
                "resultList": {"result": results},
            }
        )

    # -- OpenAlex -----------------------------------------------------------------------------

    def _openalex(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        select = _split(request.url.params.get("select"), ",")
        if path == "/works":
            wanted: list[str] = []
            for clause in _split(request.url.params.get("filter"), ","):
                name, _, value = clause.partition(":")
                if name == "doi":
                    wanted += _split(value, "|")
            works = []
            for article in dict.fromkeys(self.by_doi(d) for d in wanted):
                if article is not None and article.openalex is not None:
                    work = self._record(article.openalex)
                    works.append(_select(work, select) if select else work)
            meta = {"count": len(works), "page": 1, "per_page": len(works)}
            return _json({"meta": meta, "results": works})
        if path.startswith("/works/"):
            ident = urllib.parse.unquote(path.removeprefix("/works/"))
            kind, _, value = ident.partition(":")
            if kind.lower() == "pmid" and value:
                article = self.by_pmid(value.rsplit("/", 1)[-1])
            else:
                article = self.by_doi(ident)
            if article is not None and article.openalex is not None:
                work = self._record(article.openalex)
                return _json(_select(work, select) if select else work)
        return _json({"error": UNRECORDED}, 404)

    # -- PMC Open Access bucket ---------------------------------------------------------------

    def _bucket(self, request: httpx.Request) -> httpx.Response:
        key = urllib.parse.unquote(request.url.path.lstrip("/"))
        if not key:
            return self._bucket_list(request)
        article = self.by_pmcid(key.split(".", 1)[0]) if key.upper().startswith("PMC") else None
        listed = dict(self.listing(article)) if article is not None else {}
        if article is None or key not in listed:
            return _s3_error(404, "NoSuchKey", "The specified key does not exist.", key)
        if key.endswith(".xml") and listed[key] is not None and article.jats is not None:
            return _raw(self._read(article.jats), "application/xml")
        # Named by the article's XML, but its bytes were never recorded.
        return _s3_error(
            403, "AccessDenied", f"{UNRECORDED}: this file's bytes were not recorded", key
        )

    def _bucket_list(self, request: httpx.Request) -> httpx.Response:
        prefix = request.url.params.get("prefix") or ""
        delimiter = request.url.params.get("delimiter")
        head = prefix.split(".", 1)[0]
        article = self.by_pmcid(head) if head.upper().startswith("PMC") else None
        keys = [k for k in self.listing(article) if k[0].startswith(prefix)] if article else []
        parts = [
            f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{_S3_NS}">',
            f"<Name>pmc-oa-opendata</Name><Prefix>{escape(prefix)}</Prefix>",
        ]
        if delimiter:
            folders = dict.fromkeys(k.split(delimiter, 1)[0] + delimiter for k, _ in keys)
            parts.append(f"<KeyCount>{len(folders)}</KeyCount><MaxKeys>1000</MaxKeys>")
            parts.append(f"<Delimiter>{escape(delimiter)}</Delimiter>")
            parts.append("<IsTruncated>false</IsTruncated>")
            parts += [
                f"<CommonPrefixes><Prefix>{escape(f)}</Prefix></CommonPrefixes>" for f in folders
            ]
        else:
            parts.append(f"<KeyCount>{len(keys)}</KeyCount><MaxKeys>1000</MaxKeys>")
            parts.append("<IsTruncated>false</IsTruncated>")
            for key, size in keys:
                sized = f"<Size>{size}</Size>" if size is not None else ""
                parts.append(f"<Contents><Key>{escape(key)}</Key>{sized}</Contents>")
        parts.append("</ListBucketResult>")
        return _raw("".join(parts).encode(), "application/xml")

    # -- Crossref -----------------------------------------------------------------------------

    def _crossref(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.startswith("/works/"):
            article = self.by_doi(path.removeprefix("/works/"))
            if article is not None and article.crossref is not None:
                return _raw(self._read(article.crossref), "application/json")
            return _text(404, "Resource not found.")
        if path == "/works":
            return self._crossref_list(request)
        return _text(404, "Resource not found.")

    def _crossref_list(self, request: httpx.Request) -> httpx.Response:
        select = _split(request.url.params.get("select"), ",")
        wanted = []
        for clause in _split(request.url.params.get("filter"), ","):
            name, _, value = clause.partition(":")
            if name == "doi":
                wanted.append(value)
        items = []
        for article in dict.fromkeys(self.by_doi(d) for d in wanted):
            if article is not None and article.crossref is not None:
                work = self._record(article.crossref)["message"]
                items.append(_select(work, select) if select else work)
        message = {
            "facets": {},
            "total-results": len(items),
            "items": items,
            "items-per-page": int(request.url.params.get("rows") or 20),
        }
        return _json({"status": "ok", "message-type": "work-list", "message": message})

    # -- Unpaywall ----------------------------------------------------------------------------

    def _unpaywall(self, request: httpx.Request) -> httpx.Response:
        article = self.by_doi(request.url.path.removeprefix("/v2/"))
        if article is not None and article.unpaywall is not None:
            return _raw(self._read(article.unpaywall), "application/json")
        return _json({"HTTP_status_code": 404, "error": True, "message": UNRECORDED}, 404)

    # -- Semantic Scholar ---------------------------------------------------------------------

    def _s2_find(self, ident: str) -> tuple[DemoArticle | None, Any]:
        kind, _, value = urllib.parse.unquote(ident).partition(":")
        lookups: dict[str, Callable[[str], DemoArticle | None]] = {
            "DOI": self.by_doi,
            "PMID": self.by_pmid,
            "PMCID": self.by_pmcid,
        }
        find = lookups.get(kind.upper())
        article = find(value) if find is not None and value else None
        if article is None or article.s2 is None:
            return None, None
        return article, self._record(article.s2)

    def _s2(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        fields = ["paperId", *_split(request.url.params.get("fields"), ",")]
        if path == "/graph/v1/paper/batch" and request.method == "POST":
            try:
                asked = json.loads(request.content or b"{}").get("ids", [])
            except (ValueError, AttributeError):
                return _json({"error": "Unacceptable JSON"}, 400)
            answers = []
            for ident in asked if isinstance(asked, list) else []:
                _, record = self._s2_find(str(ident))
                found = isinstance(record, dict) and "paperId" in record
                answers.append(_select(record, fields) if found else None)
            return _json(answers)
        if path.startswith("/graph/v1/paper/"):
            ident = path.removeprefix("/graph/v1/paper/")
            article, record = self._s2_find(ident)
            if article is not None and isinstance(record, dict) and "paperId" in record:
                return _json(_select(record, fields))
            if article is not None and article.s2 is not None:
                return _raw(self._read(article.s2), "application/json", 404)  # recorded 404
            return _json({"error": f"Paper with id {urllib.parse.unquote(ident)} not found"}, 404)
        return _json({"error": UNRECORDED}, 404)

    # -- bioRxiv / medRxiv --------------------------------------------------------------------

    def _biorxiv(self, request: httpx.Request) -> httpx.Response:
        # No details answer is recorded: the world knows no post (see docs/demo-data.md).
        return _json({"messages": [{"status": "no posts found"}], "collection": []})


@cache
def _listing(jats: bytes, pmcid: str, xml_is_pmcs: bool) -> list[tuple[str, int | None]]:
    return bucket_keys(pmcid, jats, xml_is_pmcs=xml_is_pmcs)


@cache
def demo_world() -> DemoWorld:
    """Return the demo world over the packaged records (built once per process)."""
    return DemoWorld(demo_articles())


class WorldSession(Session):
    """A :class:`Session` whose every request is answered by the demo world.

    ``demo_world_session`` marks it for the frame's provenance (a later step on a
    frame it made uses the world again); ``keyless_replay`` tells the ``.lit``
    calls to ignore package-level credentials (the records were made without
    keys, and a key would only ask for answers the world does not hold).
    """

    demo_world_session: Final = True
    keyless_replay: Final = True


def world_session(*, world: DemoWorld | None = None, **session_options: Any) -> Session:
    """Return a not-yet-entered session whose client is wired to ``world`` (default: the demo's).

    The client's only transport is an :class:`httpx.MockTransport` over
    :meth:`DemoWorld.handle`, so no request leaves the process. The contact is
    :data:`DEMO_CONTACT` and pauses are skipped (:class:`InstantClock`);
    ``session_options`` (``cache=``, ``timeout=``, …) go to :class:`Session`.
    """
    for fixed in ("contact", "client_factory", "clock", "offline"):
        if fixed in session_options:
            raise TypeError(f"the demo session sets {fixed} itself")
    answering = world if world is not None else demo_world()

    def client() -> httpx.AsyncClient:
        return httpx.AsyncClient(
            transport=httpx.MockTransport(answering.handle),
            headers={"User-Agent": "litfetch_df-demo (mailto:demo@litfetch-df.invalid)"},
            trust_env=False,
            follow_redirects=False,
        )

    return WorldSession(
        client_factory=client, contact=DEMO_CONTACT, clock=InstantClock(), **session_options
    )
