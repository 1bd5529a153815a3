"""Small answers kept in memory, so the calls made on one table ask for a record once.

A table's chained calls (``df.lit.list_files()`` then ``.lit.licences()``)
read some of the same records: Unpaywall's for the file-set and the licence,
Crossref's for the file-set and the relations, Semantic Scholar's status for
the file-set and the licence. Each call runs its units in their own short
scopes, so without a memo the second call asks again. An
:class:`AnswerMemo` keeps the deterministic JSON answers (200 or 404) to GET
requests made from the units, up to a size, for as long as the session (or
the sessions of one table's calls) holds it. Bodies, listings and downloads
are not JSON records and are never kept.

It keeps the first answers up to its budget and then keeps no more (no
eviction): a table larger than the budget shares the records of its first
rows, and an LRU would share none of them on a second pass in the same order.
A persistent cache (``cache=``) shares everything, without a budget.

The budget counts what an answer really costs in memory, not only its
content: a table's many small records cost as much again in bookkeeping
(the entry, its key, URL and headers), so counting content alone let the
memo hold about twice its budget. Only the ``content-type`` header is kept,
the one header a reader of a memo's answer looks at.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Final

from .answers import CachedResponse

__all__ = ["DEFAULT_MEMO_BYTES", "ENTRY_OVERHEAD", "MAX_ANSWER_BYTES", "AnswerMemo"]

DEFAULT_MEMO_BYTES: Final = 16 * 1024 * 1024
"""The memo's budget: what the answers it keeps may cost at most (see :meth:`AnswerMemo.cost`)."""

MAX_ANSWER_BYTES: Final = 1024 * 1024
"""A larger answer (a body, a listing of thousands) is never kept."""

ENTRY_OVERHEAD: Final = 400
"""Bytes one kept answer costs besides its content, URL and headers (objects, key, slot)."""

_KEPT_STATUSES: Final = frozenset({200, 404})


def _content_type(entry: CachedResponse) -> tuple[tuple[str, str], ...]:
    return tuple((n, v) for n, v in entry.headers if n.lower() == "content-type")[:1]


def _is_json(entry: CachedResponse) -> bool:
    return any("json" in value.lower() for _, value in _content_type(entry))


class AnswerMemo:
    """Deterministic JSON answers by request key, within a byte budget; thread-safe."""

    def __init__(self, max_bytes: int = DEFAULT_MEMO_BYTES) -> None:
        self._max_bytes = max_bytes
        self._entries: dict[str, CachedResponse] = {}
        self._bytes = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<AnswerMemo {len(self._entries)} answers, {self._bytes} bytes>"

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """What the answers kept cost, as the budget counts it (see :meth:`cost`)."""
        return self._bytes

    @staticmethod
    def cost(entry: CachedResponse) -> int:
        """Return what keeping ``entry`` costs against the budget: content and bookkeeping.

        Its content, URL and ``content-type`` header, plus :data:`ENTRY_OVERHEAD`.
        """
        headers = sum(len(n) + len(v) for n, v in _content_type(entry))
        return len(entry.content) + len(entry.url) + headers + ENTRY_OVERHEAD

    def load(self, key: str) -> CachedResponse | None:
        """Return the answer kept under ``key``, or ``None``."""
        return self._entries.get(key)

    def offer(self, key: str, entry: CachedResponse) -> bool:
        """Keep ``entry`` if it is a small deterministic JSON answer that fits; say if kept.

        What is kept has only the ``content-type`` header of ``entry``.
        """
        if entry.status_code not in _KEPT_STATUSES or len(entry.content) > MAX_ANSWER_BYTES:
            return False
        if not _is_json(entry):
            return False
        size = self.cost(entry)
        with self._lock:
            if key in self._entries:
                return True
            if self._bytes + size > self._max_bytes:
                return False
            headers = _content_type(entry)
            self._entries[key] = (
                entry if headers == entry.headers else replace(entry, headers=headers)
            )
            self._bytes += size
        return True

    def clear(self) -> None:
        """Forget every answer."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0
