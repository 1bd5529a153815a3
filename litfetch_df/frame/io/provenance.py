"""A frame remembers the session settings it was made with, in ``df.attrs``.

Every step writes ``attrs["litfetch_df"]``: the contact, the persistent
cache's file and TTL, whether the run was offline, and whether the session
replayed a recording made without keys, and whether it was the demo world's
(:func:`litfetch_df.demo.demo_session`). Credentials are never
recorded. A later step on that frame (or on a slice of it: pandas carries
``attrs`` along) that is given neither a ``session`` nor a ``contact``,
``cache`` or ``offline`` of its own runs with those settings, so a frame made
from a cache offline keeps replaying it, and one made by the demo keeps being
answered by the demo world, instead of going to the network. A step told to
go online for a frame made offline says so once, in one warning line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any, Final

import pandas as pd

from ...demo_world import world_session
from ...session import Session
from ...store.memo import AnswerMemo
from ...wire.limiter import Lessons

__all__ = [
    "ATTRS_KEY",
    "Provenance",
    "from_attrs",
    "of_session",
    "restore_attrs",
    "saved_attrs",
    "stamp",
    "warn_going_online",
]

ATTRS_KEY: Final = "litfetch_df"
"""The ``DataFrame.attrs`` entry holding a frame's :class:`Provenance`."""


@dataclasses.dataclass(frozen=True, slots=True)
class Provenance:
    """The session settings a frame was made with (never a credential).

    ``cache`` is the persistent cache's file (``None``: none), ``cache_ttl``
    its TTL in seconds, ``offline`` whether only that cache answered, and
    ``keyless`` whether the session replayed a recording made without keys,
    ``demo`` whether the demo world answered it (it needs neither cache nor network).
    """

    contact: str | None = None
    cache: str | None = None
    cache_ttl: float | None = None
    offline: bool = False
    keyless: bool = False
    demo: bool = False

    @property
    def stays_offline(self) -> bool:
        """Whether the frame was made without the network (offline, or by the demo world)."""
        return self.offline or self.demo

    def as_attrs(self) -> dict[str, object]:
        """Return the settings as the plain dict stored in ``attrs``."""
        return dataclasses.asdict(self)

    def session(
        self,
        timeout: float = 30.0,
        memo: AnswerMemo | None = None,
        lessons: Mapping[str, Lessons] | None = None,
    ) -> Session:
        """Return a new, not-yet-entered :class:`Session` with these settings.

        ``memo`` is the answer memo it shares with the earlier calls on the
        frame (see :mod:`litfetch_df.store.memo`), ``lessons`` what they learned of
        the hosts' limits. Raises :class:`ValueError` when
        the frame was made offline and its cache file is gone (there is
        nothing left to replay).
        """
        if self.demo:
            return world_session(timeout=timeout, memo=memo, lessons=lessons)
        cache = self.cache if self.cache and Path(self.cache).is_file() else None
        if self.offline and cache is None:
            raise ValueError(
                f"this frame was made offline from the cache {self.cache}, which no longer "
                "exists: pass session=, cache= (a cache to replay) or offline=False (to ask "
                "the network)"
            )
        kind = _KeylessSession if self.keyless else Session
        return kind(
            contact=self.contact,
            cache=cache,
            cache_ttl=self.cache_ttl,
            offline=self.offline,
            timeout=timeout,
            memo=memo,
            lessons=lessons,
        )


class _KeylessSession(Session):
    """A session replaying a recording made without keys (as ``demo_session()``'s does)."""

    keyless_replay: Final = True


def of_session(session: Session) -> Provenance:
    """Return the settings of ``session`` (its store's file and TTL, when it has one)."""
    store = session.store
    path = getattr(store, "path", None)
    ttl = getattr(store, "ttl", None)
    return Provenance(
        contact=session.contact,
        cache=os.fspath(path) if isinstance(path, str | os.PathLike) else None,
        cache_ttl=float(ttl) if isinstance(ttl, int | float) else None,
        offline=session.offline,
        keyless=bool(getattr(session, "keyless_replay", False)),
        demo=bool(getattr(session, "demo_world_session", False)),
    )


def from_attrs(attrs: Mapping[Hashable, Any]) -> Provenance | None:
    """Return the :class:`Provenance` stored in a frame's ``attrs``, or ``None``."""
    raw = attrs.get(ATTRS_KEY)
    if not isinstance(raw, Mapping):
        return None
    ttl = raw.get("cache_ttl")
    cache = raw.get("cache")
    contact = raw.get("contact")
    return Provenance(
        contact=contact if isinstance(contact, str) else None,
        cache=cache if isinstance(cache, str) else None,
        cache_ttl=float(ttl) if isinstance(ttl, int | float) else None,
        offline=raw.get("offline") is True,
        keyless=raw.get("keyless") is True,
        demo=raw.get("demo") is True,
    )


def stamp(frame: pd.DataFrame, provenance: Provenance) -> pd.DataFrame:
    """Record ``provenance`` in ``frame.attrs`` (the step's own new frame) and return it."""
    frame.attrs = {**frame.attrs, ATTRS_KEY: provenance.as_attrs()}
    return frame


def warn_going_online(provenance: Provenance, method: str) -> None:
    """Say once, in one line, that a step asks the network for a frame made offline."""
    made = "by the demo world" if provenance.demo else f"from the cache {provenance.cache}"
    warnings.warn(
        f"{method}(): this frame was made offline ({made}); "
        "this call asks the network. Leave out session=/cache=/offline= to replay "
        "that cache instead.",
        UserWarning,
        stacklevel=4,
    )


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return False
    return True


def saved_attrs(attrs: Mapping[Hashable, Any]) -> dict[str, Any]:
    """Return the part of ``attrs`` a saved file keeps: JSON values, provenance cleaned.

    The provenance entry is rebuilt from its known fields, so nothing else
    (a key put there by hand, say) is written out.
    """
    kept = {str(k): v for k, v in attrs.items() if k != ATTRS_KEY and _jsonable(v)}
    provenance = from_attrs(attrs)
    if provenance is not None:
        kept[ATTRS_KEY] = provenance.as_attrs()
    return kept


def restore_attrs(saved: object) -> dict[Hashable, Any]:
    """Return the ``attrs`` of a frame read back from what :func:`saved_attrs` wrote."""
    if not isinstance(saved, Mapping):
        return {}
    return {str(k): v for k, v in saved.items()}
