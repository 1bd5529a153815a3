"""The session and options of one ``.lit`` call.

Every call takes its settings from three places, in this order: what the
call says (``session=``, ``contact=``, ``cache=``…), what the frame records
of the call that made it (``df.attrs``, see :mod:`~litfetch_df.frame.io.provenance`),
and the package defaults (:mod:`~litfetch_df.frame.engine.options`). A call given
no session opens its own for its duration; a session given unopened is
opened for the call, and refused to a second call running at the same time.

The calls on one table share what they fetched: a session the call opens
for itself takes the answer memo (:mod:`litfetch_df.store.memo`) of the call that
made its frame, found by a token in ``df.attrs``, so ``df.lit.list_files()
.lit.licences()`` asks for an Unpaywall record once. The last few tables'
memos are kept; a session the caller gives gets a memo of its own (kept for
its whole life).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import secrets
import threading
import weakref
from collections.abc import AsyncIterator, Hashable, Mapping
from typing import Any, Final, TypedDict, cast

import pandas as pd

from ...session import Session
from ...store.memo import AnswerMemo
from ...wire.limiter import Lessons
from ..io.columns import CANONICAL
from ..io.provenance import Provenance, from_attrs, of_session, stamp, warn_going_online
from .options import Options, effective, get_options

__all__ = ["MEMO_ATTR", "CallContext", "CallOptions", "call_context", "inherit"]

MEMO_ATTR: Final = "litfetch_df_memo"
"""The ``df.attrs`` key naming the answer memo of the calls that made the frame."""

_KEPT_TABLES: Final = 2
"""How many tables' shared state (memo, lessons) stays alive."""


class CallOptions(TypedDict, total=False):
    """Keyword configuration every ``.lit`` method accepts.

    ``session``: an open or not-yet-entered :class:`Session` to run on (its
    contact, cache and timeout then apply; on a session whose
    ``keyless_replay`` attribute is true, such as
    :func:`~litfetch_df.demo.demo_session`'s, the package-level credentials
    are ignored); ``contact``, ``credentials``,
    ``concurrency``, ``progress``, ``cache``, ``offline``, ``timeout``,
    ``allow_private_network``: see
    :class:`~litfetch_df.frame.engine.options.Options`; ``pmid``, ``pmcid``,
    ``doi``, ``bookid``: the column holding that id kind, when its name is
    not recognised.
    """

    session: Session | None
    contact: str | None
    credentials: Mapping[str, object] | None
    concurrency: int | None
    progress: bool | None
    cache: str | os.PathLike[str] | None
    offline: bool | None
    timeout: float | None
    allow_private_network: bool | None
    pmid: Hashable | None
    pmcid: Hashable | None
    doi: Hashable | None
    bookid: Hashable | None


_SESSION_LEVEL = ("contact", "cache", "offline", "timeout", "allow_private_network")


