"""Resolver chains and batch resolution.

Per item, :func:`chain` runs resolvers in order until a bundle holds every
resolvable id. For a whole corpus, the batch resolvers collapse N lookups into
``ceil(distinct / cap)`` requests per service, and :func:`chain_batch` feeds
each only the elements still missing something.

:func:`chain_batch` runs its resolvers in rounds until no bundle gains an id
(at most :data:`MAX_ROUNDS`): a bundle that gains an id from a later resolver
(a PMID from OpenAlex, say) is offered again to the earlier ones that can now
ask about it (Europe PMC search, PMID → PMCID), and to no resolver that would
ask the same question again. The first round goes in order (each resolver
sees what the ones before it left incomplete); a later round's questions all
follow from the round before, so its resolvers are asked at once (ADR 0022).

Every batch resolver here follows one recipe (:func:`_resolve_keyed`, built on
the bulk lookups' :func:`~litfetch_df.sources.bulk.bulk_lookup`): key each
element in the service's scheme, send each distinct key once, chunk at the
service's cap, issue the chunks together (the session paces them; nothing here
sleeps), fan each answer back to every index sharing its key, and report as
abandoned the still-incomplete indices of chunks that were never answered.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from collections.abc import Awaitable, Callable, Hashable, Iterable, MutableMapping, Sequence
from typing import Any, Final, TypeVar

from ..ids import RESOLVABLE, ArticleIds
from ..sources import europe_pmc_search, ncbi_idconv, openalex
from ..sources.bulk_recipe import BulkKey, IdRecords, bulk_lookup, ids_from_json, ids_to_json
from ..sources.europe_pmc_search import EuropePmcResolver
from ..sources.ncbi_idconv import NcbiIdConverterResolver
from ..wire.http import Http
from .types import BatchResolver, Resolver

__all__ = [
    "MAX_ROUNDS",
    "EuropePmcBatchResolver",
    "NcbiIdConverterBatchResolver",
    "OpenAlexResolver",
    "chain",
    "chain_batch",
    "default_batch_resolver",
    "default_resolver",
    "tells_final",
]

_T = TypeVar("_T")

MAX_ROUNDS: Final = 3
"""Most passes :func:`chain_batch` makes over its resolvers before it stops asking."""

Lookup = Callable[[list[str]], Awaitable[dict[str, ArticleIds] | None]]
"""Ask a service about a chunk of keys: key → ids found, or ``None`` when not answered."""


# -- per item -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Chain:
    resolvers: tuple[Resolver, ...]

    async def __call__(self, ids: ArticleIds, http: Http) -> ArticleIds:
        for resolver in self.resolvers:
            if ids.has(RESOLVABLE):
                break
            # Merge again here so a resolver that overwrites cannot change a known id.
            ids = ids.merge(await resolver(ids, http))
        return ids


def chain(*resolvers: Resolver) -> Resolver:
    """Compose resolvers into one that runs them in order.

    The composite stops as soon as pmid, pmcid and doi are all known and
    never lets a later resolver overwrite an id an earlier one found. Put your
    own resolver first and fallbacks after.
    """
    return _Chain(tuple(resolvers))


def default_resolver() -> Resolver:
    """Return the keyless per-item chain: Europe PMC search, then the NCBI ID Converter."""
    return chain(EuropePmcResolver(), NcbiIdConverterResolver())


# -- batch machinery ------------------------------------------------------------------------


def _id_records(kind: str, secrets: tuple[str, ...] = ()) -> IdRecords[ArticleIds]:
    """How a resolver's answers are kept per id: the ids the service found for the key."""
    return IdRecords(kind, ids_to_json, ids_from_json, secrets)


