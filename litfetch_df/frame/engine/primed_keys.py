"""The request keys a step's bulk lookups primed, and when each may be unprimed.

The primers (:mod:`litfetch_df.frame.engine.primers`) tie each key to the bundles it
answers; the runner releases a unit's keys when the unit is done, so a long
table holds the primed answers of the units still to run (ADR 0018).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ...ids import ArticleIds
from ...session import Session
from ..io.columns import bundle_key

__all__ = ["PrimedKeys"]


class PrimedKeys:
    """The request keys the bulk lookups primed, each tied to the bundles it answers.

    A primer adds a key with the bundle it answers (:meth:`add`); the runner
    calls :meth:`release` when a unit is done, and the keys no other unit
    still needs are unprimed at once, so a long table holds the primed
    answers of the units still to run, not of every row it has done. Every
    key stays listed (iterating gives them all, in the order primed) for the
    unprime at the end of the call, which also covers a key appended without a
    bundle (:meth:`append`) and an interrupted call. A key primed for a unit
    already done is unprimed as soon as it is added.
    """

    def __init__(self, session: Session, into: list[str] | None = None) -> None:
        self._session = session
        self._all: list[str] = [] if into is None else into
        self._of: dict[ArticleIds, list[str]] = {}
        self._users: dict[str, int] = {}
        self._done: set[ArticleIds] = set()
        # Told each key as it is primed (the runner wakes the units waiting for it).
        self.on_add: Callable[[str], None] | None = None

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[str]:
        return iter(self._all)

    def append(self, key: str) -> None:
        """List ``key`` with no bundle: it is unprimed at the end of the call."""
        self._all.append(key)
        if self.on_add is not None:
            self.on_add(key)

    def add(self, ids: ArticleIds, key: str) -> None:
        """List ``key`` as an answer for the unit of ``ids`` (released with that unit)."""
        self._all.append(key)
        if self.on_add is not None:
            self.on_add(key)
        unit = bundle_key(ids)
        if unit in self._done:
            if key not in self._users:
                self._session.unprime([key])
            return
        kept = self._of.setdefault(unit, [])
        if key not in kept:
            kept.append(key)
            self._users[key] = self._users.get(key, 0) + 1

    def release(self, unit: ArticleIds) -> None:
        """The unit keyed ``unit`` is done: unprime the keys no unit still to run needs."""
        self._done.add(unit)
        gone: list[str] = []
        for key in self._of.pop(unit, ()):
            left = self._users[key] - 1
            if left:
                self._users[key] = left
            else:
                del self._users[key]
                gone.append(key)
        self._session.unprime(gone)

    @property
    def held(self) -> int:
        """How many primed keys are still tied to a unit that has not run yet."""
        return len(self._users)