@dataclasses.dataclass(frozen=True, slots=True)
class CallContext:
    """One call's open session, its options, and the id columns it was told about."""

    session: Session
    options: Options
    explicit: dict[str, Hashable | None]
    # The settings the call's frame records (see frame.provenance).
    provenance: Provenance = dataclasses.field(default_factory=Provenance)
    # The token of the answer memo the call's own session shares (None: the caller's session).
    memo_token: str | None = None

    def stamp(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Record this call's session settings (and memo token) in ``frame.attrs``; return it."""
        stamp(frame, self.provenance)
        if self.memo_token is not None:
            frame.attrs = {**frame.attrs, MEMO_ATTR: self.memo_token}
        return frame

    def reading_canonical(self) -> CallContext:
        """This context reading the canonical id columns (once a resolve step wrote them)."""
        return dataclasses.replace(self, explicit={})


def _split(config: CallOptions) -> tuple[Session | None, Options, dict[str, Hashable | None]]:
    cfg: dict[str, Any] = dict(config)
    session = cfg.pop("session", None)
    explicit = {k: cfg.pop(k) for k in CANONICAL if k in cfg}
    if getattr(session, "keyless_replay", False):
        # The session answers from records made without keys (the demo's): a key from
        # the package options would only ask for answers they do not hold. Keys given to
        # this very call still apply.
        drop: dict[str, object] = {key: None for key in get_options().credentials}
        cfg["credentials"] = {**drop, **dict(cfg.get("credentials") or {})}
    if session is not None:
        clash = [k for k in _SESSION_LEVEL if cfg.get(k) is not None]
        if clash:
            raise ValueError(
                f"{', '.join(clash)} cannot be combined with session=: "
                "configure the Session itself (Session(contact=..., cache=..., ...))"
            )
    return session, effective(**cfg), explicit


# Unopened sessions a running call has opened for itself. A synchronous call runs on its
# own event loop in its own thread; another such call given the same session at the same
# time must not borrow it (its client belongs to the first call's loop) nor open it again.
_OPENED_BY_CALLS: weakref.WeakSet[Session] = weakref.WeakSet()
_OPENED_LOCK = threading.Lock()


class _Table:
    """What the calls on one table share: the answer memo, and what hosts taught them.

    The lessons are snapshots (immutable values), taken when a call ends and
    given to the next call's new session: live limiters are never shared,
    since calls on one table may run in several threads at once.
    """

    def __init__(self) -> None:
        self.memo = AnswerMemo()
        self._lessons: dict[str, Lessons] = {}
        self._lock = threading.Lock()

    def lessons(self) -> dict[str, Lessons]:
        """What the table's calls learned of each host so far."""
        with self._lock:
            return dict(self._lessons)

    def learn(self, lessons: Mapping[str, Lessons]) -> None:
        """Keep what a finished call learned (the latest call's word on a host wins)."""
        with self._lock:
            self._lessons.update(lessons)


_TABLES: collections.OrderedDict[str, _Table] = collections.OrderedDict()
_TABLES_LOCK = threading.Lock()


def _table_of(frame: pd.DataFrame | None) -> tuple[str, _Table]:
    """The memo token and shared state of a call on ``frame`` (new for a new table)."""
    token = frame.attrs.get(MEMO_ATTR) if frame is not None else None
    with _TABLES_LOCK:
        if isinstance(token, str) and token in _TABLES:
            _TABLES.move_to_end(token)
            return token, _TABLES[token]
        token = secrets.token_hex(8)
        _TABLES[token] = _Table()
        while len(_TABLES) > _KEPT_TABLES:
            _TABLES.popitem(last=False)
        return token, _TABLES[token]


def inherit(
    config: CallOptions,
    frame: pd.DataFrame | None,
    memo: AnswerMemo | None = None,
    lessons: Mapping[str, Lessons] | None = None,
) -> tuple[CallOptions, Provenance | None]:
    """Fill in the session settings ``frame`` was made with, where the call gives none.

    Returns the call's configuration to use and the frame's recorded settings.
    A frame made with a cache (or offline) gets a session with that cache, its
    TTL, contact and offline flag, unless the call names a session, a
    contact, a cache or ``offline`` itself; otherwise only a recorded contact
    fills a missing one. A session made here shares ``memo`` and starts from
    ``lessons``.
    """
    inherited = from_attrs(frame.attrs) if frame is not None else None
    told = config.get("session") is not None or any(
        config.get(k) is not None for k in ("contact", "cache", "offline", "allow_private_network")
    )
    if inherited is None or told:
        return config, inherited
    cfg = cast(dict[str, Any], dict(config))
    if inherited.cache is not None or inherited.stays_offline:
        timeout = cfg.pop("timeout", None)
        cfg["session"] = inherited.session(
            timeout=timeout or get_options().timeout, memo=memo, lessons=lessons
        )
    elif inherited.contact is not None and get_options().contact is None:
        cfg["contact"] = inherited.contact
    return cast(CallOptions, cfg), inherited


@contextlib.asynccontextmanager
async def call_context(
    config: CallOptions, frame: pd.DataFrame | None = None, method: str = ""
) -> AsyncIterator[CallContext]:
    """Yield the open session and options of one call (``config``, ``frame.attrs``, defaults)."""
    token: str | None = None
    table: _Table | None = None
    memo: AnswerMemo | None = None
    lessons: dict[str, Lessons] = {}
    if config.get("session") is None:
        token, table = _table_of(frame)
        memo, lessons = table.memo, table.lessons()
    config, inherited = inherit(config, frame, memo, lessons)
    given, options, explicit = _split(config)
    session = given or Session(
        contact=options.contact,
        cache=options.cache,
        offline=options.offline,
        timeout=options.timeout,
        memo=memo,
        lessons=lessons,
        allow_private_network=options.allow_private_network,
    )
    made_offline = inherited is not None and inherited.stays_offline
    stays = session.offline or bool(getattr(session, "demo_world_session", False))
    if inherited is not None and made_offline and not stays:
        warn_going_online(inherited, method)
    if memo is None:
        session.keep_answers()  # the caller's session: its own memo, for its whole life
    ctx = CallContext(session, options, explicit, of_session(session), token)
    if given is None:
        try:
            async with session:
                yield ctx
        finally:
            if table is not None:
                table.learn(session.lessons())
        return
    with _OPENED_LOCK:
        if given in _OPENED_BY_CALLS:
            raise RuntimeError(
                "this Session is in use by another .lit call running at the same time "
                "(another thread?); give each thread its own Session, or open one with "
                "'async with' and make the calls from that event loop"
            )
        borrowed = given.is_open
        if not borrowed:
            _OPENED_BY_CALLS.add(given)
    if borrowed:
        yield ctx
        return
    try:
        async with given:
            yield ctx
    finally:
        with _OPENED_LOCK:
            _OPENED_BY_CALLS.discard(given)
        if table is not None:  # a session made from the frame's settings
            table.learn(given.lessons())