async def _resolve_keyed(
    batch: Sequence[ArticleIds],
    http: Http,
    *,
    key_of: Callable[[ArticleIds], str | None],
    lookup: Lookup,
    cap: int,
    records: IdRecords[ArticleIds],
    alone: Callable[[str], bool] = lambda _key: False,
    width: Callable[[str], int] | None = None,
    budget: int | None = None,
) -> tuple[list[ArticleIds], set[int]]:
    """Run one service over ``batch`` through :func:`~litfetch_df.sources.bulk.bulk_lookup`.

    Each key is sent as it is compared; ``alone(key)`` marks keys that cannot
    share a request (a separator inside the id) and go one per request. With a
    persistent cache on ``http`` (a session), answers are kept and found per
    id as ``records`` says. Returns the bundles merged with what the service
    found, and the abandoned indices that are still incomplete.
    """
    keys = [None if (key := key_of(ids)) is None else BulkKey(key, key) for ids in batch]
    result = await bulk_lookup(
        keys,
        lookup,
        cap=cap,
        alone=alone,
        records=records,
        memo=http,
        width=width,
        budget=budget,
    )
    out = [
        ids if found is None else ids.merge(found)
        for ids, found in zip(batch, result.values, strict=True)
    ]
    return out, {i for i in result.abandoned if not out[i].has(RESOLVABLE)}


@dataclasses.dataclass(frozen=True, kw_only=True)
class NcbiIdConverterBatchResolver:
    """A batch resolver over the NCBI ID Converter, 200 ids per request.

    Keys each element on its pmid, else its ``PMC``-prefixed pmcid, else its
    lower-cased doi, and sends each distinct key once in auto-detecting
    requests (no ``idtype``) so PMIDs, PMCIDs and DOIs share a chunk. Records
    are matched back by ``requested-id``, falling back to the ids they echo;
    error records are misses. A DOI containing ``,`` (NCBI's list separator)
    is sent on its own. ``tool`` and the session contact identify the caller.
    Returns the aligned, merged bundles and the abandoned indices.
    """

    tool: str = "litfetch_df"

    def __post_init__(self) -> None:
        ncbi_idconv.check_tool(self.tool)

    def lookup_key(self, ids: ArticleIds) -> str | None:
        """Return what the converter is asked about for ``ids``, or ``None`` (not asked)."""
        return ncbi_idconv.batch_key(ids)

    async def __call__(
        self, batch: Sequence[ArticleIds], http: Http
    ) -> tuple[list[ArticleIds], set[int]]:
        """Enrich ``batch`` from the converter; see the class docstring."""

        async def lookup(keys: list[str]) -> dict[str, ArticleIds] | None:
            if len(keys) == 1 and "," in keys[0]:
                # Even alone it is split by NCBI unless the type is stated.
                return await ncbi_idconv.convert(http, keys, tool=self.tool, idtype="doi")
            return await ncbi_idconv.convert(http, keys, tool=self.tool)

        return await _resolve_keyed(
            batch,
            http,
            key_of=ncbi_idconv.batch_key,
            lookup=lookup,
            cap=ncbi_idconv.BATCH_CAP,
            records=_id_records(ncbi_idconv.RECORD_KIND),
            alone=lambda key: "," in key,
        )


