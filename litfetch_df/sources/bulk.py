"""Bulk lookups: one request answers many articles, for whole-table work.

A *bulk lookup* is a coroutine taking a sequence of :class:`ArticleIds` and a
:class:`~litfetch_df._http.BulkHttp` (a :class:`~litfetch_df.Session`), and
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
  404) is absence, never abandonment.

The per-service lookups live in :mod:`.semantic_scholar_batch`,
:mod:`.crossref_batch` and :mod:`.springer_batch`; :func:`bulk_file_lister`
maps a bundled per-article :class:`~litfetch_df.operations.types.FileSource`
to its bulk form.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from .._http import BulkHttp
from ..files import File
from ..ids import ArticleIds

__all__ = [
    "BulkFileLister",
    "BulkKey",
    "BulkLookup",
    "BulkResult",
    "ChunkLookup",
    "bulk_file_lister",
    "bulk_lookup",
    "chunked",
    "distinct_keys",
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
    """

    values: tuple[T_co | None, ...]
    abandoned: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if any(not 0 <= i < len(self.values) for i in self.abandoned):
            raise ValueError("abandoned indices must index values")

    @classmethod
    def empty(cls, size: int) -> BulkResult[T_co]:
        """Return a result of ``size`` absent values and nothing abandoned."""
        return cls((None,) * size)

    def __len__(self) -> int:
        return len(self.values)

    def map(self, fn: Callable[[T_co], U]) -> BulkResult[U]:
        """Return the result with ``fn`` applied to every present value (same abandoned set)."""
        return BulkResult(tuple(None if v is None else fn(v) for v in self.values), self.abandoned)


@dataclass(frozen=True, slots=True)
class BulkKey:
    """How one element is asked about: ``key`` is compared, ``wire`` is sent.

    Elements with equal ``key`` share one request slot; the first element's
    ``wire`` form is the one sent (for a DOI: the key is lower-cased, the wire
    form keeps the caller's casing).
    """

    key: str
    wire: str


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


def chunked(items: Sequence[X], cap: int) -> list[list[X]]:
    """Split ``items`` into consecutive lists of at most ``cap`` (order kept)."""
    if cap < 1:
        raise ValueError(f"cap must be at least 1, got {cap}")
    return [list(items[at : at + cap]) for at in range(0, len(items), cap)]


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
) -> BulkResult[T]:
    """Run one service over aligned ``keys``: dedupe, chunk, gather, fan out.

    Distinct keys go in chunks of at most ``cap`` wire values, in first-seen
    order; a wire value for which ``alone`` is true (one that would break the
    service's list syntax) gets a request of its own. All chunks are awaited
    together. Returns values aligned with ``keys`` and, as abandoned, exactly
    the indices of chunks ``lookup`` reported unanswered.
    """
    groups = distinct_keys(keys)
    listed = [wire for wire, _ in groups.values() if not alone(wire)]
    chunks = chunked(listed, cap) + [[wire] for wire, _ in groups.values() if alone(wire)]
    indices = {wire: where for wire, where in groups.values()}
    answers = await asyncio.gather(*(lookup(chunk) for chunk in chunks))
    values: list[T | None] = [None] * len(keys)
    abandoned: set[int] = set()
    for chunk, answer in zip(chunks, answers, strict=True):
        for wire in chunk:
            if answer is None:
                abandoned.update(indices[wire])
                continue
            found = answer.get(wire)
            if found is not None:
                for i in indices[wire]:
                    values[i] = found
    return BulkResult(tuple(values), frozenset(abandoned))


def bulk_file_lister(source: object) -> BulkFileLister | None:
    """Return the bulk form of a bundled file source, or ``None`` when it has none.

    Only the exact bundled classes map (:class:`SemanticScholarFileSource`,
    :class:`CrossrefFileSource`, :class:`SpringerFileSource`); a subclass may
    have changed ``list_files`` and keeps its per-article path. The bulk form's
    ``values[i] or ()`` equals that source's ``list_files`` for element ``i``.
    """
    # Imported here: the per-service modules import this one.
    from .crossref import CrossrefFileSource
    from .crossref_batch import crossref_batch_files
    from .semantic_scholar import SemanticScholarFileSource
    from .semantic_scholar_batch import s2_batch_files
    from .springer import SpringerFileSource
    from .springer_batch import springer_batch_files

    table: dict[type, BulkFileLister] = {
        SemanticScholarFileSource: s2_batch_files,
        CrossrefFileSource: crossref_batch_files,
        SpringerFileSource: springer_batch_files,
    }
    return table.get(type(source))
