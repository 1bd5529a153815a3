"""The recipe of every bulk lookup: one request answers many articles.

A *bulk lookup* is a coroutine taking a sequence of :class:`ArticleIds` and a
:class:`~litfetch_df.wire.http.BulkHttp` (a :class:`~litfetch_df.Session`), and
returning a :class:`BulkResult` aligned with its input. Every bulk lookup here
follows one recipe (:func:`bulk_lookup`), in the spirit of the batch resolvers:

- each element gets a :class:`BulkKey` in the service's scheme (or none: not
  applicable, no request, value ``None``);
- each distinct key is sent once (DOIs compare case-insensitively) and its
  answer fans back to every index sharing it, in input order;
- keys are chunked at the service's cap, and the chunks are issued together
  (the session paces them; nothing here sleeps);
- a chunk that was never answered (a transport failure or a 429/5xx that
  outlived every retry) marks exactly its indices abandoned; an answered chunk
  that simply lacks a key (a ``null`` element, a DOI missing from the items, a
  404) is absence, never abandonment (:func:`chunk_answer` makes that call for
  one chunk request);
- given an :class:`IdRecords` and a session (a :class:`~litfetch_df.store.answers.RecordMemo`),
  each id a well-formed answer covered is kept in the persistent cache per id
  (found or absent), and an id already kept is taken from there and left out
  of the requests, so a filtered, reordered or extended table asks only for
  the ids not answered before (docs/caching-and-offline.md).

The per-service lookups live in :mod:`.semantic_scholar_batch`,
:mod:`.crossref_batch` and :mod:`.springer_batch`, and the batch resolvers'
lookups (:mod:`.ncbi_idconv`, :mod:`.europe_pmc_search`, :mod:`.openalex`)
use the same two helpers. :mod:`.bulk` re-exports these names and adds
:func:`~litfetch_df.sources.bulk.bulk_file_lister`, which maps a bundled
per-article file source to its bulk form; the per-service modules import this
module, never :mod:`.bulk`, so the dispatcher can import them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Protocol, TypeVar

import httpx

from ..files import File
from ..ids import ArticleIds
from ..store.answers import RecordMemo, keeps_records
from ..wire.http import BulkHttp
from .common import failure_level

__all__ = [
    "BulkFileLister",
    "BulkKey",
    "BulkLookup",
    "BulkResult",
    "ChunkLookup",
    "IdRecords",
    "Settled",
    "Unusable",
    "bulk_lookup",
    "bulk_stream",
    "chunk_answer",
    "chunked",
    "distinct_keys",
    "ids_by_key",
    "ids_from_json",
    "ids_to_json",
    "json_object_record",
]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
U = TypeVar("U")
X = TypeVar("X")


@dataclass(frozen=True, slots=True)
class BulkResult(Generic[T_co]):
    """What a bulk lookup found, aligned with its input.

    ``values[i]`` answers element ``i``: ``None`` means absent (the service
    answered and knows nothing), not applicable (the element has no id the
    service takes), or abandoned. ``abandoned`` holds the indices whose request
    was never answered (worth retrying later), as opposed to answered-absent.
    ``answered`` holds the indices a well-formed answer covered, now or earlier
    (from the persistent cache): for them a ``None`` value is a positive "no
    such id", not an answer that was unusable.
    """

    values: tuple[T_co | None, ...]
    abandoned: frozenset[int] = frozenset()
    answered: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if any(not 0 <= i < len(self.values) for i in self.abandoned | self.answered):
            raise ValueError("abandoned and answered indices must index values")

    @classmethod
    def empty(cls, size: int) -> BulkResult[T_co]:
        """Return a result of ``size`` absent values and nothing abandoned."""
        return cls((None,) * size)

    def __len__(self) -> int:
        return len(self.values)

    def map(self, fn: Callable[[T_co], U]) -> BulkResult[U]:
        """Return the result with ``fn`` applied to every present value (same abandoned set)."""
        return BulkResult(
            tuple(None if v is None else fn(v) for v in self.values), self.abandoned, self.answered
        )


@dataclass(frozen=True, slots=True)
class BulkKey:
    """How one element is asked about: ``key`` is compared, ``wire`` is sent.

    Elements with equal ``key`` share one request slot; the first element's
    ``wire`` form is the one sent (for a DOI: the key is lower-cased, the wire
    form keeps the caller's casing).
    """

    key: str
    wire: str


class Unusable(dict[str, Any]):
    """An empty chunk answer that was answered but says nothing about its ids.

    :func:`chunk_answer` returns it for a definitive answer that is not
    well-formed (a 400, a body that is not JSON or not in the expected shape):
    its ids are not abandoned (asking again gives the same answer), but not
    known to be absent either, so nothing is kept per id.
    """


@dataclass(frozen=True, slots=True)
class IdRecords(Generic[T]):
    """How one bulk lookup keeps its answers per id in the persistent cache.

    ``kind`` names the lookup and everything besides the id that shapes an
    answer (the service, the fields asked for); credentials are not part of
    it, since they change who may ask, not what is answered. ``encode`` turns
    a value into JSON-able data; ``decode`` turns it back, raising
    :class:`ValueError`, :class:`TypeError` or :class:`KeyError` on data it
    cannot read (the id is then asked again). ``secrets`` are the credentials
    the lookup's requests carry: a value echoing one is not kept.
    """

    kind: str
    encode: Callable[[T], Any]
    decode: Callable[[Any], T]
    secrets: tuple[str, ...] = ()

    def recall(self, memo: RecordMemo | None, key: str) -> tuple[bool, T | None]:
        """Return ``(known, value)`` for ``key`` from ``memo``; ``value`` ``None``: no such id."""
        if memo is None:
            return False, None
        recalled = memo.recall_record(self.kind, key)
        if recalled is None:
            return False, None
        if recalled.value is None:
            return True, None
        try:
            return True, self.decode(recalled.value)
        except (ValueError, TypeError, KeyError):
            return False, None

    def keep(self, memo: RecordMemo | None, key: str, value: T | None) -> None:
        """Store the answer about ``key`` in ``memo`` (``None``: the service knows no such id)."""
        if memo is not None:
            data = None if value is None else self.encode(value)
            memo.keep_record(self.kind, key, data, secrets=self.secrets)


ChunkLookup = Callable[[list[str]], Awaitable[Mapping[str, T] | None]]
"""Ask a service about one chunk of wire values.

Returns a mapping from each wire value the service answered to its answer
(missing wire values are absent), or ``None`` when the chunk was not answered
at all (its indices are then abandoned).
"""


class BulkLookup(Protocol[T_co]):
    """The shape of a bulk lookup: aligned, deduplicated, chunked, abandonment-aware."""

    def __call__(
        self,
        batch: Sequence[ArticleIds],
        http: BulkHttp,
        /,
        *,
        credentials: Mapping[str, object] | None = None,
    ) -> Awaitable[BulkResult[T_co]]:
        """Return one value per element of ``batch`` and the abandoned indices."""
        ...


BulkFileLister = BulkLookup[tuple[File, ...]]
"""A bulk lookup of file-sets: ``values[i] or ()`` equals the per-article ``list_files``."""


def chunked(
    items: Sequence[X],
    cap: int,
    *,
    width: Callable[[X], int] | None = None,
    budget: int | None = None,
) -> list[list[X]]:
    """Split ``items`` into consecutive lists of at most ``cap`` (order kept).

    With ``width`` and ``budget``, a list also closes before its items' summed
    widths would pass ``budget`` (a service's URL length, say); an item wider
    than ``budget`` on its own still gets a list of its own.
    """
    if cap < 1:
        raise ValueError(f"cap must be at least 1, got {cap}")
    if width is None or budget is None:
        return [list(items[at : at + cap]) for at in range(0, len(items), cap)]
    out: list[list[X]] = []
    chunk: list[X] = []
    used = 0
    for item in items:
        w = width(item)
        if chunk and (len(chunk) >= cap or used + w > budget):
            out.append(chunk)
            chunk, used = [], 0
        chunk.append(item)
        used += w
    if chunk:
        out.append(chunk)
    return out


def distinct_keys(keys: Iterable[BulkKey | None]) -> dict[str, tuple[str, list[int]]]:
    """Group indices by key: ``key → (wire form of its first element, indices)``.

    Keys keep first-seen order; ``None`` entries (not applicable) are skipped.
    """
    groups: dict[str, tuple[str, list[int]]] = {}
    for index, key in enumerate(keys):
        if key is None:
            continue
        group = groups.get(key.key)
        if group is None:
            groups[key.key] = (key.wire, [index])
        else:
            group[1].append(index)
    return groups


def _never(_wire: str) -> bool:
    return False


async def bulk_lookup(
    keys: Sequence[BulkKey | None],
    lookup: ChunkLookup[T],
    *,
    cap: int,
    alone: Callable[[str], bool] = _never,
    records: IdRecords[T] | None = None,
    memo: object = None,
    width: Callable[[str], int] | None = None,
    budget: int | None = None,
) -> BulkResult[T]:
    """Run one service over aligned ``keys``: recall, dedupe, chunk, gather, keep, fan out.

    With ``records`` and a ``memo`` that is a :class:`~litfetch_df.store.answers.RecordMemo`
    (a session), each distinct key whose answer is in the persistent cache is
    taken from there and not asked. The other distinct keys go in chunks of
    at most ``cap`` wire values (and, with ``width`` and ``budget``, of at most
    ``budget`` summed widths: see :func:`chunked`), in first-seen order; a wire value for which
    ``alone`` is true (one that would break the service's list syntax) gets a
    request of its own. All chunks are awaited together. Each key a
    well-formed chunk answer covered is kept per id, found or absent; a chunk
    never answered, or answered with :class:`Unusable`, keeps nothing.
    Returns values aligned with ``keys``, as abandoned exactly the indices of
    chunks ``lookup`` reported unanswered, and as answered the indices of
    keys a well-formed answer (now or in the cache) covered.
    """
    values: list[T | None] = [None] * len(keys)
    abandoned: set[int] = set()
    answered: set[int] = set()

    def note(settled: Settled[T]) -> None:
        for i in settled.where:
            values[i] = settled.value
        if settled.abandoned:
            abandoned.update(settled.where)
        if settled.answered:
            answered.update(settled.where)

    await bulk_stream(
        keys,
        lookup,
        note,
        cap=cap,
        alone=alone,
        records=records,
        memo=memo,
        width=width,
        budget=budget,
    )
    return BulkResult(tuple(values), frozenset(abandoned), frozenset(answered))


@dataclass(frozen=True, slots=True)
class Settled(Generic[T_co]):
    """What a bulk lookup learned about one distinct key, for every index sharing it.

    ``value``: the answer (``None``: absent, unusable or abandoned).
    ``abandoned``: its chunk was never answered. ``answered``: a well-formed
    answer (now or from the persistent cache) covered it, so a ``None`` value
    means "no such id".
    """

    where: tuple[int, ...]
    value: T_co | None
    abandoned: bool = False
    answered: bool = False


async def bulk_stream(
    keys: Sequence[BulkKey | None],
    lookup: ChunkLookup[T],
    each: Callable[[Settled[T]], None],
    *,
    cap: int,
    alone: Callable[[str], bool] = _never,
    records: IdRecords[T] | None = None,
    memo: object = None,
    width: Callable[[str], int] | None = None,
    budget: int | None = None,
) -> None:
    """:func:`bulk_lookup`, handing each key's answer to ``each`` as soon as its chunk is in.

    Keys recalled from the persistent cache are handed over first, then each
    chunk's keys when its answer arrives (in completion order). Nothing is
    kept here once handed over, so a caller that uses each answer and drops
    it holds one chunk's decoded answer at a time, not the whole table's.
    Indices without a key (not applicable) are never handed over.
    """
    store = memo if records is not None and keeps_records(memo) else None
    asked: dict[str, tuple[str, list[int]]] = {}
    for key, (wire, where) in distinct_keys(keys).items():
        known, value = records.recall(store, key) if records is not None else (False, None)
        if not known:
            asked[wire] = (key, where)
            continue
        each(Settled(tuple(where), value, answered=True))
    listed = [wire for wire in asked if not alone(wire)]
    chunks = chunked(listed, cap, width=width, budget=budget)
    chunks += [[wire] for wire in asked if alone(wire)]

    async def one(chunk: list[str]) -> None:
        answer = await lookup(chunk)
        for wire in chunk:
            key, where = asked[wire]
            if answer is None:
                each(Settled(tuple(where), None, abandoned=True))
                continue
            found = answer.get(wire)
            covered = not isinstance(answer, Unusable)
            if covered and records is not None:
                records.keep(store, key, found)
            each(Settled(tuple(where), found, answered=covered))

    await asyncio.gather(*(one(chunk) for chunk in chunks))


async def chunk_answer(
    send: Awaitable[httpx.Response],
    what: str,
    read: Callable[[Any], dict[str, T] | None],
    *,
    logger: logging.Logger,
    transient: Collection[int] = (),
    absent: Collection[int] = (),
) -> dict[str, T] | None:
    """Await one chunk's request and sort its outcome as the outcome taxonomy says.

    Returns ``None`` when the chunk was never answered (its indices are then
    abandoned): an :class:`httpx.RequestError` (a transport failure after
    retries, an offline miss), or a 429, a 5xx or a status in ``transient``
    that outlived the retries. Returns ``{}`` (every id absent) for a status
    in ``absent`` (logged at DEBUG). Returns an empty :class:`Unusable`
    (absence, not abandonment, but nothing known per id) for any other
    non-200, a 200 body that is not JSON, and a body ``read`` cannot use
    (``read`` returns ``None``); each is logged on ``logger`` at WARNING.
    Otherwise returns ``read`` of the
    decoded JSON body: each wire value answered, mapped to its answer.
    ``what`` names the request in log lines; exception texts are never
    logged, since a URL in them may carry a key.
    """
    try:
        response = await send
    except httpx.RequestError as exc:
        logger.log(failure_level(exc), "%s: gave up after retries (%s)", what, type(exc).__name__)
        return None
    except httpx.HTTPError as exc:
        logger.warning("%s: failed (%s)", what, type(exc).__name__)
        return Unusable()
    status = response.status_code
    if status == 429 or status >= 500 or status in transient:
        logger.warning("%s: HTTP %d after retries", what, status)
        return None
    if status in absent:
        logger.debug("%s: HTTP %d, none known", what, status)
        return {}
    if status != 200:
        logger.warning("%s: HTTP %d", what, status)
        return Unusable()
    try:
        body = json.loads(response.content)
    except ValueError:
        logger.warning("%s: response is not JSON", what)
        return Unusable()
    found = read(body)
    if found is None:
        logger.warning("%s: response is not in the expected shape", what)
        return Unusable()
    return found


def ids_by_key(
    items: object,
    wanted: Collection[str],
    read: Callable[[Mapping[str, Any]], tuple[str, ArticleIds] | None],
) -> dict[str, ArticleIds] | None:
    """Merge, per wanted key, the ids the answer's ``items`` name (for a resolver's ``read``).

    ``read`` maps one item (a JSON object) to ``(key, ids)`` or ``None``;
    items that are not objects, that ``read`` rejects or whose key was not
    asked for are skipped, and repeated keys merge in answer order. Returns
    ``None`` when ``items`` is not a list (the answer is not in the expected
    shape).
    """
    if not isinstance(items, list):
        return None
    found: dict[str, ArticleIds] = {}
    for item in items:
        parsed = read(item) if isinstance(item, Mapping) else None
        if parsed is None or parsed[0] not in wanted:
            continue
        key, ids = parsed
        found[key] = found[key].merge(ids) if key in found else ids
    return found


_ID_FIELDS: Final = ("pmid", "pmcid", "doi", "bookid")


def ids_to_json(ids: ArticleIds) -> dict[str, str]:
    """Return the ids a bundle holds as a JSON object (the per-id record of a resolver)."""
    return {name: value for name in _ID_FIELDS if (value := getattr(ids, name)) is not None}


def ids_from_json(data: Any) -> ArticleIds:
    """Return the bundle :func:`ids_to_json` wrote; :class:`TypeError` for anything else."""
    if not isinstance(data, dict) or not all(
        name in _ID_FIELDS and isinstance(value, str) for name, value in data.items()
    ):
        raise TypeError("not a stored id bundle")
    return ArticleIds(**data)


def json_object_record(data: Any) -> dict[str, Any]:
    """Return a stored JSON object record as it is; :class:`TypeError` for anything else."""
    if not isinstance(data, dict):
        raise TypeError("not a stored record")
    return data