@dataclasses.dataclass(frozen=True)
class EuropePmcBatchResolver:
    """A batch resolver over Europe PMC search, 100 PMIDs OR-ed into one query.

    Sends ``(EXT_ID:a OR EXT_ID:b …) AND SRC:MED`` for the elements that have a
    PMID and lack a PMCID or a DOI, and fills both from each MEDLINE record
    (the PMCID covers UK-only author manuscripts NCBI lacks; the DOI covers
    PubMed articles outside PMC, at no extra request). Returns the aligned,
    merged bundles and the abandoned indices.
    """

    def lookup_key(self, ids: ArticleIds) -> str | None:
        """Return the PMID searched for ``ids``, or ``None`` (not asked)."""
        return europe_pmc_search.search_key(ids)

    async def __call__(
        self, batch: Sequence[ArticleIds], http: Http
    ) -> tuple[list[ArticleIds], set[int]]:
        """Enrich ``batch`` from Europe PMC; see the class docstring."""

        async def lookup(pmids: list[str]) -> dict[str, ArticleIds] | None:
            return await europe_pmc_search.search_pmids(http, pmids)

        return await _resolve_keyed(
            batch,
            http,
            key_of=europe_pmc_search.search_key,
            lookup=lookup,
            cap=europe_pmc_search.BATCH_CAP,
            records=_id_records(europe_pmc_search.PMID_RECORD_KIND),
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class OpenAlexResolver:
    """A batch resolver mapping DOIs to PMID / PMCID via the OpenAlex works filter.

    Sends up to 100 lower-cased DOIs (:data:`~litfetch_df.sources.openalex.BATCH_CAP`,
    fewer when long DOIs would pass the URL length OpenAlex accepts) per
    ``filter=doi:a|b|…`` request with
    ``select=ids,doi`` (identifiers only), the session contact as ``mailto``
    and ``api_key`` when given (OpenAlex's keyless daily budget is tiny).
    Paced at :attr:`Rate.OPENALEX`. A DOI containing ``|`` or ``,`` (filter
    syntax) is sent alone. A 403 (OpenAlex's rate limit) abandons its chunk
    like a 429/5xx. When the list budget is spent (the session's quota ledger
    says so), a chunk is asked by the free singleton lookups instead. The key
    is checked at construction (``ValueError`` when blank or containing
    whitespace) and never appears in a repr or a log.
    Returns the aligned, merged bundles and the abandoned indices.
    """

    api_key: str | None = dataclasses.field(default=None, repr=False)
    works: MutableMapping[str, dict[str, Any] | None] | None = dataclasses.field(
        default=None, repr=False, compare=False
    )
    """Where to put each asked DOI's work with its access terms (``None``: not asked for).

    Given, the filter selects :data:`~litfetch_df.sources.openalex.TERMS_SELECT`
    (the same list calls) so a run whose later steps want the terms of these
    DOIs reads them here instead of asking OpenAlex about them again.
    """

    def __post_init__(self) -> None:
        openalex.check_api_key(self.api_key)

    def lookup_key(self, ids: ArticleIds) -> str | None:
        """Return the DOI OpenAlex is asked about for ``ids``, or ``None`` (not asked)."""
        return openalex.doi_lookup_key(ids)

    async def __call__(
        self, batch: Sequence[ArticleIds], http: Http
    ) -> tuple[list[ArticleIds], set[int]]:
        """Enrich ``batch`` from OpenAlex; see the class docstring."""

        async def lookup(dois: list[str]) -> dict[str, ArticleIds] | None:
            found = await openalex.works_by_doi(http, dois, api_key=self.api_key, keep=self.works)
            if found is not None or not openalex.list_budget_spent(http, api_key=self.api_key):
                return found
            # The list budget is spent: the free singletons answer the same question.
            works = await openalex.single_works(http, dois, api_key=self.api_key)
            if self.works is not None:
                self.works.update({k: None if w is None else dict(w) for k, w in works.items()})
            if len(works) < len(set(dois)):
                return None  # some went unanswered: the chunk stays abandoned, as before
            named = (openalex.work_ids(w) for w in works.values() if w is not None)
            return {key: ids for key, ids in (n for n in named if n is not None)}

        secrets = () if self.api_key is None else (self.api_key,)
        return await _resolve_keyed(
            batch,
            http,
            key_of=openalex.doi_lookup_key,
            lookup=lookup,
            cap=openalex.BATCH_CAP,
            width=openalex.doi_width,
            budget=openalex.DOI_BUDGET,
            records=_id_records(openalex.RECORD_KIND, secrets),
            alone=lambda doi: "|" in doi or "," in doi,
        )


# -- batch composition ----------------------------------------------------------------------


def _required_fields(required: Iterable[str]) -> frozenset[str]:
    names = (required,) if isinstance(required, str) else tuple(required)
    fields = frozenset(names)
    if not fields:
        raise ValueError("required must name at least one of pmid, pmcid, doi")
    unknown = sorted(str(f) for f in fields - RESOLVABLE)
    if unknown:
        raise ValueError(
            f"required may name only resolvable identifiers (pmid, pmcid, doi), got {unknown}"
        )
    return fields


_NEVER: Final = object()
"""What a resolver was asked about a bundle it has not seen yet."""


def _question(resolver: BatchResolver, ids: ArticleIds) -> Hashable:
    """What ``resolver`` would ask its service about ``ids``.

    A resolver that says (a ``lookup_key`` method, as the bundled ones have)
    is judged by its key; any other by the whole bundle, so it is offered a
    bundle again whenever the bundle changed.
    """
    lookup_key = getattr(resolver, "lookup_key", None)
    if callable(lookup_key):
        key: Hashable = lookup_key(ids)
        return key
    return ids


@dataclasses.dataclass(frozen=True)
class _BatchChain:
    resolvers: tuple[BatchResolver, ...]
    required: frozenset[str]

    async def __call__(
        self,
        batch: Sequence[ArticleIds],
        http: Http,
        *,
        on_final: Callable[[list[int], list[ArticleIds]], None] | None = None,
    ) -> tuple[list[ArticleIds], set[int]]:
        current = list(batch)
        gave_up: set[int] = set()
        told: set[int] = set()

        def tell_final(rounds_done: bool = False) -> None:
            # A bundle is final once no resolver will be asked about it again: complete, or,
            # between rounds, one whose question to every resolver is the one it was last
            # asked. It is told once no bundle still open shares an id with it (one that
            # may yet become the same bundle is told with it, so each is told once).
            if on_final is None:
                return
            open_ = {i for i, ids in enumerate(current) if not ids.has(self.required)}
            if rounds_done:
                open_ = {
                    i
                    for i in open_
                    for r, resolver in enumerate(self.resolvers)
                    if asked[r].get(i, _NEVER) != _question(resolver, current[i])
                }
            open_ids = {v for i in open_ for v in _id_values(current[i])}
            done = [
                i
                for i, ids in enumerate(current)
                if i not in told and i not in open_ and open_ids.isdisjoint(_id_values(ids))
            ]
            if done:
                told.update(done)
                on_final(done, [current[i] for i in done])

        # Per resolver, what it was last asked about each index: a bundle goes back to a
        # resolver only when that question changed, so a bundle that gained nothing
        # costs no request in a later round.
        asked: list[dict[int, Hashable]] = [{} for _ in self.resolvers]

        def todo_of(r: int) -> list[int]:
            resolver, seen = self.resolvers[r], asked[r]
            todo = [
                i
                for i, ids in enumerate(current)
                if not ids.has(self.required) and seen.get(i, _NEVER) != _question(resolver, ids)
            ]
            for i in todo:
                seen[i] = _question(resolver, current[i])
            return todo

        async def ask(r: int, todo: list[int]) -> tuple[Sequence[ArticleIds], set[int]]:
            resolver = self.resolvers[r]
            results, abandoned = await resolver([current[i] for i in todo], http)
            if len(results) != len(todo):
                raise ValueError(
                    f"batch resolver {resolver!r} returned {len(results)} results "
                    f"for {len(todo)} inputs"
                )
            return results, abandoned

        def merge(todo: list[int], results: Sequence[ArticleIds], abandoned: set[int]) -> bool:
            gained = False
            for position, index in enumerate(todo):
                # Merge again so a resolver that overwrites cannot change a known id.
                merged = current[index].merge(results[position])
                gained = gained or merged != current[index]
                current[index] = merged
            gave_up.update(todo[j] for j in abandoned if 0 <= j < len(todo))
            return gained

        tell_final()
        for round_ in range(MAX_ROUNDS):
            gained = False
            if round_ == 0:
                # The first round in order: each resolver asks only about what the ones
                # before it left incomplete (most bundles are complete after the first).
                for r in range(len(self.resolvers)):
                    todo = todo_of(r)
                    if todo:
                        gained = merge(todo, *await ask(r, todo)) or gained
                        tell_final()
                tell_final(rounds_done=True)
            else:
                # A later round's questions all follow from what the round before found:
                # they go out at once, one round trip instead of one per resolver.
                todos = [(r, todo) for r in range(len(self.resolvers)) if (todo := todo_of(r))]
                answers = await _together([functools.partial(ask, r, todo) for r, todo in todos])
                for (_, todo), (results, abandoned) in zip(todos, answers, strict=True):
                    gained = merge(todo, results, abandoned) or gained
                tell_final(rounds_done=True)
            if not gained:
                break
        return current, {i for i in gave_up if not current[i].has(self.required)}


def _id_values(ids: ArticleIds) -> set[tuple[str, str]]:
    """The resolvable ids ``ids`` holds, as comparable (kind, value) pairs (DOIs lower-cased)."""
    values = {("pmid", ids.pmid), ("pmcid", ids.pmcid), ("doi", (ids.doi or "").lower())}
    return {(kind, value) for kind, value in values if value}


async def _together(calls: Sequence[Callable[[], Awaitable[_T]]]) -> list[_T]:
    """Await ``calls`` at once; the first to fail cancels the others and is raised as it is."""
    tasks = [asyncio.ensure_future(call()) for call in calls]
    if not tasks:
        return []
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return [task.result() for task in tasks]


def tells_final(resolver: object) -> bool:
    """Whether ``resolver`` (a :func:`chain_batch` composite) takes ``on_final=``.

    Called so, it tells the caller, as it goes, the bundles whose ids are final:
    ``on_final(indices, bundles)``, each index once, before it returns.
    """
    return isinstance(resolver, _BatchChain)


def chain_batch(*resolvers: BatchResolver, required: Iterable[str] = RESOLVABLE) -> BatchResolver:
    """Compose batch resolvers; each sees only the elements still missing a ``required`` id.

    The resolvers run in order, then again, until a round leaves every bundle
    as it was (at most :data:`MAX_ROUNDS` rounds). In a later round the
    resolvers are asked at once (their questions follow from the round
    before, not from each other), and each is offered only the bundles whose
    question to it changed: the key it asks
    its service about (a ``lookup_key(ids)`` method, which the bundled
    resolvers have), or, for a resolver without one, the bundle itself. So a
    DOI-only bundle that gains a PMID from OpenAlex goes back to Europe PMC
    search for its PMCID, while bundles that gained nothing cost nothing more.
    ``required`` (default: pmid, pmcid, doi) must be non-empty and name only
    resolvable identifiers, else :class:`ValueError`. The composite returns
    the aligned, merged bundles and the indices still incomplete on
    ``required`` that some resolver abandoned (an index a later resolver
    completed is dropped from the set).
    """
    return _BatchChain(tuple(resolvers), _required_fields(required))


def default_batch_resolver(
    *,
    openalex_api_key: str | None = None,
    openalex_works: MutableMapping[str, dict[str, Any] | None] | None = None,
) -> BatchResolver:
    """Return the keyless batch chain: NCBI ID Converter → Europe PMC → OpenAlex.

    ``openalex_api_key`` and ``openalex_works`` are passed to
    :class:`OpenAlexResolver` (OpenAlex's keyless daily budget allows about a
    hundred filter requests; ``openalex_works`` collects the works it read).
    """
    return chain_batch(
        NcbiIdConverterBatchResolver(),
        EuropePmcBatchResolver(),
        OpenAlexResolver(api_key=openalex_api_key, works=openalex_works),
    )
