"""The physical limit of a run: ideal request counts per host and the lower bound on wall time.

The ideal counts come from the corpus truth, not from what the library did:
for every step they are the requests a client needs if it uses every bulk
endpoint the upstream reference lists (section 9) and asks per article only
where no bulk form exists (section 9.5). The lower bound is then, per host,

    max(requests / rate, requests * latency / min(concurrency, host cap))

(the first term for rate-limited hosts, the second the latency floor of
per-article hosts at the configured concurrency), and the run's bound is the
largest of these over hosts. Dependencies between steps are ignored, so it
is a true lower bound: no client can beat it against this fake.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tests.fakes.world import (
    HOST_CROSSREF,
    HOST_EBI,
    HOST_ELSEVIER,
    HOST_NCBI,
    HOST_OPENALEX,
    HOST_S2,
    HOST_S3,
    HOST_SPRINGER,
    HOST_UNPAYWALL,
    Article,
    BodyHome,
    HostLimit,
    LicenceStyle,
    Publisher,
    s3_names,
)

from .corpus import Corpus

__all__ = [
    "CAPS",
    "LIMITS",
    "RATES",
    "STEPS",
    "HostBound",
    "Resolved",
    "expected_outcomes",
    "ideal_requests",
    "lower_bound",
    "marginal_requests",
    "resolve_rows",
    "servable",
]

STEPS = ("resolve", "bodies", "files", "licences")

# Bulk caps (upstream.md 6.3 and 9).
NCBI_CAP = 200
EUROPE_PMC_CAP = 100
OPENALEX_CAP = 100  # OR values per filter (limits-2026.md §2)
CROSSREF_CAP = 100
S2_CAP = 500
SPRINGER_META_CAP = 100
S3_PAGE = 1000


def _rate(name: str, fallback: float) -> float:
    """Requests per second of a ``litfetch_df.wire.http.Rate`` member, or ``fallback``."""
    try:
        from litfetch_df.wire.http import Rate
    except ImportError:  # pragma: no cover - the foundation always has it
        return fallback
    member = getattr(Rate, name, None)
    per_second = getattr(member, "per_second", None)
    return float(per_second) if isinstance(per_second, int | float) else fallback


RATES: dict[str, float] = {
    HOST_NCBI: 3.0,
    HOST_S2: 1.0,
    HOST_OPENALEX: 100.0,  # published for 2026 (limits-2026.md §2)
    HOST_CROSSREF: _rate("CROSSREF", 10.0),
    HOST_EBI: _rate("EUROPE_PMC", 20.0),
    # Unpaywall publishes a daily quota (100,000 calls) but no per-second limit, so the
    # pace the library commits to is the limit a polite client works against.
    HOST_UNPAYWALL: _rate("UNPAYWALL", 50.0),
}
"""Requests per second each rate-limited host of the fake allows (its physical limit).

