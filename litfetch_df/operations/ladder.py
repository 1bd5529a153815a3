"""The body ladder: walk the fetchers in priority order, resolving ids on demand.

:func:`fetch_body` is what :meth:`Session.fetch_body` delegates to. The walk:

1. Before each fetcher, if a resolver was given and has not run yet, and the
   fetcher requires a resolvable id (pmid / pmcid / doi) the bundle lacks, run
   the resolver once and merge its answer (never overwriting a known id).
2. Skip the fetcher if any id it requires is still missing.
3. Call it; the first non-``None`` body wins.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import httpx

from ..files import Blob
from ..ids import RESOLVABLE, ArticleIds
from ..sources.common import failure_level
from ..wire.http import Http, get_logger, redact_url
from .tried import Answer, Tried, Watched
from .types import Fetcher, Resolver

__all__ = ["Walk", "default_fetchers", "fetch_body", "fetch_body_tried", "rung_name"]

log = get_logger(__name__)


def default_fetchers() -> tuple[Fetcher, ...]:
    """Return the production ladder in priority order.

    ``EuropePmcBookshelfFetcher``, ``PmcOaFetcher``, ``EuropePmcFetcher``,
    ``ElsevierFetcher``, ``SpringerFetcher``. The Bookshelf rung is first: a
    ``bookid`` settles the source in one request, before any PMC request or
    resolver call. A function, so each call builds fresh instances.
    """
    # Imported here so this module loads even while a source module is absent
    # or broken; the sources import nothing from operations.
    from ..sources.elsevier import ElsevierFetcher
    from ..sources.europe_pmc import EuropePmcBookshelfFetcher, EuropePmcFetcher
    from ..sources.pmc_oa import PmcOaFetcher
    from ..sources.springer import SpringerFetcher

    return (
        EuropePmcBookshelfFetcher(),
        PmcOaFetcher(),
        EuropePmcFetcher(),
        ElsevierFetcher(),
        SpringerFetcher(),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Walk:
    """One walk of the ladder: the body found (or ``None``) and each rung tried, in order.

    The last rung tried is the one that served, when one did.
    """

    blob: Blob | None
    tried: tuple[Tried, ...]

    @property
    def given_up(self) -> tuple[Tried, ...]:
        """The rungs given up before the walk ended: each might have served a better body."""
        return tuple(t for t in self.tried if t.given_up)


def rung_name(fetcher: Fetcher) -> str:
    """The name a rung goes by (``name``, else its class name)."""
    return str(getattr(fetcher, "name", type(fetcher).__name__))


async def fetch_body(
    http: Http,
    article_ids: ArticleIds,
    *,
    resolver: Resolver | None = None,
    fetchers: Sequence[Fetcher] | None = None,
    credentials: Mapping[str, object] | None = None,
) -> Blob | None:
    """Walk ``fetchers`` (default :func:`default_fetchers`) and return the first body, or ``None``.

    ``resolver`` runs at most once per call, and only when the next fetcher
    requires a resolvable id the bundle lacks. A fetcher that raises an
    ``httpx.HTTPError`` is logged and skipped; any other exception (e.g. the
    ``ValueError`` for a malformed ``bookid``) propagates.
    """
    walk = await fetch_body_tried(
        http, article_ids, resolver=resolver, fetchers=fetchers, credentials=credentials
    )
    return walk.blob


async def fetch_body_tried(
    http: Http,
    article_ids: ArticleIds,
    *,
    resolver: Resolver | None = None,
    fetchers: Sequence[Fetcher] | None = None,
    credentials: Mapping[str, object] | None = None,
    above: str | None = None,
) -> Walk:
    """:func:`fetch_body`, also telling what each rung tried did (a :class:`Walk`).

    A rung that served is a hit, even if one of its requests was given up on
    the way; a rung that served nothing is given up when one of its requests
    was. ``above`` stops the walk at the rung of that name (not asking it):
    an earlier walk's body came from it, and only a rung above it could
    serve a better one.
    """
    ladder = default_fetchers() if fetchers is None else tuple(fetchers)
    ids = article_ids
    resolved = False
    tried: list[Tried] = []
    for fetcher in ladder:
        name = rung_name(fetcher)
        if above is not None and name == above:
            break
        needs = frozenset(fetcher.requires)
        if resolver is not None and not resolved and ids.missing(needs & RESOLVABLE):
            resolved = True
            ids = await _resolve(resolver, ids, http)
        if not ids.has(needs):
            continue
        watched = Watched(http)
        try:
            blob = await fetcher.fetch(ids, credentials=credentials, http=watched)
        except httpx.HTTPError as exc:
            log.log(
                failure_level(exc),
                "fetcher %s failed (%s: %s); trying the next one",
                name,
                type(exc).__name__,
                redact_url(str(exc)),
            )
            tried.append(watched.tried(name, False, exc))
            continue
        if blob is not None:
            log.debug("body served by %s", name)
            tried.append(Tried(name, Answer.HIT))
            return Walk(blob, tuple(tried))
        tried.append(watched.tried(name, False))
    return Walk(None, tuple(tried))


async def _resolve(resolver: Resolver, ids: ArticleIds, http: Http) -> ArticleIds:
    """Run ``resolver`` and merge its answer into ``ids``; a network failure keeps ``ids``."""
    try:
        found = await resolver(ids, http)
    except httpx.HTTPError as exc:
        log.log(
            failure_level(exc),
            "resolver failed (%s: %s); continuing with the ids given",
            type(exc).__name__,
            redact_url(str(exc)),
        )
        return ids
    return ids.merge(found)