Services that publish a limit (NCBI, Semantic Scholar, OpenAlex) use theirs; for those
that do not (Crossref's current polite pool, Europe PMC, Unpaywall), the library's own
pacing is the limit the fake enforces.
"""

CAPS: dict[str, int] = {HOST_S2: 1, HOST_CROSSREF: 5}
"""Most requests a host accepts in flight at once (Crossref caps concurrency; S2 is serial)."""

# Where the real service sends Retry-After with its 429 (our best knowledge; see README).
_RETRY_AFTER = {HOST_NCBI: True, HOST_CROSSREF: True, HOST_OPENALEX: True, HOST_UNPAYWALL: True}
_BODIES = {
    HOST_NCBI: {"error": "API rate limit exceeded", "count": "4", "limit": "3"},
    HOST_S2: {
        "message": "Too Many Requests. Please wait and try again or apply for a key for higher "
        "rate limits.",
        "code": "429",
    },
    HOST_OPENALEX: {"error": "Rate limit exceeded", "message": "Too many requests; slow down."},
    HOST_CROSSREF: {"status": "error", "message": "Too many requests"},
}

LIMITS: dict[str, HostLimit] = {
    host: HostLimit(
        per_second=rate,
        # NCBI counts requests per second: three may arrive back to back. S2 is strict.
        burst=1 if host == HOST_S2 else max(1, int(rate)),
        max_in_flight=CAPS.get(host, 0) if host != HOST_S2 else 0,
        retry_after=_RETRY_AFTER.get(host, False),
        body=_BODIES.get(host, {"message": "Too Many Requests"}),
    )
    for host, rate in RATES.items()
}
"""The limits the benchmark's fake enforces, per host."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """One input row after an ideal resolution: its article and the ids the services gave."""

    row: int
    article: Article | None
    pmid: str | None
    pmcid: str | None
    doi: str | None
    bookid: str | None

    @property
    def key(self) -> tuple[str | None, ...]:
        """The de-duplication key of the row (its resolved ids, DOI case-folded)."""
        return (self.pmid, self.pmcid, self.doi.lower() if self.doi else None, self.bookid)


def resolve_rows(corpus: Corpus) -> tuple[list[Resolved], collections.Counter[str]]:
    """Return every row resolved the way ``default_batch_resolver`` would, plus its ideal requests.

    The chain is NCBI (ids grouped by type, 200 per request), then Europe PMC
    search for rows with a PMID but no PMCID (100 per request; it also returns
    the DOI), then OpenAlex for rows still incomplete that have a DOI (100 per
    request). A row already holding pmid, pmcid and doi costs nothing.
    """
    ncbi: dict[str, set[str]] = collections.defaultdict(set)
    epmc: set[str] = set()
    openalex: set[str] = set()
    out: list[Resolved] = []
    for index, row in enumerate(corpus.rows):
        a = corpus.articles[row.article] if row.article is not None else None
        ids = {"pmid": row.pmid, "pmcid": row.pmcid, "doi": row.doi, "bookid": row.bookid}
        if a is not None and not (ids["pmid"] and ids["pmcid"] and ids["doi"]):
            key = next(((k, ids[k]) for k in ("pmid", "pmcid", "doi") if ids[k]), None)
            if key is not None:
                kind, value = key
                ncbi[kind].add((value or "").lower())
                if a.known_to_ncbi:
                    _fill(ids, a, ("pmid", "pmcid", "doi"))
            if ids["pmid"] and not ids["pmcid"]:
                epmc.add(ids["pmid"] or "")
                if a.in_europe_pmc_search and a.pmid:
                    _fill(ids, a, ("pmcid", "doi"))
            if ids["doi"] and not (ids["pmid"] and ids["pmcid"]):
                openalex.add((ids["doi"] or "").lower())
                if a.in_openalex:
                    _fill(ids, a, ("pmid", "pmcid"))
        out.append(Resolved(index, a, ids["pmid"], ids["pmcid"], ids["doi"], ids["bookid"]))
    counts: collections.Counter[str] = collections.Counter()
    counts[HOST_NCBI] = sum(math.ceil(len(v) / NCBI_CAP) for v in ncbi.values())
    counts[HOST_EBI] = math.ceil(len(epmc) / EUROPE_PMC_CAP)
    counts[HOST_OPENALEX] = math.ceil(len(openalex) / OPENALEX_CAP)
    return out, +counts


def _fill(ids: dict[str, str | None], a: Article, names: Iterable[str]) -> None:
    for name in names:
        if ids[name] is None:
            ids[name] = getattr(a, name)


def _distinct(rows: Iterable[Resolved]) -> list[Resolved]:
    seen: set[tuple[str | None, ...]] = set()
    out = []
    for r in rows:
        if r.article is None or r.key in seen or not any(r.key):
            continue
        seen.add(r.key)
        out.append(r)
    return out


@dataclass(frozen=True, slots=True)
class _BodyWalk:
    source: str | None
    requests: collections.Counter[str]
    crossref: bool


def _walk_ladder(r: Resolved, *, credentials: bool) -> _BodyWalk:
    """The ideal ladder walk for one article: which rung serves it and what it costs."""
    a = r.article
    assert a is not None
    cost: collections.Counter[str] = collections.Counter()
    if r.bookid:
        cost[HOST_EBI] += 1
        if a.body is BodyHome.BOOKSHELF:
            return _BodyWalk("europe_pmc_bookshelf", cost, False)
    if r.pmcid:
        # S3 is counted in ideal_requests: a listing answers both this rung and the file-set
        if a.pmc_versions:
            return _BodyWalk("pmc_oa_s3", cost, False)
        cost[HOST_EBI] += 1
        if a.in_europe_pmc_fulltext:
            return _BodyWalk("europe_pmc", cost, False)
    if r.doi and credentials:
        if a.publisher is Publisher.ELSEVIER and a.in_crossref:
            cost[HOST_ELSEVIER] += 1
            if a.body is BodyHome.ELSEVIER:
                return _BodyWalk("elsevier_oa", cost, True)
        if a.publisher is Publisher.SPRINGER:
            # OpenAccess JATS stays per article (upstream.md 9.5), and only a Springer
            # Nature DOI (its prefix says so) can have an answer there
            cost[HOST_SPRINGER] += 1
            if a.body is BodyHome.SPRINGER:
                return _BodyWalk("springer_oa", cost, True)
        return _BodyWalk(None, cost, True)
    return _BodyWalk(None, cost, False)


def ideal_requests(
    corpus: Corpus, steps: Iterable[str], *, credentials: bool = True
) -> collections.Counter[str]:
    """Return the ideal request count per host for running ``steps`` over the corpus frame.

    Steps are ``resolve``, ``bodies``, ``files`` and ``licences``; records two
    steps both read (Unpaywall, Crossref) count once when both steps run.
    """
    wanted = set(steps)
    unknown = wanted - set(STEPS)
    if unknown:
        raise ValueError(f"unknown steps {sorted(unknown)}")
    resolved, resolve_cost = resolve_rows(corpus)
    total: collections.Counter[str] = collections.Counter()
    if "resolve" in wanted:
        total.update(resolve_cost)
    crossref: set[str] = set()
    unpaywall: set[str] = set()
    s2: set[tuple[str | None, ...]] = set()
    meta: set[str] = set()
    for r in _distinct(resolved):
        a = r.article
        assert a is not None
        walk = _walk_ladder(r, credentials=credentials)
        doi = r.doi.lower() if r.doi else None
        if "bodies" in wanted:
            total.update(walk.requests)
            if walk.crossref and doi:
                crossref.add(doi)
        if r.pmcid and ({"bodies", "files"} & wanted):
            total[HOST_S3] += _s3_cost(a, bodies="bodies" in wanted, files="files" in wanted)
        if "files" in wanted:
            if doi:
                unpaywall.add(doi)
                crossref.add(doi)
                if credentials and a.publisher is Publisher.SPRINGER:
                    meta.add(doi)  # Meta knows only Springer Nature DOIs
            if r.pmid or r.pmcid or r.doi:
                s2.add(r.key)
        if "licences" in wanted and doi:
            artifact = walk.source is not None and a.licence_style is not LicenceStyle.NONE
            if not artifact or "bodies" not in wanted:
                unpaywall.add(doi)
    total[HOST_CROSSREF] += math.ceil(len(crossref) / CROSSREF_CAP)
    total[HOST_UNPAYWALL] += len(unpaywall)
    total[HOST_S2] += math.ceil(len(s2) / S2_CAP)
    total[HOST_SPRINGER] += math.ceil(len(meta) / SPRINGER_META_CAP)
    return +total


def _s3_cost(a: Article, *, bodies: bool, files: bool) -> int:
    """Fewest bucket requests for one PMCID: one listing of ``PMC<n>.`` tells the versions
    (or that there are none) and, without a delimiter, every key of every version; the
    body then costs one GET of the latest ``.xml``."""
    if not a.pmc_versions:
        return 1
    keys = sum(len(s3_names(a, v)) for v in range(1, a.pmc_versions + 1))
    listing = max(1, math.ceil(keys / S3_PAGE)) if files else 1
    return listing + (1 if bodies else 0)


def marginal_requests(
    corpus: Corpus, steps: Sequence[str], step: str, *, credentials: bool = True
) -> collections.Counter[str]:
    """Return the ideal requests ``step`` adds after the ``steps`` before it have run."""
    before = list(steps[: steps.index(step)])
    after = ideal_requests(corpus, [*before, step], credentials=credentials)
    if before:
        after.subtract(ideal_requests(corpus, before, credentials=credentials))
    return +after


def expected_outcomes(corpus: Corpus, *, credentials: bool = True) -> dict[str, int]:
    """Return what an ideal run finds: rows with a PMCID / DOI, rows with a body by source."""
    resolved, _ = resolve_rows(corpus)
    out: collections.Counter[str] = collections.Counter()
    for r in resolved:
        if r.article is None:
            out["invalid_rows"] += 1
            continue
        out["rows_with_pmcid"] += r.pmcid is not None
        out["rows_with_doi"] += r.doi is not None
        source = _walk_ladder(r, credentials=credentials).source
        if source is not None:
            out["rows_with_body"] += 1
            out[f"body:{source}"] += 1
    return dict(out)


def servable(corpus: Corpus, *, credentials: bool = True) -> dict[str, int]:
    """Return how many distinct resolved articles each per-article body host can serve.

    ``springer_jats``: Springer Nature OpenAccess JATS bodies (with keys);
    ``elsevier``: Elsevier full texts (with keys); ``epmc_fulltext``: articles
    Europe PMC's ``fullTextXML`` holds (whether or not the bucket serves them
    first). The ideal ladder asks these hosts for no more than this.
    """
    out = {"springer_jats": 0, "elsevier": 0, "epmc_fulltext": 0}
    resolved, _ = resolve_rows(corpus)
    for r in _distinct(resolved):
        a = r.article
        assert a is not None
        if r.pmcid and a.in_europe_pmc_fulltext:
            out["epmc_fulltext"] += 1
        if credentials and r.doi and a.body is BodyHome.SPRINGER:
            out["springer_jats"] += 1
        if credentials and r.doi and a.body is BodyHome.ELSEVIER:
            out["elsevier"] += 1
    return out


@dataclass(frozen=True, slots=True)
class HostBound:
    """One host's share of the lower bound."""

    host: str
    requests: int
    rate: float | None
    rate_seconds: float
    latency_seconds: float

    @property
    def seconds(self) -> float:
        """The host's floor: the larger of its rate term and its latency term."""
        return max(self.rate_seconds, self.latency_seconds)


def lower_bound(
    ideal: Mapping[str, int],
    *,
    latency: float,
    concurrency: int,
    rates: Mapping[str, float] = RATES,
    caps: Mapping[str, int] = CAPS,
    bursts: Mapping[str, int] | None = None,
) -> tuple[float, list[HostBound]]:
    """Return the run's lower bound in seconds and each host's term, busiest first.

    ``bursts`` (requests a host admits back to back; 1 when absent) lets the
    first ``burst`` requests leave together; the drawn worlds pass theirs.
    """
    terms = []
    for host, n in ideal.items():
        rate = rates.get(host)
        cap = max(1, min(concurrency, caps.get(host, concurrency)))
        burst = max(1, (bursts or {}).get(host, 1))
        terms.append(
            HostBound(
                host=host,
                requests=n,
                rate=rate,
                # the first burst leaves at once and the last request still has to be answered
                rate_seconds=max(0, n - burst) / rate + latency if rate and n else 0.0,
                latency_seconds=n * latency / cap,
            )
        )
    terms.sort(key=lambda t: t.seconds, reverse=True)
    return (terms[0].seconds if terms else 0.0), terms


def batch_optimal(corpus: Corpus, *, credentials: bool = True) -> dict[str, int]:
    """The fewest requests per host the services' documented 2026 bulk forms allow (issue 24).

    From the corpus truth: OpenAlex ⌈DOIs/100⌉ (OR filter of 100, ``per_page=100``),
    Crossref ⌈DOIs/50⌉, the ID Converter ⌈ids/200⌉, Europe PMC search ⌈(PMID-only
    rows + PMCIDs the bucket lacks)/1000⌉ (``pageSize`` 1000 by ``searchPOST``) plus one
    ``fullTextXML`` per servable article the bucket lacks and one ``bookXML`` per
    Bookshelf id, Semantic Scholar ⌈ids/500⌉, Unpaywall one per DOI unknown to
    OpenAlex, Springer Nature ⌈Springer DOIs/25⌉ Meta + ⌈servable/20⌉ OpenAccess
    (Basic pages), Elsevier one per servable article. S3 is left to :func:`ideal_requests`.
    """
    resolved, _ = resolve_rows(corpus)
    rows = _distinct(resolved)
    dois = {r.doi for r in rows if r.doi}
    ids = {r.pmcid or r.pmid or r.doi for r in rows if r.pmcid or r.pmid or r.doi}
    pmid_only = sum(1 for r in rows if r.pmid and not r.pmcid)
    unknown = sum(1 for r in rows if r.doi and r.article is not None and not r.article.in_openalex)
    springer = sum(
        1
        for r in rows
        if r.doi and r.article is not None and r.article.publisher is Publisher.SPRINGER
    )
    serve = servable(corpus, credentials=credentials)
    lacking = [r for r in rows if r.pmcid and r.article is not None and not r.article.pmc_versions]
    books = {r.bookid for r in rows if r.bookid}
    out = {
        HOST_OPENALEX: math.ceil(len(dois) / 100),
        HOST_CROSSREF: math.ceil(len(dois) / 50),
        HOST_NCBI: math.ceil(len(ids) / 200),
        # searchPOST pages of 1000: the PMID-only rows' ids, and which PMCIDs the bucket lacks
        # Europe PMC holds; fullTextXML only for those; one bookXML per Bookshelf id (no
        # bulk form serves a book, and only asking tells whether Europe PMC has it)
        HOST_EBI: math.ceil((pmid_only + len(lacking)) / 1000)
        + sum(1 for r in lacking if r.article is not None and r.article.in_europe_pmc_fulltext)
        + len(books),
        HOST_S2: math.ceil(len(ids) / 500),
        HOST_UNPAYWALL: unknown,
    }
    if credentials:
        out[HOST_SPRINGER] = math.ceil(springer / 25) + math.ceil(serve["springer_jats"] / 20)
        out[HOST_ELSEVIER] = serve["elsevier"]
    return {h: n for h, n in out.items() if n}


def _window_seconds(n: int, row: object) -> float:
    """Least seconds ``n`` requests need under a published per-second and per-minute limit.

    The per-second limit spaces every request; a per-minute one is a window counter (per
    UTC minute, as the fake and Europe PMC / Springer count it), so ``n`` within one
    window's allowance pass it at once and only each further window adds a minute:
    ``max(n / per_second, 60 × (⌈n / per_minute⌉ − 1))``. (``n`` over the sustained
    ``Limit.rate`` overstated the bound, 193 Europe PMC requests at 8.3/s being 23.2 s
    where 10/s in one window allows 19.3 s: not a lower bound.)
    """
    per_second = getattr(row, "per_second", None)
    per_minute = getattr(row, "per_minute", None)
    seconds = n / per_second if per_second else 0.0
    if per_minute and n:
        seconds = max(seconds, 60.0 * (math.ceil(n / per_minute) - 1))
    return seconds


def published_bound(counts: Mapping[str, int], *, latency: float) -> dict[str, float]:
    """Per host, the least wall for ``counts`` under the published 2026 rate and concurrency.

    ``max(R / per_second, 60 × (⌈R / per_minute⌉ − 1)) + latency`` from the windows
    ``litfetch_df.limits`` publishes (a per-minute window counter binds only past its
    allowance; see :func:`_window_seconds`), else ``latency`` (one round of unlimited
    concurrency); a published in-flight cap ``c`` adds ``R × latency / c``.
    The scenario's bound is the largest value.
    """
    from litfetch_df.limits import published_limit

    out: dict[str, float] = {}
    # the tiers a benchmark client lands on: a contact (Crossref polite), publisher keys
    tiers = {HOST_CROSSREF: "polite", HOST_S2: "keyed", HOST_ELSEVIER: "keyed"}
    for host, n in counts.items():
        row = published_limit(host, "list", tiers.get(host))
        floor = _window_seconds(n, row) + latency
        if row is not None and row.in_flight:
            floor = max(floor, n * latency / row.in_flight)
        out[host] = floor
    return out
